//! A module data type: registration and the server's callbacks (RDB save
//! and load, AOF rewrite, digest, memory usage, copy, free, defrag), over any value
//! that says how to turn itself into bytes and back ([`TypeValue`]). This
//! file knows nothing of what the value is; `store/compact/store.rs` gives the
//! compact log to it.
//!
//! Every callback catches a panic (a panic crossing into the server would
//! abort it) and treats loaded bytes as hostile: the value's own decoder
//! refuses what it cannot trust, and a refused load returns null, which
//! the server reports as a load error (RDB, RESTORE, replica sync) instead
//! of keeping a value it cannot use.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use redis_module::{raw, Context};

use super::base::{api, log, CallError};
use crate::relocate::Relocate;

/// A value the server can hold under a module data type.
pub trait TypeValue: Sized + Clone + 'static {
    /// The type's name (exactly 9 characters, as the server requires).
    const NAME: &'static CStr;
    /// The encoding version written with every RDB value; a load of a
    /// higher one is refused.
    const ENCODING_VERSION: c_int;
    /// The command an AOF rewrite writes to rebuild a key:
    /// `<AOF_COMMAND> key <AOF_WORD> <bytes>`.
    const AOF_COMMAND: &'static CStr;
    const AOF_WORD: &'static CStr;

    /// The bytes an RDB, a DUMP and an AOF rewrite carry.
    fn to_bytes(&self) -> Vec<u8>;
    /// Rebuilds a value from untrusted bytes, or says why not.
    fn from_bytes(bytes: &[u8]) -> Result<Self, String>;
    /// Feeds the digest (DEBUG DIGEST): a canonical sequence of integer
    /// groups, the same for equal contents however they were built.
    fn digest(&self, group: &mut dyn FnMut(&[i64]));
    /// The start of every heap block the value owns besides itself (for
    /// MEMORY USAGE by the allocator's sizes).
    fn heap_blocks(&self) -> Vec<*const u8>;
    /// How much work freeing it takes (UNLINK frees large values off the
    /// main thread).
    fn free_effort(&self) -> usize;
    /// Hands every heap block it owns besides itself to `to` (active
    /// defragmentation may move them).
    fn relocate<R: Relocate>(&mut self, to: &mut R);
}

/// The handle of a registered data type holding `T`; null until
/// [`ModuleType::create`] ran (then the server knows the type).
pub struct ModuleType<T> {
    ptr: AtomicPtr<raw::RedisModuleType>,
    _value: PhantomData<fn() -> T>,
}

impl<T: TypeValue> ModuleType<T> {
    pub const fn new() -> Self {
        ModuleType {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            _value: PhantomData,
        }
    }

    /// The server's handle, or `None` when the type was not registered.
    pub fn handle(&self) -> Option<*mut raw::RedisModuleType> {
        let p = self.ptr.load(Ordering::Relaxed);
        (!p.is_null()).then_some(p)
    }

    /// Registers the type (only possible while the module loads).
    pub fn create(&self, ctx: &Context) -> Result<(), CallError> {
        let create = api!(RedisModule_CreateDataType)?;
        // SAFETY: `RedisModuleTypeMethods` is a plain C struct of a version
        // and optional function pointers; all-zero is "no callback".
        let mut methods: raw::RedisModuleTypeMethods = unsafe { std::mem::zeroed() };
        // Version 4: mem_usage2, free_effort2, unlink2 and copy2 exist;
        // every server slidewin supports (Redis 7.0 on) reads it.
        methods.version = 4;
        methods.rdb_load = Some(rdb_load::<T>);
        methods.rdb_save = Some(rdb_save::<T>);
        methods.aof_rewrite = Some(aof_rewrite::<T>);
        methods.mem_usage = Some(mem_usage::<T>);
        methods.digest = Some(digest::<T>);
        methods.free = Some(free::<T>);
        methods.free_effort = Some(free_effort::<T>);
        methods.copy = Some(copy::<T>);
        methods.defrag = Some(defrag::<T>);
        // SAFETY: the load-time context, a NUL-terminated 9-character name
        // and a methods struct the server copies before returning.
        let ptr = unsafe { create(ctx.ctx, T::NAME.as_ptr(), T::ENCODING_VERSION, &mut methods) };
        if ptr.is_null() {
            return Err(CallError::Failed("registering the data type"));
        }
        self.ptr.store(ptr, Ordering::Relaxed);
        Ok(())
    }

    /// Takes ownership of `value` as a raw pointer for the server.
    pub fn into_raw(value: T) -> *mut c_void {
        Box::into_raw(Box::new(value)).cast()
    }
}

