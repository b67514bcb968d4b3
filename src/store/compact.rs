//! The compact log: a second [`WindowLog`] store, pure, with its byte
//! encoding. `compact_store.rs` makes it the server data type `slidewlog`
//! when `slidewin.log-type` is `compact`; `effect.rs` is the effect command
//! that replicates its changes.
//!
//! A log is a list of *runs*, each `count` entries scored `score` (ms) under
//! the consecutive member ids `first .. first + count`. The core gives a new
//! entry one more than the newest member (see `member.rs`), so the entries
//! of one call, and calls in the same millisecond, extend one run: a call
//! of `COST 10000` is one run, not 10000 entries. Runs are kept in score
//! order; members are unique over the whole log. Every query answers what
//! the sorted-set store answers for the same entries, including the order
//! of equal scores (byte-wise on the members' decimal forms), so the core
//! decides identically on both (the property tests drive both).
//!
//! The encoding ([`CompactLog::encode`], [`CompactLog::decode`]) is what an
//! RDB, a RESTORE payload or an effect command will carry: a version byte,
//! the expiry, the first score, then one record per run, mostly one or two
//! bytes: a run of one entry whose member is the expected one (one more
//! than the previous run's last) and whose score is less than 128 ms after
//! the previous one takes one byte, less than 16384 ms two. Decoding treats
//! the bytes as hostile: every length, sum and order is checked, and a log
//! it returns satisfies every invariant the queries rely on.

use std::cell::RefCell;

use crate::relocate::Relocate;
use crate::window::{NoFreeMember, WindowLog};

mod small;

/// `count` entries scored `score` under members `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub score: i64,
    pub first: i64,
    pub count: u64,
}

impl Run {
    /// The last member of the run (`first + count - 1`; checked when the
    /// run was made).
    pub fn last(&self) -> i64 {
        let span = i64::try_from(self.count.saturating_sub(1)).unwrap_or(i64::MAX);
        self.first.saturating_add(span)
    }

    fn holds(&self, id: i64) -> bool {
        self.first <= id && id <= self.last()
    }
}

/// The most entries a decoded log may hold: far above any `slidewin.max-limit`
/// times the costs of a window, far below where sums could overflow.
pub const MAX_ENTRIES: u64 = 1 << 40;

/// Scores are server times in ms, from 0 to 2^53 (where an `f64`, the
/// core's score, is still exact): a bound that keeps every gap between two
/// scores representable, so no score can be altered by the encoding.
pub const MAX_SCORE: i64 = 1 << 53;

/// The most runs a decoded log may hold: above any log the module makes
/// (`slidewin.max-limit` is at most 10,000,000), and a bound on what a
/// payload can make the decoder allocate.
pub const MAX_RUNS: u64 = 1 << 24;

/// The encoding's version byte; a decoder refuses any other.
pub const VERSION: u8 = 1;

/// Why bytes are not a compact log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes end inside a field.
    Truncated,
    /// A version this code does not know (a newer module wrote it).
    Version(u8),
    /// A varint longer than 64 bits, or a value out of its range.
    Range,
    /// Runs out of order, overlapping members, or an empty run.
    Invalid,
    /// Bytes after the last run.
    Trailing,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("the payload ends inside a field"),
            DecodeError::Version(v) => write!(f, "unknown encoding version {v}"),
            DecodeError::Range => f.write_str("a value out of range"),
            DecodeError::Invalid => {
                f.write_str("entries out of order, a member twice or an empty run")
            }
            DecodeError::Trailing => f.write_str("bytes after the last entry"),
        }
    }
}

/// Runs per chunk: a chunk is decoded whole when a call needs its insides
/// (an insert out of order, an UNDO, the boundary of a trim), so this bounds
/// that work; fewer, larger chunks spend less on each chunk's summary.
#[cfg(not(test))]
pub const CHUNK_RUNS: usize = 1024;
/// In the unit tests, tiny chunks: every property test crosses chunk
/// boundaries many times (inserts, splits, trims and UNDOs across them).
#[cfg(test)]
pub const CHUNK_RUNS: usize = 3;

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
struct Chunk {
    /// The state the first live record is read from: the score and one
    /// more than the last member of the record before it (for a new chunk,
    /// its first run's score and first member).
    base_score: i64,
    base_id: i64,
    /// The records of every run but the last, from `start` on (a byte
    /// offset for [`BYTES`], a bit offset for a Rice code): a trim steps
    /// `start` past expired records instead of rewriting the bytes.
    bytes: Vec<u8>,
    start: usize,
    /// The score of the first live run.
    first_score: i64,
    /// The state after the last record (the last encoded run's score and
    /// one more than its last member).
    tail_score: i64,
    tail_expected: i64,
    /// The last run, not yet encoded.
    last: Run,
    /// Runs (with `last`) and entries in the chunk.
    runs: u32,
    /// How the records are written: [`BYTES`] or a Rice parameter plus one.
    kind: u8,
    /// For a Rice code: the bits of the last byte not yet used (0 to 7).
    pad: u8,
    entries: u64,
    /// The smallest and largest member in the chunk.
    min_id: i64,
    max_id: i64,
}

