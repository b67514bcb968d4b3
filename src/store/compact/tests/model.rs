//! The compact log against the sorted-set model ([`MemoryLog`], which
//! orders equal scores as the server does): the same random calls through
//! the core give the same verdicts and the same entries; changes keep every
//! bound; strays; the unit cases of a call, an UNDO, equal scores.

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::chunked::*;
use super::super::codec::*;
use super::super::log::*;
use super::super::run::*;
use super::super::small::*;
use super::support::*;
use crate::window::WindowLog;
use crate::window::{self, KeyedRule, MemoryLog, Rule, Want};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn decides_like_the_sorted_set_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut model = [MemoryLog::default(), MemoryLog::default()];
        let mut compact = [CompactLog::new(), CompactLog::new()];
        // What a command keeps of each log while it holds it.
        let mut holds = [Hold::default(), Hold::default()];
        let mut now = 1_796_000_000_000i64;
        // Per key, the members each side was given, call by call (the same
        // but for wide ids' sequences). Per key, because a wide id of one
        // key may equal a wide id of the other key on one side only (the
        // sequence is process-wide and the two sides draw from it in turn).
        let mut given_model: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
        let mut given_compact: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
        for (i, op) in ops.into_iter().enumerate() {
            // Two calls in three held as a command holds them (expanded,
            // settled after), so the small form's round trip through the
            // spare chunked log, shared by both logs, is driven too.
            let held = i % 3 != 0;
            if held {
                for (h, log) in holds.iter_mut().zip(compact.iter_mut()) {
                    h.on(log).expand();
                }
            }
            match op {
                Op::Check(l, limit, w, cost, detail, members) => {
                    let rule = Rule { cost, ..Rule::new(limit, w) };
                    let want = Want { detail, members };
                    let mut a = window::check(&mut model[l], now, &rule, want).unwrap();
                    let mut b = if held {
                        window::check(&mut holds[l].on(&mut compact[l]), now, &rule, want).unwrap()
                    } else {
                        window::check(&mut compact[l], now, &rule, want).unwrap()
                    };
                    given_model[l].extend(&a.members);
                    given_compact[l].extend(&b.members);
                    a.members = comparable_all(&a.members);
                    b.members = comparable_all(&b.members);
                    prop_assert_eq!(&a, &b);
                }
                Op::MCheck(rules, cost) => {
                    let keyed: Vec<KeyedRule> = rules
                        .iter()
                        .enumerate()
                        .map(|(key, &(limit, window_ms))| KeyedRule { key, limit, window_ms })
                        .collect();
                    let want = Want { detail: true, members: true };
                    let mut a = window::mcheck(&mut model, &keyed, now, cost, want).unwrap();
                    let mut b = if held {
                        let mut views: Vec<Held<'_>> =
                            holds.iter_mut().zip(compact.iter_mut()).map(|(h, log)| h.on(log)).collect();
                        window::mcheck(&mut views, &keyed, now, cost, want).unwrap()
                    } else {
                        window::mcheck(&mut compact, &keyed, now, cost, want).unwrap()
                    };
                    for key in 0..2 {
                        given_model[key].extend(&a.members);
                        given_compact[key].extend(&b.members);
                    }
                    a.members = comparable_all(&a.members);
                    b.members = comparable_all(&b.members);
                    prop_assert_eq!(&a, &b);
                }
                Op::Peek(l, limit, w, cost) => {
                    let rule = Rule { cost, ..Rule::new(limit, w) };
                    let a = window::peek(&mut model[l], now, &rule).unwrap();
                    let b = if held {
                        window::peek(&mut holds[l].on(&mut compact[l]), now, &rule).unwrap()
                    } else {
                        window::peek(&mut compact[l], now, &rule).unwrap()
                    };
                    prop_assert_eq!(a, b);
                }
                Op::Undo(l, i) => {
                    if !given_model[l].is_empty() {
                        // A member given back leaves the list: a later call
                        // may take its id again on one side only (wide ids
                        // come from the shared sequence).
                        let i = i % given_model[l].len();
                        let (m, c) = (given_model[l].swap_remove(i), given_compact[l].swap_remove(i));
                        let removed = if held {
                            holds[l].on(&mut compact[l]).remove(c).unwrap()
                        } else {
                            compact[l].remove(c).unwrap()
                        };
                        prop_assert_eq!(model_remove(&mut model[l], m), removed);
                    }
                }
                Op::Clock(step) => now += step,
            }
            if held {
                for (h, log) in holds.iter_mut().zip(compact.iter_mut()) {
                    h.settle(log);
                }
            }
            for l in 0..2 {
                prop_assert_eq!(model_entries(&model[l]), compact_entries(&compact[l]));
                prop_assert_eq!(model[l].expire_at_ms, compact[l].expire_at_ms());
                prop_assert_eq!(compact[l].count().unwrap(), model[l].scores.len() as u64);
                // What a save and a load would carry: the same log back.
                let bytes = compact[l].encode();
                prop_assert_eq!(&CompactLog::decode(&bytes).unwrap(), &compact[l]);
                if let Err(e) = compact[l].view().check() {
                    return Err(TestCaseError::fail(e));
                }
                // The small form, however it was changed, is the canonical
                // encoding of its runs.
                if let Repr::Small(b) = &compact[l].repr {
                    if !b.is_empty() {
                        let mut own = Vec::new();
                        Chunked::decode_small(b.bytes()).unwrap().encode_small_into(&mut own);
                        prop_assert_eq!(b.bytes(), own.as_slice());
                    }
                    // In place whenever the bytes fit there.
                    prop_assert_eq!(b.block_len() == 0, b.len() <= INLINE);
                }
            }
        }
    }
}

