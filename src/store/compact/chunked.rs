//! A log held as a list of chunks, and the window decision's queries and
//! changes on it.
//!
//! **Chain and strays.** The runs in score order are split in two:
//! - the *chain*: runs whose members increase with the score, held in the
//!   chunks; the chunks' member ranges are therefore sorted and disjoint,
//!   so the chunk that may hold a member is found by a binary search, and
//!   one chunk is decoded to find it;
//! - the *strays*: the other runs, at most [`MAX_STRAYS`], held apart in a
//!   list sorted by member (binary-searched too).
//!
//! Which runs are strays is a function of the runs alone, never of the
//! history: a run is in the chain exactly when its last member is below the
//! first member of every run after it in the *canonical order*, (score,
//! strays before the chain, strays by member descending, the chain by
//! member ascending). The encoding writes the runs in that order; the
//! decoder finds the same split in one pass (a run arriving below the
//! chain's tail sends that tail to the strays); every change keeps it
//! (an insert may send chain runs to the strays, a removal may bring strays
//! back). So a log, its replica and its reload agree on it, and each change
//! is refused alike everywhere when it would pass [`MAX_STRAYS`].
//!
//! CHECKs append at the end with a member above every other: chain runs,
//! O(1). Strays come from entries scored before newer ones with a greater
//! member (the clock stepped back) and from `SLIDEWIN.APPLY`.

use super::charge::*;
use super::chunk::*;
use super::codec::*;
use super::run::*;
use crate::window::NoFreeMember;

/// A log as chunks of chain runs in score order, the strays, their totals,
/// an upper bound of the members, and the expiry (see [`CompactLog`] for
/// when it is used).
#[derive(Debug, Clone, Default)]
pub(super) struct Chunked {
    pub(super) chunks: Vec<Chunk>,
    /// The runs out of member order, sorted by first member.
    pub(super) strays: Vec<Run>,
    /// Entries and runs, in the chunks and the strays.
    pub(super) entries: u64,
    pub(super) runs: u64,
    /// No member is greater (a bound, not the maximum: removals leave it).
    pub(super) max_id: Option<i64>,
    pub(super) expire_at_ms: Option<i64>,
    /// While a small log is held as chunks (see [`CompactLog::expand`]):
    /// its small form's block, reused or given back by `settle`. Empty
    /// otherwise.
    pub(super) stash: Vec<u8>,
    /// The charges made with an ID (see `charge.rs`); `None` when there is
    /// none (never an empty table).
    pub(super) records: Option<Box<Records>>,
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
fn chain_key(r: &Run) -> (i64, i64) {
    (r.score, r.first)
}

/// Builds a log from runs in score order, splitting chain and strays as
/// the module comment says, with every bound checked: the decoder for
/// untrusted bytes, and the small form's promotion.
struct Builder {
    chunks: Vec<Chunk>,
    /// The chain's tail not yet cut into chunks (a run arriving below it
    /// sends part of it to the strays): at most `2 * CHUNK_RUNS`.
    pending: Vec<Run>,
    strays: Vec<Run>,
    entries: u64,
    runs: u64,
    max_id: Option<i64>,
    /// A block the first chunk's records may reuse.
    spare: Vec<u8>,
}

impl Builder {
    fn new() -> Builder {
        Self::with(Vec::new(), (Vec::new(), Vec::new()))
    }

    /// A builder reusing a block for the first chunk's records and the
    /// lists' allocations (emptied).
    fn with(spare: Vec<u8>, (mut chunks, mut strays): (Vec<Chunk>, Vec<Run>)) -> Builder {
        chunks.clear();
        strays.clear();
        Builder {
            chunks,
            pending: Vec::new(),
            strays,
            entries: 0,
            runs: 0,
            max_id: None,
            spare,
        }
    }

    /// The chain's last run, taken off (from the pending tail, or from the
    /// last chunk, whose runs become the pending tail again).
    fn pop_chain(&mut self) -> Option<Run> {
        if self.pending.is_empty() {
            let c = self.chunks.pop()?;
            self.pending = c.decode();
        }
        self.pending.pop()
    }

    fn chain_last(&self) -> Option<Run> {
        self.pending
            .last()
            .copied()
            .or_else(|| self.chunks.last().map(|c| c.last))
    }

    /// Adds the next run in order. Its score must not be below the last
    /// one's (the readers make sure of it: gaps are unsigned).
    fn push(&mut self, run: Run) -> Result<(), DecodeError> {
        if !(0..=MAX_SCORE).contains(&run.score) || run.first < 0 || run.count == 0 {
            return Err(DecodeError::Range);
        }
        self.entries = self
            .entries
            .checked_add(run.count)
            .filter(|&e| e <= MAX_ENTRIES)
            .ok_or(DecodeError::Bound(Bound::Entries))?;
        self.runs = self.runs.saturating_add(1);
        if self.runs > MAX_RUNS {
            return Err(DecodeError::Bound(Bound::Runs));
        }
        self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
        // Chain runs ending at or above this run's first member have a run
        // after them that starts below their end: strays.
        while self.chain_last().is_some_and(|t| t.last() >= run.first) {
            if let Some(t) = self.pop_chain() {
                self.strays.push(t);
            }
            if self.strays.len() > MAX_STRAYS {
                return Err(DecodeError::Bound(Bound::Strays));
            }
        }
        self.pending.push(run);
        if self.pending.len() >= 2 * CHUNK_RUNS {
            let rest = self.pending.split_off(CHUNK_RUNS);
            let full = std::mem::replace(&mut self.pending, rest);
            self.commit(&full);
        }
        Ok(())
    }

    /// Cuts `runs` (chain runs, in order) into a chunk after the others.
    fn commit(&mut self, runs: &[Run]) {
        let Some((&first, rest)) = runs.split_first() else {
            return;
        };
        if self.chunks.is_empty() && self.spare.capacity() > 0 && runs.len() < CHUNK_RUNS {
            // A small log's promotion: the records go into the block kept
            // for them (written as bytes, as the calls append).
            let mut c = Chunk::of_in(first, std::mem::take(&mut self.spare));
            for &r in rest {
                c.push(r);
            }
            self.chunks.push(c);
            return;
        }
        if let Some(c) = self.chunks.last_mut() {
            c.seal();
        }
        self.chunks.extend(Chunk::from_runs(runs));
    }

