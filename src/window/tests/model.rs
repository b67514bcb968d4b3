//! The decision against the naive model, over random calls and clock steps.

use super::super::log::*;
use super::super::memory::*;
use super::support::*;
use super::support::{check, mcheck, peek};
use proptest::prelude::*;

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
