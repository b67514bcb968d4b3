//! The compact log against the sorted-set model ([`MemoryLog`], which
//! orders equal scores as the server does): the same random calls through
//! the core give the same verdicts and the same entries; the encoding
//! round-trips, and hostile bytes are refused without a panic.

use proptest::prelude::*;

use super::bounds::*;
use super::charge::*;
use super::chunk::*;
use super::chunked::*;
use super::codec::*;
use super::log::*;
use super::rice::*;
use super::run::*;
use super::small::*;
use crate::window::WindowLog;
use crate::window::{self, KeyedRule, MemoryLog, Rule, Want};

/// UNDO on the model: removes member `id`.
fn model_remove(log: &mut MemoryLog, id: i64) -> bool {
    match log.members.iter().position(|&m| m == id) {
        Some(i) => {
            log.members.remove(i);
            log.scores.remove(i);
            true
        }
        None => false,
    }
}

/// A member as the two runs can agree on it: a wide id (`ms << 20 | seq`,
/// the fallback when the short one is taken) carries a process-wide
/// sequence, which the model's call and the compact call each advance, so
/// only its millisecond is compared.
fn comparable(id: i64) -> i64 {
    if id >= 1 << 40 {
        -(id >> 20)
    } else {
        id
    }
}

fn comparable_all(ids: &[i64]) -> Vec<i64> {
    ids.iter().map(|&m| comparable(m)).collect()
}

/// The model's entries as (score, member), sorted.
fn model_entries(log: &MemoryLog) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = log
        .scores
        .iter()
        .zip(&log.members)
        .map(|(&s, &m)| (s as i64, comparable(m)))
        .collect();
    v.sort_unstable();
    v
}

fn compact_entries(log: &CompactLog) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = log.entries().map(|(s, m)| (s, comparable(m))).collect();
    v.sort_unstable();
    v
}

#[derive(Debug, Clone)]
enum Op {
    /// CHECK on log 0 or 1: limit, window, cost, detail, members.
    Check(usize, u64, i64, u64, bool, bool),
    /// MCHECK over both logs: (limit, window) per log, cost.
    MCheck([(u64, i64); 2], u64),
    /// PEEK on a log.
    Peek(usize, u64, i64, u64),
    /// UNDO of the `i`-th member given so far (mod their number) on a log.
    Undo(usize, usize),
    /// The clock moves by this many ms (backwards too).
    Clock(i64),
}

fn op() -> impl Strategy<Value = Op> {
    let window = prop_oneof![Just(50i64), Just(100), Just(1000), Just(5000)];
    prop_oneof![
        4 => (0..2usize, 1..12u64, window.clone(), 1..5u64, any::<bool>(), any::<bool>())
            .prop_map(|(l, limit, w, c, d, m)| Op::Check(l, limit, w, c, d, m)),
        2 => ((1..12u64, window.clone()), (1..12u64, window.clone()), 1..4u64)
            .prop_map(|(a, b, c)| Op::MCheck([a, b], c)),
        1 => (0..2usize, 1..12u64, window, 1..5u64).prop_map(|(l, limit, w, c)| Op::Peek(l, limit, w, c)),
        2 => (0..2usize, any::<usize>()).prop_map(|(l, i)| Op::Undo(l, i)),
        3 => prop_oneof![5 => 0..40i64, 2 => 0..2000i64, 1 => -300..0i64].prop_map(Op::Clock),
    ]
}

/// Cases per property: 400, or `SLIDEWIN_FUZZ_CASES` (`make fuzz` runs a
/// million of the decoder and effect properties).
fn cases() -> u32 {
    std::env::var("SLIDEWIN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// A word of an effect command: the options, integers near the edges and
/// near a log's own values, and junk.
fn effect_word() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop_oneof![
            Just("LOG"), Just("TRIM"), Just("REMOVE"), Just("ADD"), Just("PXAT"), Just("add"), Just("Trim"),
            Just("CHARGE"), Just("CUT"), Just("r1"), Just("r2")
        ].prop_map(|w| w.as_bytes().to_vec()),
        4 => prop_oneof![0..12i64, 990..1010i64, Just(i64::MAX), Just(i64::MIN), Just(-1i64), any::<i64>()]
            .prop_map(|v| v.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
        1 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(|mut b| {
            // Mostly a payload of a version this code reads.
            if let Some(first) = b.first_mut() {
                *first = if *first < 128 { VERSION } else { VERSION_CHARGES };
            }
            b
        }),
    ]
}

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
                        prop_assert_eq!(b.bytes(), &Chunked::decode(b.bytes()).unwrap().encode());
                    }
                    // In place whenever the bytes fit there.
                    prop_assert_eq!(b.block_len() == 0, b.len() <= INLINE);
                }
            }
        }
    }

    #[test]
    fn hostile_bytes_are_refused_or_give_a_sound_log(
        versioned in any::<bool>(),
        mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        // Half of them past the version check, so the rest is exercised.
        if versioned && bytes.len() >= 2 {
            bytes[0] = VERSION;
            bytes[1] &= 1;
        }
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            sound(&mut log)?;
        }
    }

    #[test]
    fn mutated_encodings_are_refused_or_give_a_sound_log(
        ops in proptest::collection::vec((0..5000i64, 1..4u64), 1..40),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut log = CompactLog::new();
        let mut now = 1_796_000_000_000i64;
        for (step, cost) in ops {
            now += step;
            window::check(&mut log, now, &Rule { cost, ..Rule::new(1000, 3_600_000) }, Want { detail: false, members: false }).unwrap();
        }
        let mut bytes = log.encode();
        for (at, b) in flips {
            let i = at % bytes.len();
            bytes[i] ^= b;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            sound(&mut log)?;
        }
    }

    #[test]
    fn effects_from_clients_are_refused_whole_or_give_a_sound_log(
        words in proptest::collection::vec(effect_word(), 0..12),
    ) {
        let mut log = CompactLog::new();
        for (i, score) in [990i64, 995, 1000, 1000, 1005].into_iter().enumerate() {
            window::check(
                &mut log,
                score,
                &Rule { cost: 1 + i as u64 % 2, ..Rule::new(100, 1000) },
                Want { detail: false, members: false },
            )
            .unwrap();
        }
        let before = log.clone();
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
        match crate::store::compact::effect::Effect::parse(&args) {
            Err(e) => prop_assert!(e.to_string().starts_with("ERR "), "{e}"),
            Ok(effect) => match effect.apply(&mut log) {
                Err(e) => {
                    prop_assert!(e.to_string().starts_with("ERR "), "{e}");
                    prop_assert_eq!(&log, &before, "a refused effect changed the log");
                }
                Ok(()) => sound(&mut log)?,
            },
        }
    }
}

