//! A log held as a list of chunks, and the window decision's queries and
//! changes on it.

use super::chunk::*;
use super::codec::*;
use super::run::*;
use crate::window::NoFreeMember;

/// A log as chunks of runs in score order, their total, an upper bound of
/// the members, and the expiry (see [`CompactLog`] for when it is used).
#[derive(Debug, Clone, Default)]
pub(super) struct Chunked {
    pub(super) chunks: Vec<Chunk>,
    pub(super) entries: u64,
    /// No member is greater (a bound, not the maximum: removals leave it).
    pub(super) max_id: Option<i64>,
    pub(super) expire_at_ms: Option<i64>,
    /// While a small log is held as chunks (see [`CompactLog::expand`]):
    /// its small form's block, reused or given back by `settle`. Empty
    /// otherwise.
    pub(super) stash: Vec<u8>,
}

/// Equal when they hold the same runs in the same order and expire alike,
/// however the runs are cut into chunks.
impl PartialEq for Chunked {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
            && self.expire_at_ms == other.expire_at_ms
            && self.runs() == other.runs()
    }
}

impl Eq for Chunked {}

impl Chunked {
    /// A log of `runs` (in score order, members unique), cut into chunks.
    pub(super) fn from_runs(runs: &[Run], expire_at_ms: Option<i64>) -> Chunked {
        let mut chunks: Vec<Chunk> = runs
            .chunks(CHUNK_RUNS)
            .filter_map(Chunk::from_runs)
            .collect();
        chunks.shrink_to_fit();
        Chunked {
            entries: chunks.iter().map(|c| c.entries).sum(),
            max_id: chunks.iter().map(|c| c.max_id).max(),
            chunks,
            expire_at_ms,
            stash: Vec::new(),
        }
    }

    /// Replaces the log by the one `bytes` encode, reusing this one's
    /// allocations. For the module's own encodings only (a small form it
    /// wrote): nothing is checked but that the records read back, and
    /// unreadable bytes leave an empty log (as [`CompactLog::view`] does).
    pub(super) fn decode_own(&mut self, bytes: &[u8]) {
        let mut spare = self
            .chunks
            .drain(..)
            .next()
            .map(|c| c.bytes)
            .unwrap_or_default();
        self.entries = 0;
        self.max_id = None;
        self.expire_at_ms = None;
        if bytes.is_empty() || self.read_own(bytes, &mut spare).is_err() {
            self.chunks.clear();
            self.entries = 0;
            self.max_id = None;
            self.expire_at_ms = None;
        }
    }

    pub(super) fn read_own(
        &mut self,
        bytes: &[u8],
        spare: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        if r.byte()? != VERSION {
            return Err(DecodeError::Invalid);
        }
        self.expire_at_ms = match r.byte()? {
            0 => None,
            1 => Some(unzigzag(r.varint()?)),
            _ => return Err(DecodeError::Invalid),
        };
        let n = r.varint()?;
        if n == 0 {
            return Ok(());
        }
        let mut score = unzigzag(r.varint()?);
        let mut expected = 1i64;
        for _ in 0..n {
            let run = read_run(&mut r, &mut score, &mut expected)?;
            self.entries = self.entries.saturating_add(run.count);
            self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
            match self.chunks.last_mut() {
                Some(c) if (c.runs as usize) < CHUNK_RUNS => c.push(run),
                _ => self.chunks.push(Chunk::of_in(run, std::mem::take(spare))),
            }
        }
        Ok(())
    }

    /// The runs, in score order.
    pub fn runs(&self) -> Vec<Run> {
        let mut out = Vec::new();
        for c in &self.chunks {
            out.extend(c.decode());
        }
        out
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        self.entries
    }

    /// The score of the oldest entry, if any.
    pub(super) fn oldest_score(&self) -> Option<i64> {
        self.chunks.first().map(|c| c.first_score())
    }

    /// Whether the log holds at most `n` runs (stops counting past `n`:
    /// O(1) for a large log).
    pub(super) fn runs_at_most(&self, n: usize) -> bool {
        let mut seen = 0usize;
        for c in &self.chunks {
            seen = seen.saturating_add(c.runs as usize);
            if seen > n {
                return false;
            }
        }
        true
    }

