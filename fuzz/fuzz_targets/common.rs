//! What the fuzz targets share: the oracle a log must pass (the round trip
//! through the encoding and the hostile decoder, every invariant, queries
//! that answer without a panic and agree with the runs), and the split of
//! an input into command words.
#![allow(dead_code)]

use slidewin::fuzzing::compact::{canonical_by_sorting, CompactLog, Hold, MAX_ENTRIES};
use slidewin::fuzzing::window::{self, Rule, Want, WindowLog};

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

    // A decision on the log (it may trim and add), then an UNDO of the
    // oldest member, on the log alone and as a command holds it (a small
    // log changed in place): the same answers and the same log, sound.
    let oldest_member = runs.first().map_or(0, |r| r.first);
    // Windows whose cutoff falls exactly on a run's score (the oldest, the
    // middle one): an entry exactly a window old has left.
    let mid = runs.get(runs.len() / 2).map_or(0, |r| r.score);
    let exact = |from: i64| newest.saturating_sub(from).max(1);
    for (limit, cost, window_ms) in [(5, 1, 1_000), (1_000, 3, exact(oldest)), (5, 1, exact(mid))] {
        let rule = Rule {
            cost,
            ..Rule::new(limit, window_ms)
        };
        let cutoff = window::cutoff(newest, window_ms);
        let want = Want {
            detail: true,
            members: true,
        };
        let mut d = log.clone();
        let verdict = window::check(&mut d, newest, &rule, want);
        let peeked = window::peek(&mut d, newest, &rule);
        let undone = d.remove(oldest_member);

        let mut h = log.clone();
        let mut hold = Hold::default();
        let mut held = hold.on(&mut h);
        held.expand();
        let held_verdict = window::check(&mut held, newest, &rule, want);
        let held_peeked = window::peek(&mut held, newest, &rule);
        let held_undone = held.remove(oldest_member);
        hold.settle(&mut h);
        // New members are wide ids when the short one is taken, with a
        // sequence the whole process counts (member.rs): the two runs give
        // different ones, so members are compared by number, and the logs
        // by their scores and entries.
        let plain = |v: Result<window::Verdict, _>| {
            v.map(|v| {
                (
                    v.members.len(),
                    window::Verdict {
                        members: Vec::new(),
                        ..v
                    },
                )
            })
        };
        assert_eq!(plain(verdict), plain(held_verdict), "CHECK held");
        assert_eq!(peeked, held_peeked, "PEEK held");
        assert_eq!(undone, held_undone, "UNDO held");
        assert_eq!(scores(&d), scores(&h), "a held log ends elsewhere");
        assert_eq!(
            d.expire_at_ms(),
            h.expire_at_ms(),
            "a held log expires elsewhere"
        );
        for (how, d) in [("alone", &d), ("held", &h)] {
            if let Err(e) = d.check() {
                panic!("after a CHECK and an UNDO ({how}): {e}");
            }
            // The CHECK trimmed every entry at or before the cutoff (what
            // it added is scored after it).
            let mut left = d.clone();
            let above = left.count_above(cutoff).unwrap_or(u64::MAX);
            assert_eq!(
                above,
                d.count_entries(),
                "{how}: entries left at or before {cutoff}"
            );
            let bytes = d.encode();
            assert!(
                CompactLog::decode(&bytes).ok().as_ref() == Some(d),
                "after a CHECK and an UNDO ({how}): no round trip"
            );
        }
    }
}

/// The entries of each score, in score order.
fn scores(log: &CompactLog) -> Vec<(i64, u64)> {
    let mut out: Vec<(i64, u64)> = Vec::new();
    for r in log.runs() {
        match out.last_mut() {
            Some((s, n)) if *s == r.score => *n += r.count,
            _ => out.push((r.score, r.count)),
        }
    }
    out
}
