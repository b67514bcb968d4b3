//! What a small log's round trip through chunks reuses between commands,
//! and the small form's block.

use std::cell::RefCell;

use super::chunked::Chunked;

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
pub(super) fn rounded(len: usize) -> usize {
    len.saturating_add(15) & !15
}

/// The small form of `c`, written into `block` when it fits there (its
/// capacity at least the length and at most the rounded length), else
/// into a new block of the rounded length; through the spare encoding
/// buffer, so that nothing else is allocated.
pub(super) fn small_bytes_into(c: &Chunked, mut block: Vec<u8>) -> Vec<u8> {
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

/// The small form of a log.
pub(super) fn small_bytes(c: &Chunked) -> Vec<u8> {
    if c.entries == 0 && c.expire_at_ms.is_none() {
        return Vec::new();
    }
    let mut b = c.encode();
    b.shrink_to_fit();
    b
}
