//! A small log's common changes made on its encoding in place, without the
//! round trip through chunks: what an allowed CHECK on a small key does
//! (trim the expired runs at the front, count, read the newest entry,
//! append or extend the last run, set the expiry). A [`Summary`] of the
//! bytes, read once when a command takes the log, answers the questions
//! and is kept up to date by every change; anything else (a clock step
//! back, a member below the greatest, UNDO, the queries of DETAIL and
//! PEEK) falls back to the chunks (`CompactLog::promote`).
//!
//! The bytes are the form `form_codec.rs` defines (tighter than the
//! persisted encoding). Every change writes exactly the bytes
//! `Chunked::encode_small_into` would write for the resulting runs: the
//! records after the first are relative to the run before them, so a trim
//! rewrites the head and the first kept record only, an append writes one
//! record and the head, a join rewrites the last record.
//!
//! The bytes live in a [`SmallForm`]: in the stored value itself up to
//! [`INLINE`] bytes (a `limit 5` key: one 24-byte block in all), else in a
//! block of their own. The summary is the command's, never stored (see
//! `log.rs`'s `Hold`).
//!
//! A small log with charges made with an ID (at most
//! [`SMALL_CHARGES`](super::charge::SMALL_CHARGES)) is a small form too,
//! its tag's [`CHARGES`] bit set: its runs change in
//! place as above, its records after them untouched, as long as the
//! change leaves every charge alone (a trim that removes a run falls back
//! to the chunks, which drop the charges that went with it).

use super::bounds::{MAX_CHARGES, MAX_CHARGE_SPANS, MAX_ENTRIES, MAX_REQUEST_ID, MAX_SCORE};
use super::charge::{valid_request, SMALL_CHARGES};
use super::codec::{put_varint, Reader, Sink};
use super::form_codec::{
    expiry_len, is_form, put_expiry, put_form_run, put_head, read_form_run, read_head, Head,
    CHARGES, RUNS_AT,
};
use super::run::Run;

/// Logs of at most this many runs are held as their encoding alone, one
/// small block (a `limit 5` key costs about what its sorted set costs);
/// larger ones as chunks. A chunked log goes back to the small form when it
/// falls to half of this.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const SMALL_RUNS: usize = 32;
/// In the unit tests and the fuzz targets, two: every property test and
/// fuzz input moves between both forms.
#[cfg(any(test, feature = "fuzzing"))]
pub const SMALL_RUNS: usize = 2;

/// Whether a small form holds charge records (read through the chunks,
/// never in place).
pub(super) fn has_charges(form: &SmallForm) -> bool {
    form.bytes()
        .first()
        .is_some_and(|&tag| is_form(tag) && tag & CHARGES != 0)
}

/// `len` rounded up to a multiple of 16: the capacity a small form is
/// given, so that the next few records fit without a new block. The
/// server's allocator (jemalloc) serves every size in 16-byte steps up to
/// 128 bytes and coarser above, so the block is the one an exact request
/// gets: the room costs no memory.
pub(super) fn rounded(len: usize) -> usize {
    len.saturating_add(15) & !15
}

/// The most bytes a small form holds in the value itself: what fits in the
/// 24 bytes a value of a boxed slice and its length takes anyway.
pub(super) const INLINE: usize = 22;

/// A small form's bytes, as the stored value holds them: up to [`INLINE`]
/// bytes in place, more in a block of their own (`block.len()` is the
/// block's size, of which the first `len` bytes are the encoding). Empty:
/// an empty log without an expiry.
#[derive(Clone)]
pub(super) enum SmallForm {
    Inline { len: u8, buf: [u8; INLINE] },
    Block { len: u32, block: Box<[u8]> },
}

impl std::fmt::Debug for SmallForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SmallForm").field(&self.bytes()).finish()
    }
}

impl SmallForm {
    /// No bytes.
    pub(super) const EMPTY: SmallForm = SmallForm::Inline {
        len: 0,
        buf: [0; INLINE],
    };

    /// The encoding.
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            SmallForm::Inline { len, buf } => buf.get(..usize::from(*len)).unwrap_or(&[]),
            SmallForm::Block { len, block } => block
                .get(..usize::try_from(*len).unwrap_or(0))
                .unwrap_or(&[]),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.bytes().len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size of its own block (0 when held in place).
    pub(super) fn block_len(&self) -> usize {
        match self {
            SmallForm::Inline { .. } => 0,
            SmallForm::Block { block, .. } => block.len(),
        }
    }

