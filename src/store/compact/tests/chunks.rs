//! Chunks (every kind reads back and trims, the Rice code) and the small
//! form (changed in place as the chunks are).

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::chunk::*;
use super::super::chunked::*;
use super::super::log::*;
use super::super::rice::*;
use super::super::run::*;
use super::super::small::*;
use super::support::*;
use crate::window::WindowLog;
use crate::window::{self, Rule, Want};

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

proptest! {
    // About 1 in 100 chunks drawn has a single run and is skipped: as
    // many rejects allowed as cases (at the default 1,024, a run of
    // 100,000 cases aborted).
    #![proptest_config(ProptestConfig {
        max_global_rejects: cases(),
        ..ProptestConfig::with_cases(cases())
    })]

    /// An UNDO in the middle of a chunk, in place: the record of any run
    /// but the last replaced by what is left of it (nothing, a head, a
    /// tail, or both), found from the start or from where
    /// `record_holding` said, in every kind, after a trim or not: the
    /// chunk reads back the runs with the members taken out, its
    /// summaries agree, it still appends, and it seals the same.
    #[test]
    fn a_record_is_spliced_in_place(runs in chunk_runs(), pick in any::<u64>(), span in any::<u64>(), trim in any::<bool>(), located in any::<bool>(), marked in any::<bool>()) {
        prop_assume!(runs.len() > 1);
        let i = (pick % (runs.len() as u64 - 1)) as usize;
        let target = runs[i];
        let lo = target.first + ((span % target.count) as i64);
        let hi = lo + (((span >> 32) % (target.last() - lo + 1) as u64) as i64);
        for kind in std::iter::once(BYTES).chain(1..=MAX_RICE_K as u8 + 1) {
            let mut c = Chunk::from_runs_as(&runs, kind).unwrap();
            if marked {
                c.make_marks();
            }
            let mut want = runs.clone();
            // A trim before it (the front stepped past), when the target
            // is not the first run.
            let mut from = 0;
            if trim && i > 0 {
                let cutoff = runs[i - 1].score;
                if runs[i].score > cutoff {
                    c.trim_front(cutoff);
                    from = want.iter().filter(|r| r.score <= cutoff).count();
                }
            }
            let mut pieces = Vec::new();
            if lo > target.first {
                pieces.push(Run { count: (lo - target.first) as u64, ..target });
            }
            if hi < target.last() {
                pieces.push(Run { first: hi + 1, count: (target.last() - hi) as u64, ..target });
            }
            let place = if located {
                let (r, at) = c.record_holding(lo).expect("a record holds it");
                prop_assert_eq!(r, target);
                Some(at)
            } else {
                None
            };
            prop_assert_eq!(c.check_marks(), Ok(()), "kind {} trimmed", kind);
            prop_assert!(c.splice_record(target, &pieces, place), "kind {}", kind);
            prop_assert_eq!(c.check_marks(), Ok(()), "kind {} spliced", kind);
            want.splice(i..=i, pieces.iter().copied());
            let want: Vec<Run> = want.split_off(from);
            prop_assert_eq!(c.decode(), want.clone(), "kind {} lo {} hi {}", kind, lo, hi);
            prop_assert_eq!(c.runs as usize, want.len());
            prop_assert_eq!(c.entries, want.iter().map(|r| r.count).sum::<u64>());
            prop_assert_eq!(c.min_id, want[0].first);
            prop_assert_eq!(c.first_score(), want[0].score);
            prop_assert_eq!(c.max_id, want.last().unwrap().last());
            if c.kind != BYTES && c.pad > 0 {
                let free = c.bytes.last().map_or(0, |b| b >> (8 - c.pad));
                prop_assert_eq!(free, 0, "kind {}", kind);
            }
            // A run that is not a record is refused, changing nothing.
            let before = c.decode();
            let wider = Run { count: target.count + 1, ..target };
            prop_assert!(!c.splice_record(wider, &[], None));
            let last = *runs.last().unwrap();
            prop_assert!(!c.splice_record(last, &[], None));
            prop_assert_eq!(c.decode(), before);
            let tail = want.last().unwrap();
            let more = Run { score: tail.score + 1, first: tail.last() + 2, count: 1 };
            c.push(more);
            let mut want = want;
            want.push(more);
            prop_assert_eq!(c.decode(), want.clone(), "kind {} then push", kind);
            prop_assert_eq!(c.check_marks(), Ok(()), "kind {} pushed", kind);
            // The last record made the open run again (an UNDO of the
            // last run whole), from the last mark.
            if c.runs > 1 {
                let mut popped = c.clone();
                prop_assert!(popped.pop_record());
                prop_assert_eq!(popped.check_marks(), Ok(()), "kind {} popped", kind);
                want.pop();
                prop_assert_eq!(popped.decode(), want.clone(), "kind {} popped", kind);
                want.push(more);
            }
            c.seal();
            prop_assert_eq!(c.decode(), want, "kind {} sealed", kind);
        }
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
    /// Add at the greatest score a log holds (2^53), member the greatest
    /// plus `did`.
    AddTop(i64),
    Expire(i64),
    Newest,
    Count,
}

