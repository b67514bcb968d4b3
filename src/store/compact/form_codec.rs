//! A small log's form in memory (see `small.rs`): never written where
//! bytes leave the process (an RDB, a DUMP payload, an effect carry
//! `codec.rs`'s version 1 or 2, which [`stored`] writes for it), so it is
//! free to be tighter than they are where a small key needs it.
//!
//! ```text
//! form   := tag varint(runs)
//!           [ varint(zigzag(first score)) varint(first member) ]   (runs > 0)
//!           [ varint(zigzag(expiry - base)) ]                      (tag & EXPIRES)
//!           record{runs} [ charge records ]                        (tag & CHARGES)
//! tag    := 0x81 | CHARGES (0x02) | EXPIRES (0x04)
//! base   := the first score, 0 when there is no run
//! record := a record of the persisted encoding (`codec.rs`'s `put_run`),
//!           or E0|gap>>16, gap>>8, gap (3 bytes: one entry under the
//!           expected member, 16.4 s to 35 min after the run before it)
//! ```
//!
//! Against the persisted header: the expiry is relative to the first
//! score (3 bytes for a minute's window, not 6) and its flag is in the tag
//! (no byte of its own); the first record is read after the first member
//! (one byte for a run of one entry, where the persisted form writes a
//! general record once the key has trimmed its first member away); a
//! record seconds apart takes 3 bytes, not 6. Five calls a second apart
//! fit the 22 bytes the value holds in place (see `small.rs`'s `INLINE`).
//! The charge records are `codec.rs`'s `put_small_records`.

use super::codec::{
    next_run, put_run, put_varint, read_run, unzigzag, varint_len, write_header_of, zigzag,
    DecodeError, Reader, RunWriter, Sink, VERSION,
};
use super::run::Run;

/// The bits every form's tag has: never a persisted version byte (1, 2).
pub(super) const FORM: u8 = 0x81;
/// The tag's bit for a form holding charge records.
pub(super) const CHARGES: u8 = 0x02;
/// The tag's bit for a form with an expiry.
pub(super) const EXPIRES: u8 = 0x04;

/// The tag of the 3-byte record, with the gap's top 5 bits.
const WIDE: u8 = 0xE0;
/// The gaps a 3-byte record holds: those the persisted 2-byte record does
/// not, up to 2^21 ms (35 min).
const WIDE_GAPS: std::ops::Range<u64> = (1 << 14)..(1 << 21);

/// What a form says before its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) charges: bool,
    pub(super) runs: u64,
    /// The first run's score and first member (meaningless, and not
    /// written, when there is no run).
    pub(super) first_score: i64,
    pub(super) first_member: i64,
    pub(super) expire_at_ms: Option<i64>,
}

/// Whether `tag` is a form's tag (of any flags).
pub(super) fn is_form(tag: u8) -> bool {
    tag & !(CHARGES | EXPIRES) == FORM
}

/// Writes the head.
pub(super) fn put_head(out: &mut impl Sink, h: &Head) {
    let mut tag = FORM;
    if h.charges {
        tag |= CHARGES;
    }
    if h.expire_at_ms.is_some() {
        tag |= EXPIRES;
    }
    out.push(tag);
    put_varint(out, h.runs);
    let base = if h.runs > 0 {
        put_varint(out, zigzag(h.first_score));
        // Members are never negative (the readers refuse them).
        put_varint(out, u64::try_from(h.first_member).unwrap_or(0));
        h.first_score
    } else {
        0
    };
    if let Some(at) = h.expire_at_ms {
        put_expiry(out, at, base);
    }
}

/// Where the run count starts (after the tag): one byte while it is under
/// 128.
pub(super) const RUNS_AT: usize = 1;

/// Writes the expiry's field, the head's last: relative to `base` (the
/// first score, 0 when there is no run). Wrapping both ways: any expiry
/// comes back exactly.
pub(super) fn put_expiry(out: &mut impl Sink, at: i64, base: i64) {
    put_varint(out, zigzag(at.wrapping_sub(base)));
}

/// The bytes [`put_expiry`] writes.
pub(super) fn expiry_len(at: i64, base: i64) -> usize {
    varint_len(zigzag(at.wrapping_sub(base))) as usize
}

