//! Several rules at once: all or nothing, shared keys, retries, the ids
//! MCHECK gives, a denial charged to the keys without room.

use super::super::memory::*;
use super::support::*;
use super::support::{check, mcheck};

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
