//! The node's heavy-hitters summary ([`super::Top`]): fed by CHECK and
//! MCHECK with every decision, answered by SLIDEWIN.TOP, reported by INFO.
//! Node-local like INFO: never replicated or persisted, gone with a restart
//! or a failover. It follows the settings its callers pass in
//! (`slidewin.top-capacity` and `slidewin.top-period-ms`, read by them from
//! the configuration); a change of either starts it afresh.

use std::sync::{Mutex, MutexGuard};

use super::summary::{Hitter, Outcome, Top};

/// Commands run on the server's main thread, so the lock is never
/// contended; it keeps the summary safe should that ever change.
static NODE: Mutex<Option<Top>> = Mutex::new(None);

/// The summary, built or rebuilt for the settings given.
fn node_with(capacity: i64, period_ms: i64) -> MutexGuard<'static, Option<Top>> {
    // A panic while the lock was held cannot leave the summary unsound
    // (every update is complete or not started): use it as it is.
    let mut guard = NODE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !guard
        .as_ref()
        .is_some_and(|t| t.has_settings(capacity, period_ms))
    {
        *guard = Some(Top::new(capacity, period_ms));
    }
    guard
}

/// TOP's settings, `(slidewin.top-capacity, slidewin.top-period-ms)`, as
/// the callers read them from the configuration.
pub type Settings = (i64, i64);

/// Counts one decision on `key`, under the settings in force.
pub fn record((capacity, period_ms): Settings, now_ms: i64, allowed: bool, key: &[u8]) {
    if capacity == 0 {
        return;
    }
    let outcome = if allowed {
        Outcome::Allowed
    } else {
        Outcome::Denied
    };
    if let Some(top) = node_with(capacity, period_ms).as_mut() {
        top.record(now_ms, outcome, key);
    }
}

/// The summary is off (`slidewin.top-capacity 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Off;

/// The `count` heaviest keys of `outcome`; with `reset`, clears the
/// summary after reading it (a read-and-reset for periodic scraping).
pub fn top(
    (capacity, period_ms): Settings,
    now_ms: i64,
    outcome: Outcome,
    count: usize,
    reset: bool,
) -> Result<Vec<Hitter>, Off> {
    let mut guard = node_with(capacity, period_ms);
    let Some(top) = guard.as_mut().filter(|t| t.enabled()) else {
        return Err(Off);
    };
    let hitters = top.top(now_ms, outcome, count);
    if reset {
        top.reset();
    }
    Ok(hitters)
}

/// (capacity, period_ms, keys tracked, bytes held) for INFO.
pub fn info((capacity, period_ms): Settings) -> (u64, u64, u64, u64) {
    let guard = node_with(capacity, period_ms);
    let as_u64 = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    match guard.as_ref() {
        Some(t) => (
            as_u64(t.capacity()),
            u64::try_from(t.period_ms()).unwrap_or(0),
            as_u64(t.tracked_keys()),
            as_u64(t.memory_bytes()),
        ),
        None => (0, 0, 0, 0),
    }
}
