//! What a small log's round trip through chunks reuses between commands,
//! and the small form's block.

use std::cell::RefCell;

use super::charge::SMALL_CHARGES;
use super::chunked::Chunked;
use super::small::{rounded, SmallForm, INLINE};

/// What a small log's round trip through the chunked form reuses, kept
/// between commands on the thread that runs them: a chunked log with its
/// allocations (its chunk list, its chunk's records) and an encoding
/// buffer. In the steady state a command on a small log allocates nothing
/// for it but, now and then, a larger block for its grown encoding.
pub(super) struct Spare {
    pub(super) chunked: Option<Box<Chunked>>,
    pub(super) scratch: Vec<u8>,
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
pub(super) const SPARE_BYTES: usize = 2048;
pub(super) const SPARE_CHUNKS: usize = 4;

/// A chunked log to decode a small one into: the spare, or a new one.
pub(super) fn spare_chunked() -> Box<Chunked> {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.chunked.take()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `c` (emptied, its allocations kept) as the spare, unless it
/// holds more than a spare may.
pub(super) fn keep_spare(mut c: Box<Chunked>) {
    if c.chunks.capacity() > SPARE_CHUNKS
        || c.chunks.iter().any(|k| k.bytes.capacity() > SPARE_BYTES)
    {
        return;
    }
    c.stash = Vec::new();
    c.records = None;
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.chunked = Some(c);
        }
    });
}

/// Runs `f` on the spare encoding buffer holding `c`'s encoding; `None`
/// when the spare is in use (then the caller encodes anew).
fn with_encoding<R>(c: &Chunked, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    SPARE
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let mut scratch = std::mem::take(&mut s.scratch);
            scratch.clear();
            c.encode_small_into(&mut scratch);
            let r = f(&scratch);
            if scratch.capacity() <= SPARE_BYTES {
                s.scratch = scratch;
            }
            Some(r)
        })
        .ok()
        .flatten()
}

/// The small form of `c`: in place when it fits there, else written into
/// `block` when it fits there (its capacity at least the length and at
/// most the rounded length), else into a new block of the rounded length;
/// through the spare encoding buffer, so that nothing else is allocated.
/// `None` only for a length no small form reaches.
pub(super) fn small_form_into(c: &Chunked, block: Vec<u8>) -> Option<SmallForm> {
    if !small_charges(c) {
        return None;
    }
    if c.entries == 0 && c.expire_at_ms.is_none() && !has_charges(c) {
        return Some(SmallForm::EMPTY);
    }
    let cap = small_form_cap(c);
    let place = |block: Vec<u8>, bytes: &[u8]| -> Option<SmallForm> {
        if bytes.len() > cap {
            return None;
        }
        if bytes.len() <= INLINE {
            return SmallForm::from_slice(bytes);
        }
        let mut out = if block.capacity() >= bytes.len() && block.capacity() <= rounded(bytes.len())
        {
            block
        } else {
            Vec::with_capacity(rounded(bytes.len()))
        };
        out.clear();
        out.extend_from_slice(bytes);
        SmallForm::from_vec(out)
    };
    let mut block = Some(block);
    match with_encoding(c, |bytes| place(block.take().unwrap_or_default(), bytes)) {
        Some(form) => form,
        None => place(block.unwrap_or_default(), &small_bytes(c)),
    }
}

/// The small form of a log, in place or in a block of its length.
pub(super) fn small_form(c: &Chunked) -> Option<SmallForm> {
    if !small_charges(c) {
        return None;
    }
    if c.entries == 0 && c.expire_at_ms.is_none() && !has_charges(c) {
        return Some(SmallForm::EMPTY);
    }
    let cap = small_form_cap(c);
    let place = |bytes: &[u8]| {
        if bytes.len() > cap {
            return None;
        }
        SmallForm::from_slice(bytes)
    };
    with_encoding(c, place).unwrap_or_else(|| place(&small_bytes(c)))
}

/// The most bytes a small form with charge records holds, so that no
/// command decodes more than this for a small log: [`SMALL_CHARGES`]
/// charges with 128-byte ids and one run of ids each take about 1,100
/// bytes; a log whose records take more (runs of ids by the dozen) stays in
/// chunks. A log without charges never comes near it (its up to
/// [`SMALL_RUNS`](super::small::SMALL_RUNS) runs take at most 821 bytes).
#[cfg(not(any(test, feature = "fuzzing")))]
pub(super) const SMALL_FORM_BYTES: usize = SPARE_BYTES;
/// In the unit tests and the fuzz targets, 300: a few charges with long
/// ids pass it (as [`SMALL_RUNS`](super::small::SMALL_RUNS) is 2 there).
#[cfg(any(test, feature = "fuzzing"))]
pub(super) const SMALL_FORM_BYTES: usize = 300;

fn small_form_cap(c: &Chunked) -> usize {
    if has_charges(c) {
        SMALL_FORM_BYTES
    } else {
        usize::MAX
    }
}

fn has_charges(c: &Chunked) -> bool {
    c.records.as_ref().is_some_and(|r| !r.is_empty())
}

/// Whether the charge records of `c` (if any) fit the small form: at most
/// [`SMALL_CHARGES`] of them (a call then looks at each, as the table
/// does without its index).
fn small_charges(c: &Chunked) -> bool {
    c.records.as_ref().is_none_or(|r| r.len() <= SMALL_CHARGES)
}

/// A small form's bytes, encoded anew (when the spare buffer is in use).
fn small_bytes(c: &Chunked) -> Vec<u8> {
    let mut out = Vec::new();
    c.encode_small_into(&mut out);
    out
}