    /// The log: the strays checked against each other and against the
    /// chain (members unique over the log).
    fn finish(mut self, expire_at_ms: Option<i64>) -> Result<Chunked, DecodeError> {
        let pending = std::mem::take(&mut self.pending);
        for piece in pending.chunks(CHUNK_RUNS) {
            self.commit(piece);
        }
        self.strays.sort_unstable_by_key(|r| r.first);
        if self.strays.windows(2).any(|w| w[1].first <= w[0].last()) {
            return Err(DecodeError::Invalid);
        }
        let mut c = Chunked {
            chunks: self.chunks,
            strays: self.strays,
            entries: self.entries,
            runs: self.runs,
            max_id: self.max_id,
            expire_at_ms,
            stash: Vec::new(),
            records: None,
        };
        if c.strays.iter().any(|s| c.chain_meets(s.first, s.last())) {
            return Err(DecodeError::Invalid);
        }
        c.chunks.shrink_to_fit();
        c.strays.shrink_to_fit();
        Ok(c)
    }
}

impl Chunked {
    /// A log of `runs` (in score order, members unique).
    #[cfg(test)]
    pub(super) fn from_runs(runs: &[Run], expire_at_ms: Option<i64>) -> Chunked {
        let mut b = Builder::new();
        for &r in runs {
            if b.push(r).is_err() {
                return Chunked::default();
            }
        }
        b.finish(expire_at_ms).unwrap_or_default()
    }

    /// Replaces the log by the one `bytes` encode, reusing this one's
    /// allocations. For the module's own encodings (a small form it wrote),
    /// checked all the same: unreadable bytes leave an empty log (as
    /// [`CompactLog::view`] does).
    pub(super) fn decode_own(&mut self, bytes: &[u8]) {
        let spare = self
            .chunks
            .drain(..)
            .next()
            .map(|c| c.bytes)
            .unwrap_or_default();
        let stash = std::mem::take(&mut self.stash);
        let mut lists = (
            std::mem::take(&mut self.chunks),
            std::mem::take(&mut self.strays),
        );
        lists.1.clear();
        *self = if bytes.is_empty() {
            Chunked {
                chunks: lists.0,
                strays: lists.1,
                ..Chunked::default()
            }
        } else {
            Self::decode_with(bytes, Builder::with(spare, lists)).unwrap_or_default()
        };
        self.stash = stash;
    }

    /// The runs, in the canonical order.
    pub fn runs(&self) -> Vec<Run> {
        let mut out = Vec::with_capacity(usize::try_from(self.runs).unwrap_or(0));
        self.for_each_run(|r| out.push(r));
        out
    }

