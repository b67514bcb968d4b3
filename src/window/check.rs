//! One key's decision: `SLIDEWIN.CHECK`, `PEEK`, `SETTLE`, `UNDO` by
//! request id, the DETAIL fields and the expiry.

use super::ids::*;
use super::log::*;

/// The newest score that has already expired at `now_ms`: entries scored at
/// or below it are outside the window.
pub fn cutoff(now_ms: i64, window_ms: i64) -> i64 {
    now_ms.saturating_sub(window_ms)
}

/// Whether `cost` more entries fit beside the `n` in the window.
pub fn fits(n: u64, rule: &Rule) -> bool {
    n.checked_add(rule.cost)
        .is_some_and(|total| total <= rule.limit)
}

/// Milliseconds from `now_ms` until the entry scored `score` leaves a window
/// of `window_ms`, rounded up (scores from other writers may be fractional).
/// `as` saturates for values beyond `i64`, which cannot come from valid
/// input but must not wrap.
pub(super) fn ms_until_expired(score: f64, window_ms: i64, now_ms: i64) -> i64 {
    let ms = (score + window_ms as f64 - now_ms as f64).ceil();
    ms as i64
}

/// The absolute expiry of a log whose newest entry is `newest_after_now`
/// (when an entry is scored after `now_ms`) or `now_ms`: the key never
/// disappears while an entry still counts.
pub fn expiry(now_ms: i64, newest_after_now: Option<f64>, window_ms: i64) -> i64 {
    match newest_after_now {
        Some(score) if score > now_ms as f64 => {
            now_ms.saturating_add(ms_until_expired(score, window_ms, now_ms))
        }
        _ => now_ms.saturating_add(window_ms),
    }
}

/// `retry_after_ms` for a call that did not fit beside the `n` entries in
/// the window: the `(n + cost - limit)`-th oldest of them must expire first.
pub(super) fn retry_after<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    rule: &Rule,
    n: u64,
) -> Result<i64, L::Error> {
    if rule.cost > rule.limit {
        return Ok(-1);
    }
    // n + cost > limit and cost <= limit, so 1 <= k <= n.
    let k = n.saturating_add(rule.cost).saturating_sub(rule.limit);
    let cut = cutoff(now_ms, rule.window_ms);
    Ok(match log.nth_above(cut, k, n)? {
        Some(score) => ms_until_expired(score, rule.window_ms, now_ms).max(1),
        // Unreachable with a consistent log; "try again in 1 ms" is safe.
        None => 1,
    })
}

/// `reset_after_ms` when the newest in-window score is `newest`.
pub(super) fn reset_after(newest: Option<f64>, now_ms: i64, window_ms: i64) -> i64 {
    newest.map_or(0, |s| ms_until_expired(s, window_ms, now_ms).max(0))
}

/// The detail of a call that adds nothing (a denial, or a peek) with `n`
/// entries in the window: the entries stay as they are.
pub(super) fn detail_unchanged<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    rule: &Rule,
    n: u64,
) -> Result<Detail, L::Error> {
    let retry_after_ms = if fits(n, rule) {
        0
    } else {
        retry_after(log, now_ms, rule, n)?
    };
    let newest = log.newest_above(cutoff(now_ms, rule.window_ms))?;
    Ok(Detail {
        remaining: rule.limit.saturating_sub(n),
        retry_after_ms,
        reset_after_ms: reset_after(newest, now_ms, rule.window_ms),
    })
}

/// The detail of an allowed call that left `count` entries in the window
/// and set the log to expire at `at_ms`.
pub(super) fn detail_allowed(rule: &Rule, count: u64, now_ms: i64, at_ms: i64) -> Detail {
    Detail {
        remaining: rule.limit.saturating_sub(count),
        retry_after_ms: 0,
        reset_after_ms: at_ms.saturating_sub(now_ms),
    }
}

/// Runs one `SLIDEWIN.CHECK` against `log` at time `now_ms`, without an
/// ID (the unit tests and the fuzz targets; the command calls
/// [`check_request`]).
#[cfg(any(test, feature = "fuzzing"))]
pub fn check<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    rule: &Rule,
    want: Want,
) -> Result<Verdict, L::Error> {
    check_using(log, now_ms, rule, want, None, &mut ServerIds)
}

