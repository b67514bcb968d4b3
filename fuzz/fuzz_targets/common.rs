//! What the fuzz targets share: the oracle a log must pass (the round trip
//! through the encoding and the hostile decoder, every invariant, queries
//! that answer without a panic and agree with the runs), and the split of
//! an input into command words.
#![allow(dead_code)]

use slidewin::store::compact::{canonical_by_sorting, CompactLog, MAX_ENTRIES};
use slidewin::window::{self, Rule, Want, WindowLog};

/// Splits an input into words at each `\n` (a word may be empty). A word
/// `x:` followed by hex digits is those bytes (payloads with any byte, as
/// the seeds write them); anything else is taken as it is.
pub fn words(data: &[u8]) -> Vec<Vec<u8>> {
    data.split(|&b| b == b'\n')
        .map(|w| match w.strip_prefix(b"x:").and_then(unhex) {
            Some(bytes) => bytes,
            None => w.to_vec(),
        })
        .collect()
}

fn unhex(hex: &[u8]) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

/// Panics unless `log` holds every invariant, encodes to bytes the hostile
/// decoder takes back as the same log (and the same bytes again), and
/// answers every query consistently with its runs.
pub fn sound(log: &CompactLog) {
    if let Err(e) = log.check() {
        panic!("an invariant fails: {e}");
    }
    let bytes = log.encode();
    let again = match CompactLog::decode(&bytes) {
        Ok(l) => l,
        Err(e) => panic!("the log's own encoding is refused: {e}"),
    };
    assert!(again == *log, "encode then decode gives another log");
    assert_eq!(again.encode(), bytes, "the encoding is not stable");
    assert_eq!(again.expire_at_ms(), log.expire_at_ms());

    let runs = log.runs();
    assert!(
        runs.windows(2).all(|w| w[0].score <= w[1].score),
        "runs out of score order"
    );
    assert!(runs.iter().all(|r| r.count >= 1 && r.first >= 0));
    let total = runs.iter().try_fold(0u64, |t, r| t.checked_add(r.count));
    let Some(total) = total else {
        panic!("entries overflow");
    };
    assert!(total <= MAX_ENTRIES);
    assert_eq!(log.count_entries(), total);
    let mut ranges: Vec<(i64, u64)> = runs.iter().map(|r| (r.first, r.count)).collect();
    ranges.sort_unstable();
    assert!(
        ranges
            .windows(2)
            .all(|w| i128::from(w[0].0) + i128::from(w[0].1) <= i128::from(w[1].0)),
        "a member twice"
    );
    assert_eq!(
        log.canonical_runs(),
        canonical_by_sorting(&runs),
        "canonical runs"
    );

    let mut q = log.clone();
    let oldest = runs.first().map_or(0, |r| r.score);
    let newest = runs.last().map_or(0, |r| r.score);
    let count = |q: &mut CompactLog, cutoff: i64| q.count_above(cutoff).unwrap_or(u64::MAX);
    assert_eq!(count(&mut q, i64::MIN), total);
    assert_eq!(count(&mut q, newest), 0);
    let above_oldest: u64 = runs
        .iter()
        .filter(|r| r.score > oldest)
        .map(|r| r.count)
        .sum();
    assert_eq!(count(&mut q, oldest), above_oldest);
    assert_eq!(q.entries_above(oldest), above_oldest);
    if total > 0 {
        let first = q.nth_above(i64::MIN, 1, total).ok().flatten();
        assert_eq!(first, Some(oldest as f64), "the first entry");
        let last = q.nth_above(i64::MIN, total, total).ok().flatten();
        assert_eq!(last, Some(newest as f64), "the last entry");
        let newest_entry = q.newest_entry().ok().flatten().map(|(s, _)| s);
        assert_eq!(newest_entry, Some(newest as f64), "the newest entry");
        assert_eq!(q.newest_above(i64::MIN).ok().flatten(), Some(newest as f64));
    } else {
        assert_eq!(q.newest_entry().ok().flatten(), None);
    }
    assert_eq!(
        q.nth_above(i64::MIN, total.saturating_add(1), total)
            .ok()
            .flatten(),
        None
    );
    // Members: each run's ends are there (the first 64 runs: a log may
    // hold thousands), the ids around them only where no run holds them.
    for r in runs.iter().take(64) {
        assert!(
            q.has_member(r.first).unwrap_or(false),
            "member {} lost",
            r.first
        );
        assert!(
            q.has_member(r.last()).unwrap_or(false),
            "member {} lost",
            r.last()
        );
        for id in [r.first.checked_sub(1), r.last().checked_add(1)]
            .into_iter()
            .flatten()
        {
            let held = runs.iter().any(|o| o.first <= id && id <= o.last());
            assert_eq!(q.has_member(id).unwrap_or(!held), held, "member {id}");
        }
    }
    assert!(q == *log, "a query changed the log");

    // A decision on the log (it may trim and add): what it leaves is sound
    // too, except past the bounds, where it must leave the log unchanged.
    for (limit, cost) in [(5, 1), (1_000, 3)] {
        let mut d = log.clone();
        let rule = Rule {
            cost,
            ..Rule::new(limit, 1_000)
        };
        let want = Want {
            detail: true,
            members: true,
        };
        let _ = window::check(&mut d, newest, &rule, want);
        let _ = window::peek(&mut d, newest, &rule);
        if let Err(e) = d.check() {
            panic!("after a CHECK: {e}");
        }
        let bytes = d.encode();
        assert!(
            CompactLog::decode(&bytes).ok().as_ref() == Some(&d),
            "after a CHECK: no round trip"
        );
    }
}