    /// Calls `f` on every run in the canonical order (the chain and the
    /// strays merged: strays first among equal scores).
    pub(super) fn for_each_run(&self, mut f: impl FnMut(Run)) {
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
    pub(super) fn oldest_score(&self) -> Option<i64> {
        let chain = self.chunks.first().map(|c| c.first_score());
        let stray = self.strays.iter().map(|s| s.score).min();
        chain.into_iter().chain(stray).min()
    }

    /// Whether the log holds at most `n` runs.
    pub(super) fn runs_at_most(&self, n: usize) -> bool {
        self.runs <= n as u64
    }

    /// The chunk whose member range may hold `id`: the only one (their
    /// ranges are sorted and disjoint).
    fn chunk_for(&self, id: i64) -> Option<usize> {
        let ci = self.chunks.partition_point(|c| c.max_id < id);
        self.chunks
            .get(ci)
            .is_some_and(|c| c.min_id <= id)
            .then_some(ci)
    }

    /// The stray holding `id`, if any.
    fn stray_for(&self, id: i64) -> Option<usize> {
        let si = self.strays.partition_point(|s| s.last() < id);
        self.strays
            .get(si)
            .is_some_and(|s| s.first <= id)
            .then_some(si)
    }

    /// Whether a chain run holds a member in `first ..= last`: the chunks
    /// whose ranges meet it are found by a binary search; at most one is
    /// decoded (a later one meeting it starts inside it).
    fn chain_meets(&self, first: i64, last: i64) -> bool {
        self.chain_first_above(first, last, i64::MIN).is_some()
    }

    /// A chain run holding a member in `first ..= last` and scored above
    /// `cutoff_ms`, if any (at most two chunks decoded: the chain's scores
    /// increase with its members).
    fn chain_first_above(&self, first: i64, last: i64, cutoff_ms: i64) -> Option<Run> {
        // Both are prefixes: the chain's scores increase with its members.
        let start = self
            .chunks
            .partition_point(|c| c.max_id < first)
            .max(self.chunks.partition_point(|c| c.last_score() <= cutoff_ms));
        for c in self.chunks.get(start..)?.iter() {
            if c.min_id > last {
                return None;
            }
            if c.min_id >= first && c.first_score() > cutoff_ms {
                // Its first run starts inside the range.
                return c.find_run(|_| true);
            }
            let hit = c.find_run(|r| r.score > cutoff_ms && r.first <= last && r.last() >= first);
            if hit.is_some() {
                return hit;
            }
        }
        None
    }

    /// The first of the sorted, disjoint ranges `ranges` (members `first
    /// ..= last`) that overlaps a member scored above `cutoff_ms`.
    pub(super) fn first_overlap_above(
        &self,
        ranges: &[(i64, i64)],
        cutoff_ms: i64,
    ) -> Option<(i64, i64)> {
        ranges.iter().copied().find(|&(first, last)| {
            if self.chain_first_above(first, last, cutoff_ms).is_some() {
                return true;
            }
            let si = self.strays.partition_point(|s| s.last() < first);
            self.strays
                .get(si..)
                .unwrap_or(&[])
                .iter()
                .take_while(|s| s.first <= last)
                .any(|s| s.score > cutoff_ms)
        })
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
    pub(super) fn run_holding(&self, id: i64) -> Option<Run> {
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

    /// Replaces chunks `range` by chunks of `runs` (chain runs in order).
    fn replace_chunks(&mut self, range: std::ops::Range<usize>, runs: &[Run]) {
        let pieces: Vec<Chunk> = runs
            .chunks(CHUNK_RUNS)
            .filter_map(Chunk::from_runs)
            .collect();
        if range.end <= self.chunks.len() && range.start <= range.end {
            self.chunks.splice(range, pieces);
        }
    }

    /// Removes member `id` (SLIDEWIN.UNDO); whether it was there, or the
    /// bound that taking it out would pass (splitting a run in two makes
    /// one more: nothing is changed then).
    /// A unit of a charge made with an ID is never removed this way (see
    /// [`Chunked::remove_units`]): `Ok(false)`.
    pub fn remove(&mut self, id: i64) -> Result<bool, Bound> {
        if self.charged(id) {
            return Ok(false);
        }
        let Some(run) = self.run_holding(id) else {
            return Ok(false);
        };
        self.cut_out(run, id, id)?;
        Ok(true)
    }

    /// Removes members `lo ..= hi`, all in `run` (a run of the log);
    /// or the bound that splitting the run in two would pass (nothing
    /// changed).
    fn cut_out(&mut self, run: Run, lo: i64, hi: i64) -> Result<(), Bound> {
        let id = lo;
        // `first <= lo <= hi <= last`: no difference can overflow.
        let before = u64::try_from(lo.saturating_sub(run.first)).unwrap_or(0);
        let gone = u64::try_from(hi.saturating_sub(lo))
            .unwrap_or(0)
            .saturating_add(1);
        let after = run.count.saturating_sub(before).saturating_sub(gone);
        let splits = before > 0 && after > 0;
        if splits && self.runs >= MAX_RUNS {
            return Err(Bound::Runs);
        }
        let mut pieces = Vec::with_capacity(2);
        if before > 0 {
            pieces.push(Run {
                count: before,
                ..run
            });
        }
        if after > 0 {
            pieces.push(Run {
                score: run.score,
                first: hi.saturating_add(1),
                count: after,
            });
        }
        if let Some(si) = self.stray_for(id) {
            if splits && self.strays.len() >= MAX_STRAYS {
                return Err(Bound::Strays);
            }
            self.strays.splice(si..=si, pieces.iter().copied());
        } else {
            let Some(ci) = self.chunk_for(id) else {
                return Ok(());
            };
            let removed_in_place = lo == hi
                && self
                    .chunks
                    .get_mut(ci)
                    .is_some_and(|c| c.remove_from_last(id));
            if !removed_in_place {
                let Some(mut runs) = self.chunks.get(ci).map(Chunk::decode) else {
                    return Ok(());
                };
                let Some(ri) = runs.iter().position(|r| r.holds(id)) else {
                    return Ok(());
                };
                runs.splice(ri..=ri, pieces.iter().copied());
                self.replace_chunks(ci..ci + 1, &runs);
            }
        }
        self.entries = self.entries.saturating_sub(gone);
        self.runs = (self.runs + pieces.len() as u64).saturating_sub(1);
        if self.chunks.is_empty() && self.strays.is_empty() {
            self.max_id = None;
        }
        // A stray is out of order because a run after it starts at or below
        // its end. Only this run changed, and its start only when the
        // removal took it: only a stray scored at or before it ending at or
        // above its old start may now rejoin (a cheap scan; the full one,
        // with its sort and chunk lookups, runs only then).
        let unblocks = lo == run.first
            && self
                .strays
                .iter()
                .any(|s| s.score <= run.score && s.last() >= run.first);
        if unblocks {
            self.rejoin_strays();
        }
        Ok(())
    }

    /// After a removal: the strays with no run after them starting at or
    /// below their end any more join the chain (the split stays a function
    /// of the runs). O(strays) binary searches, one chunk decoded each.
    fn rejoin_strays(&mut self) {
        if self.strays.is_empty() {
            return;
        }
        // The strays in the canonical order, and for each the least first
        // member of the strays after it.
        let mut order: Vec<Run> = self.strays.clone();
        order.sort_unstable_by(|a, b| {
            (a.score, std::cmp::Reverse(a.first)).cmp(&(b.score, std::cmp::Reverse(b.first)))
        });
        // Wider than a member: "no run after it" is above every member,
        // i64::MAX included.
        let mut joining = Vec::new();
        let mut least_after = i128::MAX;
        for s in order.iter().rev() {
            // The first chain run after the stray: the first scored at or
            // above it (strays come before the chain among equal scores).
            let chain_next = self.chain_first_at_or_after(s.score);
            let next = chain_next
                .map_or(i128::MAX, |r| i128::from(r.first))
                .min(least_after);
            if i128::from(s.last()) < next {
                joining.push(*s);
            }
            least_after = least_after.min(i128::from(s.first));
        }
        for s in joining {
            if let Some(si) = self.stray_for(s.first) {
                self.strays.remove(si);
            }
            self.insert_chain(s);
        }
    }

    /// The first chain run scored at or after `score`.
    fn chain_first_at_or_after(&self, score: i64) -> Option<Run> {
        let ci = self.chunks.partition_point(|c| c.last_score() < score);
        let c = self.chunks.get(ci)?;
        if c.first_score() >= score {
            return c.find_run(|_| true);
        }
        c.find_run(|r| r.score >= score)
    }

    /// Puts `run` into the chain at its place (the caller made sure it
    /// belongs there: it neither joins nor sends anything to the strays).
    fn insert_chain(&mut self, run: Run) {
        let key = chain_key(&run);
        let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
        match self.chunks.get(ci) {
            None => {
                if self.append_chain(run) {
                    self.runs = self.runs.saturating_sub(1);
                }
            }
            Some(c) => {
                let mut runs = c.decode();
                let at = runs.partition_point(|r| chain_key(r) < key);
                runs.insert(at, run);
                self.replace_chunks(ci..ci + 1, &runs);
            }
        }
    }

    /// Appends `run` at the chain's end (after every chain run), extending
    /// the last run when it continues it.
    /// Returns whether it extended the last run (no new run).
    fn append_chain(&mut self, run: Run) -> bool {
        match self.chunks.last_mut() {
            Some(c)
                if c.last.score == run.score && c.last.last().checked_add(1) == Some(run.first) =>
            {
                c.last.count = c.last.count.saturating_add(run.count);
                c.entries = c.entries.saturating_add(run.count);
                c.max_id = c.last.last();
                return true;
            }
            Some(c) if (c.runs as usize) < CHUNK_RUNS => c.push(run),
            _ => {
                // The full chunk is sealed; the new one is written in the
                // kind chosen for it (arrivals change slowly), and sealed in
                // its own turn.
                let mut kind = BYTES;
                if let Some(c) = self.chunks.last_mut() {
                    c.seal();
                    kind = c.kind;
                }
                // Grow by a quarter, not double: a small log keeps one
                // chunk's room, a large one at most a quarter spare.
                if self.chunks.len() == self.chunks.capacity() {
                    self.chunks.reserve_exact((self.chunks.len() / 4).max(1));
                }
                self.chunks.push(Chunk {
                    kind,
                    ..Chunk::of(run)
                });
            }
        }
        false
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
            Some(prev) if prev.score == r.score && prev.last().checked_add(1) == Some(r.first) => {
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

    /// Whether member `id` is in the log and scored above `cutoff_ms`.
    pub fn holds_above(&self, id: i64, cutoff_ms: i64) -> bool {
        self.run_holding(id).is_some_and(|r| r.score > cutoff_ms)
    }

    /// What inserting `run` would take: whether it goes to the chain, and
    /// how many chain runs it sends to the strays; or the bound it would
    /// pass. Nothing is changed.
    fn plan(&self, run: &Run) -> Result<(bool, usize), Bound> {
        let key = chain_key(run);
        let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
        // The first chain run after the run's place in the chain.
        let succ = self
            .chunks
            .get(ci)
            .and_then(|c| c.find_run(|r| chain_key(&r) >= key));
        // Wider than a member: "no run after it" is above every member.
        let stray_after = self
            .strays
            .iter()
            .filter(|s| s.score > run.score)
            .map(|s| i128::from(s.first))
            .min()
            .unwrap_or(i128::MAX);
        let next = succ
            .map_or(i128::MAX, |s| i128::from(s.first))
            .min(stray_after);
        let chain = i128::from(run.last()) < next;
        // The chain runs before it (scored at or below it with smaller
        // members when it joins the chain, scored below it when it does
        // not) ending at or above its first member become strays: a
        // stretch at the end of that part of the chain.
        let capacity = MAX_STRAYS.saturating_sub(self.strays.len());
        let flips = self.chain_tail_at_or_above(run, chain, capacity.saturating_add(1));
        let new_strays = flips.saturating_add(usize::from(!chain));
        if new_strays > capacity {
            return Err(Bound::Strays);
        }
        Ok((chain, flips))
    }

    /// How many chain runs before `run`'s place (see `plan`) end at or
    /// above its first member, counting up to `most`.
    fn chain_tail_at_or_above(&self, run: &Run, chain: bool, most: usize) -> usize {
        let before = |r: &Run| {
            if chain {
                chain_key(r) < chain_key(run)
            } else {
                r.score < run.score
            }
        };
        // Chunks before `end` lie wholly before the place; chunk `end`, if
        // any, holds it.
        let end = self.chunks.partition_point(|c| before(&c.last));
        let mut n = 0usize;
        if let Some(c) = self.chunks.get(end) {
            let runs = c.decode();
            let upto = runs.partition_point(before);
            let head = runs.get(..upto).unwrap_or(&[]);
            let tail = head
                .iter()
                .rev()
                .take_while(|r| r.last() >= run.first)
                .count();
            n = tail;
            if tail < upto {
                return n;
            }
        }
        for c in self.chunks.get(..end).unwrap_or(&[]).iter().rev() {
            if n > most || c.max_id < run.first {
                break;
            }
            if c.min_id >= run.first {
                n = n.saturating_add(c.runs as usize);
                continue;
            }
            let tail = c
                .decode()
                .iter()
                .rev()
                .take_while(|r| r.last() >= run.first)
                .count();
            n = n.saturating_add(tail);
            break;
        }
        n
    }

    /// Adds a whole run whose members the caller checked are free and
    /// valid (see `effect.rs`), joining the run before it as `add` would;
    /// or the bound it would pass (nothing changed).
    pub fn add_run(&mut self, run: Run) -> Result<(), Bound> {
        self.insert(run)
    }

    /// Whether `run` can be inserted without passing a bound.
    pub(super) fn can_insert(&self, run: &Run) -> Result<(), Bound> {
        // At the bound, only an entry extending the last run (no new run).
        let extends = self.appends(run)
            && self.chunks.last().is_some_and(|c| {
                c.last.score == run.score && c.last.last().checked_add(1) == Some(run.first)
            });
        if self.runs >= MAX_RUNS && !extends {
            return Err(Bound::Runs);
        }
        if self
            .entries
            .checked_add(run.count)
            .is_none_or(|e| e > MAX_ENTRIES)
        {
            return Err(Bound::Entries);
        }
        if self.appends(run) {
            return Ok(());
        }
        self.plan(run).map(|_| ())
    }

    /// Whether `run` goes at the chain's end with nothing else to do: the
    /// common case (a CHECK's entries), O(1).
    pub(super) fn appends(&self, run: &Run) -> bool {
        match self.chunks.last() {
            None => self.strays.is_empty(),
            Some(c) => chain_key(&c.last) < chain_key(run) && c.last.last() < run.first,
        }
    }

    /// Inserts `run` at its place in the canonical order: the chain's end,
    /// its place in the chain, or the strays (sending the chain runs it
    /// puts out of order there too), joining the run before it when that
    /// one has the same score and ends just before it.
    pub(super) fn insert(&mut self, run: Run) -> Result<(), Bound> {
        self.can_insert(&run)?;
        self.entries = self.entries.saturating_add(run.count);
        self.runs = self.runs.saturating_add(1);
        self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
        if self.appends(&run) {
            if self.append_chain(run) {
                self.runs = self.runs.saturating_sub(1);
            }
            return Ok(());
        }
        let (chain, flips) = self.plan(&run)?;
        if flips > 0 {
            self.send_to_strays(&run, chain, flips);
        }
        if chain {
            // Joins the chain run before it when it continues it.
            let key = chain_key(&run);
            let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
            if ci == self.chunks.len() {
                if self.append_chain(run) {
                    self.runs = self.runs.saturating_sub(1);
                }
                return Ok(());
            }
            let Some(mut runs) = self.chunks.get(ci).map(Chunk::decode) else {
                return Ok(());
            };
            let at = runs.partition_point(|r| chain_key(r) < key);
            let joins =
                |p: &Run| p.score == run.score && p.last().checked_add(1) == Some(run.first);
            if at == 0 {
                if let Some(prev) = ci.checked_sub(1).and_then(|p| self.chunks.get_mut(p)) {
                    if joins(&prev.last) {
                        prev.last.count = prev.last.count.saturating_add(run.count);
                        prev.entries = prev.entries.saturating_add(run.count);
                        prev.max_id = prev.last.last();
                        self.runs = self.runs.saturating_sub(1);
                        return Ok(());
                    }
                }
                runs.insert(0, run);
            } else {
                match runs.get_mut(at - 1) {
                    Some(prev) if joins(prev) => {
                        prev.count = prev.count.saturating_add(run.count);
                        self.runs = self.runs.saturating_sub(1);
                    }
                    _ => runs.insert(at, run),
                }
            }
            self.replace_chunks(ci..ci + 1, &runs);
        } else {
            // Joins the stray it continues (the entries of one call).
            let si = self.strays.partition_point(|s| s.first < run.first);
            match si.checked_sub(1).and_then(|p| self.strays.get_mut(p)) {
                Some(prev)
                    if prev.score == run.score && prev.last().checked_add(1) == Some(run.first) =>
                {
                    prev.count = prev.count.saturating_add(run.count);
                    self.runs = self.runs.saturating_sub(1);
                }
                _ => self.strays.insert(si, run),
            }
        }
        Ok(())
    }

    /// Moves the last `flips` chain runs before `run`'s place (see `plan`)
    /// to the strays.
    fn send_to_strays(&mut self, run: &Run, chain: bool, flips: usize) {
        let before = |r: &Run| {
            if chain {
                chain_key(r) < chain_key(run)
            } else {
                r.score < run.score
            }
        };
        let Some(last_chunk) = self.chunks.len().checked_sub(1) else {
            return;
        };
        let end = self.chunks.partition_point(|c| before(&c.last));
        // The chunks from the first holding a moved run to the one holding
        // the place (or the last), decoded, cut, and written again.
        let last = end.min(last_chunk);
        let mut start = last;
        let mut seen = 0usize;
        while let Some(c) = self.chunks.get(start) {
            let upto = if start == end {
                c.decode().iter().filter(|r| before(r)).count()
            } else {
                c.runs as usize
            };
            seen = seen.saturating_add(upto);
            if seen >= flips || start == 0 {
                break;
            }
            start -= 1;
        }
        let mut runs: Vec<Run> = Vec::new();
        for c in self.chunks.get(start..=last).unwrap_or(&[]) {
            runs.extend(c.decode());
        }
        let place = runs.partition_point(before);
        let from = place.saturating_sub(flips);
        let moved: Vec<Run> = runs.drain(from..place).collect();
        for m in moved {
            let si = self.strays.partition_point(|s| s.first < m.first);
            self.strays.insert(si, m);
        }
        self.replace_chunks(start..last + 1, &runs);
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
        self.chunks.len().saturating_add(2).saturating_add(records)
    }

    /// The encoding (see the module comment).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.min(1 << 16) as usize * 2);
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoding to `out`: the runs in the canonical order.
    /// Version 1 without charge records, 2 with them.
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) {
        let records = self.records.as_deref().filter(|r| !r.is_empty());
        let version = if records.is_some() {
            VERSION_CHARGES
        } else {
            VERSION
        };
        write_header_of(out, version, self.expire_at_ms, self.runs);
        let mut state: Option<(i64, i64)> = None;
        self.for_each_run(|r| {
            let (score, expected) = state.get_or_insert_with(|| {
                put_varint(out, zigzag(r.score));
                (r.score, 1i64)
            });
            put_run(out, score, expected, r);
        });
        if let Some(records) = records {
            put_records(out, records.len(), records.iter());
        }
    }

    /// Decodes bytes from anywhere (RDB, RESTORE, a client): a log that
    /// holds every invariant and bound, or why not. It holds nothing but
    /// the log it builds (no list of every run).
    pub fn decode(bytes: &[u8]) -> Result<Chunked, DecodeError> {
        Self::decode_with(bytes, Builder::new())
    }

    fn decode_with(bytes: &[u8], mut b: Builder) -> Result<Chunked, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let header = read_header(&mut r)?;
        let n = header.runs;
        if n > MAX_RUNS {
            return Err(DecodeError::Bound(Bound::Runs));
        }
        // Each run takes at least one byte: a count beyond what is left is
        // a lie, refused before anything is built for it.
        let left = bytes.len().saturating_sub(r.at) as u64;
        if n > left {
            return Err(DecodeError::Truncated);
        }
        if n > 0 {
            let mut score = unzigzag(r.varint()?);
            let mut expected = 1i64;
            for _ in 0..n {
                let run = read_run(&mut r, &mut score, &mut expected)?;
                b.push(run)?;
            }
        }
        // A version 2 payload: the charge records, each checked as it is
        // read (bounds, order), then all against the log in one pass.
        let records = if header.version == VERSION_CHARGES {
            let n = read_record_count(&mut r)?;
            let mut records = RecordsBuilder::default();
            for _ in 0..n {
                records.push(read_record(&mut r)?).map_err(|b| match b {
                    Some(b) => DecodeError::Bound(b),
                    None => DecodeError::Invalid,
                })?;
            }
            Some(records.finish().map_err(|()| DecodeError::Invalid)?)
        } else {
            None
        };
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing);
        }
        let mut log = b.finish(header.expire_at_ms)?;
        if let Some(records) = records {
            if !log.holds_units_of(&records) {
                return Err(DecodeError::Invalid);
            }
            log.records = Some(Box::new(records));
        }
        Ok(log)
    }
}

/// What every log holds, checked by the unit tests after each change: the
/// chain's members increase with its keys, the chunks' bounds are exact,
/// the strays are sorted and disjoint, the totals add up, and the split is
/// the one the decoder finds in the canonical order. Also the fuzz targets'
/// oracle (feature `fuzzing`, through [`CompactLog::check`]).
#[cfg(any(test, feature = "fuzzing"))]
impl Chunked {
    pub(super) fn check(&self) -> Result<(), String> {
        let mut prev: Option<Run> = None;
        let (mut entries, mut runs) = (0u64, 0u64);
        for c in &self.chunks {
            let rs = c.decode();
            let (Some(first), Some(last)) = (rs.first(), rs.last()) else {
                return Err("an empty chunk".into());
            };
            if c.min_id != first.first || c.max_id != last.last() || c.runs as usize != rs.len() {
                return Err(format!(
                    "chunk bounds {}..{} / {} runs, runs {rs:?}",
                    c.min_id, c.max_id, c.runs
                ));
            }
            if c.entries != rs.iter().map(|r| r.count).sum::<u64>() {
                return Err("chunk entries".into());
            }
            for r in rs {
                if let Some(p) = prev {
                    if chain_key(&p) >= chain_key(&r) || p.last() >= r.first {
                        return Err(format!("chain out of order: {p:?} then {r:?}"));
                    }
                }
                prev = Some(r);
                entries += r.count;
                runs += 1;
            }
        }
        if self.strays.len() > MAX_STRAYS {
            return Err("too many strays".into());
        }
        if self.strays.windows(2).any(|w| w[0].last() >= w[1].first) {
            return Err(format!("strays unsorted or overlapping: {:?}", self.strays));
        }
        for s in &self.strays {
            entries += s.count;
            runs += 1;
            if self.chain_meets(s.first, s.last()) {
                return Err(format!("stray {s:?} meets the chain"));
            }
        }
        if entries != self.entries || runs != self.runs {
            return Err(format!(
                "totals {} / {} against {entries} / {runs}",
                self.entries, self.runs
            ));
        }
        if runs > MAX_RUNS || entries > MAX_ENTRIES {
            return Err("past a bound".into());
        }
        if let Some(m) = self.max_id {
            if self.runs().iter().any(|r| r.last() > m) {
                return Err("max_id below a member".into());
            }
        } else if runs > 0 {
            return Err("no max_id".into());
        }
        if let Some(records) = &self.records {
            records.check()?;
            if !self.holds_units_of(records) {
                return Err(format!(
                    "a charge's units are not entries at its score: {records:?}"
                ));
            }
        }
        let again =
            Chunked::decode(&self.encode()).map_err(|e| format!("does not load again: {e}"))?;
        if again.records != self.records {
            return Err(format!(
                "the charges do not load again the same: {:?} against {:?}",
                self.records, again.records
            ));
        }
        if again.strays != self.strays || again.runs() != self.runs() {
            return Err(format!(
                "the split is not the canonical one: strays {:?} against {:?}",
                self.strays, again.strays
            ));
        }
        Ok(())
    }
}

/// The charges made with an ID (see `charge.rs`): their entries are
/// entries of the log; the records name them.
impl Chunked {
    /// Whether member `id` is a unit of a charge made with an ID.
    pub(super) fn charged(&self, id: i64) -> bool {
        self.records.as_ref().is_some_and(|r| r.holds(id))
    }

