//! One key's decision: the reference's examples, the boundaries, DETAIL,
//! PEEK, saturation at the extremes; SETTLE and UNDO by request id.

use super::super::check::*;
use super::super::log::*;
use super::super::memory::*;
use super::support::*;
use super::support::{check, peek};

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
    // The longest window `slidewin.max-window-ms` allows by default (366 days).
    let r = detailed(100_000, 366 * 24 * 60 * 60 * 1000, 100_000);
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