    /// Its own block, if it has one.
    pub(super) fn block_ptr(&self) -> Option<*const u8> {
        match self {
            SmallForm::Inline { .. } => None,
            SmallForm::Block { block, .. } => Some(block.as_ptr()),
        }
    }

    /// `bytes` in place when they fit, else copied into a block of their
    /// length.
    pub(super) fn from_slice(bytes: &[u8]) -> Option<SmallForm> {
        if let Some(form) = Self::inline(bytes) {
            return Some(form);
        }
        Some(SmallForm::Block {
            len: u32::try_from(bytes.len()).ok()?,
            block: bytes.into(),
        })
    }

    /// `bytes` in place, when they fit.
    fn inline(bytes: &[u8]) -> Option<SmallForm> {
        let mut buf = [0; INLINE];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(SmallForm::Inline {
            len: u8::try_from(bytes.len()).ok()?,
            buf,
        })
    }

    /// The bytes of `v`, in place when they fit (its block freed), else in
    /// its block (its whole capacity kept). `None` only for a length no
    /// small form reaches (over 4 GB).
    pub(super) fn from_vec(mut v: Vec<u8>) -> Option<SmallForm> {
        if let Some(form) = Self::inline(&v) {
            return Some(form);
        }
        let len = u32::try_from(v.len()).ok()?;
        // The block whole, as a slice: no new block (the length is the
        // capacity, the tail zeros).
        v.resize(v.capacity(), 0);
        Some(SmallForm::Block {
            len,
            block: v.into_boxed_slice(),
        })
    }

    /// The bytes as a vector in this form's block (none when in place):
    /// what a promotion keeps to reuse.
    pub(super) fn into_vec(self) -> Vec<u8> {
        match self {
            SmallForm::Inline { .. } => Vec::new(),
            SmallForm::Block { len, block } => {
                let mut v = Vec::from(block);
                v.truncate(usize::try_from(len).unwrap_or(0));
                v
            }
        }
    }

    /// Replaces `old_len` bytes at `at` by `new`; when they outgrow their
    /// place, into a new block of the rounded length (the size the chunked
    /// path gives a small form). `None` (nothing changed) for a range
    /// outside the bytes.
    pub(super) fn splice(&mut self, at: usize, old_len: usize, new: &[u8]) -> Option<()> {
        let total = self.len();
        let end = at.checked_add(old_len)?;
        if end > total {
            return None;
        }
        let new_total = total - old_len + new.len();
        let new_end = at + new.len();
        let (room, len32) = match self {
            SmallForm::Inline { buf, .. } => (buf.as_mut_slice(), None),
            SmallForm::Block { block, .. } => {
                (&mut block[..], Some(u32::try_from(new_total).ok()?))
            }
        };
        if new_total <= room.len() {
            room.copy_within(end..total, new_end);
            room.get_mut(at..new_end)?.copy_from_slice(new);
            match self {
                SmallForm::Inline { len, .. } => *len = u8::try_from(new_total).ok()?,
                SmallForm::Block { len, .. } => *len = len32?,
            }
            return Some(());
        }
        let old = self.bytes();
        let mut v = Vec::with_capacity(rounded(new_total));
        v.extend_from_slice(old.get(..at)?);
        v.extend_from_slice(new);
        v.extend_from_slice(old.get(end..)?);
        *self = SmallForm::from_vec(v)?;
        Some(())
    }

    /// At the end of a command: in place when the bytes fit there (their
    /// block freed), else in a block of at most their rounded length.
    pub(super) fn settle(&mut self) {
        let len = self.len();
        if let SmallForm::Block { block, .. } = self {
            if len <= INLINE || block.len() > rounded(len) {
                let mut v = Vec::with_capacity(rounded(len));
                v.extend_from_slice(self.bytes());
                if let Some(form) = SmallForm::from_vec(v) {
                    *self = form;
                }
            }
        }
    }
}

/// The most runs a summary is read for (a small form holds at most
/// [`SMALL_RUNS`]; the unit tests hand it larger ones).
const MOST_RUNS: u64 = 64;

