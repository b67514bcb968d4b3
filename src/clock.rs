//! The server's clock, read once per command.
//!
//! `RedisModule_CachedMicroseconds` (Redis 7.2+, Valkey) is the time the
//! server cached when the command started; it stays the same for every
//! command of a MULTI/EXEC or a script, like the clock Redis's own commands
//! use. Older servers fall back to `RedisModule_Milliseconds`. The function
//! pointers are checked for null, never guessed from a version number.

use redis_module::raw;

/// The server's wall clock in milliseconds, or `None` if the server exports
/// neither clock function (no supported server does).
pub fn now_ms() -> Option<i64> {
    // SAFETY: the API pointers are written once while the module loads and
    // only read afterwards, on the main thread; copying an `Option<fn>` out of
    // the static creates no reference to it.
    let (cached, millis) = unsafe {
        (
            raw::RedisModule_CachedMicroseconds,
            raw::RedisModule_Milliseconds,
        )
    };
    if let Some(cached) = cached {
        // SAFETY: a plain getter with no arguments.
        return Some(unsafe { cached() }.div_euclid(1000));
    }
    // SAFETY: a plain getter with no arguments.
    millis.map(|f| unsafe { f() })
}
