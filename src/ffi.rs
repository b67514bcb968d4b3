//! The layer between slidewin and the server's module API: looking up a
//! function pointer (never unwrapped), checking a status, the error type of
//! raw calls, and the typed replication builder [`Propagate`].
//!
//! This is the first part of the one FFI layer; the sorted-set wrapper
//! (`zset.rs`) and a few registration calls still make their own raw calls
//! through [`api!`].

use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisString};

use crate::zset::ModuleString;

/// Looks up a module API function pointer, turning a null one into an error.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: the API pointers are written once by `RedisModule_Init` while
        // the module loads, before any command can run, and only read after;
        // commands run on the server's main thread. Copying the `Option<fn>`
        // out of the static creates no reference to it.
        match unsafe { redis_module::raw::$name } {
            Some(f) => Ok(f),
            None => Err($crate::ffi::StoreError::MissingApi(stringify!($name))),
        }
    };
}
pub(crate) use api;

/// Errors from raw calls, each with the reply a client should see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreError {
    /// The key holds something other than a sorted set.
    WrongType,
    /// The server does not export a function slidewin needs.
    MissingApi(&'static str),
    /// The server refused an operation it should have accepted.
    Failed(&'static str),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The server's own text (REDISMODULE_ERRORMSG_WRONGTYPE).
            StoreError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            StoreError::MissingApi(name) => write!(f, "ERR this server does not provide {name}"),
            StoreError::Failed(what) => write!(f, "ERR {what} failed"),
        }
    }
}

impl From<StoreError> for RedisError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::WrongType => RedisError::WrongType,
            other => RedisError::String(other.to_string()),
        }
    }
}

/// `REDISMODULE_OK`, or `Failed(what)`: the one status check.
pub fn status(status: c_int, what: &'static str) -> Result<(), StoreError> {
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(StoreError::Failed(what))
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

impl RawString for ModuleString {
    fn raw(&self) -> *mut raw::RedisModuleString {
        self.as_ptr()
    }
}

/// One command to propagate to replicas and the AOF, built argument by
/// argument, so no format string is ever matched to its arguments by hand:
///
/// ```text
/// Propagate::new(ctx, c"ZADD").key(name).int(now)?.string(&member).send()
/// ```
///
/// Borrowed strings must live as long as the builder (`'a`); integers and
/// words are turned into strings the builder owns and frees after sending.
pub struct Propagate<'a> {
    ctx: &'a Context,
    command: &'static CStr,
    argv: Vec<*mut raw::RedisModuleString>,
    owned: Vec<ModuleString>,
    _borrowed: PhantomData<&'a ()>,
}

impl<'a> Propagate<'a> {
    pub fn new(ctx: &'a Context, command: &'static CStr) -> Self {
        Propagate {
            ctx,
            command,
            argv: Vec::new(),
            owned: Vec::new(),
            _borrowed: PhantomData,
        }
    }

    /// A key name (any live string).
    pub fn key(self, key: &'a impl RawString) -> Self {
        self.string(key)
    }

    /// A live string, as it is.
    pub fn string(mut self, s: &'a impl RawString) -> Self {
        self.argv.push(s.raw());
        self
    }

    /// Live strings, as they are.
    pub fn strings<S: RawString + 'a>(mut self, ss: impl IntoIterator<Item = &'a S>) -> Self {
        self.argv.extend(ss.into_iter().map(RawString::raw));
        self
    }

    /// An integer, in decimal.
    pub fn int(mut self, v: i64) -> Result<Self, StoreError> {
        let s = ModuleString::from_i64(self.ctx, v)?;
        self.argv.push(s.as_ptr());
        self.owned.push(s);
        Ok(self)
    }

    /// A fixed word such as `-inf`.
    pub fn word(mut self, w: &'static CStr) -> Result<Self, StoreError> {
        let s = ModuleString::from_bytes(self.ctx, w.to_bytes())?;
        self.argv.push(s.as_ptr());
        self.owned.push(s);
        Ok(self)
    }

    /// Propagates the command (wrapped with the call's other effects in
    /// MULTI/EXEC by the server).
    pub fn send(mut self) -> Result<(), StoreError> {
        let replicate = api!(RedisModule_Replicate)?;
        // SAFETY: the live command context; "v" is followed by a pointer to
        // `argv.len()` strings and that length. Every pointer is a live
        // string: borrowed for `'a` or owned by `self.owned`, both alive
        // until after this call; the server takes its own references.
        status(
            unsafe {
                replicate(
                    self.ctx.ctx,
                    self.command.as_ptr(),
                    c"v".as_ptr(),
                    self.argv.as_mut_ptr(),
                    self.argv.len(),
                )
            },
            "replicating",
        )
    }
}