/// What the changes and questions need of a small form's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Summary {
    /// Where the first record starts, after the head (the end of the runs
    /// when there is no run).
    rec_at: u32,
    pub(super) runs: u64,
    pub(super) entries: u64,
    /// The first run's score and first member (0 when there is no run).
    first_score: i64,
    first_member: i64,
    /// The last run (count 0 when there is none), where its record starts
    /// and the state (score, expected member) it was written after.
    last: Run,
    last_at: u32,
    before_last: (i64, i64),
    /// Whether the run before the last has the last's score.
    shares_top: bool,
    /// The greatest member (-1 when there is none).
    max_id: i64,
    /// The expiry, when `expires`.
    expire_at: i64,
    expires: bool,
    /// Where the runs end: the end of the bytes, or where the charge
    /// records of a form with charges start (the records stay as they are
    /// while the runs change in place, their units untouched). 32 bits,
    /// beside the flag: the summary lives in every command's store.
    end: u32,
    /// Whether the form holds charge records.
    pub(super) charges: bool,
}

/// Up to 64 bytes on the stack: a header or a record being written.
pub(super) struct Stack {
    buf: [u8; 64],
    len: usize,
}

impl Stack {
    fn new() -> Self {
        Stack {
            buf: [0; 64],
            len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl Sink for Stack {
    fn push(&mut self, b: u8) {
        // A header is at most 1 + 10 + 10 + 31 bytes: it always fits.
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
}

/// Reads the summary of a small form (the module's own bytes; checked all
/// the same: `None` for anything unreadable, and the caller takes the
/// chunked path, which does its own checks).
pub(super) fn scan(bytes: &[u8]) -> Option<Summary> {
    let mut r = Reader { bytes, at: 0 };
    let head = read_head(&mut r).ok()?;
    let (runs, charges) = (head.runs, head.charges);
    let mut s = Summary {
        rec_at: u32::try_from(r.at).ok()?,
        runs,
        entries: 0,
        first_score: head.first_score,
        first_member: head.first_member,
        last: Run {
            score: 0,
            first: 0,
            count: 0,
        },
        last_at: u32::try_from(r.at).ok()?,
        before_last: (head.first_score, head.first_member),
        shares_top: false,
        max_id: -1,
        expire_at: head.expire_at_ms.unwrap_or(0),
        expires: head.expire_at_ms.is_some(),
        end: u32::try_from(r.at).ok()?,
        charges,
    };
    if runs == 0 {
        return (r.at == bytes.len() && !charges).then_some(s);
    }
    // A small form holds at most SMALL_RUNS runs; the bound only keeps a
    // scan short whatever the bytes say.
    if runs > MOST_RUNS {
        return None;
    }
    let (mut score, mut expected) = (s.first_score, s.first_member);
    let mut prev_score = None;
    for i in 0..runs {
        let at = r.at;
        let state = (score, expected);
        // The one-byte record (a single entry under the expected member,
        // less than 128 ms after the previous) read here; others as the
        // decoder reads them.
        let run = match bytes.get(at) {
            Some(&gap) if gap < 0x80 && expected < i64::MAX => {
                r.at = at + 1;
                score = score.checked_add(i64::from(gap))?;
                let run = Run {
                    score,
                    first: expected,
                    count: 1,
                };
                expected += 1;
                run
            }
            _ => read_form_run(&mut r, &mut score, &mut expected).ok()?,
        };
        if i > 0 {
            prev_score = Some(s.last.score);
        }
        s.last = run;
        s.last_at = u32::try_from(at).ok()?;
        s.before_last = state;
        s.entries = s.entries.checked_add(run.count)?;
        s.max_id = s.max_id.max(run.last());
    }
    // A form with charges has its records after the runs (read by the
    // chunked path only).
    if (r.at < bytes.len()) != charges || r.at > bytes.len() {
        return None;
    }
    s.end = u32::try_from(r.at).ok()?;
    s.shares_top = prev_score == Some(s.last.score);
    Some(s)
}

/// Where the runs of the summary's form end.
fn runs_end(s: &Summary) -> Option<usize> {
    usize::try_from(s.end).ok()
}

/// Removes every run scored at or below `cutoff_ms`; the entries removed.
/// `None`: not done here (nothing changed).
pub(super) fn trim(bytes: &mut SmallForm, s: &mut Summary, cutoff_ms: i64) -> Option<u64> {
    if s.runs == 0 || s.first_score > cutoff_ms {
        return Some(0);
    }
    // Runs leaving a form with charges may take charges with them: the
    // chunked path drops their records.
    if s.charges {
        return None;
    }
    let mut r = Reader {
        bytes: bytes.bytes(),
        at: usize::try_from(s.rec_at).ok()?,
    };
    let (mut score, mut expected) = (s.first_score, s.first_member);
    let (mut removed, mut gone) = (0u64, 0u64);
    let mut kept = None;
    while gone < s.runs {
        let run = read_form_run(&mut r, &mut score, &mut expected).ok()?;
        if run.score > cutoff_ms {
            kept = Some((run, r.at));
            break;
        }
        removed = removed.checked_add(run.count)?;
        gone += 1;
    }
    // The new head (the first kept run's score and member, the expiry
    // relative to that score), then the first kept run's record, rewritten
    // after that state.
    let mut head = Stack::new();
    let mut h = Head {
        charges: false,
        runs: s.runs - gone,
        first_score: 0,
        first_member: 0,
        expire_at_ms: expiry(s),
    };
    let replaced_end = match kept {
        Some((run, end)) => {
            h.first_score = run.score;
            h.first_member = run.first;
            put_head(&mut head, &h);
            let (mut sc, mut ex) = (run.score, run.first);
            put_form_run(&mut head, &mut sc, &mut ex, run);
            end
        }
        None => {
            put_head(&mut head, &h);
            bytes.len()
        }
    };
    bytes.splice(0, replaced_end, head.bytes())?;
    *s = scan(bytes.bytes())?;
    Some(removed)
}

/// The newest entry as `Chunked::newest_entry` answers it, when the last
/// run alone has the highest score; `None`: not answered here.
pub(super) fn newest_entry(s: &Summary) -> Option<Option<(f64, Option<i64>)>> {
    if s.runs == 0 {
        return Some(None);
    }
    if s.shares_top {
        return None;
    }
    let best = super::chunked::greatest_decimal(s.last.first, s.last.last());
    Some(Some((s.last.score as f64, Some(best))))
}

/// Adds member `id` scored `now_ms` after every run, extending the last run
/// when it continues it; `None`: not done here (a score before the newest,
/// a member not above every other, a log that would outgrow the small
/// form, an id or score no log may hold), nothing changed.
pub(super) fn add(
    bytes: &mut SmallForm,
    s: &mut Summary,
    now_ms: i64,
    id: i64,
    cap: usize,
) -> Option<()> {
    if id < 0 || !(0..=MAX_SCORE).contains(&now_ms) || s.entries >= MAX_ENTRIES {
        return None;
    }
    if !within_cap(bytes, s, cap) {
        return None;
    }
    let run = Run {
        score: now_ms,
        first: id,
        count: 1,
    };
    if s.runs == 0 {
        let mut head = Stack::new();
        put_head(
            &mut head,
            &Head {
                charges: s.charges,
                runs: 1,
                first_score: now_ms,
                first_member: id,
                expire_at_ms: expiry(s),
            },
        );
        let (mut sc, mut ex) = (now_ms, id);
        put_form_run(&mut head, &mut sc, &mut ex, run);
        // Up to where the runs end: a charge record may follow (see
        // `add_charge`).
        bytes.splice(0, runs_end(s)?, head.bytes())?;
        *s = scan(bytes.bytes())?;
        return Some(());
    }
    if now_ms < s.last.score || id <= s.max_id {
        return None;
    }
    if s.last.is_continued_by(now_ms, id) {
        let joined = Run {
            count: s.last.count.checked_add(1)?,
            ..s.last
        };
        let mut rec = Stack::new();
        let (mut sc, mut ex) = s.before_last;
        put_form_run(&mut rec, &mut sc, &mut ex, joined);
        let last_at = usize::try_from(s.last_at).ok()?;
        let old_len = runs_end(s)?.checked_sub(last_at)?;
        let end = u32::try_from(last_at.checked_add(rec.bytes().len())?).ok()?;
        bytes.splice(last_at, old_len, rec.bytes())?;
        s.end = end;
        s.last = joined;
    } else {
        if s.runs >= SMALL_RUNS as u64 {
            return None;
        }
        let mut rec = Stack::new();
        let (mut sc, mut ex) = (s.last.score, s.last.last().saturating_add(1));
        let before = (sc, ex);
        put_form_run(&mut rec, &mut sc, &mut ex, run);
        // The record at the end, then the head with one more run.
        let end = runs_end(s)?;
        let (last_at, new_end) = (
            u32::try_from(end).ok()?,
            u32::try_from(end.checked_add(rec.bytes().len())?).ok()?,
        );
        bytes.splice(end, 0, rec.bytes())?;
        let was = *s;
        s.end = new_end;
        s.shares_top = s.last.score == now_ms;
        s.before_last = before;
        s.last_at = last_at;
        s.last = run;
        if rewrite_head(bytes, s, s.runs + 1, expiry(s)).is_none() {
            // Not reached (the head is inside the bytes): undone all the same.
            *s = was;
            bytes.splice(end, rec.bytes().len(), &[])?;
            return None;
        }
    }
    s.entries = s.entries.checked_add(1)?;
    s.max_id = id;
    Some(())
}

/// The most bytes one change in place adds to a small form: a record of
/// four fields and a byte more of run count (an entry), or an expiry of
/// ten bytes where there was none.
const MOST_GROWTH: usize = 32;

/// Whether a change in place (at most [`MOST_GROWTH`] bytes more) leaves
/// a small form with charges within `cap` bytes, as the chunked path
/// keeps one (past it, a log with charges is held in chunks); a form
/// without charges has no cap.
fn within_cap(bytes: &SmallForm, s: &Summary, cap: usize) -> bool {
    !s.charges || bytes.len().saturating_add(MOST_GROWTH) <= cap
}

/// Sets the expiry; `None`: not done here (a form with charges that might
/// pass `cap` bytes), nothing changed.
pub(super) fn set_expiry(
    bytes: &mut SmallForm,
    s: &mut Summary,
    at_ms: i64,
    cap: usize,
) -> Option<()> {
    if !within_cap(bytes, s, cap) {
        return None;
    }
    rewrite_head(bytes, s, s.runs, Some(at_ms))
}

/// Writes the head of `s`'s form with `runs` runs and the expiry
/// `expire_at` over the old head (usually as many bytes: `splice` writes
/// over it), and moves what the summary says of the bytes after it. The
/// first run's score and member stay: so does its record.
fn rewrite_head(
    bytes: &mut SmallForm,
    s: &mut Summary,
    runs: u64,
    expire_at: Option<i64>,
) -> Option<()> {
    // What a CHECK does, one field written: one more run (its count a
    // byte before and after, the head's fields the same), or a new expiry
    // where there was one (the head's last field).
    let same_fields = (s.runs > 0) == (runs > 0);
    if same_fields && s.runs < 0x80 && runs < 0x80 && expire_at == expiry(s) {
        bytes.splice(RUNS_AT, 1, &[runs as u8])?;
        s.runs = runs;
        return Some(());
    }
    if let (true, true, Some(at)) = (runs == s.runs, s.expires, expire_at) {
        let base = if runs > 0 { s.first_score } else { 0 };
        let mut field = Stack::new();
        put_expiry(&mut field, at, base);
        let old_len = expiry_len(s.expire_at, base);
        let rec_at = usize::try_from(s.rec_at).ok()?;
        bytes.splice(rec_at.checked_sub(old_len)?, old_len, field.bytes())?;
        return moved_by(
            s,
            field.bytes().len() as isize - old_len as isize,
            runs,
            expire_at,
        );
    }
    let mut head = Stack::new();
    put_head(
        &mut head,
        &Head {
            charges: s.charges,
            runs,
            first_score: s.first_score,
            first_member: s.first_member,
            expire_at_ms: expire_at,
        },
    );
    let rec_at = usize::try_from(s.rec_at).ok()?;
    bytes.splice(0, rec_at, head.bytes())?;
    moved_by(
        s,
        head.bytes().len() as isize - rec_at as isize,
        runs,
        expire_at,
    )
}

/// The summary of a form whose head now says `runs` and `expire_at` and
/// ends `shift` bytes further on.
fn moved_by(s: &mut Summary, shift: isize, runs: u64, expire_at: Option<i64>) -> Option<()> {
    let moved = |at: u32| -> Option<u32> {
        u32::try_from(usize::try_from(at).ok()?.checked_add_signed(shift)?).ok()
    };
    s.rec_at = moved(s.rec_at)?;
    s.last_at = moved(s.last_at)?;
    s.end = moved(s.end)?;
    s.runs = runs;
    s.expire_at = expire_at.unwrap_or(0);
    s.expires = expire_at.is_some();
    Some(())
}

/// The expiry of the summary's form.
fn expiry(s: &Summary) -> Option<i64> {
    s.expires.then_some(s.expire_at)
}

/// Whether the small form settles as no bytes at all (no entry, no expiry),
/// as the chunked path leaves such a log.
pub(super) fn is_blank(s: &Summary) -> bool {
    s.runs == 0 && !s.expires
}

/// What a pass over a small form's charge records (see `codec.rs`'s
/// `put_small_records`) finds: how many there are, the one under the
/// request id looked up, and what a record appended after them needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RecordScan {
    count: usize,
    /// The record under the id looked up: its first span's first member
    /// and its units.
    found: Option<(i64, u64)>,
    /// The member a record after the last would `follow` from (its first
    /// span's last member plus one; 1 when there is no record).
    expected: i64,
    /// The greatest member of any record's span (-1 when none).
    top: i64,
}

/// Reads the charge records of a small form from where its runs end, each
/// value checked as `codec.rs`'s `read_small_records` checks it (lengths,
/// flags, span counts, ranges), at most [`SMALL_CHARGES`] of them, in the
/// order of their first members (as every small form writes them), and
/// looks `request` up among them: at most [`SMALL_CHARGES`] records of at
/// most [`MAX_CHARGE_SPANS`] spans, so O(1). `None` for anything else (the
/// caller takes the chunked path).
fn scan_records(bytes: &[u8], s: &Summary, request: &[u8]) -> Option<RecordScan> {
    let mut r = Reader {
        bytes,
        at: runs_end(s)?,
    };
    let mut scan = RecordScan {
        count: 0,
        found: None,
        expected: 1,
        top: -1,
    };
    let mut prev_first = None;
    while r.at < bytes.len() {
        if scan.count >= SMALL_CHARGES {
            return None;
        }
        let tag = r.varint().ok()?;
        let (several, one, follows) = (tag & 4 != 0, tag & 2 != 0, tag & 1 != 0);
        let len = usize::try_from((tag >> 3).checked_add(1)?).ok()?;
        if len > MAX_REQUEST_ID || (several && one) {
            return None;
        }
        let end = r.at.checked_add(len)?;
        let id = bytes.get(r.at..end)?;
        r.at = end;
        let n = if several { r.varint().ok()? } else { 1 };
        if n < 1 || (several && n < 2) || n > MAX_CHARGE_SPANS as u64 {
            return None;
        }
        let first = match follows {
            true => scan.expected,
            false => i64::try_from(r.varint().ok()?).ok()?,
        };
        let more = match one {
            true => 0,
            false => i64::try_from(r.varint().ok()?).ok()?,
        };
        let last = first.checked_add(more)?;
        if first < 0 || prev_first.is_some_and(|p| p >= first) {
            return None;
        }
        prev_first = Some(first);
        let mut units = u64::try_from(more).ok()?.checked_add(1)?;
        let mut top = last;
        for _ in 1..n {
            let f = i64::try_from(r.varint().ok()?).ok()?;
            let m = i64::try_from(r.varint().ok()?).ok()?;
            top = top.max(f.checked_add(m)?);
            units = units.checked_add(u64::try_from(m).ok()?.checked_add(1)?)?;
        }
        if id == request {
            if scan.found.is_some() {
                return None;
            }
            scan.found = Some((first, units));
        }
        scan.expected = last.checked_add(1)?;
        scan.top = scan.top.max(top);
        scan.count += 1;
    }
    Some(scan)
}

/// The score of the run holding member `id`, when one does.
fn score_of(bytes: &[u8], s: &Summary, id: i64) -> Option<i64> {
    if s.runs == 0 {
        return None;
    }
    let mut r = Reader {
        bytes,
        at: usize::try_from(s.rec_at).ok()?,
    };
    let (mut score, mut expected) = (s.first_score, s.first_member);
    for _ in 0..s.runs {
        let run = read_form_run(&mut r, &mut score, &mut expected).ok()?;
        if run.holds(id) {
            return Some(run.score);
        }
    }
    None
}

/// The charge under `request` as `Chunked::charge` answers it (its score
/// and units), read off the bytes: `Some(None)` when there is none,
/// `None` when not answered here.
pub(super) fn charge_of(
    bytes: &SmallForm,
    s: &Summary,
    request: &[u8],
) -> Option<Option<(i64, u64)>> {
    if !s.charges {
        return Some(None);
    }
    let b = bytes.bytes();
    let Some((first, units)) = scan_records(b, s, request)?.found else {
        return Some(None);
    };
    Some(Some((score_of(b, s, first)?, units)))
}

/// The number of charges; `None` when not answered here.
pub(super) fn charge_count(bytes: &SmallForm, s: &Summary) -> Option<usize> {
    if !s.charges {
        return Some(0);
    }
    scan_records(bytes.bytes(), s, &[]).map(|scan| scan.count)
}

/// Makes a new charge of one unit under `request`, scored `now_ms`, under
/// the member above every other (as `Chunked::add_units` does): its entry
/// added as [`add`] adds one, its record appended after the others (the
/// first member of a new charge is above every other, so its record is
/// the last in their order), the tag's [`CHARGES`] bit set for a form
/// that held no charge. The score and
/// member given, or `None`: not done here, nothing changed (a charge
/// already under `request`, as many charges as a small form holds, a form
/// that would pass `cap` bytes, an entry [`add`] does not add in place,
/// any bound the loader checks).
pub(super) fn add_charge(
    bytes: &mut SmallForm,
    s: &mut Summary,
    request: &[u8],
    now_ms: i64,
    cap: usize,
) -> Option<(i64, i64)> {
    if !valid_request(request) {
        return None;
    }
    let scan = match s.charges {
        true => scan_records(bytes.bytes(), s, request)?,
        false => RecordScan {
            count: 0,
            found: None,
            expected: 1,
            top: -1,
        },
    };
    if scan.found.is_some() || scan.count >= SMALL_CHARGES.min(MAX_CHARGES) {
        return None;
    }
    let first = s.max_id.checked_add(1)?.max(1);
    // Disjoint from every charge's units (they are entries of the log,
    // all at or below `max_id`: checked all the same).
    if first <= scan.top {
        return None;
    }
    // The record: the tag (one span of one unit), the id, the first
    // member unless it follows the last record's.
    let follows = first == scan.expected;
    let mut tag = Stack::new();
    let len = u64::try_from(request.len().checked_sub(1)?).ok()?;
    put_varint(&mut tag, len << 3 | 1 << 1 | u64::from(follows));
    let mut tail = Stack::new();
    if !follows {
        put_varint(&mut tail, u64::try_from(first).ok()?);
    }
    // The new entry takes at most a record of four fields and a byte more
    // of run count: a form that might pass the cap is left to the chunks.
    let total = bytes
        .len()
        .checked_add(tag.len)?
        .checked_add(request.len())?
        .checked_add(tail.len)?
        .checked_add(MOST_GROWTH)?;
    if total > cap {
        return None;
    }
    let was = (s.charges, bytes.bytes().first().copied()?);
    let at = bytes.len();
    bytes.splice(at, 0, tag.bytes())?;
    if bytes.splice(bytes.len(), 0, request).is_none()
        || bytes.splice(bytes.len(), 0, tail.bytes()).is_none()
        || bytes.splice(0, 1, &[was.1 | CHARGES]).is_none()
    {
        let _ = bytes.splice(at, bytes.len().saturating_sub(at), &[]);
        return None;
    }
    s.charges = true;
    if add(bytes, s, now_ms, first, cap).is_none() {
        // Undone: the record and the version byte as they were.
        let _ = bytes.splice(at, bytes.len().saturating_sub(at), &[]);
        let _ = bytes.splice(0, 1, &[was.1]);
        s.charges = was.0;
        return None;
    }
    Some((now_ms, first))
}
