//! What the compact log's tests share: the sorted-set model's views,
//! the random calls, the cases per property, the soundness check.

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::codec::*;
use super::super::log::*;
use super::super::run::*;
use crate::window::WindowLog;
use crate::window::{self, MemoryLog, Rule, Want};

/// UNDO on the model: removes member `id`.
pub(super) fn model_remove(log: &mut MemoryLog, id: i64) -> bool {
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
pub(super) fn comparable(id: i64) -> i64 {
    if id >= 1 << 40 {
        -(id >> 20)
    } else {
        id
    }
}

pub(super) fn comparable_all(ids: &[i64]) -> Vec<i64> {
    ids.iter().map(|&m| comparable(m)).collect()
}

/// The model's entries as (score, member), sorted.
pub(super) fn model_entries(log: &MemoryLog) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = log
        .scores
        .iter()
        .zip(&log.members)
        .map(|(&s, &m)| (s as i64, comparable(m)))
        .collect();
    v.sort_unstable();
    v
}

pub(super) fn compact_entries(log: &CompactLog) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = log.entries().map(|(s, m)| (s, comparable(m))).collect();
    v.sort_unstable();
    v
}

#[derive(Debug, Clone)]
pub(super) enum Op {
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

pub(super) fn op() -> impl Strategy<Value = Op> {
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
pub(super) fn cases() -> u32 {
    std::env::var("SLIDEWIN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// A word of an effect command: the options, integers near the edges and
/// near a log's own values, and junk.
pub(super) fn effect_word() -> impl Strategy<Value = Vec<u8>> {
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

/// What every query relies on, checked on a decoded log; then every query
/// and a CHECK run on it without a panic.
pub(super) fn sound(log: &mut CompactLog) -> Result<(), TestCaseError> {
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
    // Counted from the front (in what a trim would take): what the runs say.
    let mut cutoffs: Vec<i64> = runs.iter().flat_map(|r| [r.score - 1, r.score]).collect();
    cutoffs.extend([i64::MIN, i64::MAX, newest - 1000]);
    for cut in cutoffs {
        let above = runs
            .iter()
            .filter(|r| r.score > cut)
            .fold(0u64, |n, r| n.saturating_add(r.count));
        prop_assert_eq!(log.count_above(cut).unwrap(), above, "count_above({})", cut);
    }
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
