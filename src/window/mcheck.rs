//! Several rules judged and charged all-or-nothing: `SLIDEWIN.MCHECK`.

use std::collections::HashSet;

use crate::member;

use super::check::*;
use super::ids::*;
use super::log::*;

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
pub(super) fn longest_window(rules: &[KeyedRule], log: usize) -> Option<i64> {
    rules
        .iter()
        .filter(|r| r.key == log)
        .map(|r| r.window_ms)
        .max()
}

/// MCHECK step 1: trims each log by the longest window its rules give, so
/// no rule loses entries it still needs; returns how many were removed.
pub(super) fn trim_logs<L: WindowLog>(
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
pub(super) fn count_rules<L: WindowLog>(
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
pub(super) struct Chosen {
    pub(super) ids: Vec<i64>,
    /// The first ids, while they count up by one: `run.0..run.1`.
    pub(super) run: (i64, i64),
    /// Every id after the run ended.
    pub(super) set: HashSet<i64>,
}

impl Chosen {
    pub(super) fn with_capacity(count: u64) -> Self {
        Chosen {
            ids: Vec::with_capacity(usize::try_from(count).unwrap_or(0)),
            ..Chosen::default()
        }
    }

    pub(super) fn contains(&self, id: i64) -> bool {
        (self.run.0..self.run.1).contains(&id) || self.set.contains(&id)
    }

    pub(super) fn push(&mut self, id: i64) {
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
pub(super) fn free_everywhere<L: WindowLog>(
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
pub(super) fn shared_members<L: WindowLog>(
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
pub(super) struct Admitted {
    /// The member ids added to every log.
    ids: Vec<i64>,
    /// Per log, the newest score before adding (it counts for the expiry
    /// when it is after `now_ms`).
    newest: Vec<Option<f64>>,
}

/// MCHECK step 3, when every rule allowed: adds the same `cost` entries
/// to each log once (not once per rule) and sets each log to expire with
/// the longest window its rules give.
pub(super) fn admit<L: WindowLog>(
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
pub(super) struct RuleDetails {
    /// Each rule's verdict and detail (empty when the detail is not wanted).
    details: Vec<(bool, Detail)>,
    /// The overall wait of a denial.
    retry_after_ms: i64,
}

/// MCHECK step 4: each rule's verdict and detail, and the overall wait
/// (the largest over the rules that denied; -1 if one never passes).
/// Without the detail wanted, only a denial's waits are computed.
pub(super) fn rule_details<L: WindowLog>(
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
pub(super) fn held_anywhere<L: WindowLog>(
    logs: &mut [L],
    request: &[u8],
) -> Result<bool, L::Error> {
    for log in logs.iter_mut() {
        if log.charge(request)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The verdict of a repeated MCHECK: allowed, nothing added, each rule's
/// detail as its window is now.
pub(super) fn repeated_multi<L: WindowLog>(
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
pub(super) fn mcheck_using<L: WindowLog>(
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
