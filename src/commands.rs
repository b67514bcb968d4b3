//! Thin command wrappers: parse, read the clock once, run the pure decision
//! on the Redis-backed log, count, reply. No window logic lives here.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::args::{self, ArgError, Command, Request};
use crate::window::{self, Verdict};
use crate::zset_log::ZsetLog;
use crate::{clock, config, stats};

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

/// The reply for a verdict: `1`/`0`, or the five-field DETAIL array
/// `[allowed, limit, remaining, retry_after_ms, reset_after_ms]`.
fn reply(request: &Request, verdict: &Verdict) -> RedisValue {
    let allowed = i64::from(verdict.allowed);
    match verdict.detail {
        Some(d) if request.detail => RedisValue::Array(vec![
            RedisValue::Integer(allowed),
            RedisValue::Integer(i64::try_from(request.limit).unwrap_or(i64::MAX)),
            RedisValue::Integer(i64::try_from(d.remaining).unwrap_or(i64::MAX)),
            RedisValue::Integer(d.retry_after_ms),
            RedisValue::Integer(d.reset_after_ms),
        ]),
        _ => RedisValue::Integer(allowed),
    }
}

fn execute(ctx: &Context, argv: &[RedisString], command: Command) -> RedisResult {
    let [_, key, rest @ ..] = argv else {
        return Err(RedisError::WrongArity);
    };
    let request = args::parse(command, rest.iter().map(|a| a.as_slice()), config::bounds())?;
    let now = clock::now_ms().ok_or(RedisError::Str("ERR the server clock is unavailable"))?;
    let verdict = match command {
        Command::Check => {
            let mut log = ZsetLog::open_write(ctx, key)?;
            let verdict = window::check(&mut log, now, &request)?;
            stats::record_check(verdict.allowed, verdict.added);
            verdict
        }
        Command::Peek => {
            let mut log = ZsetLog::open_read(ctx, key)?;
            let verdict = window::peek(&mut log, now, &request)?;
            stats::record_peek();
            verdict
        }
    };
    Ok(reply(&request, &verdict))
}

fn run(ctx: &Context, argv: &[RedisString], command: Command) -> RedisResult {
    let result = guarded(|| execute(ctx, argv, command));
    if result.is_err() {
        stats::record_error();
    }
    result
}

/// `SLIDEWIN.CHECK key limit window_ms [COST count] [DETAIL]`
///
/// Trims the entries of `key` scored at or below `now - window_ms`; if
/// `count` more fit under `limit`, records them at `now`, sets the key to
/// expire when the newest entry leaves the window, and replies 1; otherwise
/// replies 0 and adds nothing. DETAIL replies with the five-field array.
pub fn check(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run(ctx, &argv, Command::Check)
}

/// `SLIDEWIN.PEEK key limit window_ms [COST count]`
///
/// Replies what `SLIDEWIN.CHECK ... DETAIL` would reply now, changing,
/// creating and replicating nothing.
pub fn peek(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run(ctx, &argv, Command::Peek)
}
