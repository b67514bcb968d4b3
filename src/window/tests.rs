//! Unit and property tests of `window.rs` (kept apart from the module code).
use super::check::*;
use super::ids::*;
use super::log::*;
use super::mcheck::*;
use super::memory::*;
use crate::member;
use proptest::prelude::*;

/// A rule and what the call wants computed, as one test request.
#[derive(Debug, Clone, Copy)]
struct Req {
    rule: Rule,
    want: Want,
}

impl std::ops::Deref for Req {
    type Target = Rule;
    fn deref(&self) -> &Rule {
        &self.rule
    }
}

fn req(limit: u64, window_ms: i64) -> Req {
    Req {
        rule: Rule::new(limit, window_ms),
        want: Want::default(),
    }
}

fn detailed(limit: u64, window_ms: i64, cost: u64) -> Req {
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

fn check(log: &mut MemoryLog, now_ms: i64, r: &Req) -> Result<Verdict, NoFreeMember> {
    super::check(log, now_ms, &r.rule, r.want)
}

fn peek(log: &mut MemoryLog, now_ms: i64, r: &Req) -> Result<Verdict, NoFreeMember> {
    super::peek(log, now_ms, &r.rule)
}

fn mcheck(
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
    super::mcheck(logs, rules, now_ms, cost, want)
}

fn unwrap<T>(r: Result<T, NoFreeMember>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e:?}"),
    }
}

fn log_of(scores: &[f64]) -> MemoryLog {
    MemoryLog {
        scores: scores.to_vec(),
        ..MemoryLog::default()
    }
}

/// [allowed, remaining, retry_after, reset_after]: the fields of the DETAIL
/// reply the decision computes (the command layer adds the caller's limit as
/// field 1; the integration suite checks the whole reply).
fn four(v: &Verdict) -> [i64; 4] {
    let d = v.detail.expect("detail");
    [
        i64::from(v.allowed),
        d.remaining as i64,
        d.retry_after_ms,
        d.reset_after_ms,
    ]
}

#[test]
fn sms_example_allows_five_then_denies() {
    let mut log = MemoryLog::default();
    let r = req(5, 60_000);
    let replies: Vec<bool> = (0..7)
        .map(|i| unwrap(check(&mut log, 1_000_000 + i, &r)).allowed)
        .collect();
    assert_eq!(replies, [true, true, true, true, true, false, false]);
    assert_eq!(log.scores.len(), 5);
    // The expiry follows the newest accepted entry, not the denied calls.
    assert_eq!(log.expire_at_ms, Some(1_000_004 + 60_000));
}