/// What every query relies on, checked on a decoded log; then every query
/// and a CHECK run on it without a panic.
fn sound(log: &mut CompactLog) -> Result<(), TestCaseError> {
    let runs = log.runs().to_vec();
    prop_assert!(runs.windows(2).all(|w| w[0].score <= w[1].score));
    prop_assert!(runs.iter().all(|r| r.count >= 1 && r.first >= 0));
    // Member ids as ranges, not one by one: a hostile run may claim 2^40 entries,
    // which the log holds in O(1) but a Vec of them would not (CI ran out of memory).
    let mut ranges: Vec<(i64, u64)> = runs.iter().map(|r| (r.first, r.count)).collect();
    ranges.sort_unstable();
    prop_assert!(
        ranges
            .windows(2)
            .all(|w| (w[0].0 as i128) + (w[0].1 as i128) <= w[1].0 as i128),
        "a member twice"
    );
    let total: u64 = runs.iter().map(|r| r.count).sum();
    prop_assert_eq!(log.count().unwrap(), total);
    prop_assert!(total <= MAX_ENTRIES);
    let newest = runs.last().map(|r| r.score).unwrap_or(0);
    let _ = log.count_above(newest - 1000).unwrap();
    let _ = log.nth_above(i64::MIN, total, total).unwrap();
    let _ = log.newest_entry().unwrap();
    if let Err(e) = log.view().check() {
        return Err(TestCaseError::fail(e));
    }
    // The digest's groups, streamed, as sorting each score's runs gives them.
    prop_assert_eq!(log.canonical_runs(), canonical_by_sorting(&runs));
    let rule = Rule::new(5, 1000);
    let _ = window::check(
        &mut *log,
        newest,
        &rule,
        Want {
            detail: true,
            members: true,
        },
    );
    let bytes = log.encode();
    prop_assert_eq!(&CompactLog::decode(&bytes).unwrap(), &*log);
    if let Err(e) = log.view().check() {
        return Err(TestCaseError::fail(e));
    }
    Ok(())
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

/// Every change that would make a log pass a bound the loader checks is
/// refused, changing nothing: an APPLY ADD, an UNDO splitting a run, a
/// payload; a CHECK never passes one.
#[test]
fn no_change_makes_a_log_the_loader_refuses() {
    // A log of MAX_RUNS runs, each of three members with a gap after it.
    let runs: Vec<Run> = (0..MAX_RUNS as i64)
        .map(|i| Run {
            score: i,
            first: 1 + 4 * i,
            count: 3,
        })
        .collect();
    let mut log = CompactLog::decode(&Chunked::from_runs(&runs, None).encode()).unwrap();
    assert_eq!(log.shape().0, MAX_RUNS);
    let before = log.clone();
    // One more run.
    let add =
        crate::store::compact::effect::Effect::parse(&[b"ADD", b"100000", b"999999999", b"1"])
            .unwrap();
    assert_eq!(
        add.apply(&mut log).map_err(|e| e.to_string()),
        Err(format!("ERR the log would hold more than {MAX_RUNS} runs"))
    );
    assert_eq!(log, before);
    // UNDO of a run's middle member splits it: refused, as an effect too.
    assert_eq!(log.remove(2), Err(Bound::Runs));
    assert_eq!(log, before);
    let undo = crate::store::compact::effect::Effect::parse(&[b"REMOVE", b"2"]).unwrap();
    assert!(undo.apply(&mut log).is_err());
    assert_eq!(log, before);
    // UNDO of an end member does not split: allowed.
    assert_eq!(log.remove(1), Ok(true));
    // A CHECK extending the last run is no new run; a CHECK adding one
    // after a trim has room.
    let rule = Rule::new(1_000_000, 1_000_000);
    let want = Want {
        detail: false,
        members: false,
    };
    window::check(&mut log, MAX_RUNS as i64 - 1, &rule, want).unwrap();
    log.view().check().unwrap();
    // A payload of one run more is refused by the loader.
    use crate::store::compact::codec::{put_run, put_varint, zigzag};
    let more: Vec<Run> = (0..=MAX_RUNS as i64)
        .map(|i| Run {
            score: i,
            first: 1 + 4 * i,
            count: 3,
        })
        .collect();
    let mut bytes = Vec::new();
    crate::store::compact::codec::write_header(&mut bytes, None, more.len() as u64);
    put_varint(&mut bytes, zigzag(0));
    let (mut score, mut expected) = (0i64, 1i64);
    for r in &more {
        put_run(&mut bytes, &mut score, &mut expected, *r);
    }
    assert_eq!(
        CompactLog::decode(&bytes),
        Err(DecodeError::Bound(Bound::Runs))
    );
    // Runs out of member order: up to the bound by APPLY, then refused.
    let mut log = CompactLog::new();
    let add = |log: &mut CompactLog, score: i64, first: i64| {
        let (s, f) = (score.to_string(), first.to_string());
        crate::store::compact::effect::Effect::parse(&[b"ADD", s.as_bytes(), f.as_bytes(), b"1"])
            .unwrap()
            .apply(log)
            .map_err(|e| e.to_string())
    };
    add(&mut log, 1_000, 1_000_000).unwrap();
    for i in 0..MAX_STRAYS as i64 {
        // Each scored before the newest entry, with a member above the
        // newest's: out of member order.
        add(&mut log, 10 + i, 2_000_000 + i * 2).unwrap();
    }
    assert_eq!(log.shape().1, MAX_STRAYS, "{:?}", log.view().strays.len());
    let before = log.clone();
    assert_eq!(
        add(&mut log, 5_000, 7),
        Err(format!(
            "ERR the log would hold more than {MAX_STRAYS} runs out of member order"
        ))
    );
    assert_eq!(log, before);
    log.view().check().unwrap();
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

/// Bytes per entry of the encoding for `n` entries arriving as a Poisson
/// stream over an hour, one CHECK each (a seeded generator: a fixed
/// computation, not a timing).
fn bytes_per_entry(n: u64, seed: u64) -> f64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mean_gap = 3_600_000.0 / n as f64;
    let mut log = CompactLog::new();
    let mut now = 1_796_000_000_000i64;
    let rule = Rule::new(n, 3_600_000);
    let want = Want {
        detail: false,
        members: false,
    };
    for _ in 0..n {
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        now += (-u.ln() * mean_gap) as i64;
        assert!(window::check(&mut log, now, &rule, want).unwrap().allowed);
    }
    log.encode().len() as f64 / n as f64
}

#[test]
fn the_encoding_takes_about_two_bytes_an_entry() {
    let at_10k = bytes_per_entry(10_000, 1);
    let at_1k = bytes_per_entry(1_000, 2);
    eprintln!("encoding: {at_10k:.2} B/entry at 10,000 per hour, {at_1k:.2} at 1,000 per hour");
    assert!(at_10k <= 2.0, "{at_10k:.2} B/entry at 10,000 per hour");
    assert!(at_1k <= 3.0, "{at_1k:.2} B/entry at 1,000 per hour");
}

/// Found by `make fuzz`: a run ending at member i64::MAX (SLIDEWIN.APPLY may
/// add one) must read back, from a chunk and from the encoding (an RDB of
/// such a log once failed to load).
#[test]
fn a_member_at_i64_max_reads_back() {
    let mut log = CompactLog::new();
    for (score, first) in [(5, 1), (7, 2), (0, i64::MAX), (9, 3)] {
        log.add_run(Run {
            score,
            first,
            count: 1,
        })
        .unwrap();
    }
    assert_eq!(log.count_entries(), 4);
    assert_eq!(log.runs().len(), 4);
    assert_eq!(CompactLog::decode(&log.encode()), Ok(log.clone()));
    assert!(log.remove(i64::MAX).unwrap());
    assert_eq!(log.runs().len(), 3);
}

/// A mover that puts every block somewhere new (a fresh allocation of the
/// same capacity), and counts them.
#[derive(Default)]
struct Mover {
    moved: usize,
}

impl crate::relocate::Relocate for Mover {
    fn vec<T>(&mut self, v: Vec<T>) -> Vec<T> {
        if v.capacity() == 0 {
            return v;
        }
        let mut fresh = Vec::with_capacity(v.capacity());
        fresh.extend(v);
        self.moved += 1;
        fresh
    }
    fn boxed<T>(&mut self, b: Box<T>) -> Box<T> {
        self.moved += 1;
        Box::new(*b)
    }
}

#[test]
fn relocating_moves_every_block_and_keeps_the_log() {
    for n in [1u64, 2, 9, 40] {
        // Runs in separate milliseconds: `n` runs, small or chunked.
        let mut log = CompactLog::new();
        for i in 0..n {
            let id = i64::try_from(i).unwrap() * 2 + 1;
            assert!(log.add(1_000 + i64::try_from(i).unwrap() * 10, id).unwrap());
        }
        log.expire_at(90_000).unwrap();
        let before = log.clone();
        let blocks = log.heap_blocks();
        let mut to = Mover::default();
        log.relocate(&mut to);
        assert_eq!(log, before, "{n} runs: the same log");
        assert_eq!(log.encode(), before.encode());
        assert_eq!(
            to.moved,
            blocks.len(),
            "{n} runs: every block listed, and only those, moved"
        );
        // (A new block may take an address just freed: only the count holds.)
        assert_eq!(log.heap_blocks().len(), blocks.len());
        // It goes on deciding: one more entry.
        assert!(log.add(5_000_000, 1_000_001).unwrap());
        assert_eq!(log.count_entries(), n + 1);
    }
}

/// Runs in score order with unique members: mostly single entries under
/// the expected member, some of several entries, members out of sequence
/// and gaps from 0 ms to near [`MAX_SCORE`].
fn chunk_runs() -> impl Strategy<Value = Vec<Run>> {
    let step = (
        prop_oneof![6 => 0..600u64, 2 => 0..70_000u64, 1 => 0..(1u64 << 52) / 200],
        prop_oneof![8 => Just(1u64), 1 => 2..10_000u64],
        prop_oneof![8 => Just(0i64), 1 => 1..1_000_000i64, 1 => Just(i64::MAX / 4)],
    );
    proptest::collection::vec(step, 1..80).prop_map(|steps| {
        let (mut score, mut next) = (0i64, 1i64);
        let mut runs = Vec::new();
        for (gap, count, jump) in steps {
            score = score.saturating_add(gap as i64).min(MAX_SCORE);
            let first = next.saturating_add(jump);
            let Some(last) = first.checked_add(count as i64 - 1) else {
                break;
            };
            if last == i64::MAX {
                break;
            }
            runs.push(Run {
                score,
                first,
                count,
            });
            next = last + 1;
        }
        if runs.is_empty() {
            runs.push(Run {
                score: 0,
                first: 1,
                count: 1,
            });
        }
        runs
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Every kind of chunk (the bytes and each Rice parameter) reads back
    /// the runs it was given, trims as the runs say, and seals into the
    /// kind `best_kind` picks, which holds the same runs in no more bytes
    /// than the byte records and within a tenth (and two bytes) of the
    /// smallest kind.
    #[test]
    fn every_chunk_kind_reads_back_and_trims(runs in chunk_runs(), cut in 0..100usize, pick in any::<u64>()) {
        let last_score = runs.last().map(|r| r.score).unwrap_or(0);
        let cutoff = runs.get(cut % runs.len()).map(|r| r.score).unwrap_or(0).min(last_score - 1);
        let (best, best_len) = best_kind(&runs);
        let mut smallest = usize::MAX;
        for kind in std::iter::once(BYTES).chain(1..=MAX_RICE_K as u8 + 1) {
            let c = Chunk::from_runs_as(&runs, kind).unwrap();
            prop_assert_eq!(c.decode(), runs.clone(), "kind {}", kind);
            let mut t = c.clone();
            let removed = t.trim_front(cutoff);
            let kept: Vec<Run> = runs.iter().copied().filter(|r| r.score > cutoff).collect();
            let gone: u64 = runs.iter().filter(|r| r.score <= cutoff).map(|r| r.count).sum();
            prop_assert_eq!(removed, gone, "kind {}", kind);
            prop_assert_eq!(t.decode(), kept, "kind {}", kind);
            smallest = smallest.min(c.bytes.len());
            // An UNDO of a member of the last run, in place; then the
            // chunk still appends.
            let last = *runs.last().unwrap();
            let id = last.first + (pick % last.count) as i64;
            let mut u = c.clone();
            prop_assert_eq!(u.remove_from_last(id), runs.len() > 1, "kind {}", kind);
            if runs.len() > 1 {
                let mut want = runs.clone();
                want.pop();
                if id > last.first {
                    want.push(Run { count: (id - last.first) as u64, ..last });
                }
                if id < last.last() {
                    want.push(Run { first: id + 1, count: (last.last() - id) as u64, ..last });
                }
                prop_assert_eq!(u.decode(), want.clone(), "kind {} undo {}", kind, id);
                // The free bits of the last byte are zeros, as `BitWriter`
                // needs (it ORs the next record in).
                if u.kind != BYTES && u.pad > 0 {
                    let free = u.bytes.last().map_or(0, |b| b >> (8 - u.pad));
                    prop_assert_eq!(free, 0, "kind {} undo {}", kind, id);
                }
                prop_assert_eq!(u.entries, want.iter().map(|r| r.count).sum::<u64>());
                prop_assert_eq!(u.runs as usize, want.len());
                // The open run grows as `insert` grows it (an entry in the
                // same millisecond), so its record differs from the bytes
                // it was cut from; then two more runs are written.
                let grown = u.last.count + 3;
                u.last.count = grown;
                u.entries += 3;
                if let Some(w) = want.last_mut() {
                    w.count = grown;
                }
                let tail = want.last().map(|r| r.last()).unwrap_or(0);
                let score = last.score + 5;
                for more in [Run { score, first: tail + 10, count: 1 }, Run { score: score + 1, first: tail + 11, count: 1 }] {
                    u.push(more);
                    want.push(more);
                }
                prop_assert_eq!(u.decode(), want, "kind {} undo {} then push", kind, id);
            }
            if kind == BYTES {
                prop_assert!(best_len <= c.bytes.len(), "the bytes take {}, kind {} {}", c.bytes.len(), best, best_len);
            }
            let mut s = c.clone();
            s.seal();
            prop_assert_eq!(s.kind, best);
            prop_assert_eq!(s.bytes.len(), best_len, "kind {}", best);
            prop_assert_eq!(s.decode(), runs.clone());
        }
        prop_assert!(best_len <= smallest + smallest / 10 + 2, "kind {} takes {}, the smallest {}", best, best_len, smallest);
    }
}

/// A sealed chunk of Poisson arrivals (1,024 runs, the production chunk) is
/// written as a Rice code near the entropy: about 1.25 bytes a run at
/// 10,000 an hour (a mean gap of 360 ms), against 1.7 for the bytes.
#[test]
fn a_sealed_chunk_of_poisson_arrivals_takes_a_rice_code() {
    use rand::{Rng, SeedableRng};
    for (per_hour, at_most) in [(10_000.0, 1.30), (1_000.0, 1.72)] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mean_gap = 3_600_000.0 / per_hour;
        let mut score = 1_796_000_000_000i64;
        let runs: Vec<Run> = (1..=1024)
            .map(|i| {
                let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
                score += 1 + (-u.ln() * mean_gap) as i64;
                Run {
                    score,
                    first: i,
                    count: 1,
                }
            })
            .collect();
        let c = Chunk::from_runs(&runs).unwrap();
        let per_run = c.bytes.len() as f64 / 1023.0;
        let bytes = Chunk::from_runs_as(&runs, BYTES).unwrap().bytes.len() as f64 / 1023.0;
        eprintln!(
            "{per_hour}/h: kind {} {per_run:.3} B/run (bytes {bytes:.3})",
            c.kind
        );
        assert_ne!(c.kind, BYTES);
        assert!(per_run <= at_most, "{per_run:.3} B/run at {per_hour}/h");
        assert!(per_run < bytes);
        assert_eq!(c.decode(), runs);
    }
}

/// A change or question on a small log, for the in-place path against the
/// chunks: the values are picked against the log as it is when the op runs.
#[derive(Debug, Clone)]
enum SmallOp {
    /// Trim at the score of the run `pick` (mod runs) plus `delta`.
    Trim(usize, i64),
    /// Add at the newest score plus `dt`, member the greatest plus `did`.
    Add(i64, i64),
    Expire(i64),
    Newest,
    Count,
}

fn small_op() -> impl Strategy<Value = SmallOp> {
    prop_oneof![
        2 => (any::<usize>(), prop_oneof![Just(0i64), Just(-1), Just(1), Just(i64::MIN / 2), Just(i64::MAX / 2)])
            .prop_map(|(p, d)| SmallOp::Trim(p, d)),
        5 => (prop_oneof![4 => Just(0i64), 4 => 1..200i64, 1 => 16_000..17_000i64, 1 => -50..0i64],
              prop_oneof![6 => Just(1i64), 1 => 2..4i64, 1 => -3..1i64])
            .prop_map(|(dt, did)| SmallOp::Add(dt, did)),
        2 => prop_oneof![0..100i64, 1_796_000_000_000..1_796_000_100_000i64, Just(-1i64), Just(i64::MAX), Just(i64::MIN)]
            .prop_map(SmallOp::Expire),
        1 => Just(SmallOp::Newest),
        1 => Just(SmallOp::Count),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The small form changed in place (`small.rs`) answers and ends as the
    /// same log promoted to chunks does, byte for byte, and its block is
    /// never larger than the chunked path would give it.
    #[test]
    fn the_small_form_changes_in_place_as_the_chunks_do(
        runs in chunk_runs(),
        keep in 0..14usize,
        expiry in proptest::option::of(0..1_796_000_000_000i64),
        ops in proptest::collection::vec(small_op(), 1..14),
    ) {
        let runs: Vec<Run> = runs.into_iter().take(keep).collect();
        let start = CompactLog {
            repr: Repr::Small(SmallForm::from_slice(&Chunked::from_runs(&runs, expiry).encode()).unwrap()),
        };
        let (mut fast, mut slow) = (start.clone(), start);
        let (mut hf, mut hs) = (Hold::default(), Hold::default());
        hf.on(&mut fast).expand();
        prop_assert!(hf.small.is_some(), "a small form is held in place");
        hs.on(&mut slow).expand();
        hs.on(&mut slow).promote();
        let mut changed = false;
        for op in ops {
            let now = slow.runs();
            match op {
                SmallOp::Trim(pick, delta) => {
                    let base = if now.is_empty() { 0 } else { now[pick % now.len()].score };
                    let cut = base.saturating_add(delta);
                    let (a, b) = (hf.on(&mut fast).trim(cut).unwrap(), hs.on(&mut slow).trim(cut).unwrap());
                    prop_assert_eq!(a, b);
                    changed |= a > 0;
                }
                SmallOp::Add(dt, did) => {
                    let newest = now.iter().map(|r| r.score).max().unwrap_or(1_000);
                    let greatest = now.iter().map(|r| r.last()).max().unwrap_or(0);
                    let (at, id) = (newest.saturating_add(dt).max(0), greatest.saturating_add(did));
                    let (a, b) = (hf.on(&mut fast).add(at, id).unwrap(), hs.on(&mut slow).add(at, id).unwrap());
                    prop_assert_eq!(a, b);
                    changed |= a;
                }
                SmallOp::Expire(at) => {
                    hf.on(&mut fast).expire_at(at).unwrap();
                    hs.on(&mut slow).expire_at(at).unwrap();
                    changed = true;
                }
                SmallOp::Newest => prop_assert_eq!(hf.on(&mut fast).newest_entry().unwrap(), hs.on(&mut slow).newest_entry().unwrap()),
                SmallOp::Count => prop_assert_eq!(hf.on(&mut fast).count().unwrap(), hs.on(&mut slow).count().unwrap()),
            }
            prop_assert_eq!(hf.count(&fast), hs.count(&slow));
        }
        let in_place = hf.small.is_some();
        hf.settle(&mut fast);
        hs.settle(&mut slow);
        prop_assert_eq!(fast.runs(), slow.runs());
        prop_assert_eq!(fast.expire_at_ms(), slow.expire_at_ms());
        prop_assert_eq!(fast.encode(), slow.encode());
        if let (true, Repr::Small(a), Repr::Small(b)) = (in_place, &fast.repr, &slow.repr) {
            prop_assert_eq!(a.bytes(), b.bytes());
            // In place when the bytes fit there, as the chunked path leaves them.
            prop_assert_eq!(a.block_len() == 0, a.len() <= INLINE);
            prop_assert_eq!(b.block_len() == 0, b.len() <= INLINE);
            if changed {
                prop_assert!(a.block_len() <= rounded(a.len()).max(b.block_len()),
                    "block {} for {} bytes (chunked path: {})", a.block_len(), a.len(), b.block_len());
            }
        }
    }
}

/// The in-place path is the one a command on a small log takes: expanded,
/// trimmed, added to and given an expiry, it never became chunks.
#[test]
fn a_check_on_a_small_log_stays_in_its_small_form() {
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    let rule = Rule::new(5, 60_000);
    for i in 0..4i64 {
        hold.on(&mut log).expand();
        let v = window::check(
            &mut hold.on(&mut log),
            1_796_000_000_000 + i * 30_000,
            &rule,
            Want::default(),
        )
        .unwrap();
        assert!(v.allowed);
        assert!(hold.small.is_some(), "call {i} left the small form");
        hold.settle(&mut log);
    }
    // The first two entries have left the window of the fourth call.
    assert_eq!(log.count_entries(), 2);
    assert_eq!(
        log.encode(),
        Chunked::decode(&log.encode()).unwrap().encode()
    );
}

/// The request ids the charge tests use: a few, so that calls repeat them.
fn request(i: u8) -> Vec<u8> {
    match i % 4 {
        0 => b"r0".to_vec(),
        1 => vec![0u8; MAX_REQUEST_ID],
        2 => b"\x00\xff binary".to_vec(),
        _ => format!("req-{i}").into_bytes(),
    }
}

/// A change to a log with charges made with an ID.
#[derive(Debug, Clone)]
enum ChargeChange {
    /// CHECK ... ID r at the clock: a repeat when the charge is there.
    Charge(u8, u64),
    /// SETTLE r units.
    Settle(u8, u64),
    /// UNDO ID r.
    UndoId(u8),
    /// UNDO of a member by id, or a token `<id>@<ms>` (any score).
    UndoMember(i64),
    /// A CHECK without an ID.
    Check(u64),
    /// SLIDEWIN.APPLY ... CHARGE r score first count (members anywhere).
    ApplyCharge(u8, i64, i64, u64),
    /// SLIDEWIN.APPLY ... CUT r units.
    ApplyCut(u8, u64),
    /// A trim (around the clock).
    Trim(i64),
    Reload,
    Clock(i64),
}

fn charge_change() -> impl Strategy<Value = ChargeChange> {
    prop_oneof![
        4 => (0..12u8, 1..5u64).prop_map(|(r, c)| ChargeChange::Charge(r, c)),
        3 => (0..12u8, 0..8u64).prop_map(|(r, u)| ChargeChange::Settle(r, u)),
        1 => (0..12u8).prop_map(ChargeChange::UndoId),
        2 => (0..40i64).prop_map(ChargeChange::UndoMember),
        2 => (1..4u64).prop_map(ChargeChange::Check),
        2 => (0..12u8, -100..20i64, 0..60i64, 1..4u64)
            .prop_map(|(r, s, f, c)| ChargeChange::ApplyCharge(r, s, f, c)),
        1 => (0..12u8, 0..4u64).prop_map(|(r, u)| ChargeChange::ApplyCut(r, u)),
        1 => (-300..0i64).prop_map(ChargeChange::Trim),
        1 => Just(ChargeChange::Reload),
        2 => prop_oneof![3 => 0..40i64, 1 => -300..0i64].prop_map(ChargeChange::Clock),
    ]
}

/// Every unit of every charge, as (score, member).
fn charged_entries(log: &CompactLog) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for r in log.charges() {
        for s in &r.spans {
            for i in 0..s.count as i64 {
                out.push((r.score, s.first + i));
            }
        }
    }
    out.sort_unstable();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Whatever charges, SETTLEs, UNDOs (by ID, by member, by token),
    /// APPLYs, trims and reloads a log goes through: every bound the
    /// loader checks holds after every step (a refused change changes
    /// nothing), the records load again the same, a charge's units are
    /// entries at its score, and an UNDO by member never removes one.
    #[test]
    fn charges_keep_every_bound_and_load_again(
        changes in proptest::collection::vec(charge_change(), 1..80),
    ) {
        use crate::store::compact::effect::Effect;
        let mut log = CompactLog::new();
        let mut now = 1_000_000i64;
        for change in changes {
            let before = log.clone();
            let refused = |r: Result<(), String>, log: &CompactLog| -> Result<(), TestCaseError> {
                if let Err(e) = r {
                    prop_assert!(e.starts_with("ERR "), "{e}");
                    prop_assert_eq!(log, &before, "a refused change changed the log");
                }
                Ok(())
            };
            match change {
                ChargeChange::Charge(r, cost) => {
                    let req = request(r);
                    if log.charge_of(&req).is_none() {
                        let res = log.add_charge_units(&req, now, cost).map(|_| ()).map_err(|b| format!("ERR {b}"));
                        refused(res, &log)?;
                        if log != before {
                            let (s, units) = log.charge_of(&req).expect("the charge was made");
                            prop_assert_eq!(units, cost);
                            prop_assert!(s >= now);
                        }
                    }
                }
                ChargeChange::Settle(r, units) => {
                    let req = request(r);
                    if let Some((s, held)) = log.charge_of(&req) {
                        let res = if units > held {
                            log.add_charge_units(&req, s, units - held).map(|_| ())
                        } else {
                            log.cut_charge(&req, units).map(|_| ())
                        };
                        let res = res.map_err(|b| format!("ERR {b}"));
                        let ok = res.is_ok();
                        refused(res, &log)?;
                        if ok {
                            let after = log.charge_of(&req);
                            if units == 0 {
                                prop_assert_eq!(after, None);
                            } else {
                                prop_assert_eq!(after, Some((s, units)));
                            }
                            prop_assert_eq!(
                                log.count_entries() as i128 - before.count_entries() as i128,
                                units as i128 - held as i128
                            );
                        }
                    }
                }
                ChargeChange::UndoId(r) => {
                    let req = request(r);
                    let held = log.charge_of(&req).map_or(0, |c| c.1);
                    match log.cut_charge(&req, 0) {
                        Ok(n) => {
                            prop_assert_eq!(n, held);
                            prop_assert_eq!(log.charge_of(&req), None);
                            prop_assert_eq!(log.cut_charge(&req, 0), Ok(0));
                        }
                        Err(b) => refused(Err(format!("ERR {b}")), &log)?,
                    }
                }
                ChargeChange::UndoMember(id) => {
                    let charged = charged_entries(&log);
                    let _ = log.remove(id);
                    prop_assert_eq!(charged_entries(&log), charged, "UNDO by member took a charge's unit");
                }
                ChargeChange::Check(cost) => {
                    let rule = Rule { cost, ..Rule::new(20, 1000) };
                    let _ = window::check(&mut log, now, &rule, Want { detail: true, members: true });
                }
                ChargeChange::ApplyCharge(r, at, first, count) => {
                    let req = request(r);
                    let (score, first, count) = ((now + at).max(0).to_string(), first.to_string(), count.to_string());
                    let args: Vec<&[u8]> = vec![b"CHARGE", &req, score.as_bytes(), first.as_bytes(), count.as_bytes()];
                    let e = Effect::parse(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let res = e.apply(&mut log).map_err(|e| e.to_string());
                    refused(res, &log)?;
                }
                ChargeChange::ApplyCut(r, units) => {
                    let req = request(r);
                    let units = units.to_string();
                    let args: Vec<&[u8]> = vec![b"CUT", &req, units.as_bytes()];
                    let e = Effect::parse(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let res = e.apply(&mut log).map_err(|e| e.to_string());
                    refused(res, &log)?;
                }
                ChargeChange::Trim(at) => {
                    let _ = log.trim(now + at);
                    prop_assert!(log.charges().iter().all(|r| r.score > now + at));
                }
                ChargeChange::Reload => {
                    let again = CompactLog::decode(&log.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(again.charges(), log.charges());
                    log = again;
                }
                ChargeChange::Clock(step) => now += step,
            }
            // The loader's bounds, the records' index, units at their score.
            if let Err(e) = log.check() {
                return Err(TestCaseError::fail(e));
            }
            let records = log.charges();
            prop_assert!(records.len() <= MAX_CHARGES);
            prop_assert!(records.iter().all(|r| r.spans.len() <= MAX_CHARGE_SPANS));
            // Without a charge, the encoding is version 1.
            let bytes = log.encode();
            prop_assert_eq!(bytes.first().copied(), Some(if records.is_empty() { VERSION } else { VERSION_CHARGES }));
            sound(&mut log)?;
        }
    }

    /// Mangled version-2 payloads are refused or give a sound log.
    #[test]
    fn mangled_payloads_with_charges_are_refused_or_sound(
        costs in proptest::collection::vec(1..4u64, 1..6),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut log = CompactLog::new();
        for (i, &c) in costs.iter().enumerate() {
            log.add_charge_units(&request(i as u8), 1_000 + i as i64, c).unwrap();
        }
        let mut bytes = log.encode();
        prop_assert_eq!(bytes[0], VERSION_CHARGES);
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        if cut % 3 == 0 {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            if let Err(e) = log.check() {
                return Err(TestCaseError::fail(e));
            }
            sound(&mut log)?;
        }
    }
}

/// A charge's units: fresh ids above every other, one run, found by its
/// request id; a SETTLE up continues it when nothing came after, else a
/// new span at the charge's score; SETTLE down removes the highest units;
/// UNDO by ID removes exactly the charge, UNDO by member never a unit.
#[test]
fn a_charge_is_named_by_its_request_id() {
    let mut log = CompactLog::new();
    let rule = Rule::new(100, 10_000);
    let want = Want::default();
    window::check(&mut log, 1_000, &rule, want).unwrap();
    assert_eq!(log.add_charge_units(b"a", 1_005, 3), Ok(Some((1_005, 2))));
    assert_eq!(log.charge_of(b"a"), Some((1_005, 3)));
    assert_eq!(log.charge_of(b"b"), None);
    // Continued: the same span.
    assert_eq!(log.add_charge_units(b"a", 1_005, 2), Ok(Some((1_005, 5))));
    assert_eq!(log.charges()[0].spans, [Span { first: 2, count: 5 }]);
    // A later entry takes id 7: the next units are a new span, scored as
    // the charge.
    window::check(&mut log, 1_010, &rule, want).unwrap();
    assert_eq!(log.add_charge_units(b"a", 1_005, 2), Ok(Some((1_005, 8))));
    assert_eq!(
        log.charges()[0].spans,
        [Span { first: 2, count: 5 }, Span { first: 8, count: 2 }]
    );
    assert_eq!(log.count_entries(), 9);
    log.check().unwrap();
    // UNDO by member: never a unit, by id or by token.
    for id in [2, 5, 8, 9] {
        assert_eq!(log.remove(id), Ok(false));
    }
    assert_eq!(log.count_entries(), 9);
    // SETTLE down to 4: units 5..=7 go (ids 8, 9 and 6).
    assert_eq!(log.cut_charge(b"a", 4), Ok(3));
    assert_eq!(log.charges()[0].spans, [Span { first: 2, count: 4 }]);
    assert_eq!(
        log.entries().collect::<Vec<_>>(),
        [
            (1_000, 1),
            (1_005, 2),
            (1_005, 3),
            (1_005, 4),
            (1_005, 5),
            (1_010, 7)
        ]
    );
    log.check().unwrap();
    // UNDO ID: exactly the charge, once.
    assert_eq!(log.cut_charge(b"a", 0), Ok(4));
    assert_eq!(log.cut_charge(b"a", 0), Ok(0));
    assert_eq!(log.charge_of(b"a"), None);
    assert_eq!(log.entries().collect::<Vec<_>>(), [(1_000, 1), (1_010, 7)]);
    // Without a charge the log is small again, its encoding version 1.
    assert_eq!(log.encode()[0], VERSION);
    log.check().unwrap();
    // A trim past a charge's score forgets it with its entries.
    log.add_charge_units(b"z", 1_020, 2).unwrap();
    assert_eq!(log.trim(1_019), Ok(2));
    assert!(log.charge_of(b"z").is_some());
    assert_eq!(log.trim(1_020), Ok(2));
    assert_eq!(log.charge_of(b"z"), None);
    log.check().unwrap();
}

/// The bounds on charges (how many, spans each, the request id's length)
/// are refused at every change, changing nothing, and by the loader.
#[test]
fn charges_have_bounds_the_loader_and_every_change_check() {
    let mut log = CompactLog::new();
    assert_eq!(log.add_charge_units(b"", 1, 1), Err(Bound::RequestId));
    assert_eq!(
        log.add_charge_units(&[7u8; MAX_REQUEST_ID + 1], 1, 1),
        Err(Bound::RequestId)
    );
    assert_eq!(
        Bound::RequestId.message(),
        format!("ID must be 1 to {MAX_REQUEST_ID} bytes")
    );
    for i in 0..MAX_CHARGES {
        log.add_charge_units(format!("r{i:04}").as_bytes(), 1_000, 1)
            .unwrap();
    }
    let before = log.clone();
    assert_eq!(
        log.add_charge_units(b"one more", 1_000, 1),
        Err(Bound::Charges)
    );
    assert_eq!(log, before);
    // An existing charge still grows (no new record).
    log.add_charge_units(b"r0000", 1_000, 1).unwrap();
    log.check().unwrap();
    // Spans: each SETTLE up with an entry after it makes one more.
    let mut log = CompactLog::new();
    log.add_charge_units(b"s", 1_000, 1).unwrap();
    for i in 1..MAX_CHARGE_SPANS as i64 {
        log.add_charge_units(b"t", 1_000 + i, 1).unwrap();
        log.add_charge_units(b"s", 1_000, 1).unwrap();
    }
    assert_eq!(log.charges()[0].spans.len(), MAX_CHARGE_SPANS);
    log.add_charge_units(b"t2", 2_000, 1).unwrap();
    let before = log.clone();
    assert_eq!(
        log.add_charge_units(b"s", 1_000, 1),
        Err(Bound::ChargeSpans)
    );
    assert_eq!(log, before);
    log.check().unwrap();
    // The loader: one span more is refused.
    let mut bytes = log.encode();
    let rec_spans_at = {
        // The record of "s": find the span count byte after its score.
        let key = [1u8, b's'];
        let at = bytes
            .windows(2)
            .position(|w| w == key)
            .expect("the record of s");
        at + 2 + 2 // length, id, score (2 bytes: 1000)
    };
    assert_eq!(bytes[rec_spans_at] as usize, MAX_CHARGE_SPANS);
    bytes[rec_spans_at] += 1;
    assert_eq!(
        CompactLog::decode(&bytes),
        Err(DecodeError::Bound(Bound::ChargeSpans))
    );
}

/// SLIDEWIN.APPLY's CHARGE and CUT reach the same log and charges as the
/// calls that made them, and are refused whole when wrong.
#[test]
fn charge_effects_reproduce_the_log() {
    use crate::store::compact::effect::Effect;
    let mut master = CompactLog::new();
    let mut replica = CompactLog::new();
    let ship = |e: &Effect, replica: &mut CompactLog| {
        let args = e.to_args();
        let words: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let parsed = Effect::parse(&words).unwrap();
        assert_eq!(&parsed, e);
        parsed.apply(replica).unwrap();
    };
    let mut e = Effect::default();
    let (score, first) = master.add_charge_units(b"req", 5_000, 3).unwrap().unwrap();
    e.record_charge(b"req", score, first, 3);
    ship(&e, &mut replica);
    let mut e = Effect::default();
    master.add_charge_units(b"other", 5_001, 1).unwrap();
    e.record_charge(b"other", 5_001, 4, 1);
    let (score, first) = master.add_charge_units(b"req", 5_000, 2).unwrap().unwrap();
    e.record_charge(b"req", score, first, 2);
    ship(&e, &mut replica);
    assert_eq!(replica, master);
    assert_eq!(replica.charges(), master.charges());
    let mut e = Effect::default();
    master.cut_charge(b"req", 1).unwrap();
    e.record_cut(b"req", 1);
    ship(&e, &mut replica);
    assert_eq!(replica, master);
    replica.check().unwrap();
    // Refusals: no such charge, more units than held, another score, a
    // unit by REMOVE, a request id too long.
    let before = replica.clone();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"CUT", b"nope", b"0"],
            "ERR CUT request-id 'nope' names no charge in the log",
        ),
        (
            &[b"CUT", b"req", b"2"],
            "ERR CUT units must be an integer between 0 and 1",
        ),
        (
            &[b"CHARGE", b"req", b"5003", b"100", b"1"],
            "ERR CHARGE score_ms must be the charge's own score, 5000",
        ),
        (
            &[b"REMOVE", b"1"],
            "ERR REMOVE member 1 is a unit of a charge made with an ID",
        ),
        (
            &[b"CHARGE", b"x", b"5003", b"4", b"1"],
            "ERR ADD members 4 to 4 are already in the log",
        ),
    ];
    for (args, expected) in cases {
        let err = Effect::parse(args)
            .unwrap()
            .apply(&mut replica)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(expected), "{err}");
        assert_eq!(replica, before);
    }
    let long = vec![b'x'; MAX_REQUEST_ID + 1];
    let err = Effect::parse(&[b"CUT", &long, b"0"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("ERR CUT request-id must be 1 to {MAX_REQUEST_ID} bytes")
    );
    assert_eq!(
        Effect::parse(&[b"CHARGE"]).unwrap_err().to_string(),
        "ERR CHARGE needs a request id"
    );
}

/// A SETTLE raising an older charge never fails for the layout: where its
/// new units at the charge's own score would pass the bound on runs out of
/// member order (or on a charge's runs of ids), the whole charge moves to
/// the newest score; its effect (CUT to 0, then CHARGE) reaches a replica,
/// applied in place, to the same log.
#[test]
fn raising_an_older_charge_never_fails_for_the_layout() {
    use crate::store::compact::effect::Effect;
    let mut master = CompactLog::new();
    let mut replica = CompactLog::new();
    let ship = |e: &Effect, replica: &mut CompactLog| {
        let args = e.to_args();
        let words: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        Effect::parse(&words).unwrap().apply(replica).unwrap();
    };
    // Charges one a millisecond; each raise of an older one puts a run out
    // of member order, up to the bound, then moves.
    let n = MAX_CHARGES as i64;
    for i in 0..n {
        let mut e = Effect::default();
        let request = format!("c{i:03}");
        let r = master
            .raise_charge(request.as_bytes(), 10_000 + i, 0, 1)
            .unwrap()
            .unwrap();
        assert!(!r.moved);
        e.record_charge(request.as_bytes(), r.score, r.first, r.count);
        ship(&e, &mut replica);
    }
    let mut moved = 0;
    for i in 0..n - 1 {
        let request = format!("c{i:03}");
        let before = master.charge_of(request.as_bytes()).unwrap();
        let base = master.clone();
        let r = master
            .raise_charge(request.as_bytes(), 0, 1, 2)
            .unwrap()
            .unwrap();
        let mut e = Effect::default();
        if r.moved {
            moved += 1;
            // Moved whole, to the newest score, later never earlier.
            assert_eq!(r.count, 2);
            assert!(r.score >= before.0);
            e.record_cut(request.as_bytes(), 0);
        } else {
            assert_eq!(r.score, before.0);
        }
        e.record_charge(request.as_bytes(), r.score, r.first, r.count);
        assert_eq!(master.charge_of(request.as_bytes()).unwrap().1, 2);
        // The replica's step fits its log as it is: applied in place.
        let (req, run) = &e.charges()[0];
        if r.moved {
            assert!(base.move_fits(req, run));
        } else {
            assert!(base.charge_fits(req, run));
        }
        ship(&e, &mut replica);
        assert_eq!(replica, master);
        assert_eq!(replica.charges(), master.charges());
        master.check().unwrap();
    }
    assert!(moved > 0, "no raise reached the bound");
    let (_, strays) = master.shape();
    assert!(strays <= MAX_STRAYS);
}
