//! The sliding-window decision, written against an abstract log of scores.
//!
//! Nothing here knows about Redis: the log is a trait ([`WindowLog`]) and the
//! clock is a plain argument, so the decision is tested with an in-memory log
//! and a fake clock. The Redis-backed logs live in `store/`.
//!
//! The rule: the window at `now` is the half-open interval
//! `(now - window_ms, now]`. Entries scored `<= now - window_ms` have expired.
//! With `n` entries in the window, a call of cost `c` is allowed when
//! `n + c <= limit`; it then adds `c` entries scored `now`, and the log
//! expires once its newest entry has left the window. A denied call adds
//! nothing.

use std::collections::HashSet;

use crate::member;

/// A rule for one call: at most `limit` entries in any trailing
/// `window_ms`, the call needing `cost` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub limit: u64,
    pub window_ms: i64,
    /// Entries the call needs (and adds when allowed).
    pub cost: u64,
}

impl Rule {
    /// A rule for a call of cost 1 (the unit tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn new(limit: u64, window_ms: i64) -> Self {
        Rule {
            limit,
            window_ms,
            cost: 1,
        }
    }
}

/// One rule of a multi-rule check, on one of the call's keys. `key` counts
/// from the command name in a parsed request (the key's argument) and
/// indexes the logs in [`mcheck`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedRule {
    pub key: usize,
    pub limit: u64,
    pub window_ms: i64,
}

impl KeyedRule {
    /// This rule for a call of `cost`.
    pub fn with_cost(&self, cost: u64) -> Rule {
        Rule {
            limit: self.limit,
            window_ms: self.window_ms,
            cost,
        }
    }
}

/// What a call wants computed beyond allowed or denied: the detail fields
/// (a denial's detail walks the log to the entry to wait for) and the ids
/// of the members added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    pub detail: bool,
    pub members: bool,
}

/// A charge made under a request id (`ID <request-id>`): the entries one
/// allowed call added under it to one log, all scored `score_ms`; it holds
/// `units` of them (the call's cost, later changed by SETTLE).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Charge {
    pub score_ms: f64,
    pub units: u64,
}

/// A log that cannot take one more entry under any member id: with a
/// consistent store this never happens (among `n + 1` consecutive ids one
/// is free), so it reports a broken store, not a full one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFreeMember;

/// A log of accepted calls, one entry per unit of cost, scored in ms.
/// The log stores; the decision, including every member id, is made here.
pub trait WindowLog {
    /// The error a backing store may report.
    type Error: From<NoFreeMember>;

    /// Removes every entry scored `<= cutoff_ms`; returns how many it removed.
    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error>;

    /// The number of entries in the log.
    fn count(&self) -> Result<u64, Self::Error>;

    /// The number of entries scored strictly above `cutoff_ms`.
    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error>;

    /// The `k`-th smallest score (1-based) among the `n` entries scored
    /// strictly above `cutoff_ms`, or `None` if there are fewer than `k`.
    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, Self::Error>;

    /// The largest score strictly above `min_ms`, if any.
    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error>;

    /// The newest entry (the last in the set's order: the highest score,
    /// and among equal scores the greatest member): its score, and its
    /// member when that is a member id (a non-negative integer).
    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error>;

    /// Whether member `id` is in the log.
    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error>;

    /// Adds an entry scored `now_ms` under member `id` unless `id` is
    /// already a member; returns whether it added.
    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error>;

    /// Sets the absolute time (ms) at which the whole log expires. This
    /// closes the call's writes: a store may publish the adds made since
    /// the last call of `expire_at` together, before the expiry.
    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error>;

    /// The charge made under `request`, if the log holds one.
    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error>;

    /// Adds units `held + 1 ..= to` to the charge under `request`, scored
    /// `score_ms` (a new charge: `held` 0). The store names the entries.
    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error>;

    /// Removes units `keep + 1 ..= held` of the charge under `request` (the
    /// highest first; `keep` 0: all of it); returns how many it removed.
    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, Self::Error>;

