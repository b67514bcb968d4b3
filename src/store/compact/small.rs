//! A small log's common changes made on its encoding in place, without the
//! round trip through chunks: what an allowed CHECK on a small key does
//! (trim the expired runs at the front, count, read the newest entry,
//! append or extend the last run, set the expiry). A [`Summary`] of the
//! bytes, read once when a command takes the log, answers the questions
//! and is kept up to date by every change; anything else (a clock step
//! back, a member below the greatest, UNDO, the queries of DETAIL and
//! PEEK) falls back to the chunks (`CompactLog::promote`).
//!
//! Every change writes exactly the bytes `Chunked::encode_into` would write
//! for the resulting runs: the records after the first are relative to the
//! run before them, so a trim rewrites the header and the first kept
//! record only, an append writes one record, a join rewrites the last.

use super::codec::{
    put_run, put_varint, read_run, unzigzag, varint_len, zigzag, Reader, Sink, VERSION,
};
use super::log::SMALL_RUNS;
use super::run::{Run, MAX_SCORE};
use super::spare::rounded;

/// The most runs a summary is read for (a small form holds at most
/// [`SMALL_RUNS`]; the unit tests hand it larger ones).
const MOST_RUNS: u64 = 64;

/// What the changes and questions need of a small form's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Summary {
    /// Where the run count's varint starts (after the expiry).
    n_at: usize,
    /// Where the first record starts (the end when there is no run).
    rec_at: usize,
    pub(super) runs: u64,
    pub(super) entries: u64,
    /// The first run's score (0 when there is no run).
    first_score: i64,
    /// The last run (count 0 when there is none), where its record starts
    /// and the state (score, expected member) it was written after.
    last: Run,
    last_at: usize,
    before_last: (i64, i64),
    /// Whether the run before the last has the last's score.
    shares_top: bool,
    /// The greatest member (-1 when there is none).
    max_id: i64,
    /// Whether an expiry is set.
    expires: bool,
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
    if r.byte().ok()? != VERSION {
        return None;
    }
    let expires = match r.byte().ok()? {
        0 => false,
        1 => {
            // Only its length matters here: stepped over, not decoded.
            while r.byte().ok()? & 0x80 != 0 {}
            true
        }
        _ => return None,
    };
    let n_at = r.at;
    let runs = r.varint().ok()?;
    let mut s = Summary {
        n_at,
        rec_at: r.at,
        runs,
        entries: 0,
        first_score: 0,
        last: Run {
            score: 0,
            first: 0,
            count: 0,
        },
        last_at: r.at,
        before_last: (0, 1),
        shares_top: false,
        max_id: -1,
        expires,
    };
    if runs == 0 {
        return (r.at == bytes.len()).then_some(s);
    }
    // A small form holds at most SMALL_RUNS runs; the bound only keeps a
    // scan short whatever the bytes say.
    if runs > MOST_RUNS {
        return None;
    }
    let first_score = unzigzag(r.varint().ok()?);
    s.first_score = first_score;
    s.rec_at = r.at;
    let (mut score, mut expected) = (first_score, 1i64);
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
            _ => read_run(&mut r, &mut score, &mut expected).ok()?,
        };
        if i > 0 {
            prev_score = Some(s.last.score);
        }
        s.last = run;
        s.last_at = at;
        s.before_last = state;
        s.entries = s.entries.checked_add(run.count)?;
        s.max_id = s.max_id.max(run.last());
    }
    if r.at != bytes.len() {
        return None;
    }
    s.shares_top = prev_score == Some(s.last.score);
    Some(s)
}

/// Replaces `old_len` bytes at `at` by `new`, growing the block to the
/// rounded length when it must grow (the size the chunked path gives a
/// small form). `None` (nothing changed) for a range outside the bytes.
fn replace(bytes: &mut Vec<u8>, at: usize, old_len: usize, new: &[u8]) -> Option<()> {
    let end = at.checked_add(old_len)?;
    let total = bytes.len();
    if end > total {
        return None;
    }
    let new_total = total - old_len + new.len();
    if new.len() > old_len {
        if new_total > bytes.capacity() {
            bytes.reserve_exact(rounded(new_total) - total);
        }
        bytes.resize(new_total, 0);
        bytes.copy_within(end..total, at + new.len());
    } else if new.len() < old_len {
        bytes.copy_within(end..total, at + new.len());
        bytes.truncate(new_total);
    }
    bytes.get_mut(at..at + new.len())?.copy_from_slice(new);
    Some(())
}