fn small_op() -> impl Strategy<Value = SmallOp> {
    prop_oneof![
        2 => (any::<usize>(), prop_oneof![Just(0i64), Just(-1), Just(1), Just(i64::MIN / 2), Just(i64::MAX / 2)])
            .prop_map(|(p, d)| SmallOp::Trim(p, d)),
        5 => (prop_oneof![4 => Just(0i64), 4 => 1..200i64, 1 => 16_000..17_000i64,
                          1 => 2_090_000..2_110_000i64, 1 => -50..0i64,
                          // Gaps past the 3-byte record, up to past the
                          // greatest score (refused alike).
                          1 => (1i64 << 21)..(1i64 << 45), 1 => Just(MAX_SCORE)],
              prop_oneof![6 => Just(1i64), 1 => 2..4i64, 1 => -3..1i64,
                          // Members far above, up to i64::MAX.
                          1 => (1i64 << 40)..(1i64 << 62), 1 => Just(i64::MAX)])
            .prop_map(|(dt, did)| SmallOp::Add(dt, did)),
        1 => prop_oneof![Just(1i64), Just(i64::MAX)].prop_map(SmallOp::AddTop),
        2 => prop_oneof![0..100i64, 1_796_000_000_000..1_796_000_100_000i64, Just(-1i64), Just(i64::MAX), Just(i64::MIN),
                         any::<i64>()]
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
        // Scores near the greatest a log holds, too.
        lift in prop_oneof![3 => Just(0i64), 1 => Just(MAX_SCORE - (1i64 << 51))],
        expiry in proptest::option::of(prop_oneof![3 => 0..1_796_000_000_000i64, 1 => any::<i64>(),
                                                   1 => Just(i64::MIN), 1 => Just(i64::MAX)]),
        ops in proptest::collection::vec(small_op(), 1..14),
    ) {
        let runs: Vec<Run> = runs
            .into_iter()
            .take(keep)
            .map(|r| Run { score: r.score.saturating_add(lift).min(MAX_SCORE), ..r })
            .collect();
        let start = CompactLog {
            repr: Repr::Small(SmallForm::from_slice(&{
                let mut own = Vec::new();
                Chunked::from_runs(&runs, expiry).encode_small_into(&mut own);
                own
            }).unwrap()),
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
            let op_shown = op.clone();
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
                SmallOp::AddTop(did) => {
                    let greatest = now.iter().map(|r| r.last()).max().unwrap_or(0);
                    let id = greatest.saturating_add(did);
                    let (a, b) = (hf.on(&mut fast).add(MAX_SCORE, id).unwrap(), hs.on(&mut slow).add(MAX_SCORE, id).unwrap());
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
            // Held in place: after each change, the very bytes the chunks
            // write for the runs (the summary agreeing with them).
            if let (Some(s), Repr::Small(f)) = (hf.small, &fast.repr) {
                let mut written = Vec::new();
                fast.view().encode_small_into(&mut written);
                prop_assert_eq!(f.bytes(), written.as_slice(), "after {:?}", op_shown);
                prop_assert_eq!(Some(s), scan(f.bytes()), "summary after {:?}", op_shown);
            }
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