    /// Refuses a new charge where the store bounds how many charges a log
    /// holds (`slidewin.max-charges-per-key`); asked of every log of a call
    /// before anything is added, so a refused call changes nothing.
    fn may_charge(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The fields of a DETAIL reply the decision computes: the reply adds
/// `allowed` and the caller's `limit` around them (five fields in all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// `limit` minus the entries in the window after this call, at least 0.
    pub remaining: u64,
    /// 0 when allowed; -1 when the cost exceeds the limit; otherwise the ms
    /// until the same call would pass (at least 1).
    pub retry_after_ms: i64,
    /// The ms until the window holds no entry at all; 0 when it is empty.
    pub reset_after_ms: i64,
}

/// What one call decided and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the call was (or, for a peek, would be) allowed.
    pub allowed: bool,
    /// Entries in the window after this call.
    pub count: u64,
    /// How many expired entries were removed (always 0 for a peek).
    pub trimmed: u64,
    /// How many entries were added.
    pub added: u64,
    /// The absolute expiry set on the log, when entries were added.
    pub expire_at_ms: Option<i64>,
    /// The detail fields, when they were wanted.
    pub detail: Option<Detail>,
    /// The member ids added, when they were wanted.
    pub members: Vec<i64>,
    /// Whether the call repeated a request id the log still holds a charge
    /// under: answered allowed, nothing added.
    pub repeated: bool,
}

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
fn ms_until_expired(score: f64, window_ms: i64, now_ms: i64) -> i64 {
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
fn retry_after<L: WindowLog>(
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
fn reset_after(newest: Option<f64>, now_ms: i64, window_ms: i64) -> i64 {
    newest.map_or(0, |s| ms_until_expired(s, window_ms, now_ms).max(0))
}

/// The detail of a call that adds nothing (a denial, or a peek) with `n`
/// entries in the window: the entries stay as they are.
fn detail_unchanged<L: WindowLog>(
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
fn detail_allowed(rule: &Rule, count: u64, now_ms: i64, at_ms: i64) -> Detail {
    Detail {
        remaining: rule.limit.saturating_sub(count),
        retry_after_ms: 0,
        reset_after_ms: at_ms.saturating_sub(now_ms),
    }
}

/// The most ids one search for a wide id probes (see `first_free`): ids
/// the call already knows taken are stepped over and not counted.
const MAX_WIDE_TRIES: u64 = 1024;

/// Ids a call knows it cannot use: the run `from..to` of consecutive ids
/// it probed and found taken or took itself. Nothing frees an id during a
/// call, so a later search can step over the run without probing it again:
/// every wide search starts from a fresh id, one above the last search's
/// start, so without this a run of ids taken one in two would be searched
/// again from near its start each time, O(cost^2) probes in all.
#[derive(Debug, Clone, Copy, Default)]
struct Unusable {
    from: i64,
    to: i64,
}

impl Unusable {
    /// Notes that `id` is now known unusable: it extends the run when it is
    /// the id after it, else starts a new one (an id at the top of the
    /// range, after which ids wrap to 0, forgets the run instead).
    fn note(&mut self, id: i64) {
        let Some(after) = id.checked_add(1) else {
            *self = Unusable::default();
            return;
        };
        if id != self.to || self.from == self.to {
            self.from = id;
        }
        self.to = after;
    }

    /// How many consecutive ids from `start` on are known unusable.
    fn run_at(&self, start: i64) -> u64 {
        if (self.from..self.to).contains(&start) {
            self.to.abs_diff(start)
        } else {
            0
        }
    }
}

/// The first of `tries + 1` consecutive ids from `start` that `take`
/// accepts (`take` may also claim it, as an NX add does), stepping over the
/// ids `known` already holds unusable without probing them; with a
/// consistent store one is found, since fewer than `tries + 1` of them can
/// be taken. Probes the same ids as a plain scan would, less the known ones,
/// and finds the same id; but never more than `MAX_WIDE_TRIES` of them (a
/// log written by SLIDEWIN.APPLY may claim 2^40 consecutive members): then
/// it fails.
fn first_free<E: From<NoFreeMember>>(
    start: i64,
    tries: u64,
    known: &mut Unusable,
    mut take: impl FnMut(i64) -> Result<bool, E>,
) -> Result<i64, E> {
    let skip = known.run_at(start);
    if skip > tries {
        return Err(NoFreeMember.into());
    }
    // `skip > 0` only inside the run, which ends at `known.to`.
    let mut id = if skip > 0 { known.to } else { start };
    for _ in (skip..=tries).take(MAX_WIDE_TRIES as usize) {
        let took = take(id)?;
        known.note(id);
        if took {
            return Ok(id);
        }
        id = member::next(id);
    }
    Err(NoFreeMember.into())
}

/// Where wide ids come from: [`member::fresh`] on the server; a
/// deterministic sequence in the tests. `above_fence` raises a call's first
/// short id above the ids an UNDO freed this millisecond
/// ([`member::fence`]; the tests have no fence).
pub trait WideIds {
    fn fresh(&mut self, now_ms: i64) -> i64;

    fn above_fence(&mut self, _now_ms: i64, first: i64) -> i64 {
        first
    }
}

/// The server's wide ids: [`member::fresh`], and its fence.
pub struct ServerIds;

impl WideIds for ServerIds {
    fn fresh(&mut self, now_ms: i64) -> i64 {
        member::fresh(now_ms)
    }

    fn above_fence(&mut self, now_ms: i64, first: i64) -> i64 {
        member::above_fence(now_ms, first)
    }
}

/// Adds `cost` entries scored `now_ms` to one log, choosing each member id
/// (see `member.rs`): the short id `first` and the ones after it, or a
/// wide id when one is taken; pushes the ids used onto `ids` when given.
fn add_entries<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    cost: u64,
    first: i64,
    wide: &mut impl WideIds,
    mut ids: Option<&mut Vec<i64>>,
) -> Result<(), L::Error> {
    let mut short = first;
    let mut known = Unusable::default();
    for _ in 0..cost {
        let added = log.add(now_ms, short)?;
        known.note(short);
        let id = if added {
            short
        } else {
            // Taken: a wide id; among count + 1 consecutive ones one is free
            // in a log the module made. Bounded all the same: a log written
            // by SLIDEWIN.APPLY may claim 2^40 consecutive members, and a
            // call's cost must not follow (`first_free` probes at most
            // MAX_WIDE_TRIES ids, then fails as for any log with no free
            // member).
            let tries = log.count()?.saturating_add(cost);
            let start = wide.fresh(now_ms);
            first_free(start, tries, &mut known, |id| log.add(now_ms, id))?
        };
        // The next entry tries the id after this one.
        short = member::next(id);
        if let Some(ids) = ids.as_deref_mut() {
            ids.push(id);
        }
    }
    Ok(())
}

/// The newest entry's score, and the first member id to try after it.
/// When the newest member is not an id (an entry of a charge made with a
/// request id, or of the Lua script slidewin replaces), the first id tried
/// is one more than the number of entries: in a key whose ids count up
/// from 1 it is usually free, where 1 would usually be taken and send the
/// call to a 19-digit wide id.
fn newest_and_first<L: WindowLog>(log: &mut L) -> Result<(Option<f64>, i64), L::Error> {
    let newest = log.newest_entry()?;
    let first = match newest {
        Some((_, None)) => i64::try_from(log.count()?)
            .unwrap_or(i64::MAX)
            .saturating_add(1),
        _ => member::first_choice(newest.and_then(|(_, id)| id)),
    };
    Ok((newest.map(|(score, _)| score), first))
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
fn detail_repeated<L: WindowLog>(
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
fn check_using<L: WindowLog>(
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
            return Ok(Verdict {
                allowed: true,
                count: n,
                trimmed,
                added: 0,
                expire_at_ms: None,
                detail,
                members: Vec::new(),
                repeated: true,
            });
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
        return Ok(Verdict {
            allowed: false,
            count: n,
            trimmed,
            added: 0,
            expire_at_ms: None,
            detail,
            members: Vec::new(),
            repeated: false,
        });
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
    Ok(Verdict {
        allowed: fits(n, rule),
        count: n,
        trimmed: 0,
        added: 0,
        expire_at_ms: None,
        detail: Some(detail_unchanged(log, now_ms, rule, n)?),
        members: Vec::new(),
        repeated: false,
    })
}

/// What a multi-rule check decided and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiVerdict {
    /// Whether every rule allowed the cost (and it was added to every log).
    pub allowed: bool,
    /// 0 when allowed; -1 if a rule can never pass; else the largest wait
    /// over the rules that denied.
    pub retry_after_ms: i64,
    /// Each rule's own verdict and detail, in the order given (when the
    /// detail was wanted).
    pub rules: Vec<(bool, Detail)>,
    /// The member ids added to every log (the same ids in each).
    pub members: Vec<i64>,
    /// Expired entries removed over all logs.
    pub trimmed: u64,
    /// The logs with a rule that had no room, each once, in order (empty
    /// when allowed): who the denial is charged to.
    pub refused_logs: Vec<usize>,
    /// Whether a log held a charge under the call's request id: answered
    /// allowed, nothing added anywhere.
    pub repeated: bool,
}

/// The longest window any rule gives log `log`, if a rule names it.
fn longest_window(rules: &[KeyedRule], log: usize) -> Option<i64> {
    rules
        .iter()
        .filter(|r| r.key == log)
        .map(|r| r.window_ms)
        .max()
}

/// MCHECK step 1: trims each log by the longest window its rules give, so
/// no rule loses entries it still needs; returns how many were removed.
fn trim_logs<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
) -> Result<u64, L::Error> {
    let mut trimmed = 0u64;
    for (i, log) in logs.iter_mut().enumerate() {
        if let Some(w) = longest_window(rules, i) {
            trimmed = trimmed.saturating_add(log.trim(cutoff(now_ms, w))?);
        }
    }
    Ok(trimmed)
}

/// MCHECK step 2: the entries in each rule's window (0 for a rule naming
/// no log, which a parsed request never has), and whether `cost` more fit.
fn count_rules<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
) -> Result<Vec<(u64, bool)>, L::Error> {
    let mut counts = Vec::with_capacity(rules.len());
    for r in rules {
        let n = match logs.get_mut(r.key) {
            Some(log) => log.count_above(cutoff(now_ms, r.window_ms))?,
            None => 0,
        };
        counts.push((n, fits(n, &r.with_cost(cost))));
    }
    Ok(counts)
}

/// The ids an MCHECK has chosen so far, in order; whether an id is among
/// them is O(1), not a search of all of them (which made a call
/// O(cost^2)). Ids usually count up by one from the first: while they do,
/// they are one range and nothing is hashed; the ids after the first break
/// go into a set.
#[derive(Debug, Default)]
struct Chosen {
    ids: Vec<i64>,
    /// The first ids, while they count up by one: `run.0..run.1`.
    run: (i64, i64),
    /// Every id after the run ended.
    set: HashSet<i64>,
}

impl Chosen {
    fn with_capacity(count: u64) -> Self {
        Chosen {
            ids: Vec::with_capacity(usize::try_from(count).unwrap_or(0)),
            ..Chosen::default()
        }
    }

    fn contains(&self, id: i64) -> bool {
        (self.run.0..self.run.1).contains(&id) || self.set.contains(&id)
    }

    fn push(&mut self, id: i64) {
        self.ids.push(id);
        let counting = self.set.is_empty() && (self.ids.len() == 1 || id == self.run.1);
        match id.checked_add(1) {
            Some(after) if counting => {
                if self.ids.len() == 1 {
                    self.run.0 = id;
                }
                self.run.1 = after;
            }
            _ => {
                self.set.insert(id);
            }
        }
    }
}

/// Whether `id` is free in every log and not among the ids already chosen.
fn free_everywhere<L: WindowLog>(
    logs: &mut [L],
    chosen: &Chosen,
    id: i64,
) -> Result<bool, L::Error> {
    if chosen.contains(id) {
        return Ok(false);
    }
    for log in logs.iter_mut() {
        if log.has_member(id)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Picks `count` member ids free in every log (the same entry in each key,
/// so one UNDO per key gives the call back everywhere): short ids from
/// `first` on, or wide ids when one is taken. O(count x logs) lookups of a
/// member, however the logs' ids are laid out.
fn shared_members<L: WindowLog>(
    logs: &mut [L],
    now_ms: i64,
    count: u64,
    first: i64,
    wide: &mut impl WideIds,
) -> Result<Vec<i64>, L::Error> {
    let mut chosen = Chosen::with_capacity(count);
    let mut known = Unusable::default();
    let mut short = first;
    for _ in 0..count {
        let free = free_everywhere(logs, &chosen, short)?;
        known.note(short);
        let id = if free {
            short
        } else {
            // Taken somewhere: a wide id. The logs and the chosen ids hold
            // fewer than `tries` ids in all, so one of `tries` consecutive
            // ids is free (probed at most MAX_WIDE_TRIES at a time, as for
            // CHECK).
            let mut tries = count;
            for log in logs.iter() {
                tries = tries.saturating_add(log.count()?);
            }
            let start = wide.fresh(now_ms);
            first_free(start, tries, &mut known, |id| {
                free_everywhere(logs, &chosen, id)
            })?
        };
        chosen.push(id);
        short = member::next(id);
    }
    Ok(chosen.ids)
}

/// What MCHECK's admit step did.
struct Admitted {
    /// The member ids added to every log.
    ids: Vec<i64>,
    /// Per log, the newest score before adding (it counts for the expiry
    /// when it is after `now_ms`).
    newest: Vec<Option<f64>>,
}

/// MCHECK step 3, when every rule allowed: adds the same `cost` entries
/// to each log once (not once per rule) and sets each log to expire with
/// the longest window its rules give.
fn admit<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
    request: Option<&[u8]>,
    wide: &mut impl WideIds,
) -> Result<Admitted, L::Error> {
    let mut newest = Vec::with_capacity(logs.len());
    // The short ids start above every log's newest member.
    let mut first = 1i64;
    for log in logs.iter_mut() {
        let (score, after) = newest_and_first(log)?;
        newest.push(score);
        first = first.max(after);
    }
    let ids = match request {
        Some(_) => Vec::new(),
        None => {
            let first = wide.above_fence(now_ms, first);
            shared_members(logs, now_ms, cost, first, wide)?
        }
    };
    for (i, log) in logs.iter_mut().enumerate() {
        let Some(w) = longest_window(rules, i) else {
            continue;
        };
        if let Some(r) = request {
            log.add_units(r, now_ms as f64, 0, cost)?;
        }
        for &id in &ids {
            if !log.add(now_ms, id)? {
                return Err(NoFreeMember.into());
            }
        }
        log.expire_at(expiry(now_ms, newest.get(i).copied().flatten(), w))?;
    }
    Ok(Admitted { ids, newest })
}

/// What MCHECK's detail step found.
struct RuleDetails {
    /// Each rule's verdict and detail (empty when the detail is not wanted).
    details: Vec<(bool, Detail)>,
    /// The overall wait of a denial.
    retry_after_ms: i64,
}

/// MCHECK step 4: each rule's verdict and detail, and the overall wait
/// (the largest over the rules that denied; -1 if one never passes).
/// Without the detail wanted, only a denial's waits are computed.
fn rule_details<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    counts: &[(u64, bool)],
    now_ms: i64,
    cost: u64,
    admitted: Option<&Admitted>,
    want_detail: bool,
) -> Result<RuleDetails, L::Error> {
    let mut details = Vec::with_capacity(if want_detail { rules.len() } else { 0 });
    let mut retry = 0i64;
    for (r, &(n, fits_rule)) in rules.iter().zip(counts) {
        let rule = r.with_cost(cost);
        let Some(log) = logs.get_mut(r.key) else {
            continue;
        };
        let d = match admitted {
            // The same expiry the log was given, seen through this rule's window.
            Some(a) => {
                let newest = a.newest.get(r.key).copied().flatten();
                let at = expiry(now_ms, newest, r.window_ms);
                detail_allowed(&rule, n.saturating_add(cost), now_ms, at)
            }
            None if want_detail => detail_unchanged(log, now_ms, &rule, n)?,
            None => Detail {
                remaining: 0,
                retry_after_ms: if fits_rule {
                    0
                } else {
                    retry_after(log, now_ms, &rule, n)?
                },
                reset_after_ms: 0,
            },
        };
        if !fits_rule {
            retry = if d.retry_after_ms < 0 || retry < 0 {
                -1
            } else {
                retry.max(d.retry_after_ms)
            };
        }
        if want_detail {
            details.push((fits_rule, d));
        }
    }
    Ok(RuleDetails {
        details,
        retry_after_ms: retry,
    })
}

/// Runs one `SLIDEWIN.MCHECK`: every rule (its `key` an index into `logs`)
/// is judged on the same `now_ms`; the call is allowed only if every rule
/// allows `cost`, and then `cost` entries are added once to each log.
/// Trim, count, admit, detail. Without an ID (the unit tests; the command
/// calls [`mcheck_request`]).
#[cfg(test)]
pub fn mcheck<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
    want: Want,
) -> Result<MultiVerdict, L::Error> {
    mcheck_using(logs, rules, now_ms, cost, want, None, &mut ServerIds)
}

/// Runs one `SLIDEWIN.MCHECK ... ID request` (`request` given) or a plain
/// one: when any of its logs still holds a charge under `request`, the call
/// is a repeat, charges nothing anywhere and is answered allowed (so a
/// request is never charged twice, even when a key with a shorter window
/// has already forgotten it); otherwise an allowed call's entries in each
/// log are the charge under `request`.
pub fn mcheck_request<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
    want: Want,
    request: Option<&[u8]>,
) -> Result<MultiVerdict, L::Error> {
    mcheck_using(logs, rules, now_ms, cost, want, request, &mut ServerIds)
}