/// A change a client or a command may make to a log.
#[derive(Debug, Clone)]
enum Change {
    /// CHECK at the clock, with a limit, a window and a cost.
    Check(u64, i64, u64),
    /// UNDO of one member (any id, taken or not).
    Undo(i64),
    /// SLIDEWIN.APPLY ADD score first count (scores around the clock).
    Add(i64, i64, u64),
    /// SLIDEWIN.APPLY TRIM cutoff (around the clock).
    Trim(i64),
    /// What a save and a load (RESTORE, RDB) do: the encoding decoded.
    Reload,
    /// The clock moves (backwards too).
    Clock(i64),
}

fn change() -> impl Strategy<Value = Change> {
    let id = prop_oneof![4 => 0..64i64, 1 => Just(i64::MAX), 1 => (i64::MAX - 64)..i64::MAX, 1 => 0..i64::MAX];
    prop_oneof![
        4 => (1..40u64, prop_oneof![Just(50i64), Just(1000), Just(1 << 40)], 1..6u64)
            .prop_map(|(l, w, c)| Change::Check(l, w, c)),
        2 => id.clone().prop_map(Change::Undo),
        4 => (-200..50i64, id, prop_oneof![4 => 1..4u64, 1 => Just(1u64 << 39)])
            .prop_map(|(s, f, c)| Change::Add(s, f, c)),
        1 => (-300..0i64).prop_map(Change::Trim),
        1 => Just(Change::Reload),
        2 => prop_oneof![3 => 0..40i64, 1 => -300..0i64].prop_map(Change::Clock),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Whatever sequence of CHECKs, UNDOs, APPLYs (members and scores out of
    /// order, at the edges, runs of 2^39) and reloads a log goes through,
    /// every bound holds after every step and the log loads again: a
    /// change that would pass a bound is refused and changes nothing.
    #[test]
    fn any_sequence_of_changes_leaves_a_log_that_loads_again(
        changes in proptest::collection::vec(change(), 1..80),
    ) {
        let mut log = CompactLog::new();
        let mut now = 1_000_000i64;
        for change in changes {
            let before = log.clone();
            match change {
                Change::Check(limit, w, cost) => {
                    // A log APPLY filled may leave no member a CHECK can
                    // take (it fails: NoFreeMember); the log stays sound.
                    let rule = Rule { cost, ..Rule::new(limit, w) };
                    let _ = window::check(&mut log, now, &rule, Want { detail: true, members: true });
                }
                Change::Undo(id) => match log.remove(id) {
                    Ok(_) => {}
                    Err(_) => prop_assert_eq!(&log, &before, "a refused UNDO changed the log"),
                },
                Change::Add(at, first, count) => {
                    let (score, count) = ((now + at).max(0).to_string(), count.to_string());
                    let first = first.to_string();
                    let args: Vec<&[u8]> = vec![b"ADD", score.as_bytes(), first.as_bytes(), count.as_bytes()];
                    if let Ok(effect) = crate::store::compact::effect::Effect::parse(&args) {
                        if let Err(e) = effect.apply(&mut log) {
                            prop_assert!(e.to_string().starts_with("ERR "), "{e}");
                            prop_assert_eq!(&log, &before, "a refused APPLY changed the log");
                        }
                    }
                }
                Change::Trim(at) => {
                    let _ = log.trim(now + at);
                }
                Change::Reload => {
                    log = CompactLog::decode(&log.encode()).unwrap();
                }
                Change::Clock(step) => now += step,
            }
            sound(&mut log)?;
        }
    }
}

/// A clock step back leaves the entries it adds out of member order: they
/// are kept apart (the strays), found by member as the rest are, and the
/// log saves and loads to the same split; past the bound a step-back entry
/// is scored as the newest one (later, never earlier).
#[test]
fn entries_added_after_the_clock_stepped_back_are_strays() {
    let mut log = CompactLog::new();
    let rule = Rule::new(1000, 60_000);
    let want = Want {
        detail: false,
        members: true,
    };
    for t in 0..10 {
        window::check(&mut log, 10_000 + t * 10, &rule, want).unwrap();
    }
    // The clock steps back 55 ms: each entry is scored before newer ones
    // and takes a member above theirs.
    let mut given = Vec::new();
    for t in 0..4 {
        let v = window::check(&mut log, 10_035 + t, &rule, want).unwrap();
        given.extend(v.members);
    }
    let v = log.view();
    assert_eq!(v.strays.len(), 4, "{:?}", v.strays);
    v.check().unwrap();
    assert_eq!(log.count().unwrap(), 14);
    // Giving one back: found among the strays.
    assert!(log.remove(given[1]).unwrap());
    assert!(!log.remove(given[1]).unwrap());
    log.view().check().unwrap();
    // Up to the bound, then scored as the newest entry.
    for t in 0..(MAX_STRAYS as i64 + 5) {
        window::check(&mut log, 10_040 + t, &rule, want).unwrap();
    }
    let v = log.view();
    v.check().unwrap();
    assert_eq!(v.strays.len(), MAX_STRAYS);
    assert_eq!(log.count().unwrap(), 13 + MAX_STRAYS as u64 + 5);
    // Three strays were left; MAX_STRAYS - 3 more fit; the other eight
    // join the newest entry's score.
    let at_top = log.entries().filter(|&(s, _)| s == 10_090).count();
    assert_eq!(
        at_top,
        1 + 8,
        "entries past the bound take the newest score"
    );
}

#[test]
fn a_call_of_any_cost_is_one_run() {
    let mut log = CompactLog::new();
    let rule = Rule {
        cost: 10_000,
        ..Rule::new(100_000, 60_000)
    };
    let v = window::check(
        &mut log,
        1_000,
        &rule,
        Want {
            detail: false,
            members: false,
        },
    )
    .unwrap();
    assert!(v.allowed);
    assert_eq!(
        log.runs(),
        [Run {
            score: 1_000,
            first: 1,
            count: 10_000
        }]
    );
    let bytes = log.encode();
    assert!(
        bytes.len() <= 16,
        "{} bytes for a COST 10000 call",
        bytes.len()
    );
}

#[test]
fn undo_splits_a_run_and_the_next_id_follows_the_newest() {
    let mut log = CompactLog::new();
    let want = Want {
        detail: false,
        members: true,
    };
    let v = window::check(
        &mut log,
        5,
        &Rule {
            cost: 3,
            ..Rule::new(10, 100)
        },
        want,
    )
    .unwrap();
    assert_eq!(v.members, [1, 2, 3]);
    assert!(log.remove(2).unwrap() && !log.remove(2).unwrap());
    assert_eq!(log.runs().len(), 2);
    assert_eq!(log.count().unwrap(), 2);
    let v = window::check(&mut log, 6, &Rule::new(10, 100), want).unwrap();
    assert_eq!(v.members, [4]);
}

#[test]
fn equal_scores_order_members_as_the_server_does() {
    // Ten entries in one ms: the server's order ends with "9", not "10".
    let mut log = CompactLog::new();
    for id in 1..=10 {
        assert!(log.add(7, id).unwrap());
    }
    assert_eq!(log.runs().len(), 1);
    assert_eq!(log.newest_entry().unwrap(), Some((7.0, Some(9))));
    assert_eq!(greatest_decimal(1, 10), 9);
    assert_eq!(greatest_decimal(10, 123), 99);
    assert_eq!(greatest_decimal(100, 123), 123);
    assert_eq!(greatest_decimal(0, 0), 0);
}

#[test]
fn refusals_name_what_is_wrong() {
    assert_eq!(CompactLog::decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(CompactLog::decode(&[3, 0, 0]), Err(DecodeError::Version(3)));
    // Version 2 without its records section.
    assert_eq!(CompactLog::decode(&[2, 0, 0]), Err(DecodeError::Truncated));
    assert_eq!(
        CompactLog::decode(&[1, 0, 0, 0]),
        Err(DecodeError::Trailing)
    );
    // Two runs claiming the same member.
    let mut log = CompactLog::new();
    log.add(1, 1).unwrap();
    log.add(2, 2).unwrap();
    let mut bytes = log.encode();
    // Rewrite the second run as a general record pointing back at member 1.
    bytes.truncate(bytes.len() - 1);
    bytes.extend([0xC0, 1, 1, 0]); // gap 1, member delta -1 (zigzag 1): member 1 again
    assert_eq!(CompactLog::decode(&bytes), Err(DecodeError::Invalid));
    // A run count that says more runs than there are bytes.
    assert_eq!(
        CompactLog::decode(&[1, 0, 0xFF, 0x7F]),
        Err(DecodeError::Truncated)
    );
    // An 11-byte varint.
    let mut long = vec![1, 1];
    long.extend([0xFF; 10]);
    long.push(0);
    assert_eq!(CompactLog::decode(&long), Err(DecodeError::Range));
}
