//! The persisted encoding: what an RDB, a RESTORE payload, the AOF rewrite
//! and `SLIDEWIN.APPLY ... LOG` carry, and a small log's form in memory.
//!
//! Version 1 is the header and the runs. Version 2 is the same followed by
//! the charge records (see `charge/`); it is written only for a log that
//! holds a charge, so a log without one is byte for byte what version 1
//! wrote (and what a module without charges reads).
//!
//! ```text
//! records := varint(n >= 1) record{n}         (by request id, strictly increasing)
//! record  := varint(len 1..=128) request-bytes varint(score 0..=2^53)
//!            varint(spans 1..=MAX_CHARGE_SPANS) span{spans}
//! span    := varint(first member) varint(count - 1)
//! ```
//!
//! A small log is kept in memory in a tighter form of its own
//! (`form_codec.rs`), its charge records as [`put_small_records`] writes
//! them: never written where bytes leave the process, never read from
//! there (its tag is no version byte this reader knows).

use super::bounds::{Bound, MAX_CHARGES, MAX_CHARGE_SPANS, MAX_REQUEST_ID, MAX_SCORE};
use super::charge::{Record, Records, SmallRecords, Span};
use super::run::Run;

/// The version byte of a log without charge records (the small form's
/// only version).
pub const VERSION: u8 = 1;

/// The version byte of a log with charge records.
pub const VERSION_CHARGES: u8 = 2;

/// What the encoding says before its records: the expiry and the number
/// of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) version: u8,
    pub(super) expire_at_ms: Option<i64>,
    pub(super) runs: u64,
    /// Where the run count's varint starts (after the expiry).
    pub(super) runs_at: usize,
}

/// Reads the header: the version byte (any other is refused), the expiry
/// and the run count. The one reader of the header, for every decoder of
/// bytes from outside (RDB, RESTORE, a client).
pub(super) fn read_header(r: &mut Reader<'_>) -> Result<Header, DecodeError> {
    let version = r.byte()?;
    if version != VERSION && version != VERSION_CHARGES {
        return Err(DecodeError::Version(version));
    }
    let expire_at_ms = match r.byte()? {
        0 => None,
        1 => Some(unzigzag(r.varint()?)),
        _ => return Err(DecodeError::Invalid),
    };
    let runs_at = r.at;
    let runs = r.varint()?;
    Ok(Header {
        version,
        expire_at_ms,
        runs,
        runs_at,
    })
}

/// Writes the header (the one writer of it): the version byte (1), the
/// expiry and the run count. The first run's score follows when there is a
/// run.
#[cfg(test)]
pub(super) fn write_header(out: &mut impl Sink, expire_at_ms: Option<i64>, runs: u64) {
    write_header_of(out, VERSION, expire_at_ms, runs)
}

/// [`write_header`] with the version byte given (2 for a log with charges).
pub(super) fn write_header_of(
    out: &mut impl Sink,
    version: u8,
    expire_at_ms: Option<i64>,
    runs: u64,
) {
    out.push(version);
    match expire_at_ms {
        None => out.push(0),
        Some(at) => {
            out.push(1);
            put_varint(out, zigzag(at));
        }
    }
    put_varint(out, runs);
}

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
    /// More runs, entries or runs out of member order than a log may hold.
    Bound(Bound),
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
            DecodeError::Bound(b) => write!(f, "{b}"),
        }
    }
}

