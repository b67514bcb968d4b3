//! The compact log: a small log as its encoding, a larger one in chunks.

use super::chunked::Chunked;
use super::codec::{DecodeError, VERSION};
use super::run::{Bound, Run, MAX_SCORE};
use super::small;
use super::spare::*;
use crate::relocate::Relocate;
use crate::window::{NoFreeMember, WindowLog};

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

#[derive(Debug, Clone)]
pub(super) enum Repr {
    /// The encoding (empty: an empty log without an expiry).
    Small(Vec<u8>),
    Large(Box<Chunked>),
}

/// The compact log: a small log as its encoding, a larger one in chunks.
#[derive(Debug, Clone)]
pub struct CompactLog {
    pub(super) repr: Repr,
    /// Held as chunks until [`CompactLog::settle`]: a command asks a log
    /// several questions, and a small log is decoded once for all of them.
    pub(super) held: bool,
    /// While held: whether the log was small when expanded, and whether
    /// anything changed since (if not, `settle` puts the same bytes back).
    pub(super) was_small: bool,
    pub(super) dirty: bool,
    /// While a small log is held in its small form (changed in place, see
    /// `small.rs`): what its bytes hold. `None` otherwise.
    pub(super) small: Option<small::Summary>,
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

/// Equal when they hold the same runs in the same order and expire alike,
/// whichever form holds them.
impl PartialEq for CompactLog {
    fn eq(&self, other: &Self) -> bool {
        *self.view() == *other.view()
    }
}

impl Eq for CompactLog {}

impl CompactLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The log as chunks: borrowed when chunked, decoded when small.
    pub(super) fn view(&self) -> std::borrow::Cow<'_, Chunked> {
        match &self.repr {
            Repr::Large(c) => std::borrow::Cow::Borrowed(c),
            // The bytes are this code's own encoding: they decode.
            Repr::Small(b) if b.is_empty() => std::borrow::Cow::Owned(Chunked::default()),
            Repr::Small(b) => std::borrow::Cow::Owned(Chunked::decode(b).unwrap_or_default()),
        }
    }

    /// Runs `f` on the log as chunks, then keeps it in the form its size
    /// calls for.
    pub(super) fn edit<R>(&mut self, f: impl FnOnce(&mut Chunked) -> R) -> R {
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
    pub(super) fn promote(&mut self) {
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
    pub(super) fn held_small(&mut self) -> Option<(&mut Vec<u8>, &mut small::Summary)> {
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

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there,
    /// or the bound taking it out would pass (nothing changed).
    pub fn remove(&mut self, id: i64) -> Result<bool, Bound> {
        self.promote();
        if !self.view().holds_above(id, i64::MIN) {
            return Ok(false);
        }
        self.edit(|c| c.remove(id))
    }

    /// See [`Chunked::canonical_runs`].
    pub fn canonical_runs(&self) -> Vec<Run> {
        self.view().canonical_runs()
    }

    /// See [`Chunked::for_each_canonical_run`].
    pub fn for_each_canonical_run(&self, f: impl FnMut(Run)) {
        self.view().for_each_canonical_run(f)
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
    pub fn add_run(&mut self, run: Run) -> Result<(), Bound> {
        self.edit(|c| c.add_run(run))
    }

    /// The runs, and the runs out of member order (see `chunked.rs`).
    pub fn shape(&self) -> (u64, usize) {
        let v = self.view();
        (v.runs, v.strays.len())
    }

    /// Whether `run` would go at the end with nothing else moved (members
    /// above every other, scored at or after the newest).
    pub fn appends(&self, run: &Run) -> bool {
        self.view().appends(run)
    }

    /// Adds an entry under member `id` scored `now_ms`, or, when that
    /// would put more than [`MAX_STRAYS`] runs out of member order, scored
    /// as the newest entry (later: the limiter stays exact or stricter).
    /// The score it was given, or `None` when the member is taken (or
    /// `now_ms` is no server time).
    pub fn add_scored(&mut self, now_ms: i64, id: i64) -> Option<i64> {
        // A clock outside 0 ..= 2^53 ms cannot be stored (no such clock).
        if id < 0 || !(0..=MAX_SCORE).contains(&now_ms) {
            return None;
        }
        if let Some((b, s)) = self.held_small() {
            if small::add(b, s, now_ms, id).is_some() {
                self.dirty = true;
                return Some(now_ms);
            }
        }
        self.promote();
        if self.view().holds_above(id, i64::MIN) {
            return None;
        }
        self.edit(|c| c.add(now_ms, id))
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
                c.strays = to.vec(std::mem::take(&mut c.strays));
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

    /// Every invariant the queries rely on, and that the log loads again as
    /// the same log (see `Chunked::check`): the unit tests' and the fuzz
    /// targets' oracle, never part of the module.
    #[cfg(any(test, feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn check(&self) -> Result<(), String> {
        self.view().check()
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
        Ok(self.add_scored(now_ms, id).is_some())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.set_expiry(at_ms);
        Ok(())
    }
}
