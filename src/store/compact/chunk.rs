//! A chunk: a stretch of consecutive runs held encoded, with the summaries
//! that answer most queries without decoding it.

use super::codec::*;
use super::rice::*;
use super::run::Run;

/// Runs per chunk: a chunk is decoded whole when a call needs its insides
/// (an insert out of order, an UNDO, the boundary of a trim), so this bounds
/// that work; fewer, larger chunks spend less on each chunk's summary.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const CHUNK_RUNS: usize = 1024;
/// In the unit tests, tiny chunks: every property test crosses chunk
/// boundaries many times (inserts, splits, trims and UNDOs across them).
/// The fuzz targets (feature `fuzzing`) use the same small values.
#[cfg(any(test, feature = "fuzzing"))]
pub const CHUNK_RUNS: usize = 3;

/// The most runs a chunk split in place holds ([`Chunk::splice_record`]):
/// past it the chunk is written again as chunks of [`CHUNK_RUNS`], so UNDOs
/// splitting runs never grow one chunk without end. Larger than twice
/// [`CHUNK_RUNS`] in the tests, whose chunks of a few runs would otherwise
/// never be split in place.
#[cfg(not(any(test, feature = "fuzzing")))]
pub(super) const SPLICED_RUNS: usize = 2 * CHUNK_RUNS;
#[cfg(any(test, feature = "fuzzing"))]
pub(super) const SPLICED_RUNS: usize = 128;

/// Records between two [`Marks`] of a chunk: a lookup by member reads at
/// most about this many records (twice as many before the marks are made).
#[cfg(not(any(test, feature = "fuzzing")))]
pub(super) const MARK_EVERY: u32 = 64;
/// In the unit tests, a mark every two records: the tiny chunks make and
/// keep marks through every change.
#[cfg(any(test, feature = "fuzzing"))]
pub(super) const MARK_EVERY: u32 = 2;

/// A chunk gets its marks on a lookup when it holds more records than
/// this: below, reading from its first record costs no more.
#[cfg(not(any(test, feature = "fuzzing")))]
pub(super) const MARKS_FROM: u32 = 2 * MARK_EVERY;
#[cfg(any(test, feature = "fuzzing"))]
pub(super) const MARKS_FROM: u32 = MARK_EVERY;

/// Where some of a chunk's records start, with the state each is read
/// after, in record order, about one every [`MARK_EVERY`] records: a
/// lookup by member (UNDO, UNDO ID, SETTLE down) starts reading at the
/// mark before the member instead of the chunk's first record, so it reads
/// at most about [`MARK_EVERY`] records however many the chunk holds.
/// Made on a chunk's first such lookup that would read more than twice
/// that (a chunk no UNDO reaches into holds none: no memory for them),
/// then kept by every change: a record written at the end adds one when
/// due, a cut drops those after it, a trim those before the first live
/// record. A sealed or rebuilt chunk starts without.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Marks {
    /// The marks, by record order (so by `at`, and by `expected`: the
    /// chain's members increase along the chunk).
    pub(super) list: Vec<RecordAt>,
    /// Records written since the last mark (or the first live record).
    pub(super) since: u32,
}