/// Reads the head, checking every field (any other tag is refused).
pub(super) fn read_head(r: &mut Reader<'_>) -> Result<Head, DecodeError> {
    let tag = r.byte()?;
    if !is_form(tag) {
        return Err(DecodeError::Version(tag));
    }
    let runs = r.varint()?;
    let (first_score, first_member) = if runs > 0 {
        let score = unzigzag(r.varint()?);
        let member = i64::try_from(r.varint()?).map_err(|_| DecodeError::Range)?;
        (score, member)
    } else {
        (0, 0)
    };
    let expire_at_ms = match tag & EXPIRES {
        0 => None,
        _ => Some(unzigzag(r.varint()?).wrapping_add(first_score)),
    };
    Ok(Head {
        charges: tag & CHARGES != 0,
        runs,
        first_score,
        first_member,
        expire_at_ms,
    })
}

/// Writes one run's record after the state (`score`, `expected`), and
/// moves the state past it: the persisted record, or the 3-byte one.
pub(super) fn put_form_run(out: &mut impl Sink, score: &mut i64, expected: &mut i64, r: Run) {
    let gap = u64::try_from(r.score.saturating_sub(*score)).unwrap_or(0);
    if r.first == *expected && r.count == 1 && WIDE_GAPS.contains(&gap) {
        out.push(WIDE | (gap >> 16) as u8);
        out.push((gap >> 8) as u8);
        out.push(gap as u8);
        *score = r.score;
        *expected = r.last().saturating_add(1);
    } else {
        put_run(out, score, expected, r);
    }
}

/// Reads one run's record after the state, checking every value, and
/// moves the state past it.
pub(super) fn read_form_run(
    r: &mut Reader<'_>,
    score: &mut i64,
    expected: &mut i64,
) -> Result<Run, DecodeError> {
    match r.bytes.get(r.at) {
        Some(&tag) if tag >= WIDE => {
            r.at = r.at.saturating_add(1);
            let high = u64::from(r.byte()?);
            let low = u64::from(r.byte()?);
            let gap = u64::from(tag & !WIDE) << 16 | high << 8 | low;
            next_run(gap, *expected, 1, score, expected)
        }
        _ => read_run(r, score, expected),
    }
}