/// Whether any log holds a charge under `request`.
fn held_anywhere<L: WindowLog>(logs: &mut [L], request: &[u8]) -> Result<bool, L::Error> {
    for log in logs.iter_mut() {
        if log.charge(request)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The verdict of a repeated MCHECK: allowed, nothing added, each rule's
/// detail as its window is now.
fn repeated_multi<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    want: Want,
    trimmed: u64,
) -> Result<MultiVerdict, L::Error> {
    let mut details = Vec::new();
    if want.detail {
        for r in rules {
            let Some(log) = logs.get_mut(r.key) else {
                continue;
            };
            let n = log.count_above(cutoff(now_ms, r.window_ms))?;
            details.push((true, detail_repeated(log, now_ms, r.limit, r.window_ms, n)?));
        }
    }
    Ok(MultiVerdict {
        allowed: true,
        retry_after_ms: 0,
        rules: details,
        members: Vec::new(),
        trimmed,
        refused_logs: Vec::new(),
        repeated: true,
    })
}

/// [`mcheck_request`], taking wide ids from `wide`.
fn mcheck_using<L: WindowLog>(
    logs: &mut [L],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
    want: Want,
    request: Option<&[u8]>,
    wide: &mut impl WideIds,
) -> Result<MultiVerdict, L::Error> {
    let trimmed = trim_logs(logs, rules, now_ms)?;
    if let Some(r) = request {
        if held_anywhere(logs, r)? {
            return repeated_multi(logs, rules, now_ms, want, trimmed);
        }
    }
    let counts = count_rules(logs, rules, now_ms, cost)?;
    let allowed = !rules.is_empty() && counts.iter().all(|&(_, f)| f);
    if allowed && request.is_some() {
        for log in logs.iter_mut() {
            log.may_charge()?;
        }
    }
    let admitted = if allowed {
        Some(admit(logs, rules, now_ms, cost, request, wide)?)
    } else {
        None
    };
    let d = rule_details(
        logs,
        rules,
        &counts,
        now_ms,
        cost,
        admitted.as_ref(),
        want.detail,
    )?;
    let mut refused_logs: Vec<usize> = Vec::new();
    for (r, _) in rules.iter().zip(&counts).filter(|(_, &(_, f))| !f) {
        if !refused_logs.contains(&r.key) {
            refused_logs.push(r.key);
        }
    }
    Ok(MultiVerdict {
        refused_logs,
        allowed,
        retry_after_ms: if allowed { 0 } else { d.retry_after_ms },
        rules: d.details,
        members: admitted.map(|a| a.ids).unwrap_or_default(),
        trimmed,
        repeated: false,
    })
}

/// An in-memory [`WindowLog`] for tests: a vector of scores and an expiry.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub scores: Vec<f64>,
    pub expire_at_ms: Option<i64>,
    /// The member of each score, in the same order, when every entry was
    /// added through [`WindowLog::add`] (tests that push bare scores leave
    /// it short, and then members are not tracked through trims).
    pub members: Vec<i64>,
    /// Charges under request ids: their score and units; their entries are
    /// in `scores` under the member [`CHARGE_UNIT`].
    pub charges: std::collections::BTreeMap<Vec<u8>, (f64, u64)>,
}

