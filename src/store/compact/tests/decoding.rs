//! The encoding and the loader's bounds: no change passes a bound the
//! loader checks, the size of an entry, a member at i64::MAX, relocation
//! (the hostile-bytes properties are in `mod.rs`, where `make fuzz` names
//! them).

use super::super::bounds::*;
use super::super::chunked::*;
use super::super::codec::*;
use super::super::log::*;
use super::super::run::*;
use crate::window::WindowLog;
use crate::window::{self, Rule, Want};

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
