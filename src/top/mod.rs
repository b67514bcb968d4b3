//! SLIDEWIN.TOP: who is being limited.
//!
//! - `summary`: pure, the heavy-hitters summary ([`Top`]: Space-Saving per
//!   epoch and outcome, rotating epochs), the clock an argument;
//! - `hitters`: the node's one instance of it, fed by CHECK and MCHECK,
//!   answered by SLIDEWIN.TOP, reported by INFO.

pub mod hitters;
pub mod summary;

pub use summary::*;