impl<T: TypeValue> Default for ModuleType<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs a callback body; a panic gives `fallback` instead of crossing into
/// the server.
fn guarded<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The value behind a pointer the server handed a callback.
///
/// # Safety
/// `value` must be null or a pointer made by [`ModuleType::into_raw`] for
/// `T` that is still owned by the server.
unsafe fn value_ref<'a, T>(value: *mut c_void) -> Option<&'a T> {
    // SAFETY: per the contract, a live `Box<T>`'s pointer or null.
    unsafe { value.cast::<T>().as_ref() }
}

fn warn(message: &str) {
    log(None, c"warning", message);
}

extern "C" fn rdb_load<T: TypeValue>(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guarded(std::ptr::null_mut(), || {
        if encver < 1 || encver > T::ENCODING_VERSION {
            warn(&format!(
                "slidewin: a {} value of encoding version {encver} (this module reads 1 to {}): refused",
                T::NAME.to_string_lossy(),
                T::ENCODING_VERSION
            ));
            return std::ptr::null_mut();
        }
        let (Ok(load), Ok(free)) = (api!(RedisModule_LoadStringBuffer), api!(RedisModule_Free))
        else {
            return std::ptr::null_mut();
        };
        let mut len = 0usize;
        // SAFETY: the IO handle the server passed for this load; `len` is a
        // valid out pointer.
        let buf = unsafe { load(rdb, &mut len) };
        if buf.is_null() || io_error(rdb) {
            // A failed read (diskless load with HANDLE_IO_ERRORS): the
            // server aborts the load and reports it.
            if !buf.is_null() {
                // SAFETY: a buffer the server allocated for us.
                unsafe { free(buf.cast()) };
            }
            return std::ptr::null_mut();
        }
        // SAFETY: the server returned `len` readable bytes at `buf`, ours
        // until freed below; the slice does not outlive the free.
        let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
        let value = T::from_bytes(bytes);
        // SAFETY: freed once, after its last use.
        unsafe { free(buf.cast()) };
        match value {
            Ok(v) => ModuleType::<T>::into_raw(v),
            Err(why) => {
                warn(&format!(
                    "slidewin: a {} value cannot be loaded: {why}",
                    T::NAME.to_string_lossy()
                ));
                std::ptr::null_mut()
            }
        }
    })
}

/// Whether the IO handle saw a read error (servers without the API report
/// errors by aborting the load themselves).
fn io_error(io: *mut raw::RedisModuleIO) -> bool {
    match api!(RedisModule_IsIOError) {
        // SAFETY: the live IO handle of the running callback.
        Ok(is_error) => (unsafe { is_error(io) }) != 0,
        Err(_) => false,
    }
}

extern "C" fn rdb_save<T: TypeValue>(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guarded((), || {
        // SAFETY: the server passes the value it holds for this key.
        let Some(v) = (unsafe { value_ref::<T>(value) }) else {
            return;
        };
        let Ok(save) = api!(RedisModule_SaveStringBuffer) else {
            return;
        };
        let bytes = v.to_bytes();
        // SAFETY: the IO handle of this save and `bytes.len()` readable
        // bytes, copied by the server.
        unsafe { save(rdb, bytes.as_ptr().cast(), bytes.len()) };
    })
}

extern "C" fn aof_rewrite<T: TypeValue>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guarded((), || {
        // SAFETY: the server passes the value it holds for `key`.
        let Some(v) = (unsafe { value_ref::<T>(value) }) else {
            return;
        };
        let Ok(emit) = api!(RedisModule_EmitAOF) else {
            return;
        };
        let bytes = v.to_bytes();
        // SAFETY: the rewrite's IO handle; format "scb" is followed by a
        // live string (the key the server passed), a NUL-terminated word,
        // and a buffer pointer with its length, all alive for the call.
        unsafe {
            emit(
                aof,
                T::AOF_COMMAND.as_ptr(),
                c"scb".as_ptr(),
                key,
                T::AOF_WORD.as_ptr(),
                bytes.as_ptr(),
                bytes.len(),
            )
        };
    })
}

extern "C" fn mem_usage<T: TypeValue>(value: *const c_void) -> usize {
    guarded(0, || {
        // SAFETY: the server passes the value it holds.
        let Some(v) = (unsafe { value_ref::<T>(value.cast_mut()) }) else {
            return 0;
        };
        let Ok(size_of) = api!(RedisModule_MallocSize) else {
            return std::mem::size_of::<T>();
        };
        let mut total = 0usize;
        for block in std::iter::once(value.cast::<u8>()).chain(v.heap_blocks()) {
            // SAFETY: the value's box and the heap blocks it reports were
            // all allocated by the server's allocator (the module's global
            // allocator is the server's) and are alive.
            total = total.saturating_add(unsafe { size_of(block.cast_mut().cast()) });
        }
        total
    })
}