/// A stretch of consecutive runs, held encoded (records relative to the
/// chunk's first run) but for the last run, which stays open so that the
/// next entry of the same millisecond extends it. The summaries answer most
/// queries without decoding.
///
/// The records are written in one of two ways, the chunk's `kind`:
/// - [`BYTES`]: the byte records of the encoding (see [`put_run`]), cheap
///   to append: the chunk calls write to;
/// - a Rice code of parameter `k` (`kind` is `k + 1`, see [`put_rice`]):
///   a run of one entry whose member is the expected one costs `q + 1 + k`
///   bits for a gap of `q * 2^k + r` ms, about 1.25 bytes for Poisson
///   arrivals, against 1.7 for the bytes.
///
/// A chunk is *sealed* when the next chunk starts after it (and whenever
/// it is rebuilt): its runs are written again in whichever kind is the
/// smallest for them, once per [`CHUNK_RUNS`] runs, so amortized O(1).
#[derive(Debug, Clone)]
pub(super) struct Chunk {
    /// The state the first live record is read from: the score and one
    /// more than the last member of the record before it (for a new chunk,
    /// its first run's score and first member).
    pub(super) base_score: i64,
    pub(super) base_id: i64,
    /// The records of every run but the last, from `start` on (a byte
    /// offset for [`BYTES`], a bit offset for a Rice code): a trim steps
    /// `start` past expired records instead of rewriting the bytes.
    pub(super) bytes: Vec<u8>,
    pub(super) start: usize,
    /// Where some records start (see [`Marks`]); `None` until a lookup
    /// needs them. (The first live run's score is read from its record:
    /// this field took its place, the chunk stays 128 bytes.)
    pub(super) marks: Option<Box<Marks>>,
    /// The state after the last record (the last encoded run's score and
    /// one more than its last member).
    pub(super) tail_score: i64,
    pub(super) tail_expected: i64,
    /// The last run, not yet encoded.
    pub(super) last: Run,
    /// Runs (with `last`) and entries in the chunk.
    pub(super) runs: u32,
    /// How the records are written: [`BYTES`] or a Rice parameter plus one.
    pub(super) kind: u8,
    /// For a Rice code: the bits of the last byte not yet used (0 to 7).
    pub(super) pad: u8,
    pub(super) entries: u64,
    /// The smallest and largest member in the chunk, exact: the first
    /// run's first and the last run's last (a chunk holds a stretch of the
    /// chain, whose members increase; see `chunked/mod.rs`).
    pub(super) min_id: i64,
    pub(super) max_id: i64,
}

/// Where a record of a chunk starts (a byte offset for [`BYTES`], a bit
/// offset for a Rice code) and the state it is read after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RecordAt {
    pub(super) at: usize,
    pub(super) score: i64,
    pub(super) expected: i64,
}

// Four to a 512-byte block; the marks took the place of a field.
const _: () = assert!(std::mem::size_of::<Chunk>() <= 128);

/// A chunk whose records are the encoding's bytes.
pub(super) const BYTES: u8 = 0;

impl Chunk {
    /// A chunk of one run, its records written as bytes.
    pub(super) fn of(run: Run) -> Chunk {
        Chunk {
            base_score: run.score,
            base_id: run.first,
            bytes: Vec::new(),
            start: 0,
            marks: None,
            tail_score: run.score,
            tail_expected: run.first,
            last: run,
            runs: 1,
            kind: BYTES,
            pad: 0,
            entries: run.count,
            min_id: run.first,
            max_id: run.last(),
        }
    }

    /// A chunk of one run whose records go into `bytes` (emptied first),
    /// reusing its allocation.
    pub(super) fn of_in(run: Run, mut bytes: Vec<u8>) -> Chunk {
        bytes.clear();
        Chunk {
            bytes,
            ..Chunk::of(run)
        }
    }

    /// A chunk of the given runs (at least one; in score order), its
    /// records written in the smallest kind for them, in a block of their
    /// size.
    pub(super) fn from_runs(runs: &[Run]) -> Option<Chunk> {
        let (&first, rest) = runs.split_first()?;
        let (kind, bytes) = best_kind(runs);
        let mut c = Chunk {
            kind,
            bytes: Vec::with_capacity(bytes),
            ..Chunk::of(first)
        };
        for &r in rest {
            c.append(r);
        }
        c.bytes.shrink_to_fit();
        Some(c)
    }

    /// A chunk of `runs` written in `kind` whatever its size (tests: every
    /// kind must read back what it was given).
    #[cfg(test)]
    pub(super) fn from_runs_as(runs: &[Run], kind: u8) -> Option<Chunk> {
        let (&first, rest) = runs.split_first()?;
        let mut c = Chunk {
            kind,
            ..Chunk::of(first)
        };
        for &r in rest {
            c.push(r);
        }
        Some(c)
    }