    /// The charge under `request`: its score and units.
    pub(super) fn charge(&self, request: &[u8]) -> Option<(i64, u64)> {
        let r = self.records.as_ref()?.get(request)?;
        Some((r.score, r.units()))
    }

    /// Whether every unit of every record is an entry of the log scored as
    /// its record: one pass over the runs in member order (the chain's
    /// chunks decoded once each, the strays merged in) and the spans.
    pub(super) fn holds_units_of(&self, records: &Records) -> bool {
        let spans = records.spans_by_member();
        let mut next = spans.iter().peekable();
        // The span being covered: the next member it needs, its last, its
        // score.
        let mut cur: Option<(i64, i64, i64)> = None;
        let mut ok = true;
        let mut visit = |r: Run| {
            while ok {
                let (need, last, score) = match cur {
                    Some(c) => c,
                    None => match next.next() {
                        Some((s, score)) => (s.first, s.last(), *score),
                        None => return,
                    },
                };
                cur = Some((need, last, score));
                if r.last() < need {
                    return;
                }
                if r.first > need || r.score != score {
                    ok = false;
                    return;
                }
                if r.last() >= last {
                    cur = None;
                } else {
                    cur = Some((r.last().saturating_add(1), last, score));
                    return;
                }
            }
        };
        let mut strays = self.strays.iter().copied().peekable();
        for c in &self.chunks {
            c.for_each_run(|r| {
                while let Some(s) = strays.next_if(|s| s.first < r.first) {
                    visit(s);
                }
                visit(r);
            });
        }
        strays.for_each(&mut visit);
        ok && cur.is_none() && next.peek().is_none()
    }