extern "C" fn digest<T: TypeValue>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guarded((), || {
        // SAFETY: the server passes the value it holds.
        let Some(v) = (unsafe { value_ref::<T>(value) }) else {
            return;
        };
        let (Ok(add), Ok(end)) = (
            api!(RedisModule_DigestAddLongLong),
            api!(RedisModule_DigestEndSequence),
        ) else {
            return;
        };
        v.digest(&mut |group| {
            for &n in group {
                // SAFETY: the digest handle of this callback.
                unsafe { add(md, n) };
            }
            // SAFETY: as above.
            unsafe { end(md) };
        });
    })
}

extern "C" fn free<T: TypeValue>(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guarded((), || {
        // SAFETY: a pointer made by `into_raw` that the server gives up
        // here, once (possibly off the main thread: dropping `T` touches
        // nothing but its own memory, and the allocator is thread-safe).
        drop(unsafe { Box::from_raw(value.cast::<T>()) });
    })
}

extern "C" fn free_effort<T: TypeValue>(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    guarded(1, || {
        // SAFETY: the server passes the value it holds.
        unsafe { value_ref::<T>(value.cast_mut()) }.map_or(1, T::free_effort)
    })
}

extern "C" fn copy<T: TypeValue>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: the server passes the value it holds for the source key.
        match unsafe { value_ref::<T>(value.cast_mut()) } {
            Some(v) => ModuleType::<T>::into_raw(v.clone()),
            None => std::ptr::null_mut(),
        }
    })
}

/// Blocks of module values active defragmentation moved, since load.
static DEFRAG_MOVED: AtomicU64 = AtomicU64::new(0);

/// How many blocks of module values active defragmentation has moved.
pub fn defrag_moved() -> u64 {
    DEFRAG_MOVED.load(Ordering::Relaxed)
}

/// The server's active defragmentation as a [`Relocate`]: each block goes
/// to `RedisModule_DefragAlloc`, which moves it (copying it whole, freeing
/// the old one) when the allocator asks to, or leaves it.
struct Defragger {
    ctx: *mut raw::RedisModuleDefragCtx,
    // SAFETY: a function type, not an unsafe block; its one call site
    // (`moved`) says why the call is sound.
    alloc: unsafe extern "C" fn(*mut raw::RedisModuleDefragCtx, *mut c_void) -> *mut c_void,
}

impl Defragger {
    /// Where the block at `ptr` lives after the server had its say.
    fn moved(&self, ptr: *mut c_void) -> *mut c_void {
        // SAFETY: the live defrag context of this callback; `ptr` starts a
        // block the module's global allocator (`RedisModule_Alloc`) made
        // and that nothing else refers to while the callback runs (the
        // server calls it on the main thread, between commands). The server
        // returns null (not moved) or a new block holding the same bytes,
        // having freed the old one.
        let new = unsafe { (self.alloc)(self.ctx, ptr) };
        if new.is_null() {
            ptr
        } else {
            DEFRAG_MOVED.fetch_add(1, Ordering::Relaxed);
            new
        }
    }
}

impl Relocate for Defragger {
    fn vec<T>(&mut self, v: Vec<T>) -> Vec<T> {
        if v.capacity() == 0 || std::mem::size_of::<T>() == 0 {
            return v;
        }
        let mut v = std::mem::ManuallyDrop::new(v);
        let (ptr, len, capacity) = (v.as_mut_ptr(), v.len(), v.capacity());
        let at = self.moved(ptr.cast()).cast::<T>();
        // SAFETY: `at` holds the `len` initialised elements of the buffer
        // of `capacity` the vector had (the block moved whole, same size,
        // same alignment: the allocator's natural one for its size class,
        // as the first allocation had), and the old vector is never dropped.
        unsafe { Vec::from_raw_parts(at, len, capacity) }
    }

    fn boxed<T>(&mut self, b: Box<T>) -> Box<T> {
        if std::mem::size_of::<T>() == 0 {
            return b;
        }
        let ptr = Box::into_raw(b);
        let at = self.moved(ptr.cast()).cast::<T>();
        // SAFETY: as for `vec`: `at` holds the value the box held, whole.
        unsafe { Box::from_raw(at) }
    }
}

extern "C" fn defrag<T: TypeValue>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    guarded(0, || {
        let Ok(alloc) = api!(RedisModule_DefragAlloc) else {
            return 0;
        };
        let mut to = Defragger { ctx, alloc };
        // SAFETY: the server passes the address of the key's value pointer,
        // a live `Box<T>` made by `into_raw`, on the main thread; the value
        // itself is moved first (the new address written back for the
        // server), then the blocks it owns.
        unsafe {
            let Some(slot) = value.as_mut() else {
                return 0;
            };
            if slot.is_null() {
                return 0;
            }
            *slot = to.moved(*slot);
            if let Some(v) = slot.cast::<T>().as_mut() {
                v.relocate(&mut to);
            }
        }
        // Done: no cursor to resume from.
        0
    })
}
