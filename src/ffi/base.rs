//! The base of the FFI layer, which imports nothing else of it: looking up
//! a module API function pointer (never unwrapped), the error type of raw
//! calls, the one status check, the server log and a command's handle. `mod.rs`, `string.rs` and
//! `set_command_info.rs` build on it.

use std::fmt;
use std::os::raw::c_int;

use std::ffi::CStr;

use redis_module::{raw, Context, RedisError};

/// Looks up a module API function pointer, turning a null one into an error.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: the API pointers are written once by `RedisModule_Init` while
        // the module loads, before any command can run, and only read after;
        // commands run on the server's main thread. Copying the `Option<fn>`
        // out of the static creates no reference to it.
        match unsafe { redis_module::raw::$name } {
            Some(f) => Ok(f),
            None => Err($crate::ffi::base::CallError::MissingApi(stringify!($name))),
        }
    };
}
pub(crate) use api;

/// Errors from raw calls, each with the reply a client should see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The key holds a kind of value the command does not work on.
    WrongType,
    /// The server does not export a function slidewin needs.
    MissingApi(&'static str),
    /// The server refused an operation it should have accepted.
    Failed(&'static str),
    /// The change would leave a bound a stored value must hold (the text
    /// says which); nothing was changed.
    Refused(&'static str),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The server's own text (REDISMODULE_ERRORMSG_WRONGTYPE).
            CallError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CallError::MissingApi(name) => write!(f, "ERR this server does not provide {name}"),
            CallError::Failed(what) => write!(f, "ERR {what} failed"),
            CallError::Refused(why) => write!(f, "ERR {why}"),
        }
    }
}

impl From<CallError> for RedisError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::WrongType => RedisError::WrongType,
            other => RedisError::String(other.to_string()),
        }
    }
}

/// `REDISMODULE_OK`, or `Failed(what)`: the one status check.
pub fn status(status: c_int, what: &'static str) -> Result<(), CallError> {
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(CallError::Failed(what))
    }
}

/// The handle of a command this module created.
pub fn get_command(ctx: &Context, name: &CStr) -> Result<*mut raw::RedisModuleCommand, CallError> {
    let get = api!(RedisModule_GetCommand)?;
    // SAFETY: the load-time context and a NUL-terminated command name.
    let command = unsafe { get(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        Err(CallError::Failed("looking up the command"))
    } else {
        Ok(command)
    }
}

/// Writes `message` to the server log at `level` (`c"warning"`,
/// `c"notice"`...), on behalf of the module when `ctx` is given. The text is
/// passed as an argument of a `"%s"` format, never as the format itself (a
/// `%` in a load argument or a panic message must not be read as a
/// conversion); NUL bytes, which C strings cannot hold, become `\0`.
pub fn log(ctx: Option<&Context>, level: &CStr, message: &str) {
    let Ok(log) = api!(RedisModule_Log) else {
        return;
    };
    let text = match std::ffi::CString::new(message) {
        Ok(text) => text,
        Err(_) => match std::ffi::CString::new(message.replace('\0', "\\0")) {
            Ok(text) => text,
            Err(_) => return,
        },
    };
    let ctx = ctx.map_or(std::ptr::null_mut(), |c| c.ctx);
    // SAFETY: `ctx` is null (allowed: the server logs without a module
    // name) or the live context of the current call; `level`, the format
    // and `text` are NUL-terminated strings alive for the call, and the
    // format consumes exactly the one `char *` argument given.
    unsafe { log(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
}