/// Runs one `SLIDEWIN.CHECK ... ID request` (`request` given) or a plain
/// one: a call repeating a request id whose charge the log still holds (in
/// this call's window) charges nothing and is answered allowed, with the
/// detail as the log is now; otherwise an allowed call's entries are the
/// charge under `request`.
pub fn check_request<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    rule: &Rule,
    want: Want,
    request: Option<&[u8]>,
) -> Result<Verdict, L::Error> {
    check_using(log, now_ms, rule, want, request, &mut ServerIds)
}

/// The detail of a repeated call: allowed, nothing added, `n` entries in
/// the window as it is now.
pub(super) fn detail_repeated<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    limit: u64,
    window_ms: i64,
    n: u64,
) -> Result<Detail, L::Error> {
    let newest = log.newest_above(cutoff(now_ms, window_ms))?;
    Ok(Detail {
        remaining: limit.saturating_sub(n),
        retry_after_ms: 0,
        reset_after_ms: reset_after(newest, now_ms, window_ms),
    })
}

/// [`check_request`], taking wide ids from `wide`.
pub(super) fn check_using<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    rule: &Rule,
    want: Want,
    request: Option<&[u8]>,
    wide: &mut impl WideIds,
) -> Result<Verdict, L::Error> {
    let trimmed = log.trim(cutoff(now_ms, rule.window_ms))?;
    let n = log.count()?;
    if let Some(r) = request {
        if log.charge(r)?.is_some() {
            let detail = match want.detail {
                true => Some(detail_repeated(log, now_ms, rule.limit, rule.window_ms, n)?),
                false => None,
            };
            return Ok(Verdict::unchanged(true, n, trimmed, detail, true));
        }
    }
    if request.is_some() && fits(n, rule) {
        log.may_charge()?;
    }
    if !fits(n, rule) {
        let detail = if want.detail {
            Some(detail_unchanged(log, now_ms, rule, n)?)
        } else {
            None
        };
        return Ok(Verdict::unchanged(false, n, trimmed, detail, false));
    }
    // The expiry covers the newest entry when it is scored after now.
    let (newest, first) = newest_and_first(log)?;
    let mut members = Vec::new();
    match request {
        Some(r) => log.add_units(r, now_ms as f64, 0, rule.cost)?,
        None => add_entries(
            log,
            now_ms,
            rule.cost,
            wide.above_fence(now_ms, first),
            wide,
            want.members.then_some(&mut members),
        )?,
    }
    let at = expiry(now_ms, newest, rule.window_ms);
    log.expire_at(at)?;
    let count = n.saturating_add(rule.cost);
    Ok(Verdict {
        allowed: true,
        count,
        trimmed,
        added: rule.cost,
        expire_at_ms: Some(at),
        detail: want.detail.then(|| detail_allowed(rule, count, now_ms, at)),
        members,
        repeated: false,
    })
}

/// The cutoff of a log's own window, for the commands that take no window
/// (SETTLE, UNDO): a CHECK sets the key to expire at its newest entry's
/// score plus the call's window (MCHECK: the longest window of its rules on
/// the key), so the window is `expires_at_ms - newest` and the cutoff
/// `newest - (expires_at_ms - now_ms)`, floored (a fractional score from
/// another writer is kept rather than trimmed early). `None`, nothing
/// expired, for a log without an expiry (`expires_at_ms` is the key's) or
/// without entries. An UNDO of the newest entry only widens the window
/// seen: it never removes an entry a CHECK would still count.
pub fn own_cutoff<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> Result<Option<i64>, L::Error> {
    let Some(at) = expires_at_ms else {
        return Ok(None);
    };
    let Some((newest, _)) = log.newest_entry()? else {
        return Ok(None);
    };
    let ttl = at.saturating_sub(now_ms);
    // `as` saturates; scores and times are far inside i64.
    Ok(Some((newest - ttl as f64).floor() as i64))
}

/// Trims `log` to its own window (see [`own_cutoff`]), as CHECK trims to
/// its: SETTLE and UNDO see no charge that has left its window. Returns
/// how many entries it removed.
pub fn trim_own<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> Result<u64, L::Error> {
    match own_cutoff(log, now_ms, expires_at_ms)? {
        Some(cut) => log.trim(cut),
        None => Ok(0),
    }
}