    /// The first of the sorted, disjoint ranges `ranges` (members `first
    /// ..= last`) that overlaps a member scored above `cutoff_ms`: each
    /// chunk whose member bounds meet a range is decoded once.
    pub(super) fn first_overlap_above(
        &self,
        ranges: &[(i64, i64)],
        cutoff_ms: i64,
    ) -> Option<(i64, i64)> {
        // The first range that may overlap `first ..= last`.
        let meeting = |first: i64, last: i64| -> Option<(i64, i64)> {
            let at = ranges.partition_point(|&(_, l)| l < first);
            ranges.get(at).copied().filter(|&(f, _)| f <= last)
        };
        for c in self.chunks.iter().filter(|c| c.last_score() > cutoff_ms) {
            if meeting(c.min_id, c.max_id).is_none() {
                continue;
            }
            let mut hit = None;
            c.find_run(|r| {
                hit = (r.score > cutoff_ms)
                    .then(|| meeting(r.first, r.last()))
                    .flatten();
                hit.is_some()
            });
            if hit.is_some() {
                return hit;
            }
        }
        None
    }

    /// Sets the expiry the encoding carries.
    pub fn set_expiry(&mut self, at_ms: i64) {
        self.expire_at_ms = Some(at_ms);
    }

    /// The absolute expiry set by the last `expire_at`, if any.
    pub fn expire_at_ms(&self) -> Option<i64> {
        self.expire_at_ms
    }

    /// Every entry as (score, member), in score order (tests and digests).
    pub fn entries(&self) -> impl Iterator<Item = (i64, i64)> {
        self.runs().into_iter().flat_map(|r| {
            (0..r.count).map(move |i| {
                let i = i64::try_from(i).unwrap_or(i64::MAX);
                (r.score, r.first.saturating_add(i))
            })
        })
    }

    /// The chunk and the run holding member `id`, if any.
    pub(super) fn find(&self, id: i64) -> Option<(usize, Vec<Run>, usize)> {
        if self.max_id.is_none_or(|m| id > m) {
            return None;
        }
        for (ci, c) in self.chunks.iter().enumerate() {
            if !c.may_hold(id) {
                continue;
            }
            // The last run first: the member asked for is usually recent.
            if c.last.holds(id) {
                return Some((ci, Vec::new(), usize::MAX));
            }
            let runs = c.decode();
            if let Some(ri) = runs.iter().position(|r| r.holds(id)) {
                return Some((ci, runs, ri));
            }
        }
        None
    }

    /// The run holding member `id`, if any.
    pub(super) fn run_holding(&self, id: i64) -> Option<Run> {
        let (ci, runs, ri) = self.find(id)?;
        match runs.get(ri) {
            Some(&r) => Some(r),
            None => self.chunks.get(ci).map(|c| c.last),
        }
    }