/// Appends the persisted encoding (version 1) of a form without charge
/// records to `out`; `Err` for bytes that are no such form (the caller
/// encodes through the chunks instead).
pub(super) fn stored(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    let h = read_head(&mut r)?;
    if h.charges {
        return Err(DecodeError::Invalid);
    }
    write_header_of(out, VERSION, h.expire_at_ms, h.runs);
    let (mut score, mut expected) = (h.first_score, h.first_member);
    let mut runs = RunWriter::default();
    // Each record takes a byte at least: the loop ends with the bytes.
    for _ in 0..h.runs {
        runs.put(out, read_form_run(&mut r, &mut score, &mut expected)?);
    }
    if r.at != bytes.len() {
        return Err(DecodeError::Trailing);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(score: i64, first: i64, count: u64) -> Run {
        Run {
            score,
            first,
            count,
        }
    }

    fn form(h: Head, runs: &[Run]) -> Vec<u8> {
        let mut out = Vec::new();
        put_head(&mut out, &h);
        let (mut score, mut expected) = (h.first_score, h.first_member);
        for &r in runs {
            put_form_run(&mut out, &mut score, &mut expected, r);
        }
        out
    }

    fn head(runs: &[Run], expire_at_ms: Option<i64>) -> Head {
        Head {
            charges: false,
            runs: runs.len() as u64,
            first_score: runs.first().map_or(0, |r| r.score),
            first_member: runs.first().map_or(0, |r| r.first),
            expire_at_ms,
        }
    }

    /// A case's name, runs, expiry and bytes.
    type Case = (&'static str, Vec<Run>, Option<i64>, Vec<u8>);

    /// The form byte for byte, and back.
    #[test]
    fn golden_forms() {
        let t = 1_764_990_000_000i64;
        // Five calls a second apart on a 60 s window, the key's 100th to
        // 104th entries: 21 bytes (the persisted encoding takes 28).
        let spread: Vec<Run> = (0..5).map(|i| run(t + i * 1_000, 100 + i, 1)).collect();
        let mut want = vec![FORM | EXPIRES, 5];
        put_varint(&mut want, zigzag(t));
        want.extend([100]);
        // The expiry 64 s after the first score: zigzag 128000.
        want.extend([0x80, 0xE8, 0x07]);
        want.extend([0, 0x83, 0xE8, 0x83, 0xE8, 0x83, 0xE8, 0x83, 0xE8]);
        let cases: Vec<Case> = vec![
            ("an empty log", vec![], None, vec![FORM, 0]),
            (
                "an empty log with an expiry (absolute)",
                vec![],
                Some(1_000),
                vec![FORM | EXPIRES, 0, 0xD0, 0x0F],
            ),
            ("five calls a second apart", spread, Some(t + 64_000), want),
            (
                // 20 s and 35 min - 1 ms apart: 3-byte records; 35 min:
                // the persisted general record.
                "records minutes apart",
                vec![
                    run(0, 1, 1),
                    run(20_000, 2, 1),
                    run(20_000 + (1 << 21) - 1, 3, 1),
                    run(20_000 + (2 << 21) - 1, 4, 1),
                ],
                None,
                vec![
                    FORM, 4, 0, 1, 0, 0xE0, 0x4E, 0x20, 0xFF, 0xFF, 0xFF, 0xC0, 0x80, 0x80, 0x80,
                    0x01, 0, 0,
                ],
            ),
        ];
        for (name, runs, expiry, bytes) in cases {
            let h = head(&runs, expiry);
            assert_eq!(form(h, &runs), bytes, "{name}");
            if name.starts_with("five") {
                let mut persisted = Vec::new();
                assert_eq!(stored(&bytes, &mut persisted), Ok(()));
                assert_eq!((bytes.len(), persisted.len()), (21, 28));
            }
            let mut r = Reader {
                bytes: &bytes,
                at: 0,
            };
            assert_eq!(read_head(&mut r), Ok(h), "{name}");
            let (mut score, mut expected) = (h.first_score, h.first_member);
            for want in &runs {
                assert_eq!(
                    read_form_run(&mut r, &mut score, &mut expected),
                    Ok(*want),
                    "{name}"
                );
            }
            assert_eq!(r.at, bytes.len(), "{name}");
        }
    }

    /// [`stored`] writes what the persisted encoder writes for the same
    /// runs, and refuses what is no form without charges.
    #[test]
    fn stored_is_the_persisted_encoding() {
        let runs = [run(5, 3, 1), run(30_005, 4, 2), run(30_005, 9, 1)];
        let bytes = form(head(&runs, Some(90_000)), &runs);
        let mut out = Vec::new();
        assert_eq!(stored(&bytes, &mut out), Ok(()));
        let mut want = Vec::new();
        write_header_of(&mut want, VERSION, Some(90_000), 3);
        put_varint(&mut want, zigzag(5));
        let (mut score, mut expected) = (5, 1);
        for r in runs {
            put_run(&mut want, &mut score, &mut expected, r);
        }
        assert_eq!(out, want);
        for bad in [
            vec![VERSION, 0, 0],
            vec![FORM | CHARGES, 0],
            vec![FORM, 1],
            vec![FORM, 0, 0],
            vec![FORM, 1, 0, 0, WIDE],
        ] {
            assert!(stored(&bad, &mut Vec::new()).is_err(), "{bad:?}");
        }
    }

    /// Any expiry, any first score: the head comes back as written.
    #[test]
    fn extreme_heads_round_trip() {
        for (score, member, at) in [
            (0, 0, i64::MIN),
            (1 << 53, i64::MAX, i64::MAX),
            (1 << 53, 1, i64::MIN),
        ] {
            let h = Head {
                charges: true,
                runs: 1,
                first_score: score,
                first_member: member,
                expire_at_ms: Some(at),
            };
            let mut out = Vec::new();
            put_head(&mut out, &h);
            assert_eq!(read_head(&mut Reader { bytes: &out, at: 0 }), Ok(h));
        }
    }
}