/// The bytes [`put_run`] writes for `r`, `gap` ms after the state.
pub(super) fn run_bytes(r: &Run, gap: u64, expected: i64) -> u64 {
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

pub(super) fn varint_len(v: u64) -> u64 {
    u64::from((64 - v.leading_zeros()).max(1).div_ceil(7))
}

/// Writes one run's record after the state (`score`, `expected`), and
/// moves the state past it.
pub(super) fn put_run(out: &mut impl Sink, score: &mut i64, expected: &mut i64, r: Run) {
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

/// Writes runs after a header as the encoding holds them: the first run's
/// score, then each run's record (the first after member 1). The one
/// writer of the runs of version 1 and 2.
#[derive(Default)]
pub(super) struct RunWriter {
    state: Option<(i64, i64)>,
}

impl RunWriter {
    pub(super) fn put(&mut self, out: &mut impl Sink, r: Run) {
        let (score, expected) = self.state.get_or_insert_with(|| {
            put_varint(out, zigzag(r.score));
            (r.score, 1)
        });
        put_run(out, score, expected, r);
    }
}

/// Reads one run's record after the state (`score`, `expected`), checking
/// every value, and moves the state past it.
pub(super) fn read_run(
    r: &mut Reader<'_>,
    score: &mut i64,
    expected: &mut i64,
) -> Result<Run, DecodeError> {
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
pub(super) fn next_run(
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

/// Writes the charge records section (version 2), `records` in request id
/// order.
pub(super) fn put_records(
    out: &mut impl Sink,
    n: usize,
    records: impl Iterator<Item = impl std::borrow::Borrow<Record>>,
) {
    put_varint(out, n as u64);
    for r in records {
        let r = r.borrow();
        put_varint(out, r.request.len() as u64);
        for &b in r.request.iter() {
            out.push(b);
        }
        put_varint(out, u64::try_from(r.score).unwrap_or(0));
        put_varint(out, r.spans.len() as u64);
        for s in &r.spans {
            put_varint(out, u64::try_from(s.first).unwrap_or(0));
            put_varint(out, s.count.saturating_sub(1));
        }
    }
}

/// The fewest bytes a record takes: a length, one byte of id, a score, a
/// span count, one span of two varints.
const MIN_RECORD_BYTES: u64 = 6;

/// Reads the record count of a records section, refused when past
/// [`MAX_CHARGES`] or beyond what the bytes left can hold (so nothing is
/// built for a count that lies).
pub(super) fn read_record_count(r: &mut Reader<'_>) -> Result<usize, DecodeError> {
    let n = r.varint()?;
    if n == 0 {
        return Err(DecodeError::Invalid);
    }
    if n > MAX_CHARGES as u64 {
        return Err(DecodeError::Bound(Bound::Charges));
    }
    let left = r.bytes.len().saturating_sub(r.at) as u64;
    if n.saturating_mul(MIN_RECORD_BYTES) > left {
        return Err(DecodeError::Truncated);
    }
    usize::try_from(n).map_err(|_| DecodeError::Range)
}

/// Reads one record, every value checked against its range and bound.
pub(super) fn read_record(r: &mut Reader<'_>) -> Result<Record, DecodeError> {
    let len = r.varint()?;
    if len == 0 || len > MAX_REQUEST_ID as u64 {
        return Err(DecodeError::Bound(Bound::RequestId));
    }
    let len = usize::try_from(len).map_err(|_| DecodeError::Range)?;
    let end = r.at.checked_add(len).ok_or(DecodeError::Truncated)?;
    let request: Box<[u8]> = r.bytes.get(r.at..end).ok_or(DecodeError::Truncated)?.into();
    r.at = end;
    let score = r.varint()?;
    if score > MAX_SCORE as u64 {
        return Err(DecodeError::Range);
    }
    let n = r.varint()?;
    if n == 0 {
        return Err(DecodeError::Invalid);
    }
    if n > MAX_CHARGE_SPANS as u64 {
        return Err(DecodeError::Bound(Bound::ChargeSpans));
    }
    let mut spans = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        let first = i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?;
        let more = i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?;
        first.checked_add(more).ok_or(DecodeError::Range)?;
        spans.push(Span {
            first,
            count: (more as u64).saturating_add(1),
        });
    }
    Ok(Record {
        request,
        score: score as i64,
        spans,
    })
}

/// Writes the records of a small form in memory (see `form_codec.rs`)
/// to the end of the bytes (no count), in the
/// order of their first members (any order reads back):
///
/// ```text
/// record := varint((len - 1) << 3 | several << 2 | one << 1 | follows)
///           request-bytes
///           [varint(spans 2..=MAX_CHARGE_SPANS) if several]
///           [varint(first member) unless follows]
///           [varint(count - 1) unless one]
///           span{spans - 1}
/// span   := varint(first member) varint(count - 1)
/// ```
///
/// `follows`: the first unit is the member after the previous record's
/// first span (1 for the first record); `one`: a single span of a single
/// unit (a charge of COST 1); `several`: more than one span. A charge of
/// COST 1 with an id of up to 16 bytes takes its id and one byte. No
/// score: a charge's units are entries of the log at its score (the loader
/// checks it of every payload and every change keeps it), so it is the
/// score of the run holding its first unit. `false`, nothing written, for
/// more than [`SMALL_CHARGES`](super::charge::SMALL_CHARGES) records (no
/// small form holds them).
pub(super) fn put_small_records(out: &mut impl Sink, records: &Records) -> bool {
    let mut expected = 1i64;
    records.each_by_member(|request, head, rest| {
        let several = !rest.is_empty();
        let one = !several && head.count == 1;
        let follows = head.first == expected;
        let len = request.len().saturating_sub(1) as u64;
        put_varint(
            out,
            len << 3 | u64::from(several) << 2 | u64::from(one) << 1 | u64::from(follows),
        );
        out.push_all(request);
        if several {
            put_varint(out, rest.len().saturating_add(1) as u64);
        }
        if !follows {
            put_varint(out, u64::try_from(head.first).unwrap_or(0));
        }
        if !one {
            put_varint(out, head.count.saturating_sub(1));
        }
        for s in rest {
            put_varint(out, u64::try_from(s.first).unwrap_or(0));
            put_varint(out, s.count.saturating_sub(1));
        }
        expected = head.last().saturating_add(1);
    })
}

/// Reads the records [`put_small_records`] wrote, from `r` to the end of
/// its bytes, straight into a table: every value checked against its range
/// and bound, at most [`SMALL_CHARGES`](super::charge::SMALL_CHARGES) of
/// them: each scored `score_of(its first span)`, which is `None` unless
/// the log holds every member of the span at one score, and refused unless
/// `covers(span, score)` for each further span.
pub(super) fn read_small_records(
    r: &mut Reader<'_>,
    score_of: impl Fn(Span) -> Option<i64>,
    covers: impl Fn(Span, i64) -> bool,
) -> Result<Records, DecodeError> {
    let left = r.bytes.len().saturating_sub(r.at);
    let mut records = SmallRecords::with_capacity(left);
    let mut expected = 1i64;
    let mut any = false;
    while r.at < r.bytes.len() {
        let tag = r.varint()?;
        let (several, one, follows) = (tag & 4 != 0, tag & 2 != 0, tag & 1 != 0);
        let len = (tag >> 3).saturating_add(1);
        if len > MAX_REQUEST_ID as u64 {
            return Err(DecodeError::Bound(Bound::RequestId));
        }
        if several && one {
            return Err(DecodeError::Invalid);
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::Range)?;
        let end = r.at.checked_add(len).ok_or(DecodeError::Truncated)?;
        let request = r.bytes.get(r.at..end).ok_or(DecodeError::Truncated)?;
        r.at = end;
        let n = if several { r.varint()? } else { 1 };
        if n < 1 || (several && n < 2) {
            return Err(DecodeError::Invalid);
        }
        if n > MAX_CHARGE_SPANS as u64 {
            return Err(DecodeError::Bound(Bound::ChargeSpans));
        }
        let first = if follows {
            expected
        } else {
            i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?
        };
        let more = if one {
            0
        } else {
            i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?
        };
        let head = Span {
            first,
            count: (more as u64).saturating_add(1),
        };
        first.checked_add(more).ok_or(DecodeError::Range)?;
        expected = head.last().saturating_add(1);
        let score = score_of(head).ok_or(DecodeError::Invalid)?;
        let pushed = if several {
            // A charge of several runs of ids (rare): a list for them.
            let mut spans = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
            spans.push(head);
            for _ in 1..n {
                let first = i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?;
                let more = i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?;
                first.checked_add(more).ok_or(DecodeError::Range)?;
                let span = Span {
                    first,
                    count: (more as u64).saturating_add(1),
                };
                if !covers(span, score) {
                    return Err(DecodeError::Invalid);
                }
                spans.push(span);
            }
            records.push(request, score, &spans)
        } else {
            records.push(request, score, std::slice::from_ref(&head))
        };
        pushed.map_err(|b| match b {
            Some(b) => DecodeError::Bound(b),
            None => DecodeError::Invalid,
        })?;
        any = true;
    }
    if !any {
        return Err(DecodeError::Invalid);
    }
    Ok(records.finish())
}

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Where bytes are written: a block, or a few bytes on the stack.
pub(super) trait Sink {
    fn push(&mut self, b: u8);

    fn push_all(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

impl Sink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }

    fn push_all(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

pub(super) fn put_varint(out: &mut impl Sink, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over untrusted bytes.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) at: usize,
}

impl Reader<'_> {
    pub(super) fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.bytes.get(self.at).ok_or(DecodeError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    pub(super) fn varint(&mut self) -> Result<u64, DecodeError> {
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