    /// Replaces chunk `ci` by chunks of `runs` (none when `runs` is empty).
    pub(super) fn replace_chunk(&mut self, ci: usize, runs: &[Run]) {
        let pieces: Vec<Chunk> = runs
            .chunks(CHUNK_RUNS)
            .filter_map(Chunk::from_runs)
            .collect();
        if ci < self.chunks.len() {
            self.chunks.splice(ci..=ci, pieces);
        }
    }

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there.
    pub fn remove(&mut self, id: i64) -> bool {
        let Some((ci, mut runs, ri)) = self.find(id) else {
            return false;
        };
        if runs.is_empty() {
            // Held by the chunk's last run: taken out of it in place.
            if self
                .chunks
                .get_mut(ci)
                .is_some_and(|c| c.remove_from_last(id))
            {
                self.entries = self.entries.saturating_sub(1);
                return true;
            }
            runs = match self.chunks.get(ci) {
                Some(c) => c.decode(),
                None => return false,
            };
        }
        let ri = if ri == usize::MAX {
            runs.len().saturating_sub(1)
        } else {
            ri
        };
        let Some(&run) = runs.get(ri) else {
            return false;
        };
        // `first <= id <= last`: neither difference can overflow.
        let before = u64::try_from(id.saturating_sub(run.first)).unwrap_or(0);
        let after = run.count.saturating_sub(before).saturating_sub(1);
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
                first: id.saturating_add(1),
                count: after,
            });
        }
        runs.splice(ri..=ri, pieces);
        self.replace_chunk(ci, &runs);
        self.entries = self.entries.saturating_sub(1);
        true
    }

    /// The digest's view of the log: per entry group `[score, first,
    /// count]`, canonical (equal scores ordered by member, contiguous runs
    /// merged), so two logs with the same entries give the same groups
    /// however their runs were split.
    pub fn canonical_runs(&self) -> Vec<Run> {
        let all = self.runs();
        let mut out: Vec<Run> = Vec::with_capacity(all.len());
        for group in all.chunk_by(|a, b| a.score == b.score) {
            let mut g = group.to_vec();
            g.sort_unstable_by_key(|r| r.first);
            for r in g {
                match out.last_mut() {
                    Some(prev)
                        if prev.score == r.score && prev.last().checked_add(1) == Some(r.first) =>
                    {
                        prev.count = prev.count.saturating_add(r.count);
                    }
                    _ => out.push(r),
                }
            }
        }
        out
    }

    /// Whether member `id` is in the log and scored above `cutoff_ms`.
    pub fn holds_above(&self, id: i64, cutoff_ms: i64) -> bool {
        self.run_holding(id).is_some_and(|r| r.score > cutoff_ms)
    }

    /// Adds a whole run whose members the caller checked are free and
    /// valid (see `effect.rs`), joining the run before it as `add` would.
    pub fn add_run(&mut self, run: Run) {
        self.insert(run);
    }

    /// Inserts `run` after every run scored at or before it, joining the
    /// run before it when that one has the same score and ends just before
    /// it (the flat list's rule, chunk by chunk).
    pub(super) fn insert(&mut self, run: Run) {
        self.entries = self.entries.saturating_add(run.count);
        self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
        let joins =
            |prev: &Run| prev.score == run.score && prev.last().checked_add(1) == Some(run.first);
        // The chunk holding the first run scored after `run`.
        let ci = self.chunks.partition_point(|c| c.last_score() <= run.score);
        if ci == self.chunks.len() {
            // At the end, the common case: extend the last run or append.
            match self.chunks.last_mut() {
                Some(c) if joins(&c.last) => {
                    c.last.count = c.last.count.saturating_add(run.count);
                    c.entries = c.entries.saturating_add(run.count);
                    c.max_id = c.max_id.max(run.last());
                }
                Some(c) if (c.runs as usize) < CHUNK_RUNS => c.push(run),
                _ => {
                    // The full chunk is sealed; the new one is written in
                    // the kind chosen for it (arrivals change slowly), and
                    // sealed in its own turn.
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
            return;
        }
        let Some(chunk) = self.chunks.get(ci) else {
            return;
        };
        let mut runs = chunk.decode();
        let at = runs.partition_point(|r| r.score <= run.score);
        if at == 0 {
            // The run before is the previous chunk's last.
            if let Some(prev) = ci.checked_sub(1).and_then(|p| self.chunks.get_mut(p)) {
                if joins(&prev.last) {
                    prev.last.count = prev.last.count.saturating_add(run.count);
                    prev.entries = prev.entries.saturating_add(run.count);
                    prev.max_id = prev.max_id.max(run.last());
                    return;
                }
            }
            runs.insert(0, run);
        } else {
            match runs.get_mut(at - 1) {
                Some(prev) if joins(prev) => prev.count = prev.count.saturating_add(run.count),
                _ => runs.insert(at, run),
            }
        }
        self.replace_chunk(ci, &runs);
    }

    /// Every heap block the log owns (for MEMORY USAGE).
    pub fn heap_blocks(&self) -> Vec<*const u8> {
        let mut out = Vec::with_capacity(self.chunks.len() + 1);
        if self.chunks.capacity() > 0 {
            out.push(self.chunks.as_ptr().cast());
        }
        for c in &self.chunks {
            if c.bytes.capacity() > 0 {
                out.push(c.bytes.as_ptr());
            }
        }
        out
    }

    /// How many heap blocks freeing the log releases.
    pub fn blocks(&self) -> usize {
        self.chunks.len().saturating_add(1)
    }

    /// The encoding (see the module comment).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.min(1 << 16) as usize * 2);
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoding to `out`, allocating nothing else.
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        match self.expire_at_ms {
            None => out.push(0),
            Some(at) => {
                out.push(1);
                put_varint(out, zigzag(at));
            }
        }
        let (mut runs, mut first) = (0u64, None);
        for c in &self.chunks {
            c.for_each_run(|r| {
                runs = runs.saturating_add(1);
                first.get_or_insert(r.score);
            });
        }
        put_varint(out, runs);
        let Some(first) = first else {
            return;
        };
        put_varint(out, zigzag(first));
        let (mut score, mut expected) = (first, 1i64);
        for c in &self.chunks {
            c.for_each_run(|r| put_run(out, &mut score, &mut expected, r));
        }
    }

    /// Decodes bytes from anywhere (RDB, RESTORE, a client): a log that
    /// holds every invariant, or why not.
    pub fn decode(bytes: &[u8]) -> Result<Chunked, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.byte()?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let expire_at_ms = match r.byte()? {
            0 => None,
            1 => Some(unzigzag(r.varint()?)),
            _ => return Err(DecodeError::Invalid),
        };
        let n = r.varint()?;
        if n > MAX_RUNS {
            return Err(DecodeError::Range);
        }
        // Each run takes at least one byte: a count beyond what is left is
        // a lie, refused before anything is allocated for it.
        let left = bytes.len().saturating_sub(r.at) as u64;
        if n > left {
            return Err(DecodeError::Truncated);
        }
        let mut runs = Vec::with_capacity(n as usize);
        let mut entries = 0u64;
        if n > 0 {
            let mut score = unzigzag(r.varint()?);
            let mut expected = 1i64;
            for _ in 0..n {
                let run = read_run(&mut r, &mut score, &mut expected)?;
                if !(0..=MAX_SCORE).contains(&run.score) {
                    return Err(DecodeError::Range);
                }
                entries = entries.checked_add(run.count).ok_or(DecodeError::Range)?;
                if entries > MAX_ENTRIES {
                    return Err(DecodeError::Range);
                }
                runs.push(run);
            }
        }
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing);
        }
        // Members unique over the log: no two runs' ranges overlap.
        let mut ranges: Vec<(i64, i64)> = runs.iter().map(|r| (r.first, r.last())).collect();
        ranges.sort_unstable();
        if ranges.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err(DecodeError::Invalid);
        }
        Ok(Chunked::from_runs(&runs, expire_at_ms))
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
        let mut removed: u64 = self.chunks.drain(..whole).map(|c| c.entries).sum();
        // The chunk the cutoff falls in, if any: its expired records are
        // stepped over, not rewritten.
        if let Some(c) = self.chunks.first_mut() {
            if c.first_score() <= cutoff_ms {
                removed = removed.saturating_add(c.trim_front(cutoff_ms));
            }
        }
        self.entries = self.entries.saturating_sub(removed);
        if self.chunks.is_empty() {
            self.max_id = None;
        }
        Ok(removed)
    }

    pub(super) fn count_above(&self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        let mut n = 0u64;
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
        let mut seen = 0u64;
        let start = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        for c in self.chunks.iter().skip(start) {
            if c.first_score() > cutoff_ms && seen.saturating_add(c.entries) < k {
                seen = seen.saturating_add(c.entries);
                continue;
            }
            // The runs are read up to the one holding the k-th entry only.
            let hit = c.find_run(|r| {
                if r.score <= cutoff_ms {
                    return false;
                }
                seen = seen.saturating_add(r.count);
                seen >= k
            });
            if let Some(r) = hit {
                return Ok(Some(r.score as f64));
            }
        }
        Ok(None)
    }

    pub(super) fn newest_above(&self, min_ms: i64) -> Result<Option<f64>, NoFreeMember> {
        Ok(self
            .chunks
            .last()
            .map(|c| c.last_score())
            .filter(|&s| s > min_ms)
            .map(|s| s as f64))
    }

    pub(super) fn newest_entry(&self) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
        let Some(top) = self.chunks.last().map(|c| c.last_score()) else {
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

    pub(super) fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, NoFreeMember> {
        if id < 0 || self.find(id).is_some() {
            return Ok(false);
        }
        self.insert(Run {
            score: now_ms,
            first: id,
            count: 1,
        });
        Ok(true)
    }
}
