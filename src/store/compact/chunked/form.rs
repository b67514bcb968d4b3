//! The log as chunks and strays: the type, and reading the runs it holds.

use super::super::charge::*;
use super::super::chunk::*;
use super::super::run::*;

/// A log as chunks of chain runs in score order, the strays, their totals,
/// an upper bound of the members, and the expiry (see [`CompactLog`] for
/// when it is used).
#[derive(Debug, Clone, Default)]
pub(in crate::store::compact) struct Chunked {
    pub(in crate::store::compact) chunks: Vec<Chunk>,
    /// The runs out of member order, sorted by first member.
    pub(in crate::store::compact) strays: Vec<Run>,
    /// Entries and runs, in the chunks and the strays.
    pub(in crate::store::compact) entries: u64,
    pub(in crate::store::compact) runs: u64,
    /// No member is greater (a bound, not the maximum: removals leave it).
    pub(in crate::store::compact) max_id: Option<i64>,
    pub(in crate::store::compact) expire_at_ms: Option<i64>,
    /// While a small log is held as chunks (see [`CompactLog::expand`]):
    /// its small form's block, reused or given back by `settle`. Empty
    /// otherwise.
    pub(in crate::store::compact) stash: Vec<u8>,
    /// The charges made with an ID (see `charge/`); `None` when there is
    /// none (never an empty table).
    pub(in crate::store::compact) records: Option<Box<Records>>,
}

// One allocator class with the charge table's pointer (jemalloc: 128).
const _: () = assert!(std::mem::size_of::<Chunked>() <= 128);

/// Equal when they hold the same runs in the same order and expire alike,
/// however the runs are cut into chunks.
impl PartialEq for Chunked {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
            && self.expire_at_ms == other.expire_at_ms
            && self.records == other.records
            && self.runs() == other.runs()
    }
}

impl Eq for Chunked {}

/// A chain run's place in the canonical order (see the module comment).
pub(super) fn chain_key(r: &Run) -> (i64, i64) {
    (r.score, r.first)
}

/// Builds a log from runs in score order, splitting chain and strays as
/// the module comment says, with every bound checked: the decoder for
/// untrusted bytes, and the small form's promotion.
impl Chunked {
    /// The runs, in the canonical order.
    pub fn runs(&self) -> Vec<Run> {
        let mut out = Vec::with_capacity(usize::try_from(self.runs).unwrap_or(0));
        self.for_each_run(|r| out.push(r));
        out
    }

    /// Calls `f` on every run in the canonical order (the chain and the
    /// strays merged: strays first among equal scores).
    pub(in crate::store::compact) fn for_each_run(&self, mut f: impl FnMut(Run)) {
        if self.strays.is_empty() {
            for c in &self.chunks {
                c.for_each_run(&mut f);
            }
            return;
        }
        let mut strays = self.strays.clone();
        strays.sort_unstable_by(|a, b| {
            (a.score, std::cmp::Reverse(a.first)).cmp(&(b.score, std::cmp::Reverse(b.first)))
        });
        let mut next = strays.into_iter().peekable();
        for c in &self.chunks {
            c.for_each_run(|r| {
                while let Some(s) = next.next_if(|s| s.score <= r.score) {
                    f(s);
                }
                f(r);
            });
        }
        next.for_each(f);
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        self.entries
    }

    /// The score of the oldest entry, if any.
    pub(in crate::store::compact) fn oldest_score(&self) -> Option<i64> {
        let chain = self.chunks.first().map(|c| c.first_score());
        let stray = self.strays.iter().map(|s| s.score).min();
        chain.into_iter().chain(stray).min()
    }

    /// Whether the log holds at most `n` runs.
    pub(in crate::store::compact) fn runs_at_most(&self, n: usize) -> bool {
        self.runs <= n as u64
    }

    /// The chunk whose member range may hold `id`: the only one (their
    /// ranges are sorted and disjoint).
    pub(super) fn chunk_for(&self, id: i64) -> Option<usize> {
        let ci = self.chunks.partition_point(|c| c.max_id < id);
        self.chunks
            .get(ci)
            .is_some_and(|c| c.min_id <= id)
            .then_some(ci)
    }

    /// The stray holding `id`, if any.
    pub(super) fn stray_for(&self, id: i64) -> Option<usize> {
        let si = self.strays.partition_point(|s| s.last() < id);
        self.strays
            .get(si)
            .is_some_and(|s| s.first <= id)
            .then_some(si)
    }

    /// Sets the expiry the encoding carries.
    pub fn set_expiry(&mut self, at_ms: i64) {
        self.expire_at_ms = Some(at_ms);
    }

