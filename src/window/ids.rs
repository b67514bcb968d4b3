//! The member ids a call gives its entries: the next id above the newest,
//! else a free wide id found by a bounded search.

use crate::member;

use super::log::*;

/// The most ids one search for a wide id probes (see `first_free`): ids
/// the call already knows taken are stepped over and not counted.
pub(super) const MAX_WIDE_TRIES: u64 = 1024;

/// Ids a call knows it cannot use: the run `from..to` of consecutive ids
/// it probed and found taken or took itself. Nothing frees an id during a
/// call, so a later search can step over the run without probing it again:
/// every wide search starts from a fresh id, one above the last search's
/// start, so without this a run of ids taken one in two would be searched
/// again from near its start each time, O(cost^2) probes in all.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Unusable {
    from: i64,
    to: i64,
}

impl Unusable {
    /// Notes that `id` is now known unusable: it extends the run when it is
    /// the id after it, else starts a new one (an id at the top of the
    /// range, after which ids wrap to 0, forgets the run instead).
    pub(super) fn note(&mut self, id: i64) {
        let Some(after) = id.checked_add(1) else {
            *self = Unusable::default();
            return;
        };
        if id != self.to || self.from == self.to {
            self.from = id;
        }
        self.to = after;
    }

    /// How many consecutive ids from `start` on are known unusable.
    pub(super) fn run_at(&self, start: i64) -> u64 {
        if (self.from..self.to).contains(&start) {
            self.to.abs_diff(start)
        } else {
            0
        }
    }
}

/// The first of `tries + 1` consecutive ids from `start` that `take`
/// accepts (`take` may also claim it, as an NX add does), stepping over the
/// ids `known` already holds unusable without probing them; with a
/// consistent store one is found, since fewer than `tries + 1` of them can
/// be taken. Probes the same ids as a plain scan would, less the known ones,
/// and finds the same id; but never more than `MAX_WIDE_TRIES` of them (a
/// log written by SLIDEWIN.APPLY may claim 2^40 consecutive members): then
/// it fails.
pub(super) fn first_free<E: From<NoFreeMember>>(
    start: i64,
    tries: u64,
    known: &mut Unusable,
    mut take: impl FnMut(i64) -> Result<bool, E>,
) -> Result<i64, E> {
    let skip = known.run_at(start);
    if skip > tries {
        return Err(NoFreeMember.into());
    }
    // `skip > 0` only inside the run, which ends at `known.to`.
    let mut id = if skip > 0 { known.to } else { start };
    for _ in (skip..=tries).take(MAX_WIDE_TRIES as usize) {
        let took = take(id)?;
        known.note(id);
        if took {
            return Ok(id);
        }
        id = member::next(id);
    }
    Err(NoFreeMember.into())
}

/// Where wide ids come from: [`member::fresh`] on the server; a
/// deterministic sequence in the tests. `above_fence` raises a call's first
/// short id above the ids an UNDO freed this millisecond
/// ([`member::fence`]; the tests have no fence).
pub trait WideIds {
    fn fresh(&mut self, now_ms: i64) -> i64;

    fn above_fence(&mut self, _now_ms: i64, first: i64) -> i64 {
        first
    }
}

/// The server's wide ids: [`member::fresh`], and its fence.
pub struct ServerIds;

impl WideIds for ServerIds {
    fn fresh(&mut self, now_ms: i64) -> i64 {
        member::fresh(now_ms)
    }

    fn above_fence(&mut self, now_ms: i64, first: i64) -> i64 {
        member::above_fence(now_ms, first)
    }
}

/// Adds `cost` entries scored `now_ms` to one log, choosing each member id
/// (see `member.rs`): the short id `first` and the ones after it, or a
/// wide id when one is taken; pushes the ids used onto `ids` when given.
pub(super) fn add_entries<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    cost: u64,
    first: i64,
    wide: &mut impl WideIds,
    mut ids: Option<&mut Vec<i64>>,
) -> Result<(), L::Error> {
    let mut short = first;
    let mut known = Unusable::default();
    for _ in 0..cost {
        let added = log.add(now_ms, short)?;
        known.note(short);
        let id = if added {
            short
        } else {
            // Taken: a wide id; among count + 1 consecutive ones one is free
            // in a log the module made. Bounded all the same: a log written
            // by SLIDEWIN.APPLY may claim 2^40 consecutive members, and a
            // call's cost must not follow (`first_free` probes at most
            // MAX_WIDE_TRIES ids, then fails as for any log with no free
            // member).
            let tries = log.count()?.saturating_add(cost);
            let start = wide.fresh(now_ms);
            first_free(start, tries, &mut known, |id| log.add(now_ms, id))?
        };
        // The next entry tries the id after this one.
        short = member::next(id);
        if let Some(ids) = ids.as_deref_mut() {
            ids.push(id);
        }
    }
    Ok(())
}

/// The newest entry's score, and the first member id to try after it.
/// When the newest member is not an id (an entry of a charge made with a
/// request id, or of the Lua script slidewin replaces), the first id tried
/// is one more than the number of entries: in a key whose ids count up
/// from 1 it is usually free, where 1 would usually be taken and send the
/// call to a 19-digit wide id.
pub(super) fn newest_and_first<L: WindowLog>(log: &mut L) -> Result<(Option<f64>, i64), L::Error> {
    let newest = log.newest_entry()?;
    let first = match newest {
        Some((_, None)) => i64::try_from(log.count()?)
            .unwrap_or(i64::MAX)
            .saturating_add(1),
        _ => member::first_choice(newest.and_then(|(_, id)| id)),
    };
    Ok((newest.map(|(score, _)| score), first))
}
