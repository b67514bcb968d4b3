//! The sliding-window decision, written against an abstract log of scores.
//!
//! Nothing here knows about Redis: the log is a trait ([`WindowLog`]) and the
//! clock is a plain argument, so the decision is tested with an in-memory log
//! and a fake clock. The Redis-backed log lives in `zset_log.rs`.
//!
//! The rule: the window at `now` is the half-open interval
//! `(now - window_ms, now]`. Entries scored `<= now - window_ms` have expired.
//! With `n` entries in the window, a call of cost `c` is allowed when
//! `n + c <= limit`; it then adds `c` entries scored `now`, and the log
//! expires once its newest entry has left the window. A denied call adds
//! nothing.

use crate::args::Request;

/// A log of accepted calls, one entry per unit of cost, scored in ms.
pub trait WindowLog {
    /// The error a backing store may report.
    type Error;

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

    /// Adds `count` entries scored `now_ms`, each under a member unique in
    /// the log; pushes the member ids used onto `added` when given.
    fn append(
        &mut self,
        now_ms: i64,
        count: u64,
        added: Option<&mut Vec<i64>>,
    ) -> Result<(), Self::Error>;

    /// Whether member `id` is in the log.
    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error>;

    /// Adds one entry scored `now_ms` for each id, which must be free.
    fn append_members(&mut self, now_ms: i64, ids: &[i64]) -> Result<(), Self::Error>;

    /// Sets the absolute time (ms) at which the whole log expires.
    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error>;
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
    /// The detail fields, when they were asked for.
    pub detail: Option<Detail>,
    /// The member ids added, when they were asked for.
    pub members: Vec<i64>,
}

/// The newest score that has already expired at `now_ms`: entries scored at
/// or below it are outside the window.
pub fn cutoff(now_ms: i64, window_ms: i64) -> i64 {
    now_ms.saturating_sub(window_ms)
}

/// Whether `cost` more entries fit beside the `n` in the window.
pub fn fits(n: u64, request: &Request) -> bool {
    n.checked_add(request.cost)
        .is_some_and(|total| total <= request.limit)
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
    request: &Request,
    n: u64,
) -> Result<i64, L::Error> {
    if request.cost > request.limit {
        return Ok(-1);
    }
    // n + cost > limit and cost <= limit, so 1 <= k <= n.
    let k = n.saturating_add(request.cost).saturating_sub(request.limit);
    let cut = cutoff(now_ms, request.window_ms);
    Ok(match log.nth_above(cut, k, n)? {
        Some(score) => ms_until_expired(score, request.window_ms, now_ms).max(1),
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
    request: &Request,
    n: u64,
) -> Result<Detail, L::Error> {
    let retry_after_ms = if fits(n, request) {
        0
    } else {
        retry_after(log, now_ms, request, n)?
    };
    let newest = log.newest_above(cutoff(now_ms, request.window_ms))?;
    Ok(Detail {
        remaining: request.limit.saturating_sub(n),
        retry_after_ms,
        reset_after_ms: reset_after(newest, now_ms, request.window_ms),
    })
}

/// Runs one `SLIDEWIN.CHECK` against `log` at time `now_ms`.
pub fn check<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    request: &Request,
) -> Result<Verdict, L::Error> {
    let cut = cutoff(now_ms, request.window_ms);
    let trimmed = log.trim(cut)?;
    let n = log.count()?;
    if !fits(n, request) {
        let detail = if request.detail {
            Some(detail_unchanged(log, now_ms, request, n)?)
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
        });
    }
    let newest_after_now = log.newest_above(now_ms)?;
    let mut members = Vec::new();
    log.append(
        now_ms,
        request.cost,
        request.with_members.then_some(&mut members),
    )?;
    let at = expiry(now_ms, newest_after_now, request.window_ms);
    log.expire_at(at)?;
    let count = n.saturating_add(request.cost);
    Ok(Verdict {
        allowed: true,
        count,
        trimmed,
        added: request.cost,
        expire_at_ms: Some(at),
        detail: request.detail.then(|| Detail {
            remaining: request.limit.saturating_sub(count),
            retry_after_ms: 0,
            reset_after_ms: at.saturating_sub(now_ms),
        }),
        members,
    })
}

/// Answers what `check` with DETAIL would answer at `now_ms`, changing
/// nothing: expired entries are not counted rather than removed.
pub fn peek<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    request: &Request,
) -> Result<Verdict, L::Error> {
    let n = log.count_above(cutoff(now_ms, request.window_ms))?;
    Ok(Verdict {
        allowed: fits(n, request),
        count: n,
        trimmed: 0,
        added: 0,
        expire_at_ms: None,
        detail: Some(detail_unchanged(log, now_ms, request, n)?),
        members: Vec::new(),
    })
}

/// One rule of a multi-rule check: the log it judges (an index into the
/// logs of the call) and its limit and window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiRule {
    pub log: usize,
    pub limit: u64,
    pub window_ms: i64,
}

/// What a multi-rule check decided and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiVerdict {
    /// Whether every rule allowed the cost (and it was added to every log).
    pub allowed: bool,
    /// 0 when allowed; -1 if a rule can never pass; else the largest wait
    /// over the rules that denied.
    pub retry_after_ms: i64,
    /// Each rule's own verdict and detail, in the order given.
    pub rules: Vec<(bool, Detail)>,
    /// The member ids added to every log (the same ids in each).
    pub members: Vec<i64>,
    /// Expired entries removed over all logs.
    pub trimmed: u64,
}

