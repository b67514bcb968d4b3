//! The counters behind `INFO slidewin`'s `slidewin_stats` section: what the
//! commands move (`record_*`) and read back (`Counter::get`, `errors`). A
//! leaf: the command table names counters from here and `stats.rs` shows
//! them, so neither imports the other through it.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter of `slidewin_stats` that a command moves. Each command lists
/// the counters it moves in the command table (`CommandSpec::counters`), and
/// the INFO fields are those lists in table order, then `errors`, which
/// every command moves: a counter no command declares is not shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    ChecksAllowed,
    ChecksDenied,
    CostGranted,
    Peeks,
    Undone,
    Repeated,
    Settled,
    ShadowRefused,
}

impl Counter {
    /// Every counter (the unit test checks each is declared by a command).
    #[cfg(test)]
    pub const ALL: [Counter; 8] = [
        Counter::ChecksAllowed,
        Counter::ChecksDenied,
        Counter::CostGranted,
        Counter::Peeks,
        Counter::Undone,
        Counter::Repeated,
        Counter::Settled,
        Counter::ShadowRefused,
    ];

    /// The INFO field, without the server's `slidewin_` prefix.
    pub fn field(self) -> &'static CStr {
        match self {
            Counter::ChecksAllowed => c"checks_allowed",
            Counter::ChecksDenied => c"checks_denied",
            Counter::CostGranted => c"cost_granted",
            Counter::Peeks => c"peeks",
            Counter::Undone => c"undone",
            Counter::Repeated => c"repeated",
            Counter::Settled => c"settled",
            Counter::ShadowRefused => c"checks_shadow_refused",
        }
    }

    fn cell(self) -> &'static AtomicU64 {
        static CHECKS_ALLOWED: AtomicU64 = AtomicU64::new(0);
        static CHECKS_DENIED: AtomicU64 = AtomicU64::new(0);
        static COST_GRANTED: AtomicU64 = AtomicU64::new(0);
        static PEEKS: AtomicU64 = AtomicU64::new(0);
        static UNDONE: AtomicU64 = AtomicU64::new(0);
        static REPEATED: AtomicU64 = AtomicU64::new(0);
        static SETTLED: AtomicU64 = AtomicU64::new(0);
        static SHADOW_REFUSED: AtomicU64 = AtomicU64::new(0);
        match self {
            Counter::ChecksAllowed => &CHECKS_ALLOWED,
            Counter::ChecksDenied => &CHECKS_DENIED,
            Counter::CostGranted => &COST_GRANTED,
            Counter::Peeks => &PEEKS,
            Counter::Undone => &UNDONE,
            Counter::Repeated => &REPEATED,
            Counter::Settled => &SETTLED,
            Counter::ShadowRefused => &SHADOW_REFUSED,
        }
    }

    fn add(self, by: u64) {
        self.cell().fetch_add(by, Ordering::Relaxed);
    }

    pub fn get(self) -> u64 {
        self.cell().load(Ordering::Relaxed)
    }
}

static ERRORS: AtomicU64 = AtomicU64::new(0);

/// Error replies the commands gave.
pub fn errors() -> u64 {
    ERRORS.load(Ordering::Relaxed)
}

pub fn record_check(allowed: bool, cost: u64) {
    if allowed {
        Counter::ChecksAllowed.add(1);
        Counter::CostGranted.add(cost);
    } else {
        Counter::ChecksDenied.add(1);
    }
}

pub fn record_peek() {
    Counter::Peeks.add(1);
}

pub fn record_undo(removed: u64) {
    Counter::Undone.add(removed);
}

/// A CHECK or MCHECK answered from the charge an earlier call with the
/// same request id made: nothing charged.
pub fn record_repeat() {
    Counter::Repeated.add(1);
}

/// A CHECK or MCHECK with SHADOW that the limit refused: answered allowed,
/// nothing charged, not counted in `checks_denied`.
pub fn record_shadow_refused() {
    Counter::ShadowRefused.add(1);
}

/// A SETTLE that found its charge.
pub fn record_settle() {
    Counter::Settled.add(1);
}

pub fn record_error() {
    ERRORS.fetch_add(1, Ordering::Relaxed);
}
