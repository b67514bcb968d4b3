//! The member ids a call gives: short ones counting up, wide ones when
//! taken, the same picks as before in O(cost x keys) probes, a bounded search.

use super::super::ids::*;
use super::super::log::*;
use super::super::mcheck::*;
use super::super::memory::*;
use super::support::check;
use super::support::*;
use crate::member;
use proptest::prelude::*;

#[test]
fn member_ids_are_short_and_count_up() {
    let mut log = MemoryLog::default();
    let r = with_members(100, 1_000, 1);
    let ids: Vec<i64> = (0..3)
        .flat_map(|i| unwrap(check(&mut log, 10 + i, &r)).members)
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    let v = unwrap(check(&mut log, 20, &with_members(100, 1_000, 3)));
    assert_eq!(v.members, [4, 5, 6]);
    // Once every entry expired, the key starts over.
    let v = unwrap(check(&mut log, 5_000, &r));
    assert_eq!(v.members, [1]);
}

#[test]
fn a_taken_short_id_falls_back_to_a_wide_one() {
    // Newest entry 9 at the same score as 10: "9" sorts last, so the short
    // id 10 is taken and the entry gets a wide id; the one after counts on.
    let mut log = MemoryLog {
        scores: vec![50.0, 50.0],
        members: vec![10, 9],
        ..MemoryLog::default()
    };
    let v = unwrap(check(&mut log, 50, &with_members(100, 1_000, 2)));
    assert_eq!(v.members.len(), 2);
    assert!(v.members[0] >= 1 << crate::member::SEQ_BITS, "{v:?}");
    assert_eq!(v.members[1], v.members[0] + 1);
    let mut unique = log.members.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 4);
}

// ---- Member ids: the same picks as before, in O(cost x keys) probes ----

/// Wide ids as the server makes them (`member::member_id(now, seq)`), from
/// a known sequence number on, so that two runs see the same ones.
struct TestIds {
    seq: u64,
}

impl WideIds for TestIds {
    fn fresh(&mut self, now_ms: i64) -> i64 {
        self.seq += 1;
        crate::member::member_id(now_ms, self.seq - 1)
    }
}

/// A log that counts the member lookups and adds made on it.
#[derive(Debug, Default, Clone)]
struct Counted {
    log: MemoryLog,
    probes: u64,
}

impl WindowLog for Counted {
    type Error = NoFreeMember;
    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        self.log.trim(cutoff_ms)
    }
    fn count(&self) -> Result<u64, NoFreeMember> {
        self.log.count()
    }
    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        self.log.count_above(cutoff_ms)
    }
    fn nth_above(&mut self, c: i64, k: u64, n: u64) -> Result<Option<f64>, NoFreeMember> {
        self.log.nth_above(c, k, n)
    }
    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, NoFreeMember> {
        self.log.newest_above(min_ms)
    }
    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
        self.log.newest_entry()
    }
    fn has_member(&mut self, id: i64) -> Result<bool, NoFreeMember> {
        self.probes += 1;
        self.log.has_member(id)
    }
    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, NoFreeMember> {
        self.probes += 1;
        self.log.add(now_ms, id)
    }
    fn expire_at(&mut self, at_ms: i64) -> Result<(), NoFreeMember> {
        self.log.expire_at(at_ms)
    }
    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, NoFreeMember> {
        self.log.charge(request)
    }
    fn add_units(&mut self, r: &[u8], s: f64, held: u64, to: u64) -> Result<(), NoFreeMember> {
        self.log.add_units(r, s, held, to)
    }
    fn remove_units(&mut self, r: &[u8], keep: u64, held: u64) -> Result<u64, NoFreeMember> {
        self.log.remove_units(r, keep, held)
    }
}

/// The member search as it was at 65f4bb8 (a scan of the ids chosen so far
/// for every probe, each wide search from its fresh id): the reference the
/// new search must agree with, id for id.
mod before {
    use super::*;

    fn first_free(
        start: i64,
        tries: u64,
        mut take: impl FnMut(i64) -> Result<bool, NoFreeMember>,
    ) -> Result<i64, NoFreeMember> {
        let mut id = start;
        for _ in 0..=tries {
            if take(id)? {
                return Ok(id);
            }
            id = member::next(id);
        }
        Err(NoFreeMember)
    }

