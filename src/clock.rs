//! The server's clock, read once per command.
//!
//! `RedisModule_CachedMicroseconds` (Redis 7.2+, Valkey) is the time the
//! server cached when the command started; it stays the same for every
//! command of a MULTI/EXEC or a script, like the clock Redis's own commands
//! use. Older servers fall back to `RedisModule_Milliseconds`. The function
//! pointers are checked for null, never guessed from a version number.

use crate::ffi;

/// The server's wall clock in milliseconds, or `None` if the server exports
/// neither clock function (no supported server does).
pub fn now_ms() -> Option<i64> {
    match ffi::cached_microseconds() {
        Some(us) => Some(us.div_euclid(1000)),
        None => ffi::milliseconds(),
    }
}