    /// Writes the runs again in the smallest kind for them, in a block of
    /// their size (the chunk is full, or rebuilt): the records the calls
    /// appended as bytes become a Rice code where that is smaller.
    pub(super) fn seal(&mut self) {
        let runs = self.decode();
        if let Some(c) = Chunk::from_runs(&runs) {
            *self = c;
        }
    }

    /// The score of the first live run: its record's, read (one record),
    /// or the last run's when it is the only one.
    pub(super) fn first_score(&self) -> i64 {
        let (mut at, mut score, mut expected) = (self.start, self.base_score, self.base_id);
        if at < self.end() {
            if let Ok(r) = self.read(&mut at, &mut score, &mut expected) {
                return r.score;
            }
        }
        self.last.score
    }

    pub(super) fn last_score(&self) -> i64 {
        self.last.score
    }

    /// Where the records end: a byte offset for [`BYTES`], a bit offset
    /// for a Rice code.
    pub(super) fn end(&self) -> usize {
        if self.kind == BYTES {
            self.bytes.len()
        } else {
            self.bytes
                .len()
                .saturating_mul(8)
                .saturating_sub(usize::from(self.pad))
        }
    }

    /// Reads the record at `at` after the state (`score`, `expected`),
    /// moving both past it.
    pub(super) fn read(
        &self,
        at: &mut usize,
        score: &mut i64,
        expected: &mut i64,
    ) -> Result<Run, DecodeError> {
        if self.kind == BYTES {
            let mut r = Reader {
                bytes: &self.bytes,
                at: *at,
            };
            let run = read_run(&mut r, score, expected)?;
            *at = r.at;
            Ok(run)
        } else {
            let k = u32::from(self.kind.saturating_sub(1));
            read_rice(&self.bytes, self.end(), at, k, score, expected)
        }
    }

    /// Appends `run` (scored at or after the last run), closing the last.
    pub(super) fn push(&mut self, run: Run) {
        // Room for one more record (at most 31 bytes), grown by a quarter
        // rather than doubled: the open chunk's spare room is memory too.
        if self.bytes.capacity() - self.bytes.len() < 32 {
            self.bytes.reserve_exact((self.bytes.len() / 4).max(32));
        }
        self.append(run);
    }

    /// As `push`, in whatever room the block has (growing it as a vector
    /// grows when there is none).
    pub(super) fn append(&mut self, run: Run) {
        self.put_record(self.last);
        self.last = run;
        self.runs = self.runs.saturating_add(1);
        self.entries = self.entries.saturating_add(run.count);
        self.min_id = self.min_id.min(run.first);
        self.max_id = self.max_id.max(run.last());
    }

    /// Writes `run` as the record after the last one (the state after
    /// the records moves past it); nothing else changes.
    /// Replaces the records of `[from, to)` (record starts, or `to` the
    /// end) by `new`, `new_len` long (bytes, or bits for a Rice code): the
    /// records after `to` are moved, not read (a Rice code's bits shifted
    /// 56 at a time); the state after the last record is the caller's.
    pub(super) fn replace_records(&mut self, from: usize, to: usize, new: &[u8], new_len: usize) {
        if self.kind == BYTES {
            if from <= to && to <= self.bytes.len() {
                self.bytes.splice(from..to, new.iter().copied());
            }
            return;
        }
        let end = self.end();
        let mut tail = Vec::with_capacity(end.saturating_sub(to) / 8 + 1);
        let mut w = BitWriter {
            out: &mut tail,
            pad: 0,
        };
        copy_bits(&mut w, &self.bytes, to, end);
        let tail_len = end.saturating_sub(to);
        self.truncate_records(from);
        let mut w = BitWriter {
            out: &mut self.bytes,
            pad: self.pad,
        };
        copy_bits(&mut w, new, 0, new_len);
        copy_bits(&mut w, &tail, 0, tail_len);
        self.pad = w.pad;
    }

