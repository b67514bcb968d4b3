//! Moving a value's heap blocks, as active defragmentation does: a leaf
//! that both the stores (which know their blocks) and the FFI layer (which
//! knows how the server moves a block) import.

/// Gives each block a value owns to whoever may move it: the same
/// contents come back, possibly in another block.
pub trait Relocate {
    /// The vector's buffer, moved or not (same length and capacity).
    fn vec<T>(&mut self, v: Vec<T>) -> Vec<T>;
    /// The box's block, moved or not.
    fn boxed<T>(&mut self, b: Box<T>) -> Box<T>;
}
