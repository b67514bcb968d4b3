//! The Rice code a sealed chunk's records may be written in (memory only:
//! never persisted).

use super::codec::{next_run, unzigzag, varint_len, zigzag, DecodeError};
use super::run::Run;

/// The greatest Rice parameter: a record's code (at most `ESC + 1 + k`
/// bits) then fits the 57 bits one read of the bytes yields.
pub(super) const MAX_RICE_K: u32 = 40;

/// In a Rice code, a quotient of `ESC` ones marks an escaped record: three
/// varints (the gap, the member's zigzag distance from the expected one,
/// the count less one), written 8 bits a byte, follow. Runs of several
/// entries, members out of sequence, and gaps of `ESC * 2^k` ms or more
/// are written so.
pub(super) const ESC: u32 = 16;

/// The bits [`put_rice`] writes for `r`, `gap` ms after the state.
pub(super) fn rice_bits(r: &Run, gap: u64, expected: i64, k: u32) -> u64 {
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

/// Appends bits, least significant first, to bytes whose last `pad` bits
/// are free.
pub(super) struct BitWriter<'a> {
    pub(super) out: &'a mut Vec<u8>,
    pub(super) pad: u8,
}

impl BitWriter<'_> {
    /// Appends the low `n` bits of `v` (`n` at most 57).
    pub(super) fn put(&mut self, v: u64, n: u32) {
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

    pub(super) fn varint(&mut self, mut v: u64) {
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
pub(super) fn put_rice(w: &mut BitWriter<'_>, k: u32, score: &mut i64, expected: &mut i64, r: Run) {
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
pub(super) fn bits_at(bytes: &[u8], at: usize) -> u64 {
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
pub(super) fn read_rice(
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