    pub(super) fn put_record(&mut self, run: Run) {
        let end = self.end();
        if let Some(m) = self.marks.as_deref_mut() {
            if m.since >= MARK_EVERY {
                m.list.push(RecordAt {
                    at: end,
                    score: self.tail_score,
                    expected: self.tail_expected,
                });
                m.since = 0;
            }
            m.since = m.since.saturating_add(1);
        }
        if self.kind == BYTES {
            put_run(
                &mut self.bytes,
                &mut self.tail_score,
                &mut self.tail_expected,
                run,
            );
        } else {
            let k = u32::from(self.kind.saturating_sub(1));
            let mut w = BitWriter {
                out: &mut self.bytes,
                pad: self.pad,
            };
            put_rice(
                &mut w,
                k,
                &mut self.tail_score,
                &mut self.tail_expected,
                run,
            );
            self.pad = w.pad;
        }
    }

    /// Cuts the records at `at` (a record's start: a byte offset for
    /// [`BYTES`], a bit offset for a Rice code), the unused bits of a Rice
    /// code's last byte cleared; the state after the records is the
    /// caller's to set.
    pub(super) fn truncate_records(&mut self, at: usize) {
        if self.kind == BYTES {
            self.bytes.truncate(at);
        } else {
            self.bytes.truncate(at.div_ceil(8));
            let used = (at % 8) as u32;
            self.pad = 0;
            if used > 0 {
                if let Some(b) = self.bytes.last_mut() {
                    *b &= (1u8 << used) - 1;
                }
                self.pad = (8 - used) as u8;
            }
        }
    }

    /// Every run of the chunk, in order.
    pub(super) fn decode(&self) -> Vec<Run> {
        let mut out = Vec::with_capacity(self.runs as usize);
        self.for_each_run(|r| out.push(r));
        out
    }

    /// Calls `f` on every run of the chunk, in order, allocating nothing.
    pub(super) fn for_each_run(&self, mut f: impl FnMut(Run)) {
        self.find_run(|r| {
            f(r);
            false
        });
    }

    /// The first run, in order, for which `f` says true: the records are
    /// read one by one and no further (allocating nothing).
    pub(super) fn find_run(&self, mut f: impl FnMut(Run) -> bool) -> Option<Run> {
        // One loop per kind: the kind is not asked again for each record.
        let found = if self.kind == BYTES {
            self.find_record(&mut f, |c, at, score, expected| {
                let mut r = Reader {
                    bytes: &c.bytes,
                    at: *at,
                };
                let run = read_run(&mut r, score, expected);
                *at = r.at;
                run
            })
        } else {
            let (k, end) = (u32::from(self.kind.saturating_sub(1)), self.end());
            self.find_record(&mut f, |c, at, score, expected| {
                read_rice(&c.bytes, end, at, k, score, expected)
            })
        };
        found.or_else(|| f(self.last).then_some(self.last))
    }