/// The member [`MemoryLog`] gives the entries of a charge (never an id).
#[cfg(test)]
pub const CHARGE_UNIT: i64 = i64::MIN;

#[cfg(test)]
impl MemoryLog {
    fn sorted_above(&self, cutoff_ms: i64) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .scores
            .iter()
            .copied()
            .filter(|&s| s > cutoff_ms as f64)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

#[cfg(test)]
impl WindowLog for MemoryLog {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let before = self.scores.len();
        let mut kept_members = Vec::new();
        let mut kept_scores = Vec::new();
        for (i, &s) in self.scores.iter().enumerate() {
            if s > cutoff_ms as f64 {
                kept_scores.push(s);
                if let Some(&m) = self.members.get(i) {
                    kept_members.push(m);
                }
            }
        }
        self.scores = kept_scores;
        if self.members.len() == before {
            self.members = kept_members;
        }
        self.charges.retain(|_, (s, _)| *s > cutoff_ms as f64);
        Ok((before - self.scores.len()) as u64)
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.scores.len() as u64)
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        Ok(self.sorted_above(cutoff_ms).len() as u64)
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, _n: u64) -> Result<Option<f64>, Self::Error> {
        let v = self.sorted_above(cutoff_ms);
        Ok(usize::try_from(k)
            .ok()
            .and_then(|k| k.checked_sub(1))
            .and_then(|i| v.get(i).copied()))
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        Ok(self.sorted_above(min_ms).last().copied())
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        // The highest score; among equal scores, the greatest member in the
        // server's order (byte-wise on the decimal forms).
        let tracked = self.members.len() == self.scores.len();
        let mut best: Option<(f64, Option<i64>)> = None;
        for (i, &score) in self.scores.iter().enumerate() {
            let id = if tracked {
                self.members.get(i).copied()
            } else {
                None
            };
            let better = match best {
                None => true,
                Some((s, m)) => {
                    score > s
                        || (score == s && id.map(|v| v.to_string()) > m.map(|v| v.to_string()))
                }
            };
            if better {
                best = Some((score, id));
            }
        }
        Ok(best)
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        Ok(self.members.contains(&id))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        if self.members.contains(&id) {
            return Ok(false);
        }
        self.scores.push(now_ms as f64);
        self.members.push(id);
        Ok(true)
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.expire_at_ms = Some(at_ms);
        Ok(())
    }

    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error> {
        Ok(self
            .charges
            .get(request)
            .map(|&(score_ms, units)| Charge { score_ms, units }))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error> {
        for _ in held..to {
            self.scores.push(score_ms);
            self.members.push(CHARGE_UNIT);
        }
        self.charges.insert(request.to_vec(), (score_ms, to));
        Ok(())
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, Self::Error> {
        let Some(&(score, _)) = self.charges.get(request) else {
            return Ok(0);
        };
        let mut left = held.saturating_sub(keep);
        let removed = left;
        while left > 0 {
            let Some(i) = self
                .members
                .iter()
                .zip(&self.scores)
                .rposition(|(&m, &s)| m == CHARGE_UNIT && s == score)
            else {
                break;
            };
            self.members.remove(i);
            self.scores.remove(i);
            left -= 1;
        }
        if keep == 0 {
            self.charges.remove(request);
        } else {
            self.charges.insert(request.to_vec(), (score, keep));
        }
        Ok(removed - left)
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