#[test]
fn table_of_boundaries() {
    // (existing scores, now, limit, window) -> (allowed, trimmed, count, expire)
    type Case = (&'static [f64], i64, u64, i64, (bool, u64, u64, Option<i64>));
    let cases: &[Case] = &[
        // An entry exactly window_ms old has expired.
        (&[0.0], 1000, 1, 1000, (true, 1, 1, Some(2000))),
        // One millisecond younger, it still counts.
        (&[1.0], 1000, 1, 1000, (false, 0, 1, None)),
        // Empty log.
        (&[], 5, 3, 10, (true, 0, 1, Some(15))),
        // Full log, nothing stale: denied, nothing trimmed.
        (&[1.0, 2.0, 3.0], 5, 3, 10, (false, 0, 3, None)),
        // Full log with one stale entry: the trim frees a slot.
        (&[1.0, 2.0, 3.0], 11, 3, 10, (true, 1, 3, Some(21))),
        // A future entry (clock stepped back) still counts and the expiry
        // covers it.
        (&[50.0], 10, 2, 10, (true, 0, 2, Some(60))),
        // A fractional score from a foreign writer rounds the expiry up.
        (&[50.5], 10, 2, 10, (true, 0, 2, Some(61))),
    ];
    for (scores, now, limit, window, expected) in cases {
        let mut log = log_of(scores);
        let got = unwrap(check(&mut log, *now, &req(*limit, *window)));
        assert_eq!(
            (got.allowed, got.trimmed, got.count, got.expire_at_ms),
            *expected,
            "scores {scores:?} now {now} limit {limit} window {window}"
        );
        assert_eq!(log.expire_at_ms, expected.3);
    }
}

#[test]
fn detail_examples_from_the_reference() {
    let now = 100_000i64;
    // Empty key.
    let mut log = MemoryLog::default();
    let v = unwrap(check(&mut log, now, &detailed(3, 10_000, 1)));
    assert_eq!(four(&v), [1, 2, 0, 10_000]);
    // Entries 9000, 5000 and 1000 ms old.
    let aged = [
        (now - 9000) as f64,
        (now - 5000) as f64,
        (now - 1000) as f64,
    ];
    let cases: &[(u64, u64, [i64; 4])] = &[
        (3, 1, [0, 0, 1000, 9000]),
        (3, 2, [0, 0, 5000, 9000]),
        (4, 2, [0, 1, 1000, 9000]),
        (3, 3, [0, 0, 9000, 9000]),
        // Cost above the limit can never pass.
        (3, 4, [0, 0, -1, 9000]),
        (6, 3, [1, 0, 0, 10_000]),
    ];
    for (limit, cost, expected) in cases {
        let mut log = log_of(&aged);
        let v = unwrap(check(&mut log, now, &detailed(*limit, 10_000, *cost)));
        assert_eq!(four(&v), *expected, "limit {limit} cost {cost}");
        // PEEK answers the same (for the denied ones, where nothing changes).
        if !v.allowed {
            let mut log = log_of(&aged);
            let p = unwrap(peek(&mut log, now, &detailed(*limit, 10_000, *cost)));
            assert_eq!(four(&p), *expected);
            assert_eq!(log.scores, aged.to_vec(), "peek changes nothing");
        }
    }
}

#[test]
fn allowed_cost_adds_every_unit() {
    let mut log = MemoryLog::default();
    let v = unwrap(check(&mut log, 10, &detailed(5, 100, 3)));
    assert_eq!(four(&v), [1, 2, 0, 100]);
    assert_eq!(log.scores, vec![10.0; 3]);
    let v = unwrap(check(&mut log, 20, &detailed(5, 100, 3)));
    assert_eq!(four(&v), [0, 2, 90, 90]);
    assert_eq!(log.scores.len(), 3, "denied: nothing added");
}

#[test]
fn cost_above_limit_is_denied_but_still_trims() {
    let mut log = log_of(&[1.0, 50.0]);
    let v = unwrap(check(&mut log, 100, &detailed(2, 60, 3)));
    assert!(!v.allowed);
    assert_eq!(v.trimmed, 1);
    assert_eq!(log.scores, vec![50.0]);
    assert_eq!(four(&v), [0, 1, -1, 10]);
}

#[test]
fn peek_ignores_stale_entries_without_removing_them() {
    let mut log = log_of(&[1.0, 2.0, 95.0]);
    let v = unwrap(peek(&mut log, 100, &detailed(2, 50, 1)));
    assert_eq!(four(&v), [1, 1, 0, 45]);
    assert_eq!(log.scores.len(), 3);
    // An empty window resets in 0.
    let mut log = log_of(&[1.0]);
    let v = unwrap(peek(&mut log, 100, &detailed(2, 50, 1)));
    assert_eq!(four(&v), [1, 2, 0, 0]);
}

#[test]
fn oldest_age_is_the_oldest_in_window_entry_after_the_call() {
    let age = |log: &mut MemoryLog, now: i64, window: i64, n: u64| {
        unwrap(oldest_age(log, now, window, n))
    };
    // Stale entries (scored <= now - window) do not count: 50 is stale at 100.
    let mut log = log_of(&[50.0, 60.0, 95.0]);
    let v = unwrap(peek(&mut log, 100, &detailed(5, 50, 1)));
    assert_eq!(age(&mut log, 100, 50, v.count), Some(40));
    // After an allowed check into an empty window, its own entry: age 0.
    let mut log = log_of(&[1.0]);
    let v = unwrap(check(&mut log, 100, &detailed(5, 50, 1)));
    assert_eq!(age(&mut log, 100, 50, v.count), Some(0));
    // After a denial, the oldest left after the trim.
    let mut log = log_of(&[10.0, 70.0, 80.0]);
    let v = unwrap(check(&mut log, 100, &detailed(2, 50, 1)));
    assert!(!v.allowed);
    assert_eq!(age(&mut log, 100, 50, v.count), Some(30));
    // Empty: none. An entry scored after now (the clock stepped back): 0.
    let mut log = log_of(&[]);
    assert_eq!(age(&mut log, 100, 50, 0), None);
    let mut log = log_of(&[130.0]);
    assert_eq!(age(&mut log, 100, 50, 1), Some(0));
}

#[test]
fn retry_after_is_never_zero_while_limited() {
    // A fractional foreign score just inside the window.
    let mut log = log_of(&[50.2]);
    let v = unwrap(peek(&mut log, 100, &detailed(1, 50, 1)));
    assert_eq!(four(&v), [0, 0, 1, 1]);
}

#[test]
fn over_full_logs_report_zero_remaining() {
    // The limit was lowered after the log filled up.
    let mut log = log_of(&[90.0, 91.0, 92.0, 93.0]);
    let v = unwrap(check(&mut log, 100, &detailed(2, 50, 1)));
    // Three of the four must expire before one more fits: the third oldest.
    assert_eq!(four(&v), [0, 0, 42, 43]);
}

#[test]
fn denied_calls_leave_the_log_and_expiry_alone() {
    let mut log = MemoryLog::default();
    let r = req(2, 100);
    assert!(unwrap(check(&mut log, 10, &r)).allowed);
    assert!(unwrap(check(&mut log, 20, &r)).allowed);
    let before = log.clone();
    let denied = unwrap(check(&mut log, 30, &r));
    assert!(!denied.allowed);
    assert_eq!(denied.detail, None, "no detail unless asked");
    assert_eq!(log.scores, before.scores);
    assert_eq!(log.expire_at_ms, Some(120));
}

#[test]
fn extreme_values_saturate_instead_of_overflowing() {
    let r = detailed(100_000, crate::args::DEFAULT_MAX_WINDOW_MS, 100_000);
    let mut log = MemoryLog::default();
    let got = unwrap(check(&mut log, i64::MAX, &r));
    assert_eq!(got.expire_at_ms, Some(i64::MAX));
    let mut log = MemoryLog::default();
    let got = unwrap(check(&mut log, i64::MIN, &r));
    assert!(got.allowed);
    assert_eq!(cutoff(i64::MIN, 5), i64::MIN);
    assert!(!fits(u64::MAX, &r));
    assert_eq!(expiry(0, Some(f64::INFINITY), 10), i64::MAX);
    assert_eq!(expiry(0, Some(f64::NAN), 10), 10);
    let mut log = log_of(&[f64::MAX]);
    let v = unwrap(peek(&mut log, 0, &detailed(1, 10, 1)));
    assert_eq!(four(&v), [0, 0, i64::MAX, i64::MAX]);
}

/// The naive model: accept at `t` when fewer than `limit - cost + 1`
/// accepted units are scored after `t - window`.
fn model_allows(accepted: &[i64], t: i64, r: &Rule) -> bool {
    let in_window = accepted.iter().filter(|&&s| s > t - r.window_ms).count() as u64;
    in_window + r.cost <= r.limit
}

/// The naive retry: the smallest wait after which the model allows.
fn model_retry(accepted: &[i64], t: i64, r: &Rule) -> i64 {
    if r.cost > r.limit {
        return -1;
    }
    (1..=r.window_ms)
        .find(|d| model_allows(accepted, t + d, r))
        .unwrap_or(i64::MAX)
}

fn rule(log: usize, limit: u64, window_ms: i64) -> KeyedRule {
    KeyedRule {
        key: log,
        limit,
        window_ms,
    }
}

#[test]
fn mcheck_sms_policy_is_all_or_nothing() {
    // ip: 5 per minute; phone: 1 per minute and 10 per day.
    let day = 86_400_000;
    let rules = [rule(0, 5, 60_000), rule(1, 1, 60_000), rule(1, 10, day)];
    let mut logs = vec![MemoryLog::default(), MemoryLog::default()];
    let v = unwrap(mcheck(&mut logs, &rules, 1_000_000, 1, true));
    assert!(v.allowed);
    assert_eq!(v.members.len(), 1);
    assert_eq!(logs[0].scores.len(), 1);
    assert_eq!(logs[1].scores.len(), 1, "once per key, not once per rule");
    assert_eq!(
        logs[0].members, logs[1].members,
        "the same member in each key"
    );
    assert_eq!(logs[0].expire_at_ms, Some(1_000_000 + 60_000));
    assert_eq!(
        logs[1].expire_at_ms,
        Some(1_000_000 + day),
        "the longest window"
    );
    let details: Vec<(bool, [i64; 3])> = v
        .rules
        .iter()
        .map(|(ok, d)| {
            (
                *ok,
                [d.remaining as i64, d.retry_after_ms, d.reset_after_ms],
            )
        })
        .collect();
    assert_eq!(
        details,
        [
            (true, [4, 0, 60_000]),
            (true, [0, 0, 60_000]),
            (true, [9, 0, day])
        ]
    );
    // A second SMS to the same phone a second later: the phone's minute
    // rule denies, so the ip is not charged either.
    let v = unwrap(mcheck(&mut logs, &rules, 1_001_000, 1, true));
    assert!(!v.allowed);
    assert_eq!(v.retry_after_ms, 59_000);
    assert_eq!(logs[0].scores.len(), 1, "nothing added anywhere");
    assert_eq!(logs[1].scores.len(), 1);
    assert!(v.rules[0].0);
    assert!(!v.rules[1].0);
    assert_eq!(v.rules[1].1.retry_after_ms, 59_000);
    // A minute later it passes again.
    let v = unwrap(mcheck(&mut logs, &rules, 1_060_000, 1, false));
    assert!(v.allowed);
    assert!(v.rules.is_empty(), "no detail unless asked");
    assert_eq!(logs[1].scores.len(), 2, "the day rule kept the older entry");
}

#[test]
fn mcheck_trims_a_shared_key_only_by_its_longest_window() {
    let rules = [rule(0, 1, 100), rule(0, 5, 1000)];
    let mut logs = vec![log_of(&[500.0])];
    // At 700 the entry is outside the 100 ms rule but inside the 1 s one.
    let v = unwrap(mcheck(&mut logs, &rules, 700, 1, true));
    assert!(v.allowed);
    assert_eq!(
        logs[0].scores,
        vec![500.0, 700.0],
        "the 1 s rule still needs 500"
    );
    assert_eq!(v.rules[0].1.remaining, 0);
    assert_eq!(v.rules[1].1.remaining, 3);
    assert_eq!(v.trimmed, 0);
    // At 1600 the 1 s window has passed 500, which goes.
    let v = unwrap(mcheck(&mut logs, &rules, 1600, 1, false));
    assert!(v.allowed);
    assert_eq!(v.trimmed, 1);
    assert_eq!(logs[0].scores, vec![700.0, 1600.0]);
}

#[test]
fn mcheck_retry_is_the_longest_wait_or_never() {
    let mut logs = vec![log_of(&[90.0]), log_of(&[50.0])];
    let rules = [rule(0, 1, 100), rule(1, 1, 100)];
    let v = unwrap(mcheck(&mut logs, &rules, 100, 1, false));
    assert!(!v.allowed);
    assert_eq!(
        v.retry_after_ms, 90,
        "the key whose entry is youngest decides"
    );
    let v = unwrap(mcheck(
        &mut logs,
        &[rule(0, 1, 100), rule(1, 5, 100)],
        100,
        2,
        false,
    ));
    assert_eq!(v.retry_after_ms, -1, "a cost of 2 never fits a limit of 1");
}

#[derive(Debug, Clone)]
enum Op {
    /// Move the clock by this many ms (negative: a backwards step).
    Clock(i64),
    /// A foreign writer (the old Lua script, a client clock) adds a score.
    Foreign(f64),
    Check {
        limit: u64,
        window: i64,
        cost: u64,
    },
    Peek {
        limit: u64,
        window: i64,
        cost: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let req = (1u64..10, 1i64..1000, 1u64..12);
    prop_oneof![
        (-500i64..500).prop_map(Op::Clock),
        prop_oneof![
            (-1e6f64..1e7).boxed(),
            Just(f64::MAX).boxed(),
            Just(-0.0).boxed(),
            (0i64..5000).prop_map(|v| v as f64 + 0.5).boxed(),
        ]
        .prop_map(Op::Foreign),
        req.clone().prop_map(|(limit, window, cost)| Op::Check {
            limit,
            window,
            cost
        }),
        req.prop_map(|(limit, window, cost)| Op::Peek {
            limit,
            window,
            cost
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn agrees_with_the_naive_model(
        limit in 1u64..8,
        window in 1i64..200,
        steps in proptest::collection::vec((0i64..60, 1u64..4, any::<bool>()), 1..100),
    ) {
        let mut log = MemoryLog::default();
        let mut accepted: Vec<i64> = Vec::new();
        // The scores the implementation itself added, for the promise below.
        let mut granted: Vec<i64> = Vec::new();
        let mut now = 1_000i64;
        for (step, cost, use_peek) in steps {
            now += step;
            let r = detailed(limit, window, cost);
            let expected = model_allows(&accepted, now, &r);
            let before = log.clone();
            let got = if use_peek {
                unwrap(peek(&mut log, now, &r))
            } else {
                unwrap(check(&mut log, now, &r))
            };
            prop_assert_eq!(got.allowed, expected);
            let d = got.detail.expect("detail");
            if use_peek {
                prop_assert_eq!(&log.scores, &before.scores);
            } else if got.allowed {
                accepted.extend(std::iter::repeat_n(now, cost as usize));
                prop_assert_eq!(got.expire_at_ms, Some(now + window));
                prop_assert_eq!(got.added, cost);
                let added = log.scores.len() - got.added as usize;
                granted.extend(log.scores[added..].iter().map(|&s| s as i64));
            }
            if !got.allowed {
                prop_assert_eq!(d.retry_after_ms, model_retry(&accepted, now, &r));
            }
            let live: Vec<i64> = accepted.iter().copied().filter(|&s| s > now - window).collect();
            let count_after = live.len() as u64;
            prop_assert_eq!(d.remaining, limit.saturating_sub(count_after));
            let reset = live.iter().max().map_or(0, |&s| s + window - now);
            prop_assert_eq!(d.reset_after_ms, reset);
            if !use_peek {
                let mut kept: Vec<i64> = log.scores.iter().map(|&s| s as i64).collect();
                kept.sort_unstable();
                prop_assert_eq!(kept, live);
            }
        }
        // The promise, over what the implementation added: no trailing
        // window ever holds more than `limit`.
        for &end in &granted {
            let n = granted.iter().filter(|&&s| s > end - window && s <= end).count();
            prop_assert!(n as u64 <= limit, "{} in the window ending {}", n, end);
        }
    }

    /// The same comparison with clock steps in both directions. The model
    /// keeps the entries a check has not trimmed (a check trims scores at or
    /// below `now - window`; a peek trims nothing), counts every kept score
    /// above `now - window` (entries from "the future" included), and
    /// expires the log at `max(newest, now) + window`.
    #[test]
    fn agrees_with_the_naive_model_across_clock_steps(
        limit in 1u64..6,
        window in 1i64..200,
        steps in proptest::collection::vec((-150i64..150, 1u64..4, any::<bool>()), 1..100),
    ) {
        let mut log = MemoryLog::default();
        let mut kept: Vec<i64> = Vec::new();
        let mut now = 10_000i64;
        for (step, cost, use_peek) in steps {
            now += step;
            let r = detailed(limit, window, cost);
            let counted = |kept: &[i64], t: i64| kept.iter().filter(|&&s| s > t - window).count() as u64;
            let expected = counted(&kept, now) + cost <= limit;
            let got = if use_peek {
                unwrap(peek(&mut log, now, &r))
            } else {
                unwrap(check(&mut log, now, &r))
            };
            prop_assert_eq!(got.allowed, expected, "now {} kept {:?}", now, kept);
            if !use_peek {
                kept.retain(|&s| s > now - window);
                if got.allowed {
                    kept.extend(std::iter::repeat_n(now, cost as usize));
                    let newest = kept.iter().copied().max().unwrap_or(now);
                    prop_assert_eq!(got.expire_at_ms, Some(newest.max(now) + window));
                }
                let mut have: Vec<i64> = log.scores.iter().map(|&s| s as i64).collect();
                have.sort_unstable();
                let mut want = kept.clone();
                want.sort_unstable();
                prop_assert_eq!(have, want);
            }
            let d = got.detail.expect("detail");
            let live: Vec<i64> = kept.iter().copied().filter(|&s| s > now - window).collect();
            prop_assert_eq!(d.remaining, limit.saturating_sub(live.len() as u64));
            prop_assert_eq!(d.reset_after_ms, live.iter().max().map_or(0, |&s| s + window - now));
            if got.allowed {
                prop_assert_eq!(d.retry_after_ms, 0);
            } else if cost > limit {
                prop_assert_eq!(d.retry_after_ms, -1);
            } else {
                // The smallest wait after which the model allows.
                let horizon = live.iter().max().map_or(0, |&s| s + window - now);
                let retry = (1..=horizon.max(1))
                    .find(|w| counted(&live, now + w) + cost <= limit)
                    .unwrap_or(i64::MAX);
                prop_assert_eq!(d.retry_after_ms, retry);
            }
        }
    }

    #[test]
    fn mcheck_agrees_with_the_rules_one_by_one(
        rules in proptest::collection::vec((0usize..3, 1u64..6, 1i64..300), 1..5),
        steps in proptest::collection::vec((0i64..80, 1u64..3), 1..60),
    ) {
        let rules: Vec<KeyedRule> = rules.into_iter().map(|(l, lim, w)| rule(l, lim, w)).collect();
        let mut logs = vec![MemoryLog::default(), MemoryLog::default(), MemoryLog::default()];
        let mut accepted: Vec<Vec<i64>> = vec![Vec::new(); 3];
        let mut now = 10_000i64;
        for (step, cost) in steps {
            now += step;
            let expected = rules.iter().all(|r| {
                let n = accepted[r.key].iter().filter(|&&s| s > now - r.window_ms).count() as u64;
                n + cost <= r.limit
            });
            let v = unwrap(mcheck(&mut logs, &rules, now, cost, true));
            prop_assert_eq!(v.allowed, expected);
            prop_assert_eq!(v.rules.len(), rules.len());
            if expected {
                let used: std::collections::BTreeSet<usize> = rules.iter().map(|r| r.key).collect();
                for l in used {
                    accepted[l].extend(std::iter::repeat_n(now, cost as usize));
                }
                prop_assert_eq!(v.members.len() as u64, cost);
            } else {
                prop_assert!(v.retry_after_ms == -1 || v.retry_after_ms >= 1);
            }
            for (r, (ok, d)) in rules.iter().zip(&v.rules) {
                let n = accepted[r.key].iter().filter(|&&s| s > now - r.window_ms).count() as u64;
                prop_assert_eq!(d.remaining, r.limit.saturating_sub(n));
                prop_assert!(*ok || !expected);
            }
            // Every log holds what some rule on it still needs.
            for (l, log) in logs.iter().enumerate() {
                if let Some(w) = rules.iter().filter(|r| r.key == l).map(|r| r.window_ms).max() {
                    let mut have: Vec<i64> = log.scores.iter().map(|&s| s as i64).collect();
                    have.sort_unstable();
                    let want: Vec<i64> = accepted[l].iter().copied().filter(|&s| s > now - w).collect();
                    prop_assert_eq!(have, want);
                }
            }
        }
    }

    /// Clock steps in both directions, foreign scores of any value and
    /// random requests: never a panic, and every reply is consistent
    /// with the log it was computed from.
    #[test]
    fn survives_clock_steps_and_foreign_entries(ops in proptest::collection::vec(op(), 1..150)) {
        let mut log = MemoryLog::default();
        let mut now = 1_000_000i64;
        for op in ops {
            match op {
                Op::Clock(step) => now += step,
                Op::Foreign(score) => log.scores.push(score),
                Op::Check { limit, window, cost } | Op::Peek { limit, window, cost } => {
                    let is_peek = matches!(op, Op::Peek { .. });
                    let r = detailed(limit, window, cost);
                    let before = log.clone();
                    let in_window = before.sorted_above(now - window).len() as u64;
                    let v = if is_peek {
                        unwrap(peek(&mut log, now, &r))
                    } else {
                        unwrap(check(&mut log, now, &r))
                    };
                    let d = v.detail.expect("detail");
                    prop_assert_eq!(v.allowed, in_window + cost <= limit);
                    prop_assert!(d.remaining <= limit);
                    prop_assert!(d.reset_after_ms >= 0);
                    if v.allowed {
                        prop_assert_eq!(d.retry_after_ms, 0);
                    } else if cost > limit {
                        prop_assert_eq!(d.retry_after_ms, -1);
                    } else {
                        prop_assert!(d.retry_after_ms >= 1);
                    }
                    if is_peek || !v.allowed {
                        // Nothing added; a check may only have trimmed.
                        prop_assert_eq!(log.sorted_above(now - window), before.sorted_above(now - window));
                    } else {
                        prop_assert_eq!(log.sorted_above(now - window).len() as u64, in_window + cost);
                        let at = v.expire_at_ms.expect("expiry");
                        // The key outlives every entry that still counts.
                        for s in log.sorted_above(now - window) {
                            prop_assert!(s.is_nan() || s + window as f64 <= at as f64 + 1.0 || s >= i64::MAX as f64);
                        }
                    }
                    if is_peek {
                        prop_assert_eq!(&log.scores, &before.scores);
                    }
                }
            }
        }
    }
}

fn with_members(limit: u64, window_ms: i64, cost: u64) -> Req {
    Req {
        want: Want {
            detail: false,
            members: true,
        },
        ..detailed(limit, window_ms, cost)
    }
}

#[test]
fn member_ids_are_short_and_count_up() {
    let mut log = MemoryLog::default();
    let r = with_members(100, 1_000, 1);
    let ids: Vec<i64> = (0..3)
        .flat_map(|i| unwrap(check(&mut log, 10 + i, &r)).members)
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    let v = unwrap(check(&mut log, 20, &with_members(100, 1_000, 3)));
    assert_eq!(v.members, [4, 5, 6]);
    // Once every entry expired, the key starts over.
    let v = unwrap(check(&mut log, 5_000, &r));
    assert_eq!(v.members, [1]);
}

#[test]
fn a_taken_short_id_falls_back_to_a_wide_one() {
    // Newest entry 9 at the same score as 10: "9" sorts last, so the short
    // id 10 is taken and the entry gets a wide id; the one after counts on.
    let mut log = MemoryLog {
        scores: vec![50.0, 50.0],
        members: vec![10, 9],
        ..MemoryLog::default()
    };
    let v = unwrap(check(&mut log, 50, &with_members(100, 1_000, 2)));
    assert_eq!(v.members.len(), 2);
    assert!(v.members[0] >= 1 << crate::member::SEQ_BITS, "{v:?}");
    assert_eq!(v.members[1], v.members[0] + 1);
    let mut unique = log.members.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 4);
}

#[test]
fn mcheck_shares_short_ids_above_every_key() {
    let rules = [rule(0, 10, 1_000), rule(1, 10, 1_000)];
    let mut logs = vec![MemoryLog::default(), MemoryLog::default()];
    // Key 1 already holds ids 1..=3 from its own checks.
    for t in 0..3 {
        unwrap(check(&mut logs[1], t, &with_members(10, 1_000, 1)));
    }
    let v = unwrap(mcheck(&mut logs, &rules, 5, 2, false));
    assert!(v.allowed);
    assert_eq!(v.members, [4, 5]);
    assert_eq!(logs[0].members, [4, 5]);
    assert_eq!(logs[1].members, [1, 2, 3, 4, 5]);
}

#[test]
fn mcheck_charges_a_denial_to_the_keys_without_room() {
    // ip: 5 per minute (room); phone: 1 per minute (full) and 10 per day.
    let rules = [
        rule(0, 5, 60_000),
        rule(1, 1, 60_000),
        rule(1, 10, 86_400_000),
    ];
    let mut logs = vec![MemoryLog::default(), MemoryLog::default()];
    let v = unwrap(mcheck(&mut logs, &rules, 1_000, 1, false));
    assert!(v.allowed);
    assert!(v.refused_logs.is_empty());
    let v = unwrap(mcheck(&mut logs, &rules, 1_001, 1, false));
    assert!(!v.allowed);
    assert_eq!(v.refused_logs, [1], "the phone key, once");
}

// ---- Member ids: the same picks as before, in O(cost x keys) probes ----

/// Wide ids as the server makes them (`member::member_id(now, seq)`), from
/// a known sequence number on, so that two runs see the same ones.
struct TestIds {
    seq: u64,
}

impl WideIds for TestIds {
    fn fresh(&mut self, now_ms: i64) -> i64 {
        self.seq += 1;
        crate::member::member_id(now_ms, self.seq - 1)
    }
}

/// A log that counts the member lookups and adds made on it.
#[derive(Debug, Default, Clone)]
struct Counted {
    log: MemoryLog,
    probes: u64,
}

impl WindowLog for Counted {
    type Error = NoFreeMember;
    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        self.log.trim(cutoff_ms)
    }
    fn count(&self) -> Result<u64, NoFreeMember> {
        self.log.count()
    }
    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        self.log.count_above(cutoff_ms)
    }
    fn nth_above(&mut self, c: i64, k: u64, n: u64) -> Result<Option<f64>, NoFreeMember> {
        self.log.nth_above(c, k, n)
    }
    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, NoFreeMember> {
        self.log.newest_above(min_ms)
    }
    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
        self.log.newest_entry()
    }
    fn has_member(&mut self, id: i64) -> Result<bool, NoFreeMember> {
        self.probes += 1;
        self.log.has_member(id)
    }
    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, NoFreeMember> {
        self.probes += 1;
        self.log.add(now_ms, id)
    }
    fn expire_at(&mut self, at_ms: i64) -> Result<(), NoFreeMember> {
        self.log.expire_at(at_ms)
    }
    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, NoFreeMember> {
        self.log.charge(request)
    }
    fn add_units(&mut self, r: &[u8], s: f64, held: u64, to: u64) -> Result<(), NoFreeMember> {
        self.log.add_units(r, s, held, to)
    }
    fn remove_units(&mut self, r: &[u8], keep: u64, held: u64) -> Result<u64, NoFreeMember> {
        self.log.remove_units(r, keep, held)
    }
}

/// The member search as it was at 65f4bb8 (a scan of the ids chosen so far
/// for every probe, each wide search from its fresh id): the reference the
/// new search must agree with, id for id.
mod before {
    use super::*;

    fn first_free(
        start: i64,
        tries: u64,
        mut take: impl FnMut(i64) -> Result<bool, NoFreeMember>,
    ) -> Result<i64, NoFreeMember> {
        let mut id = start;
        for _ in 0..=tries {
            if take(id)? {
                return Ok(id);
            }
            id = member::next(id);
        }
        Err(NoFreeMember)
    }

    fn free_everywhere<L: WindowLog<Error = NoFreeMember>>(
        logs: &mut [L],
        ids: &[i64],
        id: i64,
    ) -> Result<bool, NoFreeMember> {
        if ids.contains(&id) {
            return Ok(false);
        }
        for log in logs.iter_mut() {
            if log.has_member(id)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn shared_members<L: WindowLog<Error = NoFreeMember>>(
        logs: &mut [L],
        now_ms: i64,
        count: u64,
        first: i64,
        wide: &mut impl WideIds,
    ) -> Result<Vec<i64>, NoFreeMember> {
        let mut ids: Vec<i64> = Vec::new();
        let mut short = first;
        for _ in 0..count {
            let id = if free_everywhere(logs, &ids, short)? {
                short
            } else {
                let mut tries = count;
                for log in logs.iter() {
                    tries = tries.saturating_add(log.count()?);
                }
                first_free(wide.fresh(now_ms), tries, |id| {
                    free_everywhere(logs, &ids, id)
                })?
            };
            ids.push(id);
            short = member::next(id);
        }
        Ok(ids)
    }

    pub fn add_entries<L: WindowLog<Error = NoFreeMember>>(
        log: &mut L,
        now_ms: i64,
        cost: u64,
        first: i64,
        wide: &mut impl WideIds,
    ) -> Result<Vec<i64>, NoFreeMember> {
        let mut ids = Vec::new();
        let mut short = first;
        for _ in 0..cost {
            let id = if log.add(now_ms, short)? {
                short
            } else {
                let tries = log.count()?.saturating_add(cost);
                first_free(wide.fresh(now_ms), tries, |id| log.add(now_ms, id))?
            };
            short = member::next(id);
            ids.push(id);
        }
        Ok(ids)
    }
}

/// A log holding `members`, all scored `at`.
fn holding(members: &[i64], at: f64) -> Counted {
    Counted {
        log: MemoryLog {
            scores: vec![at; members.len()],
            members: members.to_vec(),
            ..MemoryLog::default()
        },
        probes: 0,
    }
}

const NOW: i64 = 1_795_996_800_000;
/// The sequence number the tests' first wide id has.
const SEQ0: u64 = 1_000;

/// Ids taken one in two from the first wide id on: `count` of them, at
/// `base + 1`, `base + 3`, ... (the first wide id itself is free).
fn one_in_two(count: usize) -> Vec<i64> {
    let base = crate::member::member_id(NOW, SEQ0);
    (0..count as i64).map(|i| base + 1 + 2 * i).collect()
}

#[test]
fn one_in_two_taken_wide_ids_cost_linear_probes() {
    // The short id 1 is taken, so the search goes wide; every wide id after
    // the first one is taken one in two. Before, each wide search started
    // one above the last one's start and probed every id it had already
    // seen: 2,000 ids took about 2,000,000 probes.
    let taken = one_in_two(2_000);
    let mut with_short = taken.clone();
    with_short.push(1);
    let cost = 2_000u64;

    let mut log = holding(&with_short, NOW as f64);
    let mut reference = log.clone();
    let got = unwrap(add_entries_ids(&mut log, cost, 1));
    let want = unwrap(before::add_entries(
        &mut reference,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    assert_eq!(got, want, "CHECK picks the same ids");
    assert!(
        log.probes <= 4 * (cost + taken.len() as u64),
        "CHECK: {} probes for {cost} ids (before: {})",
        log.probes,
        reference.probes
    );

    let mut logs = vec![holding(&with_short, NOW as f64), holding(&[], 0.0)];
    let mut reference = logs.clone();
    let got = unwrap(shared_members(
        &mut logs,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    let want = unwrap(before::shared_members(
        &mut reference,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    assert_eq!(got, want, "MCHECK picks the same ids");
    let probes: u64 = logs.iter().map(|l| l.probes).sum();
    let before: u64 = reference.iter().map(|l| l.probes).sum();
    assert!(
        probes <= 4 * (cost + taken.len() as u64) * logs.len() as u64,
        "MCHECK: {probes} probes for {cost} ids on 2 keys (before: {before})"
    );
}

/// `add_entries` with the tests' wide ids, returning the ids added.
fn add_entries_ids(log: &mut Counted, cost: u64, first: i64) -> Result<Vec<i64>, NoFreeMember> {
    let mut ids = Vec::new();
    add_entries(
        log,
        NOW,
        cost,
        first,
        &mut TestIds { seq: SEQ0 },
        Some(&mut ids),
    )?;
    Ok(ids)
}

#[test]
fn chosen_ids_answer_as_the_list_does_at_every_size() {
    // Counting up from 40 (one range), then a break, counting up again,
    // then scattered ids, and the top of the range.
    let ids: Vec<i64> = (40..70)
        .chain(1_000..1_020)
        .chain((0..60).map(|i| i * 7 % 101))
        .chain([i64::MAX, i64::MAX - 1])
        .collect();
    let mut chosen = Chosen::with_capacity(ids.len() as u64);
    for (i, &id) in ids.iter().enumerate() {
        for probe in [id, id - 1, id.saturating_add(1), -id, 39, 70, 1_020] {
            assert_eq!(
                chosen.contains(probe),
                chosen.ids.contains(&probe),
                "after {i} ids, {probe}"
            );
        }
        chosen.push(id);
        assert!(chosen.contains(id));
    }
    assert_eq!(chosen.ids, ids);
    assert_eq!(chosen.run, (40, 70), "the first ids are one range");
}

#[test]
fn a_search_with_no_free_id_fails_as_before() {
    // A store that answers every id taken (an inconsistent one): both
    // searches give up after the same number of tries.
    let mut known = Unusable::default();
    let mut probes = 0;
    let r = first_free(10, 5, &mut known, |_| {
        probes += 1;
        Ok::<bool, NoFreeMember>(false)
    });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(probes, 6);
    // Again from inside the run just probed: nothing is probed twice, and
    // the answer is the same.
    let mut again = 0;
    let r = first_free(12, 5, &mut known, |_| {
        again += 1;
        Ok::<bool, NoFreeMember>(false)
    });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(again, 2, "16 and 17: 12..=15 are known taken");
    // Ids at the top of the range wrap to 0 without overflowing.
    let mut known = Unusable::default();
    let r = first_free(i64::MAX - 1, 3, &mut known, |id| {
        Ok::<bool, NoFreeMember>(id == 1)
    });
    assert_eq!(r, Ok(1));
}

/// Members for a test log: short ids near the first choice and wide ids
/// near the ones the tests' sequence gives, so that searches collide.
fn colliding_members() -> impl Strategy<Value = Vec<i64>> {
    let base = crate::member::member_id(NOW, SEQ0);
    proptest::collection::vec(
        prop_oneof![(1i64..40), (0i64..120).prop_map(move |d| base + d)],
        0..80,
    )
    .prop_map(|mut v| {
        v.sort_unstable();
        v.dedup();
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// MCHECK's and CHECK's member search pick exactly the ids the search
    /// of 65f4bb8 picked, on logs whose short and wide ids are taken here
    /// and there, never probing more.
    #[test]
    fn member_search_picks_what_it_picked_before(
        keys in proptest::collection::vec(colliding_members(), 1..4),
        first in 1i64..45,
        cost in 1u64..60,
    ) {
        let mut logs: Vec<Counted> = keys.iter().map(|m| holding(m, NOW as f64)).collect();
        let mut reference = logs.clone();
        let got = shared_members(&mut logs, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        let want = before::shared_members(&mut reference, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        prop_assert_eq!(&got, &want);
        let probes: u64 = logs.iter().map(|l| l.probes).sum();
        let before: u64 = reference.iter().map(|l| l.probes).sum();
        prop_assert!(probes <= before, "{} > {}", probes, before);

        let mut log = holding(&keys[0], NOW as f64);
        let mut reference = log.clone();
        let got = add_entries_ids(&mut log, cost, first);
        let want = before::add_entries(&mut reference, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(&log.log.members, &reference.log.members);
        prop_assert!(log.probes <= reference.probes);
    }
}

#[test]
fn a_long_run_of_taken_wide_ids_fails_after_a_bounded_search() {
    // 5,000 consecutive members from the first wide id on (a log written by
    // SLIDEWIN.APPLY can claim 2^40): the search gives up after
    // MAX_WIDE_TRIES probes instead of following the run.
    let base = crate::member::member_id(NOW, SEQ0);
    let mut taken: Vec<i64> = (0..5_000).map(|i| base + i).collect();
    taken.push(1);
    let mut log = holding(&taken, NOW as f64);
    assert_eq!(add_entries_ids(&mut log, 1, 1), Err(NoFreeMember));
    assert_eq!(
        log.probes,
        1 + MAX_WIDE_TRIES,
        "the short id, then the wide ones"
    );
    let mut logs = vec![holding(&taken, NOW as f64)];
    let r = shared_members(&mut logs, NOW, 1, 1, &mut TestIds { seq: SEQ0 });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(logs[0].probes, 1 + MAX_WIDE_TRIES);
}

const WIDE: SettleBounds = SettleBounds {
    max_added: 1_000,
    max_entries: 1_000,
};

/// A log after `CHECK k 10 200 COST 3 ID r` at 1000 and a plain CHECK at
/// 1100: two charges' worth of entries, expiring at 1300.
fn charged_log() -> MemoryLog {
    let mut log = MemoryLog::default();
    let rule = Rule {
        limit: 10,
        window_ms: 200,
        cost: 3,
    };
    let v = unwrap(check_request(
        &mut log,
        1000,
        &rule,
        Want::default(),
        Some(b"r"),
    ));
    assert!(v.allowed);
    let v = unwrap(check_request(
        &mut log,
        1100,
        &Rule::new(10, 200),
        Want::default(),
        None,
    ));
    assert!(v.allowed);
    assert_eq!(log.expire_at_ms, Some(1300));
    log
}

#[test]
fn the_own_window_comes_from_the_expiry_and_the_newest_entry() {
    let mut log = charged_log();
    // Newest 1100, expiry 1300: a window of 200, cutoff now - 200.
    assert_eq!(unwrap(own_cutoff(&mut log, 1250, Some(1300))), Some(1050));
    assert_eq!(unwrap(own_cutoff(&mut log, 1250, None)), None, "no expiry");
    let mut empty = MemoryLog::default();
    assert_eq!(unwrap(own_cutoff(&mut empty, 1250, Some(1300))), None);
}

#[test]
fn settle_and_undo_trim_first() {
    // Within the window, the charge settles.
    let mut log = charged_log();
    let at = log.expire_at_ms;
    assert_eq!(
        unwrap(settle(&mut log, b"r", 5, 1150, at, WIDE)),
        Settled::Units(5)
    );
    assert_eq!(log.scores.len(), 6);
    // At 1200 the charge (scored 1000) has left its 200 ms window: absent,
    // and trimmed; the later entry stays.
    let mut log = charged_log();
    assert_eq!(
        unwrap(settle(&mut log, b"r", 5, 1200, at, WIDE)),
        Settled::NoCharge
    );
    assert_eq!(log.scores, [1100.0]);
    let mut log = charged_log();
    assert_eq!(unwrap(undo_request(&mut log, b"r", 1200, at)), 0);
    assert_eq!(log.scores, [1100.0]);
    // One ms earlier it is still in its window.
    let mut log = charged_log();
    assert_eq!(unwrap(undo_request(&mut log, b"r", 1199, at)), 3);
    assert_eq!(log.scores, [1100.0]);
    // Without an expiry nothing is trimmed.
    let mut log = charged_log();
    assert_eq!(unwrap(undo_request(&mut log, b"r", 5000, None)), 3);
    let mut log = charged_log();
    assert_eq!(trim_own(&mut log, 1300, at), Ok(4));
}

#[test]
fn a_settle_raise_keeps_the_key_within_max_entries() {
    let bounds = SettleBounds {
        max_added: 1_000,
        max_entries: 10,
    };
    // 4 entries: the charge can grow to 9 units (10 entries), not 10.
    let mut log = charged_log();
    let at = log.expire_at_ms;
    let before = log.clone();
    assert_eq!(
        unwrap(settle(&mut log, b"r", 10, 1150, at, bounds)),
        Settled::TooManyEntries { entries: 11 }
    );
    assert_eq!(log.scores, before.scores, "nothing changed");
    assert_eq!(log.charges, before.charges);
    // Refused before the trim too: nothing changes at all.
    let mut log = charged_log();
    log.scores.push(800.0);
    log.members.push(77);
    assert_eq!(
        unwrap(settle(&mut log, b"r", 10, 1150, at, bounds)),
        Settled::TooManyEntries { entries: 11 },
        "the expired entry does not count"
    );
    assert_eq!(log.scores.len(), 5, "and is not trimmed by a refusal");
    let mut log = charged_log();
    assert_eq!(
        unwrap(settle(&mut log, b"r", 9, 1150, at, bounds)),
        Settled::Units(9)
    );
    assert_eq!(log.scores.len(), 10);
    // Lowering is always allowed, even above the bound.
    let tight = SettleBounds {
        max_added: 1_000,
        max_entries: 2,
    };
    assert_eq!(
        unwrap(settle(&mut log, b"r", 4, 1150, at, tight)),
        Settled::Units(4)
    );
    // The per-call bound is named first.
    let per_call = SettleBounds {
        max_added: 3,
        max_entries: 5,
    };
    assert_eq!(
        unwrap(settle(&mut log, b"r", 8, 1150, at, per_call)),
        Settled::TooManyAdded { added: 4 }
    );
}