    /// Adds `n` units to the charge under `request` (a new one scored
    /// `score_ms`, an existing one at its own score) under fresh member ids
    /// above every other: the score given and the first id (a new charge
    /// that would put more than [`MAX_STRAYS`] runs out of member order is
    /// scored as the newest entry, as `add` does), `None` when `n` is 0 or
    /// no such id is left (ids up to i64::MAX, which only SLIDEWIN.APPLY
    /// can place), or the bound it would pass (nothing changed).
    pub(super) fn add_units(
        &mut self,
        request: &[u8],
        score_ms: i64,
        n: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        let existing = self.charge(request).map(|(s, _)| s);
        if n == 0 {
            return Ok(None);
        }
        if !(0..=MAX_SCORE).contains(&score_ms) {
            return Ok(None);
        }
        let first = match self.max_id {
            None => 1,
            Some(m) => match m.checked_add(1) {
                Some(f) => f.max(1),
                None => return Ok(None),
            },
        };
        if i64::try_from(n - 1)
            .ok()
            .and_then(|m| first.checked_add(m))
            .is_none()
        {
            return Ok(None);
        }
        let mut run = Run {
            score: existing.unwrap_or(score_ms),
            first,
            count: n,
        };
        match self.add_charge(request, run) {
            Ok(()) => {}
            Err(Bound::Strays) if existing.is_none() => {
                let Some(top) = self.top_score().filter(|&t| t > run.score) else {
                    return Err(Bound::Strays);
                };
                run.score = top;
                self.add_charge(request, run)?;
            }
            Err(b) => return Err(b),
        }
        Ok(Some((run.score, first)))
    }

