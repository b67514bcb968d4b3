//! Module strings this code creates (or takes over from the server) and
//! must free: created from an integer or bytes, read back as an integer,
//! freed on drop.

use std::ptr::NonNull;

use redis_module::{raw, Context, RedisString};

use super::base::{api, status as ok_status, CallError};

/// A module string this code created and must free.
pub struct ModuleString<'c> {
    ctx: &'c Context,
    ptr: NonNull<raw::RedisModuleString>,
}

impl<'c> ModuleString<'c> {
    /// The decimal string of `v`, as the server would print it.
    pub fn from_i64(ctx: &'c Context, v: i64) -> Result<Self, CallError> {
        let create = api!(RedisModule_CreateStringFromLongLong)?;
        // SAFETY: `ctx.ctx` is the live context of the running command.
        let ptr = unsafe { create(ctx.ctx, v) };
        NonNull::new(ptr)
            .map(|ptr| ModuleString { ctx, ptr })
            .ok_or(CallError::Failed("creating a string"))
    }

    /// A copy of `bytes`.
    pub fn from_bytes(ctx: &'c Context, bytes: &[u8]) -> Result<Self, CallError> {
        let create = api!(RedisModule_CreateString)?;
        // SAFETY: `ctx.ctx` is the live context of the running command;
        // `bytes` is valid for `bytes.len()` bytes and the server copies them.
        let ptr = unsafe { create(ctx.ctx, bytes.as_ptr().cast(), bytes.len()) };
        NonNull::new(ptr)
            .map(|ptr| ModuleString { ctx, ptr })
            .ok_or(CallError::Failed("creating a string"))
    }

    /// The string as an integer, when it is the canonical decimal form of
    /// one (as the server parses integers: no sign but `-`, no leading
    /// zeros, no spaces).
    pub fn to_i64(&self) -> Option<i64> {
        let parse = api!(RedisModule_StringToLongLong).ok()?;
        let mut v: std::os::raw::c_longlong = 0;
        // SAFETY: `self.ptr` is a live string we own; `v` is a valid out slot.
        let status = unsafe { parse(self.ptr.as_ptr(), &mut v) };
        ok_status(status, "parsing an integer").ok().map(|()| v)
    }

    /// Takes over a string the server handed out as a new reference.
    ///
    /// # Safety
    /// `ptr` must be a live string of which the caller owns exactly one
    /// reference, not freed elsewhere: the returned value frees it.
    pub(crate) unsafe fn adopt(ctx: &'c Context, ptr: NonNull<raw::RedisModuleString>) -> Self {
        ModuleString { ctx, ptr }
    }

    pub(crate) fn as_ptr(&self) -> *mut raw::RedisModuleString {
        self.ptr.as_ptr()
    }
}

impl Drop for ModuleString<'_> {
    fn drop(&mut self) {
        if let Ok(free) = api!(RedisModule_FreeString) {
            // SAFETY: we own exactly one reference to this string, taken when
            // it was created or handed to us by the iterator; it is freed once.
            unsafe { free(self.ctx.ctx, self.ptr.as_ptr()) }
        }
    }
}

/// A live server string: one of the command's arguments, or one this code
/// created ([`ModuleString`]).
pub trait RawString {
    fn raw(&self) -> *mut raw::RedisModuleString;
}

impl RawString for RedisString {
    fn raw(&self) -> *mut raw::RedisModuleString {
        self.inner
    }
}

impl RawString for ModuleString<'_> {
    fn raw(&self) -> *mut raw::RedisModuleString {
        self.as_ptr()
    }
}