/// The bounds on a SETTLE raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleBounds {
    /// The most entries one call may add (`slidewin.max-entries-per-call`).
    pub max_added: u64,
    /// The most entries the key may hold after it (`slidewin.max-limit`).
    pub max_entries: u64,
}

/// What SETTLE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The charge now holds these units.
    Units(u64),
    /// The log holds no charge under the id in its window: nothing changed
    /// but the trim.
    NoCharge,
    /// Refused, nothing changed: the raise would add `added` entries, more
    /// than one call may.
    TooManyAdded { added: u64 },
    /// Refused, nothing changed: the raise would leave the log with
    /// `entries` entries, more than the key may hold.
    TooManyEntries { entries: u64 },
}

/// `SLIDEWIN.SETTLE` at `now_ms` on a log expiring at `expires_at_ms`:
/// trims the log to its own window first ([`trim_own`]), then sets the
/// units of the charge under `request` to `units`: fewer removes the
/// highest ones, more adds the difference at the charge's own score (past
/// any limit: the calls that follow wait), unless that passes `bounds`:
/// then nothing changes, not even the trim.
pub fn settle<L: WindowLog>(
    log: &mut L,
    request: &[u8],
    units: u64,
    now_ms: i64,
    expires_at_ms: Option<i64>,
    bounds: SettleBounds,
) -> Result<Settled, L::Error> {
    let cut = own_cutoff(log, now_ms, expires_at_ms)?;
    let live = |c: &Charge| cut.is_none_or(|cut| c.score_ms > cut as f64);
    let charge = log.charge(request)?.filter(live);
    if let Some(c) = charge {
        let added = units.saturating_sub(c.units);
        if added > bounds.max_added {
            return Ok(Settled::TooManyAdded { added });
        }
        if added > 0 {
            let held = match cut {
                Some(cut) => log.count_above(cut)?,
                None => log.count()?,
            };
            let entries = held.saturating_add(added);
            if entries > bounds.max_entries {
                return Ok(Settled::TooManyEntries { entries });
            }
        }
    }
    if let Some(cut) = cut {
        log.trim(cut)?;
    }
    let Some(charge) = charge else {
        return Ok(Settled::NoCharge);
    };
    if units < charge.units {
        log.remove_units(request, units, charge.units)?;
    } else if units > charge.units {
        log.add_units(request, charge.score_ms, charge.units, units)?;
    }
    Ok(Settled::Units(units))
}

/// `SLIDEWIN.UNDO key ID request` at `now_ms` on a log expiring at
/// `expires_at_ms`: trims the log to its own window first ([`trim_own`]),
/// then removes the whole charge under `request`; returns how many entries
/// it removed (0 when there is none).
pub fn undo_request<L: WindowLog>(
    log: &mut L,
    request: &[u8],
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> Result<u64, L::Error> {
    trim_own(log, now_ms, expires_at_ms)?;
    match log.charge(request)? {
        Some(charge) => log.remove_units(request, 0, charge.units),
        None => Ok(0),
    }
}

/// The age in ms at `now_ms` of the oldest of the `n` entries in the
/// window (0 for an entry scored after now, after a clock step back);
/// `None` when the window is empty. Reads the log, changes nothing: called
/// after a check or a peek with its verdict's `count`.
pub fn oldest_age<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    window_ms: i64,
    n: u64,
) -> Result<Option<i64>, L::Error> {
    if n == 0 {
        return Ok(None);
    }
    let oldest = log.nth_above(cutoff(now_ms, window_ms), 1, n)?;
    Ok(oldest.map(|score| ((now_ms as f64 - score).floor() as i64).max(0)))
}

/// Answers what `check` with DETAIL would answer at `now_ms`, changing
/// nothing: expired entries are not counted rather than removed.
pub fn peek<L: WindowLog>(log: &mut L, now_ms: i64, rule: &Rule) -> Result<Verdict, L::Error> {
    let n = log.count_above(cutoff(now_ms, rule.window_ms))?;
    let detail = detail_unchanged(log, now_ms, rule, n)?;
    Ok(Verdict::unchanged(fits(n, rule), n, 0, Some(detail), false))
}