    /// Moves the charge under `request` to the newest score with `units`
    /// units under fresh member ids (appended: no run goes out of member
    /// order): what a SETTLE raising an older charge does when placing the
    /// new units at the charge's own score would pass the bound on runs out
    /// of member order or on a charge's runs of ids. The charge then leaves
    /// the window later, never earlier: the limit stays exact or stricter.
    /// The score and first member given, `None` when there is no such
    /// charge or no id is free, or the bound it would pass (nothing
    /// changed).
    pub(super) fn move_charge(
        &mut self,
        request: &[u8],
        units: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        let Some((score, _)) = self.charge(request) else {
            return Ok(None);
        };
        if units == 0 {
            return Ok(None);
        }
        let top = self.top_score().unwrap_or(score).max(score);
        let Some(first) = self
            .max_id
            .map_or(Some(1), |m| m.checked_add(1).map(|f| f.max(1)))
        else {
            return Ok(None);
        };
        if i64::try_from(units - 1)
            .ok()
            .and_then(|m| first.checked_add(m))
            .is_none()
        {
            return Ok(None);
        }
        let run = Run {
            score: top,
            first,
            count: units,
        };
        // Appended after the charge's units are gone: the removal leaves
        // no more runs or entries than the log holds now, but for the runs
        // it splits, which `remove_units` checks first.
        if !self.appends(&run) {
            return Ok(None);
        }
        let gone = self.records.as_ref().map(|r| r.plan_cut(request, 0));
        self.cut_fits(gone.as_deref().unwrap_or(&[]), 1)?;
        self.can_insert(&run)?;
        self.remove_units(request, 0)?;
        self.add_charge(request, run)?;
        Ok(Some((top, first)))
    }