    /// The absolute expiry set by the last `expire_at`, if any (the unit
    /// tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn expire_at_ms(&self) -> Option<i64> {
        self.expire_at_ms
    }

    /// Every entry as (score, member), in the canonical order (the unit
    /// tests).
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (i64, i64)> {
        self.runs().into_iter().flat_map(|r| {
            (0..r.count).map(move |i| {
                let i = i64::try_from(i).unwrap_or(i64::MAX);
                (r.score, r.first.saturating_add(i))
            })
        })
    }

    /// The run holding member `id`, if any: O(log n) and one chunk decoded.
    pub(in crate::store::compact) fn run_holding(&self, id: i64) -> Option<Run> {
        if self.max_id.is_none_or(|m| id > m) {
            return None;
        }
        if let Some(si) = self.stray_for(id) {
            return self.strays.get(si).copied();
        }
        let c = self.chunks.get(self.chunk_for(id)?)?;
        // The last run first: the member asked for is usually recent.
        if c.last.holds(id) {
            return Some(c.last);
        }
        c.find_run(|r| r.last() >= id).filter(|r| r.holds(id))
    }

    /// As [`Chunked::run_holding`], with where its record starts when it
    /// is a record of a chunk (not a stray, not a chunk's last run), for
    /// a change that follows (see [`Chunked::cut_out`]). The chunk's
    /// marks are made first when due (see `Marks` in `chunk.rs`), so this
    /// reads at most about `MARK_EVERY` records then.
    pub(super) fn run_holding_at(&mut self, id: i64) -> Option<(Run, Option<RecordAt>)> {
        if self.max_id.is_none_or(|m| id > m) {
            return None;
        }
        if let Some(si) = self.stray_for(id) {
            return self.strays.get(si).map(|&r| (r, None));
        }
        let ci = self.chunk_for(id)?;
        let c = self.chunks.get_mut(ci)?;
        if c.last.holds(id) {
            return Some((c.last, None));
        }
        c.make_marks();
        c.record_holding(id).map(|(r, at)| (r, Some(at)))
    }

    /// The digest's view of the log: per entry group `[score, first,
    /// count]`, canonical (equal scores ordered by member, contiguous runs
    /// merged), so two logs with the same entries give the same groups
    /// however their runs were split. (The unit tests and the fuzz targets;
    /// the digest walks [`Chunked::for_each_canonical_run`].)
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn canonical_runs(&self) -> Vec<Run> {
        let mut out = Vec::new();
        self.for_each_canonical_run(|r| out.push(r));
        out
    }

    /// Calls `f` on each group of [`Chunked::canonical_runs`], in order,
    /// holding nothing but a sorted copy of the strays: the chain is in
    /// (score, member) order already, and the strays are merged into it.
    pub fn for_each_canonical_run(&self, mut f: impl FnMut(Run)) {
        let mut strays = self.strays.clone();
        strays.sort_unstable_by_key(chain_key);
        let mut strays = strays.into_iter().peekable();
        let mut pending: Option<Run> = None;
        let mut emit = |r: Run| match pending.as_mut() {
            Some(prev) if prev.is_continued_by(r.score, r.first) => {
                prev.count = prev.count.saturating_add(r.count);
            }
            _ => {
                if let Some(prev) = pending.replace(r) {
                    f(prev);
                }
            }
        };
        for c in &self.chunks {
            c.for_each_run(|r| {
                while let Some(s) = strays.next_if(|s| chain_key(s) < chain_key(&r)) {
                    emit(s);
                }
                emit(r);
            });
        }
        strays.for_each(&mut emit);
        if let Some(prev) = pending {
            f(prev);
        }
    }

    /// Every heap block the log owns (for MEMORY USAGE).
    pub fn heap_blocks(&self) -> Vec<*const u8> {
        let mut out = Vec::with_capacity(self.chunks.len() + 2);
        if self.chunks.capacity() > 0 {
            out.push(self.chunks.as_ptr().cast());
        }
        if self.strays.capacity() > 0 {
            out.push(self.strays.as_ptr().cast());
        }
        for c in &self.chunks {
            if c.bytes.capacity() > 0 {
                out.push(c.bytes.as_ptr());
            }
            c.mark_blocks(&mut out);
        }
        if let Some(r) = &self.records {
            out.push((&**r as *const Records).cast());
            r.heap_blocks(&mut out);
        }
        out
    }

    /// How many heap blocks freeing the log releases.
    pub fn blocks(&self) -> usize {
        let records = self.records.as_ref().map_or(0, |r| r.blocks());
        let marks = self
            .chunks
            .iter()
            .filter(|c| c.marks.is_some())
            .fold(0usize, |n, c| n.saturating_add(c.mark_block_count()));
        self.chunks
            .len()
            .saturating_add(2)
            .saturating_add(records)
            .saturating_add(marks)
    }
}