/// A chunk whose records are the encoding's bytes.
const BYTES: u8 = 0;

/// The greatest Rice parameter: a record's code (at most `ESC + 1 + k`
/// bits) then fits the 57 bits one read of the bytes yields.
const MAX_RICE_K: u32 = 40;

/// In a Rice code, a quotient of `ESC` ones marks an escaped record: three
/// varints (the gap, the member's zigzag distance from the expected one,
/// the count less one), written 8 bits a byte, follow. Runs of several
/// entries, members out of sequence, and gaps of `ESC * 2^k` ms or more
/// are written so.
const ESC: u32 = 16;

impl Chunk {
    /// A chunk of one run, its records written as bytes.
    fn of(run: Run) -> Chunk {
        Chunk {
            base_score: run.score,
            base_id: run.first,
            bytes: Vec::new(),
            start: 0,
            first_score: run.score,
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
    fn of_in(run: Run, mut bytes: Vec<u8>) -> Chunk {
        bytes.clear();
        Chunk {
            bytes,
            ..Chunk::of(run)
        }
    }

    /// A chunk of the given runs (at least one; in score order), its
    /// records written in the smallest kind for them, in a block of their
    /// size.
    fn from_runs(runs: &[Run]) -> Option<Chunk> {
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
    fn from_runs_as(runs: &[Run], kind: u8) -> Option<Chunk> {
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
    fn seal(&mut self) {
        let runs = self.decode();
        if let Some(c) = Chunk::from_runs(&runs) {
            *self = c;
        }
    }

    fn first_score(&self) -> i64 {
        self.first_score
    }

    fn last_score(&self) -> i64 {
        self.last.score
    }

    /// Where the records end: a byte offset for [`BYTES`], a bit offset
    /// for a Rice code.
    fn end(&self) -> usize {
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
    fn read(
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
    fn push(&mut self, run: Run) {
        // Room for one more record (at most 31 bytes), grown by a quarter
        // rather than doubled: the open chunk's spare room is memory too.
        if self.bytes.capacity() - self.bytes.len() < 32 {
            self.bytes.reserve_exact((self.bytes.len() / 4).max(32));
        }
        self.append(run);
    }

    /// As `push`, in whatever room the block has (growing it as a vector
    /// grows when there is none).
    fn append(&mut self, run: Run) {
        let closed = self.last;
        if self.kind == BYTES {
            put_run(
                &mut self.bytes,
                &mut self.tail_score,
                &mut self.tail_expected,
                closed,
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
                closed,
            );
            self.pad = w.pad;
        }
        self.last = run;
        self.runs = self.runs.saturating_add(1);
        self.entries = self.entries.saturating_add(run.count);
        self.min_id = self.min_id.min(run.first);
        self.max_id = self.max_id.max(run.last());
    }

    /// Every run of the chunk, in order.
    fn decode(&self) -> Vec<Run> {
        let mut out = Vec::with_capacity(self.runs as usize);
        self.for_each_run(|r| out.push(r));
        out
    }

    /// Calls `f` on every run of the chunk, in order, allocating nothing.
    fn for_each_run(&self, mut f: impl FnMut(Run)) {
        self.find_run(|r| {
            f(r);
            false
        });
    }

    /// The first run, in order, for which `f` says true: the records are
    /// read one by one and no further (allocating nothing).
    fn find_run(&self, mut f: impl FnMut(Run) -> bool) -> Option<Run> {
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
    fn find_record(
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
    fn trim_front(&mut self, cutoff_ms: i64) -> u64 {
        let mut removed = 0u64;
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        loop {
            if at >= end {
                self.first_score = self.last.score;
                break;
            }
            let Ok(run) = self.read(&mut at, &mut score, &mut expected) else {
                break;
            };
            if run.score > cutoff_ms {
                self.first_score = run.score;
                break;
            }
            self.start = at;
            self.base_score = score;
            self.base_id = expected;
            self.runs = self.runs.saturating_sub(1);
            self.entries = self.entries.saturating_sub(run.count);
            removed = removed.saturating_add(run.count);
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
    fn remove_from_last(&mut self, id: i64) -> bool {
        let run = self.last;
        if !run.holds(id) || self.runs < 2 {
            return false;
        }
        // `first <= id <= last`: neither difference can overflow.
        let before = u64::try_from(id.saturating_sub(run.first)).unwrap_or(0);
        let after = run.count.saturating_sub(before).saturating_sub(1);
        let next = id.saturating_add(1);
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
        self.entries = self.entries.saturating_sub(1);
        true
    }

    /// Makes the last record the open last run (the last run is gone):
    /// the records are read to find where the last one starts, and cut
    /// there. False, changing nothing, when there is no record.
    fn pop_record(&mut self) -> bool {
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        let mut found = None;
        while at < end {
            let state = (at, score, expected);
            match self.read(&mut at, &mut score, &mut expected) {
                Ok(run) => found = Some((state, run)),
                Err(_) => return false,
            }
        }
        let Some(((at, score, expected), run)) = found else {
            return false;
        };
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
        self.tail_score = score;
        self.tail_expected = expected;
        self.last = run;
        self.runs = self.runs.saturating_sub(1);
        true
    }

    /// Whether member `id` may be in the chunk.
    fn may_hold(&self, id: i64) -> bool {
        self.min_id <= id && id <= self.max_id
    }
}

/// The kind that writes the records of `runs` (every run but the last,
/// after the first's state) in the fewest bytes, and that size: the bytes
/// of the encoding, or the best of four Rice parameters around the one a
/// histogram of the single-entry records' gaps (by bit length) calls for.
fn best_kind(runs: &[Run]) -> (u8, usize) {
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
fn estimated_rice_bits(by_length: &[u32; 65], k: u32) -> u64 {
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

/// The bytes [`put_run`] writes for `r`, `gap` ms after the state.
fn run_bytes(r: &Run, gap: u64, expected: i64) -> u64 {
    if r.first == expected && r.count == 1 && gap < 1 << 14 {
        if gap < 1 << 7 {
            1
        } else {
            2
        }
    } else {
        1 + varint_len(gap)
            + varint_len(zigzag(r.first.wrapping_sub(expected)))
            + varint_len(r.count.saturating_sub(1))
    }
}

/// The bits [`put_rice`] writes for `r`, `gap` ms after the state.
fn rice_bits(r: &Run, gap: u64, expected: i64, k: u32) -> u64 {
    let q = gap >> k;
    if r.first == expected && r.count == 1 && q < u64::from(ESC) {
        q + 1 + u64::from(k)
    } else {
        u64::from(ESC)
            + 8 * (varint_len(gap)
                + varint_len(zigzag(r.first.wrapping_sub(expected)))
                + varint_len(r.count.saturating_sub(1)))
    }
}

fn varint_len(v: u64) -> u64 {
    u64::from((64 - v.leading_zeros()).max(1).div_ceil(7))
}

/// Appends bits, least significant first, to bytes whose last `pad` bits
/// are free.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    pad: u8,
}

impl BitWriter<'_> {
    /// Appends the low `n` bits of `v` (`n` at most 57).
    fn put(&mut self, v: u64, n: u32) {
        let mut v = if n >= 64 { v } else { v & ((1u64 << n) - 1) };
        let mut n = n;
        if self.pad > 0 && n > 0 {
            let used = 8 - u32::from(self.pad);
            if let Some(last) = self.out.last_mut() {
                *last |= (v << used) as u8;
            }
            let took = n.min(u32::from(self.pad));
            v >>= took;
            n -= took;
            self.pad -= took as u8;
        }
        while n > 0 {
            self.out.push(v as u8);
            let took = n.min(8);
            v >>= took;
            n -= took;
            self.pad = (8 - took) as u8;
        }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.put(u64::from((v as u8) | 0x80), 8);
            v >>= 7;
        }
        self.put(v, 8);
    }
}

/// Writes one run's Rice record (parameter `k`) after the state (`score`,
/// `expected`), and moves the state past it: a run of one entry under the
/// expected member, `gap = q * 2^k + r` ms after the state with `q <
/// ESC`, is `q` ones, a zero and the `k` bits of `r`; any other run is
/// `ESC` ones and three varints (see [`ESC`]).
fn put_rice(w: &mut BitWriter<'_>, k: u32, score: &mut i64, expected: &mut i64, r: Run) {
    // Scores never decrease, so the gap is never negative.
    let gap = u64::try_from(r.score.saturating_sub(*score)).unwrap_or(0);
    let q = gap >> k;
    if r.first == *expected && r.count == 1 && q < u64::from(ESC) {
        let low = gap & ((1u64 << k) - 1);
        // q ones, then a zero, then the remainder: at most 57 bits.
        let code = ((1u64 << q) - 1) | (low << (q + 1));
        w.put(code, q as u32 + 1 + k);
    } else {
        w.put((1u64 << ESC) - 1, ESC);
        w.varint(gap);
        w.varint(zigzag(r.first.wrapping_sub(*expected)));
        w.varint(r.count.saturating_sub(1));
    }
    *score = r.score;
    *expected = r.last().saturating_add(1);
}

/// The 57 or more bits of `bytes` from bit `at` on (zeros past the end).
fn bits_at(bytes: &[u8], at: usize) -> u64 {
    let i = at / 8;
    let word = match bytes.get(i..i.saturating_add(8)) {
        Some(b) => b.try_into().map(u64::from_le_bytes).unwrap_or(0),
        None => {
            let mut buf = [0u8; 8];
            for (d, s) in buf.iter_mut().zip(bytes.get(i..).unwrap_or(&[])) {
                *d = *s;
            }
            u64::from_le_bytes(buf)
        }
    };
    word >> (at % 8)
}

/// Reads one Rice record (parameter `k`) at bit `at` of records ending at
/// bit `end`, as [`read_run`] reads a byte record.
fn read_rice(
    bytes: &[u8],
    end: usize,
    at: &mut usize,
    k: u32,
    score: &mut i64,
    expected: &mut i64,
) -> Result<Run, DecodeError> {
    let w = bits_at(bytes, *at);
    let q = (!w).trailing_zeros();
    let (gap, first, count) = if q < ESC {
        let used = (q + 1 + k) as usize;
        if at.saturating_add(used) > end {
            return Err(DecodeError::Truncated);
        }
        let low = (w >> (q + 1)) & ((1u64 << k) - 1);
        *at += used;
        ((u64::from(q) << k) | low, *expected, 1)
    } else {
        let mut pos = at.saturating_add(ESC as usize);
        let mut varint = || -> Result<u64, DecodeError> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                if pos.saturating_add(8) > end {
                    return Err(DecodeError::Truncated);
                }
                let b = bits_at(bytes, pos) & 0xFF;
                pos += 8;
                let low = b & 0x7F;
                if shift == 63 && low > 1 {
                    return Err(DecodeError::Range);
                }
                v |= low << shift;
                if b & 0x80 == 0 {
                    return Ok(v);
                }
            }
            Err(DecodeError::Range)
        };
        let gap = varint()?;
        let delta = unzigzag(varint()?);
        let count = varint()?.checked_add(1).ok_or(DecodeError::Range)?;
        *at = pos;
        let first = expected.checked_add(delta).ok_or(DecodeError::Range)?;
        (gap, first, count)
    };
    next_run(gap, first, count, score, expected)
}

/// Writes one run's record after the state (`score`, `expected`), and
/// moves the state past it.
fn put_run(out: &mut impl Sink, score: &mut i64, expected: &mut i64, r: Run) {
    // Scores never decrease, so the gap is never negative.
    let gap = u64::try_from(r.score.saturating_sub(*score)).unwrap_or(0);
    if r.first == *expected && r.count == 1 && gap < 1 << 7 {
        out.push(gap as u8);
    } else if r.first == *expected && r.count == 1 && gap < 1 << 14 {
        out.push(0x80 | (gap >> 8) as u8);
        out.push(gap as u8);
    } else {
        out.push(0xC0);
        put_varint(out, gap);
        put_varint(out, zigzag(r.first.wrapping_sub(*expected)));
        put_varint(out, r.count.saturating_sub(1));
    }
    *score = r.score;
    *expected = r.last().saturating_add(1);
}

/// Reads one run's record after the state (`score`, `expected`), checking
/// every value, and moves the state past it.
fn read_run(r: &mut Reader<'_>, score: &mut i64, expected: &mut i64) -> Result<Run, DecodeError> {
    let tag = r.byte()?;
    let (gap, first, count) = match tag {
        0x00..=0x7F => (u64::from(tag), *expected, 1),
        0x80..=0xBF => {
            let low = r.byte()?;
            (u64::from(tag & 0x3F) << 8 | u64::from(low), *expected, 1)
        }
        0xC0 => {
            let gap = r.varint()?;
            let delta = unzigzag(r.varint()?);
            let first = expected.checked_add(delta).ok_or(DecodeError::Range)?;
            let count = r.varint()?.checked_add(1).ok_or(DecodeError::Range)?;
            (gap, first, count)
        }
        _ => return Err(DecodeError::Invalid),
    };
    next_run(gap, first, count, score, expected)
}

/// The run a record read (its gap after the state, first member, count),
/// checked, with the state (`score`, `expected`) moved past it.
fn next_run(
    gap: u64,
    first: i64,
    count: u64,
    score: &mut i64,
    expected: &mut i64,
) -> Result<Run, DecodeError> {
    let gap = i64::try_from(gap).map_err(|_| DecodeError::Range)?;
    let next_score = score.checked_add(gap).ok_or(DecodeError::Range)?;
    let span = i64::try_from(count.saturating_sub(1)).map_err(|_| DecodeError::Range)?;
    let last = first.checked_add(span).ok_or(DecodeError::Range)?;
    if first < 0 {
        return Err(DecodeError::Range);
    }
    *score = next_score;
    // As `put_run` moves it: saturating, so that a run ending at i64::MAX
    // (a member a client may give SLIDEWIN.APPLY) reads back; a run after
    // it overlaps it and is refused by the caller's overlap check.
    *expected = last.saturating_add(1);
    Ok(Run {
        score: next_score,
        first,
        count,
    })
}

/// A log as chunks of runs in score order, their total, an upper bound of
/// the members, and the expiry (see [`CompactLog`] for when it is used).
#[derive(Debug, Clone, Default)]
struct Chunked {
    chunks: Vec<Chunk>,
    entries: u64,
    /// No member is greater (a bound, not the maximum: removals leave it).
    max_id: Option<i64>,
    expire_at_ms: Option<i64>,
    /// While a small log is held as chunks (see [`CompactLog::expand`]):
    /// its small form's block, reused or given back by `settle`. Empty
    /// otherwise.
    stash: Vec<u8>,
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
    fn from_runs(runs: &[Run], expire_at_ms: Option<i64>) -> Chunked {
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
    fn decode_own(&mut self, bytes: &[u8]) {
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

    fn read_own(&mut self, bytes: &[u8], spare: &mut Vec<u8>) -> Result<(), DecodeError> {
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
    fn oldest_score(&self) -> Option<i64> {
        self.chunks.first().map(|c| c.first_score())
    }

    /// Whether the log holds at most `n` runs (stops counting past `n`:
    /// O(1) for a large log).
    fn runs_at_most(&self, n: usize) -> bool {
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
    fn first_overlap_above(&self, ranges: &[(i64, i64)], cutoff_ms: i64) -> Option<(i64, i64)> {
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
    fn find(&self, id: i64) -> Option<(usize, Vec<Run>, usize)> {
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
    fn run_holding(&self, id: i64) -> Option<Run> {
        let (ci, runs, ri) = self.find(id)?;
        match runs.get(ri) {
            Some(&r) => Some(r),
            None => self.chunks.get(ci).map(|c| c.last),
        }
    }

    /// Replaces chunk `ci` by chunks of `runs` (none when `runs` is empty).
    fn replace_chunk(&mut self, ci: usize, runs: &[Run]) {
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
    fn insert(&mut self, run: Run) {
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
    fn encode_into(&self, out: &mut Vec<u8>) {
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

/// Logs of at most this many runs are held as their encoding alone, one
/// small block (a `limit 5` key costs about what its sorted set costs);
/// larger ones as chunks. A chunked log goes back to the small form when it
/// falls to half of this.
#[cfg(not(test))]
pub const SMALL_RUNS: usize = 32;
/// In the unit tests, two: every property test moves between both forms.
#[cfg(test)]
pub const SMALL_RUNS: usize = 2;

#[derive(Debug, Clone)]
enum Repr {
    /// The encoding (empty: an empty log without an expiry).
    Small(Vec<u8>),
    Large(Box<Chunked>),
}

/// The compact log: a small log as its encoding, a larger one in chunks.
#[derive(Debug, Clone)]
pub struct CompactLog {
    repr: Repr,
    /// Held as chunks until [`CompactLog::settle`]: a command asks a log
    /// several questions, and a small log is decoded once for all of them.
    held: bool,
    /// While held: whether the log was small when expanded, and whether
    /// anything changed since (if not, `settle` puts the same bytes back).
    was_small: bool,
    dirty: bool,
    /// While a small log is held in its small form (changed in place, see
    /// `small.rs`): what its bytes hold. `None` otherwise.
    small: Option<small::Summary>,
}

impl Default for CompactLog {
    fn default() -> Self {
        CompactLog {
            repr: Repr::Small(Vec::new()),
            held: false,
            was_small: false,
            dirty: false,
            small: None,
        }
    }
}

/// What a small log's round trip through the chunked form reuses, kept
/// between commands on the thread that runs them: a chunked log with its
/// allocations (its chunk list, its chunk's records) and an encoding
/// buffer. In the steady state a command on a small log allocates nothing
/// for it but, now and then, a larger block for its grown encoding.
struct Spare {
    chunked: Option<Box<Chunked>>,
    scratch: Vec<u8>,
}

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            chunked: None,
            scratch: Vec::new(),
        })
    };
}

/// The most a kept spare may hold on to (bytes of records or of encoding,
/// chunks in the list): a spare that grew past it, from a large log, is
/// freed instead.
const SPARE_BYTES: usize = 2048;
const SPARE_CHUNKS: usize = 4;

/// A chunked log to decode a small one into: the spare, or a new one.
fn spare_chunked() -> Box<Chunked> {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.chunked.take()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `c` (emptied, its allocations kept) as the spare, unless it
/// holds more than a spare may.
fn keep_spare(mut c: Box<Chunked>) {
    if c.chunks.capacity() > SPARE_CHUNKS
        || c.chunks.iter().any(|k| k.bytes.capacity() > SPARE_BYTES)
    {
        return;
    }
    c.stash = Vec::new();
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.chunked = Some(c);
        }
    });
}

/// `len` rounded up to a multiple of 16: the capacity a small form is
/// given, so that the next few records fit without a new block. The
/// server's allocator (jemalloc) serves every size in 16-byte steps up to
/// 128 bytes and coarser above, so the block is the one an exact request
/// gets: the room costs no memory.
fn rounded(len: usize) -> usize {
    len.saturating_add(15) & !15
}

/// The small form of `c`, written into `block` when it fits there (its
/// capacity at least the length and at most the rounded length), else
/// into a new block of the rounded length; through the spare encoding
/// buffer, so that nothing else is allocated.
fn small_bytes_into(c: &Chunked, mut block: Vec<u8>) -> Vec<u8> {
    if c.entries == 0 && c.expire_at_ms.is_none() {
        return Vec::new();
    }
    let place = |block: Vec<u8>, bytes: &[u8]| -> Vec<u8> {
        let mut out = if block.capacity() >= bytes.len() && block.capacity() <= rounded(bytes.len())
        {
            block
        } else {
            Vec::with_capacity(rounded(bytes.len()))
        };
        out.clear();
        out.extend_from_slice(bytes);
        out
    };
    let via_scratch = SPARE.try_with(|s| {
        let mut s = s.try_borrow_mut().ok()?;
        let mut scratch = std::mem::take(&mut s.scratch);
        scratch.clear();
        c.encode_into(&mut scratch);
        block = place(std::mem::take(&mut block), &scratch);
        if scratch.capacity() <= SPARE_BYTES {
            s.scratch = scratch;
        }
        Some(())
    });
    match via_scratch {
        Ok(Some(())) => block,
        _ => place(block, &c.encode()),
    }
}

/// Equal when they hold the same runs in the same order and expire alike,
/// whichever form holds them.
impl PartialEq for CompactLog {
    fn eq(&self, other: &Self) -> bool {
        *self.view() == *other.view()
    }
}

impl Eq for CompactLog {}

/// The small form of a log.
fn small_bytes(c: &Chunked) -> Vec<u8> {
    if c.entries == 0 && c.expire_at_ms.is_none() {
        return Vec::new();
    }
    let mut b = c.encode();
    b.shrink_to_fit();
    b
}

impl CompactLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The log as chunks: borrowed when chunked, decoded when small.
    fn view(&self) -> std::borrow::Cow<'_, Chunked> {
        match &self.repr {
            Repr::Large(c) => std::borrow::Cow::Borrowed(c),
            // The bytes are this code's own encoding: they decode.
            Repr::Small(b) if b.is_empty() => std::borrow::Cow::Owned(Chunked::default()),
            Repr::Small(b) => std::borrow::Cow::Owned(Chunked::decode(b).unwrap_or_default()),
        }
    }

    /// Runs `f` on the log as chunks, then keeps it in the form its size
    /// calls for.
    fn edit<R>(&mut self, f: impl FnOnce(&mut Chunked) -> R) -> R {
        self.promote();
        self.dirty = true;
        match &mut self.repr {
            Repr::Large(c) => {
                let r = f(c);
                if !self.held && c.runs_at_most(SMALL_RUNS / 2) {
                    let b = small_bytes(c);
                    self.repr = Repr::Small(b);
                }
                r
            }
            Repr::Small(b) => {
                let mut c = if b.is_empty() {
                    Chunked::default()
                } else {
                    Chunked::decode(b).unwrap_or_default()
                };
                let r = f(&mut c);
                self.repr = if c.runs_at_most(SMALL_RUNS) {
                    Repr::Small(small_bytes(&c))
                } else {
                    Repr::Large(Box::new(c))
                };
                r
            }
        }
    }

    /// Holds the log for a command until `settle`: a small log in its small
    /// form with its summary read once (the common changes are made on the
    /// bytes, see `small.rs`; anything else promotes it to chunks), a large
    /// one as it is.
    pub fn expand(&mut self) {
        if self.held {
            return;
        }
        self.was_small = false;
        self.dirty = false;
        self.held = true;
        if let Repr::Small(b) = &mut self.repr {
            self.was_small = true;
            if b.is_empty() {
                // A new log: the form of an empty one, in a block the
                // first call's entry and expiry fit in.
                let mut fresh = Vec::with_capacity(32);
                fresh.extend_from_slice(&[VERSION, 0, 0]);
                *b = fresh;
                self.dirty = true;
            }
            self.small = small::scan(b);
            if self.small.is_none() {
                self.promote();
            }
        }
    }

    /// A small log held in its small form, held as chunks from now on
    /// (decoded into the spare chunked log: its own bytes, so without the
    /// checks of `decode`). Anything it changed stays changed.
    fn promote(&mut self) {
        if self.small.take().is_none() {
            return;
        }
        if let Repr::Small(b) = &mut self.repr {
            let small = std::mem::take(b);
            let mut c = spare_chunked();
            c.decode_own(&small);
            c.stash = small;
            self.repr = Repr::Large(c);
        }
    }

    /// The summary and bytes of a small log held in its small form.
    fn held_small(&mut self) -> Option<(&mut Vec<u8>, &mut small::Summary)> {
        match (&mut self.repr, self.small.as_mut()) {
            (Repr::Small(b), Some(s)) => Some((b, s)),
            _ => None,
        }
    }

    /// Ends `expand`: a log small enough goes back to its small form (the
    /// same bytes when nothing changed), and the chunks it was held in
    /// become the spare.
    pub fn settle(&mut self) {
        if !std::mem::replace(&mut self.held, false) {
            return;
        }
        if let Some(s) = self.small.take() {
            // As the chunked path leaves it: no bytes for a blank log, and
            // a block of at most the rounded length.
            if let (Repr::Small(b), true) = (&mut self.repr, self.dirty) {
                if small::is_blank(&s) {
                    *b = Vec::new();
                } else if b.capacity() > rounded(b.len()) {
                    b.shrink_to(rounded(b.len()));
                }
            }
            return;
        }
        let Repr::Large(c) = &mut self.repr else {
            return;
        };
        let stash = std::mem::take(&mut c.stash);
        if !c.runs_at_most(SMALL_RUNS) {
            return;
        }
        let bytes = if self.was_small && !self.dirty {
            stash
        } else {
            small_bytes_into(c, stash)
        };
        if let Repr::Large(c) = std::mem::replace(&mut self.repr, Repr::Small(bytes)) {
            keep_spare(c);
        }
    }

    /// The runs, in score order.
    pub fn runs(&self) -> Vec<Run> {
        self.view().runs()
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        match (&self.repr, &self.small) {
            (Repr::Small(_), Some(s)) => s.entries,
            _ => self.view().count_entries(),
        }
    }

    /// Sets the expiry the encoding carries.
    pub fn set_expiry(&mut self, at_ms: i64) {
        if let Some((b, s)) = self.held_small() {
            if small::set_expiry(b, s, at_ms).is_some() {
                self.dirty = true;
                return;
            }
        }
        self.edit(|c| c.set_expiry(at_ms))
    }

    /// The absolute expiry set by the last `expire_at`, if any.
    pub fn expire_at_ms(&self) -> Option<i64> {
        self.view().expire_at_ms()
    }

    /// Every entry as (score, member), in score order (tests and digests).
    pub fn entries(&self) -> impl Iterator<Item = (i64, i64)> {
        self.view().entries().collect::<Vec<_>>().into_iter()
    }

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there.
    pub fn remove(&mut self, id: i64) -> bool {
        self.promote();
        if !self.view().holds_above(id, i64::MIN) {
            return false;
        }
        self.edit(|c| c.remove(id))
    }

    /// See [`Chunked::canonical_runs`].
    pub fn canonical_runs(&self) -> Vec<Run> {
        self.view().canonical_runs()
    }

    /// Whether member `id` is in the log and scored above `cutoff_ms`.
    pub fn holds_above(&self, id: i64, cutoff_ms: i64) -> bool {
        self.view().holds_above(id, cutoff_ms)
    }

    /// The first of the sorted, disjoint member ranges `ranges` that meets
    /// a member scored above `cutoff_ms`, if any.
    pub fn first_overlap_above(&self, ranges: &[(i64, i64)], cutoff_ms: i64) -> Option<(i64, i64)> {
        self.view().first_overlap_above(ranges, cutoff_ms)
    }

    /// The entries scored above `cutoff_ms`.
    pub fn entries_above(&self, cutoff_ms: i64) -> u64 {
        self.view().count_above(cutoff_ms).unwrap_or(0)
    }

    /// Adds a whole run whose members the caller checked are free and
    /// valid (see `effect.rs`), joining the run before it as `add` would.
    pub fn add_run(&mut self, run: Run) {
        self.edit(|c| c.add_run(run))
    }

    /// Every heap block the log owns besides the value itself.
    pub fn heap_blocks(&self) -> Vec<*const u8> {
        match &self.repr {
            Repr::Small(b) if b.capacity() > 0 => vec![b.as_ptr()],
            Repr::Small(_) => Vec::new(),
            Repr::Large(c) => {
                let mut out = vec![(&**c as *const Chunked).cast::<u8>()];
                out.extend(c.heap_blocks());
                out
            }
        }
    }

    /// Hands every heap block the log owns (those `heap_blocks` lists) to
    /// `to`, which may move them (active defragmentation).
    pub fn relocate<R: Relocate>(&mut self, to: &mut R) {
        let repr = std::mem::replace(&mut self.repr, Repr::Small(Vec::new()));
        self.repr = match repr {
            Repr::Small(b) => Repr::Small(to.vec(b)),
            Repr::Large(c) => {
                let mut c = to.boxed(c);
                let chunks = std::mem::take(&mut c.chunks);
                let mut chunks = to.vec(chunks);
                for chunk in chunks.iter_mut() {
                    chunk.bytes = to.vec(std::mem::take(&mut chunk.bytes));
                }
                c.chunks = chunks;
                c.stash = to.vec(std::mem::take(&mut c.stash));
                Repr::Large(c)
            }
        };
    }

    /// How many heap blocks freeing the log releases.
    pub fn blocks(&self) -> usize {
        match &self.repr {
            Repr::Small(_) => 1,
            Repr::Large(c) => c.blocks().saturating_add(1),
        }
    }

    /// The encoding (see the module comment).
    pub fn encode(&self) -> Vec<u8> {
        match &self.repr {
            Repr::Small(b) if !b.is_empty() => b.clone(),
            _ => self.view().encode(),
        }
    }

    /// Decodes bytes from anywhere (RDB, RESTORE, a client): a log that
    /// holds every invariant, or why not.
    pub fn decode(bytes: &[u8]) -> Result<CompactLog, DecodeError> {
        let c = Chunked::decode(bytes)?;
        let repr = if c.runs_at_most(SMALL_RUNS) {
            Repr::Small(small_bytes(&c))
        } else {
            Repr::Large(Box::new(c))
        };
        Ok(CompactLog {
            repr,
            ..CompactLog::default()
        })
    }
}

impl WindowLog for CompactLog {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        if let Some((b, s)) = self.held_small() {
            if let Some(removed) = small::trim(b, s, cutoff_ms) {
                if removed > 0 {
                    self.dirty = true;
                }
                return Ok(removed);
            }
        }
        // Nothing to trim: no rewrite.
        if self.view().oldest_score().is_none_or(|s| s > cutoff_ms) {
            return Ok(0);
        }
        self.edit(|c| c.trim(cutoff_ms))
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.count_entries())
    }

    // The queries of DETAIL, PEEK and UNDO read the chunks: a small log
    // held in its small form is promoted once for the rest of the command.
    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        self.promote();
        self.view().count_above(cutoff_ms)
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, Self::Error> {
        self.promote();
        self.view().nth_above(cutoff_ms, k, n)
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        self.promote();
        self.view().newest_above(min_ms)
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        if let Some(newest) = self.small.as_ref().and_then(small::newest_entry) {
            return Ok(newest);
        }
        self.promote();
        self.view().newest_entry()
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        self.promote();
        Ok(self.view().holds_above(id, i64::MIN))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        // A clock outside 0 ..= 2^53 ms cannot be stored (no such clock).
        if id < 0 || !(0..=MAX_SCORE).contains(&now_ms) {
            return Ok(false);
        }
        if let Some((b, s)) = self.held_small() {
            if small::add(b, s, now_ms, id).is_some() {
                self.dirty = true;
                return Ok(true);
            }
        }
        self.promote();
        if self.view().holds_above(id, i64::MIN) {
            return Ok(false);
        }
        self.edit(|c| c.add(now_ms, id))
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.set_expiry(at_ms);
        Ok(())
    }
}

/// The byte-wise greatest decimal form among the ids `first ..= last`
/// (non-negative, `first <= last`): within one length the numeric order is
/// the byte order, so the candidates are the largest id of each length.
fn greatest_decimal(first: i64, last: i64) -> i64 {
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
    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
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

    fn count_above(&self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
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

    fn nth_above(&self, cutoff_ms: i64, k: u64, _n: u64) -> Result<Option<f64>, NoFreeMember> {
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

    fn newest_above(&self, min_ms: i64) -> Result<Option<f64>, NoFreeMember> {
        Ok(self
            .chunks
            .last()
            .map(|c| c.last_score())
            .filter(|&s| s > min_ms)
            .map(|s| s as f64))
    }

    fn newest_entry(&self) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
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

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, NoFreeMember> {
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

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Where bytes are written: a block, or a few bytes on the stack.
trait Sink {
    fn push(&mut self, b: u8);
}

impl Sink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }
}

fn put_varint(out: &mut impl Sink, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over untrusted bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.bytes.get(self.at).ok_or(DecodeError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7F);
            // The tenth byte may only carry the top bit.
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Range);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Range)
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
