//! Thin command wrappers: check arity, parse, read the clock once, run the
//! pure decision on the Redis-backed log, reply. No logic lives here.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::args::{self, ArgError};
use crate::clock;
use crate::window;
use crate::zset_log::ZsetLog;

impl From<ArgError> for RedisError {
    fn from(e: ArgError) -> Self {
        match e {
            ArgError::WrongArity => RedisError::WrongArity,
            other => RedisError::String(other.to_string()),
        }
    }
}

/// Runs a command body, turning a panic into an error reply: a panic that
/// crossed into the server would abort it and take every client's data down.
fn guarded(body: impl FnOnce() -> RedisResult) -> RedisResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(RedisError::Str(
            "ERR slidewin internal error (nothing was changed; see the server log)",
        ))
    })
}

/// `SLIDEWIN.CHECK key limit window_ms`
///
/// Trims the entries of `key` scored at or below `now - window_ms`; if fewer
/// than `limit` remain, records one entry at `now`, sets the key to expire
/// when that entry leaves the window, and replies 1; otherwise replies 0 and
/// adds nothing.
pub fn check(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    guarded(|| {
        let [_, key, limit, window_ms] = argv.as_slice() else {
            return Err(RedisError::WrongArity);
        };
        let parsed = args::parse_check(&[limit.as_slice(), window_ms.as_slice()])?;
        let now = clock::now_ms().ok_or(RedisError::Str("ERR the server clock is unavailable"))?;
        let mut log = ZsetLog::open(ctx, key)?;
        let outcome = window::check(&mut log, now, &parsed)?;
        Ok(RedisValue::Integer(i64::from(outcome.allowed)))
    })
}