/// Picks `count` member ids free in every log.
fn shared_members<L: WindowLog>(
    logs: &mut [L],
    now_ms: i64,
    count: u64,
) -> Result<Vec<i64>, L::Error> {
    let mut ids: Vec<i64> = Vec::new();
    for _ in 0..count {
        let mut id = crate::member::fresh(now_ms);
        // Each log holds finitely many members, so this ends; with ids built
        // from the clock and a sequence it almost always ends at once.
        'search: loop {
            if ids.contains(&id) {
                id = crate::member::next(id);
                continue;
            }
            for log in logs.iter_mut() {
                if log.has_member(id)? {
                    id = crate::member::next(id);
                    continue 'search;
                }
            }
            break;
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Runs one `SLIDEWIN.MCHECK`: every rule is judged on the same `now_ms`;
/// the call is allowed only if every rule allows `cost`, and then `cost`
/// entries are added once to each log (not once per rule), each log expiring
/// with the longest window its rules give. Each log is trimmed by its
/// longest window only, so no rule loses entries it still needs.
pub fn mcheck<L: WindowLog>(
    logs: &mut [L],
    rules: &[MultiRule],
    now_ms: i64,
    cost: u64,
    detail: bool,
) -> Result<MultiVerdict, L::Error> {
    let longest = |log: usize| {
        rules
            .iter()
            .filter(|r| r.log == log)
            .map(|r| r.window_ms)
            .max()
    };
    let mut trimmed = 0u64;
    for (i, log) in logs.iter_mut().enumerate() {
        if let Some(w) = longest(i) {
            trimmed = trimmed.saturating_add(log.trim(cutoff(now_ms, w))?);
        }
    }
    let mut counts = Vec::with_capacity(rules.len());
    for r in rules {
        let Some(log) = logs.get_mut(r.log) else {
            counts.push(0);
            continue;
        };
        counts.push(log.count_above(cutoff(now_ms, r.window_ms))?);
    }
    let request = |r: &MultiRule| Request {
        limit: r.limit,
        window_ms: r.window_ms,
        cost,
        detail: true,
        with_members: false,
    };
    let fits_each: Vec<bool> = rules
        .iter()
        .zip(&counts)
        .map(|(r, &n)| fits(n, &request(r)))
        .collect();
    let allowed = !rules.is_empty() && fits_each.iter().all(|&f| f);

    let mut members = Vec::new();
    let mut newest_after_now: Vec<Option<f64>> = vec![None; logs.len()];
    if allowed {
        for (i, log) in logs.iter_mut().enumerate() {
            newest_after_now[i] = log.newest_above(now_ms)?;
        }
        members = shared_members(logs, now_ms, cost)?;
        for (i, log) in logs.iter_mut().enumerate() {
            if let Some(w) = longest(i) {
                log.append_members(now_ms, &members)?;
                log.expire_at(expiry(now_ms, newest_after_now[i], w))?;
            }
        }
    }

    let mut details = Vec::with_capacity(rules.len());
    let mut retry = 0i64;
    for ((r, &n), &fits_rule) in rules.iter().zip(&counts).zip(&fits_each) {
        let req = request(r);
        let Some(log) = logs.get_mut(r.log) else {
            continue;
        };
        let d = if allowed {
            // The same expiry the log was given, seen through this rule's window.
            let at = expiry(
                now_ms,
                newest_after_now.get(r.log).copied().flatten(),
                r.window_ms,
            );
            Detail {
                remaining: r.limit.saturating_sub(n.saturating_add(cost)),
                retry_after_ms: 0,
                reset_after_ms: at.saturating_sub(now_ms),
            }
        } else if detail {
            detail_unchanged(log, now_ms, &req, n)?
        } else {
            // Only the wait matters, for the overall retry.
            Detail {
                remaining: 0,
                retry_after_ms: if fits_rule {
                    0
                } else {
                    retry_after(log, now_ms, &req, n)?
                },
                reset_after_ms: 0,
            }
        };
        if !fits_rule {
            retry = if d.retry_after_ms < 0 || retry < 0 {
                -1
            } else {
                retry.max(d.retry_after_ms)
            };
        }
        if detail {
            details.push((fits_rule, d));
        }
    }
    Ok(MultiVerdict {
        allowed,
        retry_after_ms: if allowed { 0 } else { retry },
        rules: details,
        members,
        trimmed,
    })
}

/// An in-memory [`WindowLog`] for tests: a vector of scores and an expiry.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub scores: Vec<f64>,
    pub expire_at_ms: Option<i64>,
    /// Member ids this log added (for WITHMEMBERS and shared members).
    pub members: Vec<i64>,
}

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
    type Error = std::convert::Infallible;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let before = self.scores.len();
        self.scores.retain(|&s| s > cutoff_ms as f64);
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

    fn append(
        &mut self,
        now_ms: i64,
        count: u64,
        added: Option<&mut Vec<i64>>,
    ) -> Result<(), Self::Error> {
        let ids: Vec<i64> = (0..count).map(|_| crate::member::fresh(now_ms)).collect();
        self.append_members(now_ms, &ids)?;
        if let Some(added) = added {
            added.extend(ids);
        }
        Ok(())
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        Ok(self.members.contains(&id))
    }

    fn append_members(&mut self, now_ms: i64, ids: &[i64]) -> Result<(), Self::Error> {
        for &id in ids {
            self.scores.push(now_ms as f64);
            self.members.push(id);
        }
        Ok(())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.expire_at_ms = Some(at_ms);
        Ok(())
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
