//! What the decision's tests share: a request, the calls on a memory log,
//! the naive model.

use super::super::log::*;
use super::super::mcheck::*;
use super::super::memory::*;

/// A rule and what the call wants computed, as one test request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Req {
    rule: Rule,
    want: Want,
}

impl std::ops::Deref for Req {
    type Target = Rule;
    fn deref(&self) -> &Rule {
        &self.rule
    }
}

pub(super) fn req(limit: u64, window_ms: i64) -> Req {
    Req {
        rule: Rule::new(limit, window_ms),
        want: Want::default(),
    }
}

pub(super) fn detailed(limit: u64, window_ms: i64, cost: u64) -> Req {
    Req {
        rule: Rule {
            limit,
            window_ms,
            cost,
        },
        want: Want {
            detail: true,
            members: false,
        },
    }
}

pub(super) fn check(log: &mut MemoryLog, now_ms: i64, r: &Req) -> Result<Verdict, NoFreeMember> {
    super::super::check::check(log, now_ms, &r.rule, r.want)
}

pub(super) fn peek(log: &mut MemoryLog, now_ms: i64, r: &Req) -> Result<Verdict, NoFreeMember> {
    super::super::check::peek(log, now_ms, &r.rule)
}

pub(super) fn mcheck(
    logs: &mut [MemoryLog],
    rules: &[KeyedRule],
    now_ms: i64,
    cost: u64,
    detail: bool,
) -> Result<MultiVerdict, NoFreeMember> {
    let want = Want {
        detail,
        members: true,
    };
    super::super::mcheck::mcheck(logs, rules, now_ms, cost, want)
}

pub(super) fn unwrap<T>(r: Result<T, NoFreeMember>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e:?}"),
    }
}

pub(super) fn log_of(scores: &[f64]) -> MemoryLog {
    MemoryLog {
        scores: scores.to_vec(),
        ..MemoryLog::default()
    }
}

/// [allowed, remaining, retry_after, reset_after]: the fields of the DETAIL
/// reply the decision computes (the command layer adds the caller's limit as
/// field 1; the integration suite checks the whole reply).
pub(super) fn four(v: &Verdict) -> [i64; 4] {
    let d = v.detail.expect("detail");
    [
        i64::from(v.allowed),
        d.remaining as i64,
        d.retry_after_ms,
        d.reset_after_ms,
    ]
}

/// The naive model: accept at `t` when fewer than `limit - cost + 1`
/// accepted units are scored after `t - window`.
pub(super) fn model_allows(accepted: &[i64], t: i64, r: &Rule) -> bool {
    let in_window = accepted.iter().filter(|&&s| s > t - r.window_ms).count() as u64;
    in_window + r.cost <= r.limit
}

/// The naive retry: the smallest wait after which the model allows.
pub(super) fn model_retry(accepted: &[i64], t: i64, r: &Rule) -> i64 {
    if r.cost > r.limit {
        return -1;
    }
    (1..=r.window_ms)
        .find(|d| model_allows(accepted, t + d, r))
        .unwrap_or(i64::MAX)
}

pub(super) fn rule(log: usize, limit: u64, window_ms: i64) -> KeyedRule {
    KeyedRule {
        key: log,
        limit,
        window_ms,
    }
}

pub(super) fn with_members(limit: u64, window_ms: i64, cost: u64) -> Req {
    Req {
        want: Want {
            detail: false,
            members: true,
        },
        ..detailed(limit, window_ms, cost)
    }
}