/// Removes every run scored at or below `cutoff_ms`; the entries removed.
/// `None`: not done here (nothing changed).
pub(super) fn trim(bytes: &mut Vec<u8>, s: &mut Summary, cutoff_ms: i64) -> Option<u64> {
    if s.runs == 0 || s.first_score > cutoff_ms {
        return Some(0);
    }
    let mut r = Reader {
        bytes: bytes.as_slice(),
        at: s.rec_at,
    };
    let (mut score, mut expected) = (s.first_score, 1i64);
    let (mut removed, mut gone) = (0u64, 0u64);
    let mut kept = None;
    while gone < s.runs {
        let run = read_run(&mut r, &mut score, &mut expected).ok()?;
        if run.score > cutoff_ms {
            kept = Some((run, r.at));
            break;
        }
        removed = removed.checked_add(run.count)?;
        gone += 1;
    }
    // The new header: the run count, then (when runs are left) the first
    // kept run's score and its record, rewritten after that state.
    let mut head = Stack::new();
    put_varint(&mut head, s.runs - gone);
    let replaced_end = match kept {
        Some((run, end)) => {
            put_varint(&mut head, zigzag(run.score));
            let (mut sc, mut ex) = (run.score, 1i64);
            put_run(&mut head, &mut sc, &mut ex, run);
            end
        }
        None => bytes.len(),
    };
    let old_len = replaced_end.checked_sub(s.n_at)?;
    replace(bytes, s.n_at, old_len, head.bytes())?;
    *s = scan(bytes)?;
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
pub(super) fn add(bytes: &mut Vec<u8>, s: &mut Summary, now_ms: i64, id: i64) -> Option<()> {
    if id < 0 || !(0..=MAX_SCORE).contains(&now_ms) {
        return None;
    }
    let run = Run {
        score: now_ms,
        first: id,
        count: 1,
    };
    if s.runs == 0 {
        let mut tail = Stack::new();
        put_varint(&mut tail, 1);
        put_varint(&mut tail, zigzag(now_ms));
        let (mut sc, mut ex) = (now_ms, 1i64);
        put_run(&mut tail, &mut sc, &mut ex, run);
        let old_len = bytes.len().checked_sub(s.n_at)?;
        replace(bytes, s.n_at, old_len, tail.bytes())?;
        *s = scan(bytes)?;
        return Some(());
    }
    if now_ms < s.last.score || id <= s.max_id {
        return None;
    }
    if s.last.score == now_ms && s.last.last().checked_add(1) == Some(id) {
        let joined = Run {
            count: s.last.count.checked_add(1)?,
            ..s.last
        };
        let mut rec = Stack::new();
        let (mut sc, mut ex) = s.before_last;
        put_run(&mut rec, &mut sc, &mut ex, joined);
        let old_len = bytes.len().checked_sub(s.last_at)?;
        replace(bytes, s.last_at, old_len, rec.bytes())?;
        s.last = joined;
    } else {
        if s.runs >= SMALL_RUNS as u64 {
            return None;
        }
        let mut rec = Stack::new();
        let (mut sc, mut ex) = (s.last.score, s.last.last().saturating_add(1));
        let before = (sc, ex);
        put_run(&mut rec, &mut sc, &mut ex, run);
        // The run count first (one more), then the record at the end.
        let mut n = Stack::new();
        put_varint(&mut n, s.runs + 1);
        // Only the count's own bytes are replaced (the first score
        // follows them).
        let n_len = usize::try_from(varint_len(s.runs)).ok()?;
        replace(bytes, s.n_at, n_len, n.bytes())?;
        let shift = n.bytes().len() as isize - n_len as isize;
        s.rec_at = s.rec_at.checked_add_signed(shift)?;
        s.shares_top = s.last.score == now_ms;
        s.before_last = before;
        s.last_at = bytes.len();
        bytes.extend_from_slice(rec.bytes());
        s.last = run;
        s.runs += 1;
    }
    s.entries = s.entries.checked_add(1)?;
    s.max_id = id;
    Some(())
}

/// Sets the expiry.
pub(super) fn set_expiry(bytes: &mut Vec<u8>, s: &mut Summary, at_ms: i64) -> Option<()> {
    // Usually as many bytes as the old one: `replace` writes over it.
    let mut field = Stack::new();
    field.push(1);
    put_varint(&mut field, zigzag(at_ms));
    let old_len = s.n_at.checked_sub(1)?;
    replace(bytes, 1, old_len, field.bytes())?;
    let shift = field.bytes().len() as isize - old_len as isize;
    s.n_at = s.n_at.checked_add_signed(shift)?;
    s.rec_at = s.rec_at.checked_add_signed(shift)?;
    s.last_at = s.last_at.checked_add_signed(shift)?;
    s.expires = true;
    Some(())
}

/// Whether the small form settles as no bytes at all (no entry, no expiry),
/// as the chunked path leaves such a log.
pub(super) fn is_blank(s: &Summary) -> bool {
    s.runs == 0 && !s.expires
}
