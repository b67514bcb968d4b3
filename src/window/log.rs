//! What the decision works on and answers: the rules, the log (the
//! [`WindowLog`] trait every store implements), a charge, the verdicts.

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

impl Verdict {
    /// The verdict of a call that added nothing: refused, repeated, or a
    /// peek.
    pub fn unchanged(
        allowed: bool,
        count: u64,
        trimmed: u64,
        detail: Option<Detail>,
        repeated: bool,
    ) -> Verdict {
        Verdict {
            allowed,
            count,
            trimmed,
            added: 0,
            expire_at_ms: None,
            detail,
            members: Vec::new(),
            repeated,
        }
    }
}