    fn free_everywhere<L: WindowLog<Error = NoFreeMember>>(
        logs: &mut [L],
        ids: &[i64],
        id: i64,
    ) -> Result<bool, NoFreeMember> {
        if ids.contains(&id) {
            return Ok(false);
        }
        for log in logs.iter_mut() {
            if log.has_member(id)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn shared_members<L: WindowLog<Error = NoFreeMember>>(
        logs: &mut [L],
        now_ms: i64,
        count: u64,
        first: i64,
        wide: &mut impl WideIds,
    ) -> Result<Vec<i64>, NoFreeMember> {
        let mut ids: Vec<i64> = Vec::new();
        let mut short = first;
        for _ in 0..count {
            let id = if free_everywhere(logs, &ids, short)? {
                short
            } else {
                let mut tries = count;
                for log in logs.iter() {
                    tries = tries.saturating_add(log.count()?);
                }
                first_free(wide.fresh(now_ms), tries, |id| {
                    free_everywhere(logs, &ids, id)
                })?
            };
            ids.push(id);
            short = member::next(id);
        }
        Ok(ids)
    }

    pub fn add_entries<L: WindowLog<Error = NoFreeMember>>(
        log: &mut L,
        now_ms: i64,
        cost: u64,
        first: i64,
        wide: &mut impl WideIds,
    ) -> Result<Vec<i64>, NoFreeMember> {
        let mut ids = Vec::new();
        let mut short = first;
        for _ in 0..cost {
            let id = if log.add(now_ms, short)? {
                short
            } else {
                let tries = log.count()?.saturating_add(cost);
                first_free(wide.fresh(now_ms), tries, |id| log.add(now_ms, id))?
            };
            short = member::next(id);
            ids.push(id);
        }
        Ok(ids)
    }
}

/// A log holding `members`, all scored `at`.
fn holding(members: &[i64], at: f64) -> Counted {
    Counted {
        log: MemoryLog {
            scores: vec![at; members.len()],
            members: members.to_vec(),
            ..MemoryLog::default()
        },
        probes: 0,
    }
}

const NOW: i64 = 1_795_996_800_000;
/// The sequence number the tests' first wide id has.
const SEQ0: u64 = 1_000;

/// Ids taken one in two from the first wide id on: `count` of them, at
/// `base + 1`, `base + 3`, ... (the first wide id itself is free).
fn one_in_two(count: usize) -> Vec<i64> {
    let base = crate::member::member_id(NOW, SEQ0);
    (0..count as i64).map(|i| base + 1 + 2 * i).collect()
}

#[test]
fn one_in_two_taken_wide_ids_cost_linear_probes() {
    // The short id 1 is taken, so the search goes wide; every wide id after
    // the first one is taken one in two. Before, each wide search started
    // one above the last one's start and probed every id it had already
    // seen: 2,000 ids took about 2,000,000 probes.
    let taken = one_in_two(2_000);
    let mut with_short = taken.clone();
    with_short.push(1);
    let cost = 2_000u64;

    let mut log = holding(&with_short, NOW as f64);
    let mut reference = log.clone();
    let got = unwrap(add_entries_ids(&mut log, cost, 1));
    let want = unwrap(before::add_entries(
        &mut reference,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    assert_eq!(got, want, "CHECK picks the same ids");
    assert!(
        log.probes <= 4 * (cost + taken.len() as u64),
        "CHECK: {} probes for {cost} ids (before: {})",
        log.probes,
        reference.probes
    );

    let mut logs = vec![holding(&with_short, NOW as f64), holding(&[], 0.0)];
    let mut reference = logs.clone();
    let got = unwrap(shared_members(
        &mut logs,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    let want = unwrap(before::shared_members(
        &mut reference,
        NOW,
        cost,
        1,
        &mut TestIds { seq: SEQ0 },
    ));
    assert_eq!(got, want, "MCHECK picks the same ids");
    let probes: u64 = logs.iter().map(|l| l.probes).sum();
    let before: u64 = reference.iter().map(|l| l.probes).sum();
    assert!(
        probes <= 4 * (cost + taken.len() as u64) * logs.len() as u64,
        "MCHECK: {probes} probes for {cost} ids on 2 keys (before: {before})"
    );
}

/// `add_entries` with the tests' wide ids, returning the ids added.
fn add_entries_ids(log: &mut Counted, cost: u64, first: i64) -> Result<Vec<i64>, NoFreeMember> {
    let mut ids = Vec::new();
    add_entries(
        log,
        NOW,
        cost,
        first,
        &mut TestIds { seq: SEQ0 },
        Some(&mut ids),
    )?;
    Ok(ids)
}

#[test]
fn chosen_ids_answer_as_the_list_does_at_every_size() {
    // Counting up from 40 (one range), then a break, counting up again,
    // then scattered ids, and the top of the range.
    let ids: Vec<i64> = (40..70)
        .chain(1_000..1_020)
        .chain((0..60).map(|i| i * 7 % 101))
        .chain([i64::MAX, i64::MAX - 1])
        .collect();
    let mut chosen = Chosen::with_capacity(ids.len() as u64);
    for (i, &id) in ids.iter().enumerate() {
        for probe in [id, id - 1, id.saturating_add(1), -id, 39, 70, 1_020] {
            assert_eq!(
                chosen.contains(probe),
                chosen.ids.contains(&probe),
                "after {i} ids, {probe}"
            );
        }
        chosen.push(id);
        assert!(chosen.contains(id));
    }
    assert_eq!(chosen.ids, ids);
    assert_eq!(chosen.run, (40, 70), "the first ids are one range");
}

#[test]
fn a_search_with_no_free_id_fails_as_before() {
    // A store that answers every id taken (an inconsistent one): both
    // searches give up after the same number of tries.
    let mut known = Unusable::default();
    let mut probes = 0;
    let r = first_free(10, 5, &mut known, |_| {
        probes += 1;
        Ok::<bool, NoFreeMember>(false)
    });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(probes, 6);
    // Again from inside the run just probed: nothing is probed twice, and
    // the answer is the same.
    let mut again = 0;
    let r = first_free(12, 5, &mut known, |_| {
        again += 1;
        Ok::<bool, NoFreeMember>(false)
    });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(again, 2, "16 and 17: 12..=15 are known taken");
    // Ids at the top of the range wrap to 0 without overflowing.
    let mut known = Unusable::default();
    let r = first_free(i64::MAX - 1, 3, &mut known, |id| {
        Ok::<bool, NoFreeMember>(id == 1)
    });
    assert_eq!(r, Ok(1));
}

/// Members for a test log: short ids near the first choice and wide ids
/// near the ones the tests' sequence gives, so that searches collide.
fn colliding_members() -> impl Strategy<Value = Vec<i64>> {
    let base = crate::member::member_id(NOW, SEQ0);
    proptest::collection::vec(
        prop_oneof![(1i64..40), (0i64..120).prop_map(move |d| base + d)],
        0..80,
    )
    .prop_map(|mut v| {
        v.sort_unstable();
        v.dedup();
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// MCHECK's and CHECK's member search pick exactly the ids the search
    /// of 65f4bb8 picked, on logs whose short and wide ids are taken here
    /// and there, never probing more.
    #[test]
    fn member_search_picks_what_it_picked_before(
        keys in proptest::collection::vec(colliding_members(), 1..4),
        first in 1i64..45,
        cost in 1u64..60,
    ) {
        let mut logs: Vec<Counted> = keys.iter().map(|m| holding(m, NOW as f64)).collect();
        let mut reference = logs.clone();
        let got = shared_members(&mut logs, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        let want = before::shared_members(&mut reference, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        prop_assert_eq!(&got, &want);
        let probes: u64 = logs.iter().map(|l| l.probes).sum();
        let before: u64 = reference.iter().map(|l| l.probes).sum();
        prop_assert!(probes <= before, "{} > {}", probes, before);

        let mut log = holding(&keys[0], NOW as f64);
        let mut reference = log.clone();
        let got = add_entries_ids(&mut log, cost, first);
        let want = before::add_entries(&mut reference, NOW, cost, first, &mut TestIds { seq: SEQ0 });
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(&log.log.members, &reference.log.members);
        prop_assert!(log.probes <= reference.probes);
    }
}

#[test]
fn a_long_run_of_taken_wide_ids_fails_after_a_bounded_search() {
    // 5,000 consecutive members from the first wide id on (a log written by
    // SLIDEWIN.APPLY can claim 2^40): the search gives up after
    // MAX_WIDE_TRIES probes instead of following the run.
    let base = crate::member::member_id(NOW, SEQ0);
    let mut taken: Vec<i64> = (0..5_000).map(|i| base + i).collect();
    taken.push(1);
    let mut log = holding(&taken, NOW as f64);
    assert_eq!(add_entries_ids(&mut log, 1, 1), Err(NoFreeMember));
    assert_eq!(
        log.probes,
        1 + MAX_WIDE_TRIES,
        "the short id, then the wide ones"
    );
    let mut logs = vec![holding(&taken, NOW as f64)];
    let r = shared_members(&mut logs, NOW, 1, 1, &mut TestIds { seq: SEQ0 });
    assert_eq!(r, Err(NoFreeMember));
    assert_eq!(logs[0].probes, 1 + MAX_WIDE_TRIES);
}
