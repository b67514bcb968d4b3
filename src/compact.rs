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

use crate::window::{NoFreeMember, WindowLog};

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

/// The log: runs in score order, their total, and the expiry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactLog {
    runs: Vec<Run>,
    entries: u64,
    expire_at_ms: Option<i64>,
}

impl CompactLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs, in score order.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        self.entries
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
    pub fn entries(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.runs.iter().flat_map(|r| {
            (0..r.count).map(move |i| {
                let i = i64::try_from(i).unwrap_or(i64::MAX);
                (r.score, r.first.saturating_add(i))
            })
        })
    }

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there.
    pub fn remove(&mut self, id: i64) -> bool {
        let Some((at, run)) = self
            .runs
            .iter()
            .copied()
            .enumerate()
            .find(|(_, r)| r.holds(id))
        else {
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
        self.runs.splice(at..=at, pieces);
        self.entries = self.entries.saturating_sub(1);
        true
    }

    /// The digest's view of the log: per entry group `[score, first,
    /// count]`, canonical (equal scores ordered by member, contiguous runs
    /// merged), so two logs with the same entries give the same groups
    /// however their runs were split.
    pub fn canonical_runs(&self) -> Vec<Run> {
        let mut out: Vec<Run> = Vec::with_capacity(self.runs.len());
        for group in self.runs.chunk_by(|a, b| a.score == b.score) {
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
        let at = self.first_above(cutoff_ms);
        self.runs.iter().skip(at).any(|r| r.holds(id))
    }

    /// Whether any member of `first ..= last` is scored above `cutoff_ms`.
    pub fn overlaps_above(&self, first: i64, last: i64, cutoff_ms: i64) -> bool {
        let at = self.first_above(cutoff_ms);
        self.runs
            .iter()
            .skip(at)
            .any(|r| r.first <= last && first <= r.last())
    }

    /// Adds a whole run whose members the caller checked are free and
    /// valid (see `effect.rs`), joining the run before it as `add` would.
    pub fn add_run(&mut self, run: Run) {
        let at = self.runs.partition_point(|r| r.score <= run.score);
        match at.checked_sub(1).and_then(|i| self.runs.get_mut(i)) {
            Some(prev)
                if prev.score == run.score && prev.last().checked_add(1) == Some(run.first) =>
            {
                prev.count = prev.count.saturating_add(run.count);
            }
            _ => self.runs.insert(at, run),
        }
        self.entries = self.entries.saturating_add(run.count);
    }

    /// The heap block holding the runs, if one is allocated.
    pub fn runs_block(&self) -> Option<*const u8> {
        (self.runs.capacity() > 0).then(|| self.runs.as_ptr().cast())
    }

    /// Index of the first run scored above `cutoff_ms`.
    fn first_above(&self, cutoff_ms: i64) -> usize {
        self.runs.partition_point(|r| r.score <= cutoff_ms)
    }

    /// The encoding (see the module comment).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.runs.len() * 2);
        out.push(VERSION);
        match self.expire_at_ms {
            None => out.push(0),
            Some(at) => {
                out.push(1);
                put_varint(&mut out, zigzag(at));
            }
        }
        put_varint(&mut out, self.runs.len() as u64);
        let Some(first) = self.runs.first() else {
            return out;
        };
        put_varint(&mut out, zigzag(first.score));
        let (mut score, mut expected) = (first.score, 1i64);
        for r in &self.runs {
            // Scores never decrease, so the gap is never negative.
            let gap = u64::try_from(r.score.saturating_sub(score)).unwrap_or(0);
            if r.first == expected && r.count == 1 && gap < 1 << 7 {
                out.push(gap as u8);
            } else if r.first == expected && r.count == 1 && gap < 1 << 14 {
                out.push(0x80 | (gap >> 8) as u8);
                out.push(gap as u8);
            } else {
                out.push(0xC0);
                put_varint(&mut out, gap);
                put_varint(&mut out, zigzag(r.first.wrapping_sub(expected)));
                put_varint(&mut out, r.count.saturating_sub(1));
            }
            score = r.score;
            expected = r.last().saturating_add(1);
        }
        out
    }

    /// Decodes bytes from anywhere (RDB, RESTORE, a client): a log that
    /// holds every invariant, or why not.
    pub fn decode(bytes: &[u8]) -> Result<CompactLog, DecodeError> {
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
                let tag = r.byte()?;
                let (gap, first, count) = match tag {
                    0x00..=0x7F => (u64::from(tag), expected, 1),
                    0x80..=0xBF => {
                        let low = r.byte()?;
                        (u64::from(tag & 0x3F) << 8 | u64::from(low), expected, 1)
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
                let gap = i64::try_from(gap).map_err(|_| DecodeError::Range)?;
                score = score.checked_add(gap).ok_or(DecodeError::Range)?;
                let span =
                    i64::try_from(count.saturating_sub(1)).map_err(|_| DecodeError::Range)?;
                let last = first.checked_add(span).ok_or(DecodeError::Range)?;
                if first < 0 {
                    return Err(DecodeError::Range);
                }
                entries = entries.checked_add(count).ok_or(DecodeError::Range)?;
                if entries > MAX_ENTRIES {
                    return Err(DecodeError::Range);
                }
                runs.push(Run {
                    score,
                    first,
                    count,
                });
                expected = last.checked_add(1).ok_or(DecodeError::Range)?;
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
        Ok(CompactLog {
            runs,
            entries,
            expire_at_ms,
        })
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

impl WindowLog for CompactLog {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let at = self.first_above(cutoff_ms);
        let removed: u64 = self.runs.drain(..at).map(|r| r.count).sum();
        self.entries = self.entries.saturating_sub(removed);
        Ok(removed)
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.entries)
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let at = self.first_above(cutoff_ms);
        Ok(self.runs.iter().skip(at).map(|r| r.count).sum())
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, _n: u64) -> Result<Option<f64>, Self::Error> {
        if k == 0 {
            return Ok(None);
        }
        let at = self.first_above(cutoff_ms);
        let mut seen = 0u64;
        for r in self.runs.iter().skip(at) {
            seen = seen.saturating_add(r.count);
            if seen >= k {
                return Ok(Some(r.score as f64));
            }
        }
        Ok(None)
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        Ok(self
            .runs
            .last()
            .filter(|r| r.score > min_ms)
            .map(|r| r.score as f64))
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        let Some(top) = self.runs.last().map(|r| r.score) else {
            return Ok(None);
        };
        // The greatest member among the runs at the highest score, in the
        // server's order of equal scores.
        let best = self
            .runs
            .iter()
            .rev()
            .take_while(|r| r.score == top)
            .map(|r| greatest_decimal(r.first, r.last()))
            .max_by(|a, b| a.to_string().cmp(&b.to_string()));
        Ok(Some((top as f64, best)))
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        Ok(self.runs.iter().any(|r| r.holds(id)))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        if id < 0 || self.runs.iter().any(|r| r.holds(id)) {
            return Ok(false);
        }
        let at = self.runs.partition_point(|r| r.score <= now_ms);
        match at.checked_sub(1).and_then(|i| self.runs.get_mut(i)) {
            Some(prev) if prev.score == now_ms && prev.last().checked_add(1) == Some(id) => {
                prev.count = prev.count.saturating_add(1);
            }
            _ => self.runs.insert(
                at,
                Run {
                    score: now_ms,
                    first: id,
                    count: 1,
                },
            ),
        }
        self.entries = self.entries.saturating_add(1);
        Ok(true)
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.expire_at_ms = Some(at_ms);
        Ok(())
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
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
