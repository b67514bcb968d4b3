//! The persisted encoding, version 1: what an RDB, a RESTORE payload, the
//! AOF rewrite and `SLIDEWIN.APPLY ... LOG` carry, and a small log's form
//! in memory.

use super::run::{Bound, Run};

/// The encoding's version byte; a decoder refuses any other.
pub const VERSION: u8 = 1;

/// What the encoding says before its records: the expiry and the number
/// of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) expire_at_ms: Option<i64>,
    pub(super) runs: u64,
    /// Where the run count's varint starts (after the expiry).
    pub(super) runs_at: usize,
}

/// Reads the header: the version byte (any other is refused), the expiry
/// and the run count. The one reader of the header, for every decoder.
pub(super) fn read_header(r: &mut Reader<'_>) -> Result<Header, DecodeError> {
    let version = r.byte()?;
    if version != VERSION {
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
        expire_at_ms,
        runs,
        runs_at,
    })
}

/// Writes the header (the one writer of it): the version byte, the expiry
/// and the run count. The first run's score follows when there is a run.
pub(super) fn write_header(out: &mut impl Sink, expire_at_ms: Option<i64>, runs: u64) {
    out.push(VERSION);
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

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Where bytes are written: a block, or a few bytes on the stack.
pub(super) trait Sink {
    fn push(&mut self, b: u8);
}

impl Sink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
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

/// The v1 encoding byte for byte: these payloads are what RDB files, DUMP
/// payloads and AOF rewrites already hold, so every later version must
/// read them as they are (and write them so while the version is 1).
#[cfg(test)]
mod golden {
    use super::super::chunked::Chunked;
    use super::super::run::Run;
    use super::*;

    fn run(score: i64, first: i64, count: u64) -> Run {
        Run {
            score,
            first,
            count,
        }
    }

    /// What a case is, its runs, its expiry, its bytes.
    type Case = (&'static str, Vec<Run>, Option<i64>, Vec<u8>);

    fn cases() -> Vec<Case> {
        vec![
            ("an empty log", vec![], None, vec![1, 0, 0]),
            (
                "an empty log with an expiry",
                vec![],
                Some(1_000),
                vec![1, 1, 0xD0, 0x0F, 0],
            ),
            (
                // Header, first score 1000 (zigzag 2000 = D0 0F), then one
                // byte a run: gap 0, gap 5, and a two-byte gap of 200.
                "one-entry runs in order",
                vec![run(1_000, 1, 1), run(1_005, 2, 1), run(1_205, 3, 1)],
                None,
                vec![1, 0, 3, 0xD0, 0x0F, 0, 5, 0x80, 200],
            ),
            (
                // A run of three (a COST 3 call), then a member out of
                // sequence: general records (C0, gap, zigzag delta, count-1).
                "general records",
                vec![run(10, 1, 3), run(10, 9, 1)],
                Some(70_010),
                vec![1, 1, 0xF4, 0xC5, 0x08, 2, 20, 0xC0, 0, 0, 2, 0xC0, 0, 10, 0],
            ),
            (
                "a member at i64::MAX",
                vec![run(0, i64::MAX, 1)],
                None,
                [
                    vec![1, 0, 1, 0, 0xC0, 0],
                    {
                        let mut v = Vec::new();
                        put_varint(&mut v, zigzag(i64::MAX - 1));
                        v
                    },
                    vec![0],
                ]
                .concat(),
            ),
        ]
    }

    #[test]
    fn logs_encode_to_the_same_bytes_and_read_back() {
        for (what, runs, expiry, bytes) in cases() {
            let log = Chunked::from_runs(&runs, expiry);
            assert_eq!(log.encode(), bytes, "{what}: encoding");
            let back = Chunked::decode(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(back.runs(), runs, "{what}: runs");
            assert_eq!(back.expire_at_ms(), expiry, "{what}: expiry");
        }
    }

    #[test]
    fn the_header_has_one_reader_and_one_writer() {
        let mut out = Vec::new();
        write_header(&mut out, Some(-3), 300);
        assert_eq!(out, [1, 1, 5, 0xAC, 0x02]);
        let h = read_header(&mut Reader { bytes: &out, at: 0 }).unwrap();
        assert_eq!((h.expire_at_ms, h.runs, h.runs_at), (Some(-3), 300, 3));
        // A newer version is refused, whatever follows.
        assert_eq!(
            read_header(&mut Reader {
                bytes: &[2, 0, 0],
                at: 0
            }),
            Err(DecodeError::Version(2))
        );
    }
}
