//! Counters since the module loaded, shown by `INFO slidewin`.
//!
//! Fields (the server prefixes each with `slidewin_`):
//! `checks_allowed`, `checks_denied` (CHECK and MCHECK calls), `peeks`,
//! `cost_granted` (entries added by allowed checks, over all their keys),
//! `undone` (entries SLIDEWIN.UNDO removed) and `errors` (error replies the
//! commands gave; arity
//! errors come from the server itself, which checks the declared arity).
//!
//! A second section, `slidewin_capabilities`, says what the module found the
//! server able to do when it loaded (1 or 0): `acl_categories` (the server
//! exports `RedisModule_SetCommandACLCategories`, so the commands carry ACL
//! categories) and `cached_clock` (the server exports
//! `RedisModule_CachedMicroseconds`, so one clock value holds for a whole
//! MULTI or script).
//!
//! A third, `slidewin_top`, describes the heavy-hitters summary behind
//! SLIDEWIN.TOP: `top_capacity` (keys per epoch and outcome; 0 is off),
//! `top_period_ms`, `top_keys_tracked` (over every epoch and both outcomes)
//! and `top_memory_bytes` (what it holds; bounded by the capacity).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ffi::InfoWriter;

static CHECKS_ALLOWED: AtomicU64 = AtomicU64::new(0);
static CHECKS_DENIED: AtomicU64 = AtomicU64::new(0);
static PEEKS: AtomicU64 = AtomicU64::new(0);
static COST_GRANTED: AtomicU64 = AtomicU64::new(0);
static ERRORS: AtomicU64 = AtomicU64::new(0);
static UNDONE: AtomicU64 = AtomicU64::new(0);

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

pub fn record_check(allowed: bool, cost: u64) {
    if allowed {
        bump(&CHECKS_ALLOWED, 1);
        bump(&COST_GRANTED, cost);
    } else {
        bump(&CHECKS_DENIED, 1);
    }
}

pub fn record_peek() {
    bump(&PEEKS, 1);
}

pub fn record_undo(removed: u64) {
    bump(&UNDONE, removed);
}

pub fn record_error() {
    bump(&ERRORS, 1);
}

/// The counters as (field, value) pairs, in INFO order.
pub fn snapshot() -> [(&'static std::ffi::CStr, u64); 6] {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    [
        (c"checks_allowed", get(&CHECKS_ALLOWED)),
        (c"checks_denied", get(&CHECKS_DENIED)),
        (c"peeks", get(&PEEKS)),
        (c"cost_granted", get(&COST_GRANTED)),
        (c"undone", get(&UNDONE)),
        (c"errors", get(&ERRORS)),
    ]
}

/// What the server supports, as (field, 0 or 1) pairs in INFO order: each
/// optional API is detected by its function pointer, never by version.
pub fn capabilities() -> [(&'static std::ffi::CStr, u64); 2] {
    [
        (
            c"acl_categories",
            u64::from(crate::ffi::has_acl_categories()),
        ),
        (c"cached_clock", u64::from(crate::ffi::has_cached_clock())),
    ]
}

/// The INFO sections: `slidewin_stats`, `slidewin_capabilities` and
/// `slidewin_top`.
fn write_info(info: &mut InfoWriter) {
    info.section(c"stats");
    for (name, value) in snapshot() {
        info.field(name, value);
    }
    info.section(c"capabilities");
    for (name, value) in capabilities() {
        info.field(name, value);
    }
    let (capacity, period_ms, keys, bytes) = crate::hitters::info();
    info.section(c"top");
    info.field(c"top_capacity", capacity);
    info.field(c"top_period_ms", period_ms);
    info.field(c"top_keys_tracked", keys);
    info.field(c"top_memory_bytes", bytes);
}

/// Installs the module's INFO sections.
pub fn register(ctx: &redis_module::Context) {
    crate::ffi::register_info(ctx, write_info);
}