    /// The first record for which `f` says true, each read by `read`.
    #[inline(always)]
    pub(super) fn find_record(
        &self,
        f: &mut impl FnMut(Run) -> bool,
        read: impl Fn(&Chunk, &mut usize, &mut i64, &mut i64) -> Result<Run, DecodeError>,
    ) -> Option<Run> {
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        // The bytes are this code's own: a record always reads back.
        while at < end {
            match read(self, &mut at, &mut score, &mut expected) {
                Ok(run) if f(run) => return Some(run),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        None
    }

    /// Removes the runs scored at or below `cutoff_ms` from the front, by
    /// stepping past their records (the last run must be above it: the
    /// caller drops a chunk it covers whole); returns the entries removed.
    /// The dead bytes are given back once they outweigh the live ones, so
    /// the work stays proportional to what expires.
    pub(super) fn trim_front(&mut self, cutoff_ms: i64) -> u64 {
        let mut removed = 0u64;
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        loop {
            if at >= end {
                self.min_id = self.last.first;
                break;
            }
            let Ok(run) = self.read(&mut at, &mut score, &mut expected) else {
                break;
            };
            if run.score > cutoff_ms {
                self.min_id = run.first;
                break;
            }
            self.start = at;
            self.base_score = score;
            self.base_id = expected;
            self.runs = self.runs.saturating_sub(1);
            self.entries = self.entries.saturating_sub(run.count);
            removed = removed.saturating_add(run.count);
        }
        // The marks before the first live record go.
        let start = self.start;
        if let Some(m) = self.marks.as_deref_mut() {
            let gone = m.list.partition_point(|r| r.at < start);
            m.list.drain(..gone);
        }
        // Whole dead bytes (a Rice code keeps the bits of a partly live
        // byte).
        let dead = if self.kind == BYTES {
            self.start
        } else {
            self.start / 8
        };
        if dead > 0 && dead >= self.bytes.len().saturating_sub(dead) {
            self.bytes.drain(..dead);
            // The marks move with the records (`dead` bytes, or as many
            // times 8 bits, all before the first live record).
            let shift = if self.kind == BYTES {
                dead
            } else {
                dead.saturating_mul(8)
            };
            if let Some(m) = self.marks.as_deref_mut() {
                for r in m.list.iter_mut() {
                    r.at = r.at.saturating_sub(shift);
                }
            }
            self.start = if self.kind == BYTES {
                0
            } else {
                self.start % 8
            };
            if self.bytes.capacity() > 2 * self.bytes.len() + 16 {
                self.bytes.shrink_to_fit();
            }
        }
        removed
    }

    /// Removes member `id` from the last run without writing the records
    /// again (an UNDO of a recent entry, the usual one): false, changing
    /// nothing, when the last run does not hold it or is the chunk's only
    /// run.
    #[cfg(test)]
    pub(super) fn remove_from_last(&mut self, id: i64) -> bool {
        self.remove_range_from_last(id, id)
    }

    /// As [`Chunk::remove_from_last`], members `lo ..= hi` of the last run
    /// (an UNDO of a recent charge of several units).
    pub(super) fn remove_range_from_last(&mut self, lo: i64, hi: i64) -> bool {
        let run = self.last;
        if lo > hi || !run.holds(lo) || !run.holds(hi) || self.runs < 2 {
            return false;
        }
        // `first <= lo <= hi <= last`: no difference can overflow.
        let before = u64::try_from(lo.saturating_sub(run.first)).unwrap_or(0);
        let gone = u64::try_from(hi.saturating_sub(lo))
            .unwrap_or(0)
            .saturating_add(1);
        let after = run.count.saturating_sub(before).saturating_sub(gone);
        let next = hi.saturating_add(1);
        match (before, after) {
            (0, 0) => {
                if !self.pop_record() {
                    return false;
                }
            }
            (0, _) => {
                self.last = Run {
                    first: next,
                    count: after,
                    ..run
                }
            }
            (_, 0) => {
                self.last = Run {
                    count: before,
                    ..run
                }
            }
            _ => {
                self.last = Run {
                    count: before,
                    ..run
                };
                self.push(Run {
                    score: run.score,
                    first: next,
                    count: after,
                });
                // `push` counted the second part's entries again.
                self.entries = self.entries.saturating_sub(after);
            }
        }
        self.entries = self.entries.saturating_sub(gone);
        self.max_id = self.last.last();
        true
    }
}

/// Appends bits `from .. to` of `src` to `w`.
fn copy_bits(w: &mut BitWriter<'_>, src: &[u8], mut from: usize, to: usize) {
    while from < to {
        let n = (to - from).min(56);
        w.put(bits_at(src, from), n as u32);
        from += n;
    }
}

/// Writes `run` as a record of a chunk of `kind` after `out` (its last
/// byte's `pad` high bits free, for a Rice code), read after the state
/// (`score`, `expected`), which moves past it.
pub(super) fn write_record(
    kind: u8,
    out: &mut Vec<u8>,
    pad: &mut u8,
    score: &mut i64,
    expected: &mut i64,
    run: Run,
) {
    if kind == BYTES {
        put_run(out, score, expected, run);
    } else {
        let k = u32::from(kind.saturating_sub(1));
        let mut w = BitWriter { out, pad: *pad };
        put_rice(&mut w, k, score, expected, run);
        *pad = w.pad;
    }
}

/// How long the records [`write_record`] wrote are: bytes, or bits for a
/// Rice code.
pub(super) fn records_len(kind: u8, out: &[u8], pad: u8) -> usize {
    if kind == BYTES {
        out.len()
    } else {
        out.len().saturating_mul(8).saturating_sub(usize::from(pad))
    }
}

/// The kind that writes the records of `runs` (every run but the last,
/// after the first's state) in the fewest bytes, and that size: the bytes
/// of the encoding, or the best of four Rice parameters around the one a
/// histogram of the single-entry records' gaps (by bit length) calls for.
pub(super) fn best_kind(runs: &[Run]) -> (u8, usize) {
    let Some((&first, _)) = runs.split_first() else {
        return (BYTES, 0);
    };
    let records = runs.get(..runs.len().saturating_sub(1)).unwrap_or(&[]);
    // One walk for the byte size and the histogram of gaps.
    let (mut score, mut expected) = (first.score, first.first);
    let (mut byte_len, mut by_length, mut simple) = (0u64, [0u32; 65], false);
    for r in records {
        let gap = u64::try_from(r.score.saturating_sub(score)).unwrap_or(0);
        byte_len = byte_len.saturating_add(run_bytes(r, gap, expected));
        if r.first == expected && r.count == 1 {
            let b = (64 - gap.leading_zeros()) as usize;
            if let Some(n) = by_length.get_mut(b) {
                *n = n.saturating_add(1);
            }
            simple = true;
        }
        score = r.score;
        expected = r.last().saturating_add(1);
    }
    if !simple {
        return (BYTES, byte_len as usize);
    }
    let centre = (0..=MAX_RICE_K)
        .min_by_key(|&k| estimated_rice_bits(&by_length, k))
        .unwrap_or(0);
    let low = centre.saturating_sub(1);
    let mut bits = [0u64; 4];
    let (mut score, mut expected) = (first.score, first.first);
    for r in records {
        let gap = u64::try_from(r.score.saturating_sub(score)).unwrap_or(0);
        for (i, b) in bits.iter_mut().enumerate() {
            let k = (low + i as u32).min(MAX_RICE_K);
            *b = b.saturating_add(rice_bits(r, gap, expected, k));
        }
        score = r.score;
        expected = r.last().saturating_add(1);
    }
    let mut best = (BYTES, byte_len);
    for (i, b) in bits.iter().enumerate() {
        let k = (low + i as u32).min(MAX_RICE_K);
        let len = b.div_ceil(8);
        if len < best.1 {
            best = (k as u8 + 1, len);
        }
    }
    (best.0, best.1 as usize)
}

/// About twice the bits a Rice code of parameter `k` spends on gaps
/// counted by bit length (`by_length[b]` gaps in `2^(b-1) .. 2^b`), each
/// taken at its range's mean quotient.
pub(super) fn estimated_rice_bits(by_length: &[u32; 65], k: u32) -> u64 {
    let mut total = 0u64;
    for (b, &n) in (0u32..).zip(by_length.iter()) {
        if n == 0 {
            continue;
        }
        let twice = if b <= k {
            2 * (u64::from(k) + 1)
        } else if b - k > 4 {
            // Quotients of ESC (16) and more: escaped.
            2 * (u64::from(ESC) + 8 * (u64::from(b.div_ceil(7)) + 2))
        } else {
            // Quotients from 2^(b-1-k) to 2^(b-k) - 1: a mean of 1.5 *
            // 2^(b-1-k) - 0.5.
            3 * (1u64 << (b - 1 - k)) - 1 + 2 * (u64::from(k) + 1)
        };
        total = total.saturating_add(twice.saturating_mul(u64::from(n)));
    }
    total
}