    /// Whether [`Chunked::add_charge`] of `run` passes no bound.
    pub(super) fn charge_fits(&self, request: &[u8], run: &Run) -> bool {
        let span = Span {
            first: run.first,
            count: run.count,
        };
        let records = match &self.records {
            Some(r) => r.can_add(request, span).is_ok(),
            None => valid_request(request),
        };
        records && self.can_insert(run).is_ok()
    }

    /// Whether removing the charge under `request` and then appending
    /// `run` passes no bound.
    pub(super) fn move_fits(&self, request: &[u8], run: &Run) -> bool {
        let Some(gone) = self.records.as_ref().map(|r| r.plan_cut(request, 0)) else {
            return false;
        };
        self.appends(run)
            && self.cut_fits(&gone, 1).is_ok()
            && self
                .entries
                .checked_add(run.count)
                .is_some_and(|e| e <= MAX_ENTRIES)
    }

    /// Adds `run` (members the caller checked are free, scored as the
    /// charge under `request` when there is one) as units of that charge,
    /// made when missing; or the bound it would pass (nothing changed).
    pub(super) fn add_charge(&mut self, request: &[u8], run: Run) -> Result<(), Bound> {
        let span = Span {
            first: run.first,
            count: run.count,
        };
        match &self.records {
            Some(r) => r.can_add(request, span)?,
            None if !valid_request(request) => return Err(Bound::RequestId),
            None => {}
        }
        self.insert(run)?;
        self.records
            .get_or_insert_with(Default::default)
            .add_span(request, run.score, span)
    }

    /// Keeps the first `keep` units of the charge under `request` (the
    /// highest go first; none: the charge goes): removes their entries and
    /// returns how many, or the bound that splitting a run would pass
    /// (nothing changed).
    pub(super) fn remove_units(&mut self, request: &[u8], keep: u64) -> Result<u64, Bound> {
        let Some(records) = self.records.as_ref() else {
            return Ok(0);
        };
        let gone = records.plan_cut(request, keep);
        if gone.is_empty() {
            return Ok(0);
        }
        self.cut_fits(&gone, 0)?;
        let mut removed = 0u64;
        for g in &gone {
            removed = removed.saturating_add(self.remove_span(*g));
        }
        if let Some(records) = self.records.as_mut() {
            records.cut(request, keep);
            if records.is_empty() {
                self.records = None;
            }
        }
        Ok(removed)
    }

    /// Whether removing the spans `gone` (each splitting the run it is
    /// taken out of the middle of) and then adding `more` runs passes the
    /// bound on runs or on runs out of member order.
    fn cut_fits(&self, gone: &[Span], more: u64) -> Result<(), Bound> {
        let (mut splits, mut stray_splits) = (0u64, 0usize);
        for g in gone {
            if let Some(r) = self.run_holding(g.first) {
                if r.first < g.first && r.last() > g.last() {
                    splits += 1;
                    if self.stray_for(g.first).is_some() {
                        stray_splits += 1;
                    }
                }
            }
        }
        if self.runs.saturating_add(splits).saturating_add(more) > MAX_RUNS {
            return Err(Bound::Runs);
        }
        if self.strays.len().saturating_add(stray_splits) > MAX_STRAYS {
            return Err(Bound::Strays);
        }
        Ok(())
    }

    /// Removes the entries `span` names (all in the log), run by run from
    /// the highest; returns how many.
    fn remove_span(&mut self, span: Span) -> u64 {
        let mut hi = span.last();
        let mut removed = 0u64;
        while let Some(r) = self.run_holding(hi) {
            let lo = r.first.max(span.first);
            if self.cut_out(r, lo, hi).is_err() {
                break;
            }
            let n = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0);
            removed = removed.saturating_add(n).saturating_add(1);
            if lo <= span.first {
                break;
            }
            hi = lo.saturating_sub(1);
        }
        removed
    }
}

/// The byte-wise greatest decimal form among the ids `first ..= last`
/// (non-negative, `first <= last`): within one length the numeric order is
/// the byte order, so the candidates are the largest id of each length.
pub(super) fn greatest_decimal(first: i64, last: i64) -> i64 {
    let mut best = last;
    let mut bound: i64 = 9;
    while bound < last {
        if bound >= first && bound.to_string() > best.to_string() {
            best = bound;
        }
        bound = match bound.checked_mul(10).and_then(|b| b.checked_add(9)) {
            Some(b) => b,
            None => break,
        };
    }
    best
}

/// The window decision's queries and changes, on the chunks (what
/// [`CompactLog`]'s `WindowLog` runs).
impl Chunked {
    pub(super) fn trim(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        let whole = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        let mut runs_gone: u64 = 0;
        let mut removed: u64 = 0;
        for c in self.chunks.drain(..whole) {
            removed = removed.saturating_add(c.entries);
            runs_gone = runs_gone.saturating_add(u64::from(c.runs));
        }
        // The chunk the cutoff falls in, if any: its expired records are
        // stepped over, not rewritten.
        if let Some(c) = self.chunks.first_mut() {
            if c.first_score() <= cutoff_ms {
                let runs_before = c.runs;
                removed = removed.saturating_add(c.trim_front(cutoff_ms));
                runs_gone = runs_gone.saturating_add(u64::from(runs_before.saturating_sub(c.runs)));
            }
        }
        // Expired strays (a trim takes a prefix of the canonical order: no
        // other run changes side).
        if self.strays.iter().any(|s| s.score <= cutoff_ms) {
            self.strays.retain(|s| {
                let keep = s.score > cutoff_ms;
                if !keep {
                    removed = removed.saturating_add(s.count);
                    runs_gone = runs_gone.saturating_add(1);
                }
                keep
            });
        }
        self.entries = self.entries.saturating_sub(removed);
        self.runs = self.runs.saturating_sub(runs_gone);
        if self.chunks.is_empty() && self.strays.is_empty() {
            self.max_id = None;
        }
        // The charges scored at or below the cutoff went with their entries.
        if let Some(records) = self.records.as_mut() {
            records.trim(cutoff_ms);
            if records.is_empty() {
                self.records = None;
            }
        }
        Ok(removed)
    }

    pub(super) fn count_above(&self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        let mut n = self
            .strays
            .iter()
            .filter(|s| s.score > cutoff_ms)
            .fold(0u64, |n, s| n.saturating_add(s.count));
        for c in self.chunks.iter().rev() {
            if c.first_score() > cutoff_ms {
                n = n.saturating_add(c.entries);
            } else {
                if c.last_score() > cutoff_ms {
                    let mut above = 0u64;
                    c.for_each_run(|r| {
                        if r.score > cutoff_ms {
                            above = above.saturating_add(r.count);
                        }
                    });
                    n = n.saturating_add(above);
                }
                break;
            }
        }
        Ok(n)
    }

    pub(super) fn nth_above(
        &self,
        cutoff_ms: i64,
        k: u64,
        _n: u64,
    ) -> Result<Option<f64>, NoFreeMember> {
        if k == 0 {
            return Ok(None);
        }
        // The strays above the cutoff, by score, counted in as the walk
        // over the chain passes their scores.
        let mut strays: Vec<Run> = self
            .strays
            .iter()
            .filter(|s| s.score > cutoff_ms)
            .copied()
            .collect();
        strays.sort_unstable_by_key(|s| s.score);
        let mut next = strays.into_iter().peekable();
        let mut seen = 0u64;
        let start = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        for c in self.chunks.iter().skip(start) {
            // Strays scored before the chunk's first run.
            while let Some(s) = next.next_if(|s| s.score < c.first_score()) {
                seen = seen.saturating_add(s.count);
                if seen >= k {
                    return Ok(Some(s.score as f64));
                }
            }
            let strays_inside = next.peek().is_some_and(|s| s.score <= c.last_score());
            if !strays_inside && c.first_score() > cutoff_ms && seen.saturating_add(c.entries) < k {
                seen = seen.saturating_add(c.entries);
                continue;
            }
            // The runs are read up to the one holding the k-th entry only.
            let mut hit = None;
            c.find_run(|r| {
                while let Some(s) = next.next_if(|s| s.score <= r.score) {
                    seen = seen.saturating_add(s.count);
                    if seen >= k {
                        hit = Some(s.score);
                        return true;
                    }
                }
                if r.score <= cutoff_ms {
                    return false;
                }
                seen = seen.saturating_add(r.count);
                if seen >= k {
                    hit = Some(r.score);
                }
                seen >= k
            });
            if let Some(score) = hit {
                return Ok(Some(score as f64));
            }
        }
        for s in next {
            seen = seen.saturating_add(s.count);
            if seen >= k {
                return Ok(Some(s.score as f64));
            }
        }
        Ok(None)
    }

    /// The highest score, if any.
    fn top_score(&self) -> Option<i64> {
        let chain = self.chunks.last().map(|c| c.last_score());
        let stray = self.strays.iter().map(|s| s.score).max();
        chain.into_iter().chain(stray).max()
    }

    pub(super) fn newest_above(&self, min_ms: i64) -> Result<Option<f64>, NoFreeMember> {
        Ok(self.top_score().filter(|&s| s > min_ms).map(|s| s as f64))
    }

    pub(super) fn newest_entry(&self) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
        let Some(top) = self.top_score() else {
            return Ok(None);
        };
        // The greatest member among the runs at the highest score, in the
        // server's order of equal scores. Usually the last run alone holds
        // it; the chunks are only decoded when other runs share the score.
        let mut best: Option<i64> = None;
        let mut consider = |r: &Run| {
            let g = greatest_decimal(r.first, r.last());
            if best.is_none_or(|b| g.to_string() > b.to_string()) {
                best = Some(g);
            }
        };
        for s in self.strays.iter().filter(|s| s.score == top) {
            consider(s);
        }
        for c in self.chunks.iter().rev() {
            if c.last_score() != top {
                break;
            }
            if c.runs == 1 || c.tail_score < top {
                consider(&c.last);
            } else {
                for r in c.decode().iter().filter(|r| r.score == top) {
                    consider(r);
                }
            }
            if c.first_score() < top {
                break;
            }
        }
        Ok(Some((top as f64, best)))
    }

    /// Adds an entry scored `now_ms` under member `id`, or scored as the
    /// newest entry when `now_ms` would put more than [`MAX_STRAYS`] runs
    /// out of member order (see [`MAX_STRAYS`]): the score it was given, or
    /// `None` when the member is taken or no place keeps every bound.
    pub(super) fn add(&mut self, now_ms: i64, id: i64) -> Option<i64> {
        if id < 0 || self.run_holding(id).is_some() {
            return None;
        }
        let run = Run {
            score: now_ms,
            first: id,
            count: 1,
        };
        match self.insert(run) {
            Ok(()) => Some(now_ms),
            Err(Bound::Strays) => {
                let top = self.top_score().filter(|&t| t > now_ms)?;
                self.insert(Run { score: top, ..run }).ok().map(|()| top)
            }
            Err(_) => None,
        }
    }
}
