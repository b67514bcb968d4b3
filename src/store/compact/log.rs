//! The compact log: a small log as its encoding, a larger one in chunks.

use super::bounds::{Bound, MAX_SCORE};
use super::chunked::Chunked;
use super::codec::DecodeError;
use super::form_codec::{self, FORM};
use super::run::Run;
use super::small::{self, SmallForm, SMALL_RUNS};
use super::spare::*;
use crate::relocate::Relocate;
use crate::window::{Charge, NoFreeMember, WindowLog};

#[derive(Debug, Clone)]
pub(super) enum Repr {
    /// The encoding, in place or in a block of its own (empty: an empty
    /// log without an expiry).
    Small(SmallForm),
    Large(Box<Chunked>),
}

/// The compact log: a small log as its encoding, a larger one in chunks.
/// The value a key holds: 24 bytes, a `limit 5` key's encoding in them.
/// What a command reads of it once and keeps while it runs is a [`Hold`],
/// the command's, never stored.
#[derive(Debug, Clone)]
pub struct CompactLog {
    pub(super) repr: Repr,
}

/// [`CompactLog::contents`]: the entries by score as (score, count), the
/// charges as (request id, score, units).
#[cfg(any(test, feature = "fuzzing"))]
pub type LogContents = (Vec<(i64, u64)>, Vec<(Vec<u8>, i64, u64)>);

// The value's block: 24 bytes, the smallest block that holds a `limit 5`
// key's encoding besides the pointer to it.
const _: () = assert!(std::mem::size_of::<CompactLog>() == 24);

impl Default for CompactLog {
    fn default() -> Self {
        CompactLog {
            repr: Repr::Small(SmallForm::EMPTY),
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

/// What a command keeps of a log it holds (one per key per command, see
/// `store.rs`; never stored with the value): a command asks a log several
/// questions, and a small log's bytes are read once for all of them.
#[derive(Debug, Default)]
pub struct Hold {
    /// Held until [`Hold::settle`].
    pub(super) held: bool,
    /// While held: whether the log was small when expanded, and whether
    /// anything changed since (if not, `settle` puts the same bytes back).
    pub(super) was_small: bool,
    pub(super) dirty: bool,
    /// While a small log is held in its small form (changed in place, see
    /// `small.rs`): what its bytes hold. `None` otherwise.
    pub(super) small: Option<small::Summary>,
    /// While a small log held in place was promoted to chunks: its bytes,
    /// put back by `settle` when nothing changed (a block is kept in the
    /// chunks' stash instead).
    unchanged: Option<SmallForm>,
}

/// A log with its command's [`Hold`]: the window's questions and changes,
/// on the small form in place while the hold has its summary.
pub struct Held<'a> {
    pub(super) log: &'a mut CompactLog,
    pub(super) hold: &'a mut Hold,
}

impl Hold {
    /// The log `log` with this hold (held or not: see [`Held::expand`]).
    pub fn on<'a>(&'a mut self, log: &'a mut CompactLog) -> Held<'a> {
        Held { log, hold: self }
    }

    /// The number of entries of `log`, which this hold is the hold of.
    pub fn count(&self, log: &CompactLog) -> u64 {
        match (&log.repr, &self.small) {
            (Repr::Small(_), Some(s)) => s.entries,
            _ => log.view().count_entries(),
        }
    }

    /// Ends [`Held::expand`] for `log`: a log small enough goes back to
    /// its small form (the same bytes when nothing changed), and the chunks
    /// it was held in become the spare.
    pub fn settle(&mut self, log: &mut CompactLog) {
        if !std::mem::replace(&mut self.held, false) {
            return;
        }
        if let Some(s) = self.small.take() {
            // As the chunked path leaves it: no bytes for a blank log, and
            // in place or in a block of at most the rounded length.
            if let (Repr::Small(b), true) = (&mut log.repr, self.dirty) {
                if small::is_blank(&s) {
                    *b = SmallForm::EMPTY;
                } else {
                    b.settle();
                }
            }
            return;
        }
        let Repr::Large(c) = &mut log.repr else {
            return;
        };
        let stash = std::mem::take(&mut c.stash);
        let unchanged = self.unchanged.take();
        // The same bytes when nothing changed.
        let form = match (self.was_small && !self.dirty, unchanged) {
            _ if !c.runs_at_most(SMALL_RUNS) => None,
            (true, Some(form)) => Some(form),
            (true, None) if !stash.is_empty() => SmallForm::from_vec(stash),
            _ => small_form_into(c, stash),
        };
        let Some(form) = form else {
            if self.was_small {
                // It left the small form in this command (too many runs or
                // charges), in the spare's blocks (sized for any small
                // log): cut to what it holds, as a log decoded whole has
                // them.
                c.chunks.shrink_to_fit();
                for chunk in c.chunks.iter_mut() {
                    chunk.bytes.shrink_to_fit();
                }
            }
            return;
        };
        if let Repr::Large(c) = std::mem::replace(&mut log.repr, Repr::Small(form)) {
            keep_spare(c);
        }
    }
}

impl CompactLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// The log with a hold of its own, not held: every change through the
    /// chunks, the form kept as its size calls for after each.
    fn unheld<R>(&mut self, f: impl FnOnce(&mut Held<'_>) -> R) -> R {
        let mut hold = Hold::default();
        f(&mut hold.on(self))
    }

    /// The log as chunks: borrowed when chunked, decoded when small.
    pub(super) fn view(&self) -> std::borrow::Cow<'_, Chunked> {
        match &self.repr {
            Repr::Large(c) => std::borrow::Cow::Borrowed(c),
            // The bytes are this code's own encoding: they decode.
            Repr::Small(b) if b.is_empty() => std::borrow::Cow::Owned(Chunked::default()),
            Repr::Small(b) => {
                std::borrow::Cow::Owned(Chunked::decode_small(b.bytes()).unwrap_or_default())
            }
        }
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        self.view().count_entries()
    }

    /// Sets the expiry the encoding carries.
    pub fn set_expiry(&mut self, at_ms: i64) {
        self.unheld(|h| h.set_expiry(at_ms))
    }

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there,
    /// or the bound taking it out would pass (nothing changed).
    pub fn remove(&mut self, id: i64) -> Result<bool, Bound> {
        self.unheld(|h| h.remove(id))
    }

    /// The runs, in score order (the unit tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn runs(&self) -> Vec<Run> {
        self.view().runs()
    }

    /// The absolute expiry set by the last `expire_at`, if any (the unit
    /// tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn expire_at_ms(&self) -> Option<i64> {
        self.view().expire_at_ms()
    }

    /// Every entry as (score, member), in score order (the unit tests).
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (i64, i64)> {
        self.view().entries().collect::<Vec<_>>().into_iter()
    }

    /// See [`Chunked::for_each_canonical_run`].
    pub fn for_each_canonical_run(&self, f: impl FnMut(Run)) {
        self.view().for_each_canonical_run(f)
    }

    /// See [`Chunked::canonical_runs`] (the unit tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn canonical_runs(&self) -> Vec<Run> {
        self.view().canonical_runs()
    }

    /// What the log holds but for its member ids: the entries by score (a
    /// score's runs summed), and each charge's request id, score and units.
    /// Two logs given the same commands, one held and one not, must agree
    /// here, though not on the ids (the unit tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn contents(&self) -> LogContents {
        let mut scores: Vec<(i64, u64)> = Vec::new();
        for r in self.runs() {
            match scores.last_mut() {
                Some(last) if last.0 == r.score => last.1 += r.count,
                _ => scores.push((r.score, r.count)),
            }
        }
        let charges = self
            .charges()
            .into_iter()
            .map(|r| {
                let units = r.spans.iter().map(|s| s.count).sum();
                (r.request.to_vec(), r.score, units)
            })
            .collect();
        (scores, charges)
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
        self.unheld(|h| h.edit(|c| c.add_run(run)))
    }

    /// The charge under `request` (see `charge/`): its score and units.
    pub fn charge_of(&self, request: &[u8]) -> Option<(i64, u64)> {
        match &self.repr {
            Repr::Large(c) => c.charge(request),
            Repr::Small(b) if !small::has_charges(b) => None,
            Repr::Small(_) => self.view().charge(request),
        }
    }

    /// Whether member `id` is a unit of a charge made with an ID.
    pub fn charged(&self, id: i64) -> bool {
        match &self.repr {
            Repr::Large(c) => c.charged(id),
            Repr::Small(b) if !small::has_charges(b) => false,
            Repr::Small(_) => self.view().charged(id),
        }
    }

    /// The charges made with an ID, by request id: (request, score, units,
    /// spans), for tests and the effect's checks.
    pub fn charges(&self) -> Vec<super::charge::Record> {
        match &self.repr {
            Repr::Small(b) if !small::has_charges(b) => Vec::new(),
            _ => self
                .view()
                .records
                .as_ref()
                .map(|r| r.iter().collect())
                .unwrap_or_default(),
        }
    }

    /// The number of charges, and whether one more could be made under
    /// new request ids (see `effect.rs`'s fast path).
    pub fn charge_count(&self) -> usize {
        match &self.repr {
            Repr::Large(c) => c.records.as_ref().map_or(0, |r| r.len()),
            Repr::Small(b) if !small::has_charges(b) => 0,
            Repr::Small(_) => self.view().records.as_ref().map_or(0, |r| r.len()),
        }
    }

    /// Adds `run` (members the caller checked are free) as units of the
    /// charge under `request` (SLIDEWIN.APPLY ... CHARGE).
    pub fn add_charge(&mut self, request: &[u8], run: Run) -> Result<(), Bound> {
        self.unheld(|h| h.edit(|c| c.add_charge(request, run)))
    }

    /// See [`Held::cut_charge`].
    pub fn cut_charge(&mut self, request: &[u8], keep: u64) -> Result<u64, Bound> {
        self.unheld(|h| h.cut_charge(request, keep))
    }

    /// See [`Held::raise_charge`] (the unit tests).
    #[cfg(test)]
    pub fn raise_charge(
        &mut self,
        request: &[u8],
        score_ms: i64,
        held: u64,
        to: u64,
    ) -> Result<Option<Raised>, Bound> {
        self.unheld(|h| h.raise_charge(request, score_ms, held, to))
    }

    /// See [`Held::add_charge_units`] (the unit tests).
    #[cfg(test)]
    pub fn add_charge_units(
        &mut self,
        request: &[u8],
        score_ms: i64,
        n: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        self.unheld(|h| h.add_charge_units(request, score_ms, n))
    }

    /// The runs, and the runs out of member order (see `chunked/mod.rs`).
    pub fn shape(&self) -> (u64, usize) {
        let v = self.view();
        (v.runs, v.strays.len())
    }

    /// Whether adding `run` to the charge under `request` passes no bound
    /// (nothing changed).
    pub fn charge_fits(&self, request: &[u8], run: &Run) -> bool {
        self.view().charge_fits(request, run)
    }

    /// Whether removing a charge and appending `run` passes no bound.
    pub fn move_fits(&self, request: &[u8], run: &Run) -> bool {
        self.view().move_fits(request, run)
    }

    /// Whether `run` would go at the end with nothing else moved (members
    /// above every other, scored at or after the newest).
    pub fn appends(&self, run: &Run) -> bool {
        self.view().appends(run)
    }

    /// Every heap block the log owns besides the value itself.
    pub fn heap_blocks(&self) -> Vec<*const u8> {
        match &self.repr {
            Repr::Small(b) => b.block_ptr().into_iter().collect(),
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
        let repr = std::mem::replace(&mut self.repr, Repr::Small(SmallForm::EMPTY));
        self.repr = match repr {
            Repr::Small(SmallForm::Block { len, block }) => {
                // The block whole (its length is its capacity): moved as a
                // vector, no new block either way.
                let moved = to.vec(Vec::from(block));
                Repr::Small(SmallForm::Block {
                    len,
                    block: moved.into_boxed_slice(),
                })
            }
            small @ Repr::Small(_) => small,
            Repr::Large(c) => {
                let mut c = to.boxed(c);
                let chunks = std::mem::take(&mut c.chunks);
                let mut chunks = to.vec(chunks);
                for chunk in chunks.iter_mut() {
                    chunk.bytes = to.vec(std::mem::take(&mut chunk.bytes));
                    chunk.relocate_marks(to);
                }
                c.chunks = chunks;
                c.stash = to.vec(std::mem::take(&mut c.stash));
                c.strays = to.vec(std::mem::take(&mut c.strays));
                if let Some(records) = c.records.take() {
                    let mut records = to.boxed(records);
                    records.relocate(to);
                    c.records = Some(records);
                }
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

    /// The encoding (see the module comment): version 1, or 2 with
    /// charge records. A small form without charges is rewritten record by
    /// record (see `form_codec.rs`); others go through the chunks.
    pub fn encode(&self) -> Vec<u8> {
        if let Repr::Small(b) = &self.repr {
            if !b.is_empty() && !small::has_charges(b) {
                let mut out = Vec::with_capacity(b.len().saturating_add(16));
                if form_codec::stored(b.bytes(), &mut out).is_ok() {
                    return out;
                }
            }
        }
        self.view().encode()
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
        let small = if c.runs_at_most(SMALL_RUNS) {
            small_form(&c)
        } else {
            None
        };
        let repr = match small {
            Some(form) => Repr::Small(form),
            None => Repr::Large(Box::new(c)),
        };
        Ok(CompactLog { repr })
    }
}

impl Held<'_> {
    /// Runs `f` on the log as chunks, then keeps it in the form its size
    /// calls for (a held log stays chunks until `settle`).
    pub(super) fn edit<R>(&mut self, f: impl FnOnce(&mut Chunked) -> R) -> R {
        self.promote();
        self.hold.dirty = true;
        match &mut self.log.repr {
            Repr::Large(c) => {
                let r = f(c);
                if !self.hold.held && c.runs_at_most(SMALL_RUNS / 2) {
                    if let Some(form) = small_form(c) {
                        self.log.repr = Repr::Small(form);
                    }
                }
                r
            }
            Repr::Small(b) => {
                let mut c = if b.is_empty() {
                    Chunked::default()
                } else {
                    Chunked::decode_small(b.bytes()).unwrap_or_default()
                };
                let r = f(&mut c);
                let small = if c.runs_at_most(SMALL_RUNS) {
                    small_form(&c)
                } else {
                    None
                };
                self.log.repr = match small {
                    Some(form) => Repr::Small(form),
                    None => Repr::Large(Box::new(c)),
                };
                r
            }
        }
    }

    /// Holds the log for the command until [`Hold::settle`]: a small log
    /// in its small form with its summary read once (the common changes
    /// are made on the bytes, see `small.rs`; anything else promotes it to
    /// chunks), a large one as it is.
    pub fn expand(&mut self) {
        let hold = &mut *self.hold;
        if hold.held {
            return;
        }
        hold.was_small = false;
        hold.dirty = false;
        hold.unchanged = None;
        hold.held = true;
        if let Repr::Small(b) = &mut self.log.repr {
            hold.was_small = true;
            if b.is_empty() {
                // A new log: the form of an empty one (in place: the first
                // call's entry and expiry fit there).
                *b = SmallForm::from_slice(&[FORM, 0]).unwrap_or(SmallForm::EMPTY);
                hold.dirty = true;
            }
            hold.small = small::scan(b.bytes());
            if hold.small.is_none() {
                // Not read in place (not reached: every small form is).
                self.hold_as_chunks();
            }
        }
    }

    /// A small log held in its small form, held as chunks from now on
    /// (decoded into the spare chunked log: its own bytes, so without the
    /// checks of `decode`). Anything it changed stays changed.
    pub(super) fn promote(&mut self) {
        if self.hold.small.take().is_none() {
            return;
        }
        self.hold_as_chunks();
    }

    /// A small log held, held as chunks from now on (see [`Held::promote`]).
    fn hold_as_chunks(&mut self) {
        if let Repr::Small(b) = &mut self.log.repr {
            let small = std::mem::replace(b, SmallForm::EMPTY);
            let mut c = spare_chunked();
            c.decode_own(small.bytes());
            if small.block_len() == 0 {
                self.hold.unchanged = Some(small);
            } else {
                c.stash = small.into_vec();
            }
            self.log.repr = Repr::Large(c);
        }
    }

    /// The summary and bytes of a small log held in its small form.
    fn held_small(&mut self) -> Option<(&mut SmallForm, &mut small::Summary)> {
        match (&mut self.log.repr, self.hold.small.as_mut()) {
            (Repr::Small(b), Some(s)) => Some((b, s)),
            _ => None,
        }
    }

    /// The number of entries.
    pub fn count_entries(&self) -> u64 {
        self.hold.count(self.log)
    }

    /// Sets the expiry the encoding carries.
    pub fn set_expiry(&mut self, at_ms: i64) {
        if let Some((b, s)) = self.held_small() {
            if small::set_expiry(b, s, at_ms, SMALL_FORM_BYTES).is_some() {
                self.hold.dirty = true;
                return;
            }
        }
        self.edit(|c| c.set_expiry(at_ms))
    }

    /// Removes member `id` (SLIDEWIN.UNDO); returns whether it was there,
    /// or the bound taking it out would pass (nothing changed).
    pub fn remove(&mut self, id: i64) -> Result<bool, Bound> {
        self.promote();
        if !self.log.view().holds_above(id, i64::MIN) {
            return Ok(false);
        }
        self.edit(|c| c.remove(id))
    }

    /// Adds an entry under member `id` scored `now_ms`, or, when that
    /// would put more than [`MAX_STRAYS`](super::bounds::MAX_STRAYS) runs out of
    /// member order, scored as the newest entry (later: the limiter stays
    /// exact or stricter). The score it was given, or `None` when the
    /// member is taken (or `now_ms` is no server time).
    pub fn add_scored(&mut self, now_ms: i64, id: i64) -> Option<i64> {
        // A clock outside 0 ..= 2^53 ms cannot be stored (no such clock).
        if id < 0 || !(0..=MAX_SCORE).contains(&now_ms) {
            return None;
        }
        if let Some((b, s)) = self.held_small() {
            if small::add(b, s, now_ms, id, SMALL_FORM_BYTES).is_some() {
                self.hold.dirty = true;
                return Some(now_ms);
            }
        }
        self.promote();
        if self.log.view().holds_above(id, i64::MIN) {
            return None;
        }
        self.edit(|c| c.add(now_ms, id))
    }
}

/// What [`Held::raise_charge`] added: `count` units scored `score` from
/// member `first` on; `moved` when the charge's units were all taken off
/// first (so `count` is all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub score: i64,
    pub first: i64,
    pub count: u64,
    pub moved: bool,
}

/// The charges made with an ID (see `charge/`): a small log with charges
/// (see `form_codec.rs`)
/// takes the in-place changes of `small.rs` that leave its charges alone
/// (an entry added after the others, the expiry, a trim that removes
/// nothing); anything that reads or changes a charge holds it as chunks,
/// and it goes back to its small form at the end while it holds at most
/// [`SMALL_CHARGES`](super::charge::SMALL_CHARGES) charges.
impl Held<'_> {
    /// The charge under `request`: its score and units (a small form with
    /// charges held as chunks from now on: its records are read once).
    pub fn charge_of(&mut self, request: &[u8]) -> Option<(i64, u64)> {
        if let Some((b, s)) = self.held_small() {
            if let Some(answer) = small::charge_of(b, s, request) {
                return answer;
            }
        }
        self.promote_charges();
        self.log.charge_of(request)
    }

    /// The number of charges (see [`Held::charge_of`]).
    pub fn charge_count(&mut self) -> usize {
        if let Some((b, s)) = self.held_small() {
            if let Some(n) = small::charge_count(b, s) {
                return n;
            }
        }
        self.promote_charges();
        self.log.charge_count()
    }

    /// A small form with charges held in place: held as chunks from now on
    /// (the records are read there, see `small.rs`).
    fn promote_charges(&mut self) {
        if self.hold.small.is_some_and(|s| s.charges) {
            self.promote();
        }
    }

    /// Adds `n` units to the charge under `request` (made when missing,
    /// scored `score_ms`; an existing one's at its own score) under fresh
    /// member ids: the score and first member given, `None` when `n` is 0
    /// or no id is free, or the bound it would pass (nothing changed).
    pub fn add_charge_units(
        &mut self,
        request: &[u8],
        score_ms: i64,
        n: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        if n == 0 {
            return Ok(None);
        }
        // A new charge of one unit after every entry: in place.
        if n == 1 {
            if let Some((b, s)) = self.held_small() {
                if let Some(added) = small::add_charge(b, s, request, score_ms, SMALL_FORM_BYTES) {
                    self.hold.dirty = true;
                    return Ok(Some(added));
                }
            }
        }
        self.edit(|c| c.add_units(request, score_ms, n))
    }

    /// Raises the charge under `request` from `held` to `to` units (a new
    /// charge when `held` is 0, scored `score_ms`): the new units at the
    /// charge's own score, or, when that would pass a bound of the layout
    /// (runs out of member order, a charge's runs of ids), the whole charge
    /// moved to the newest score (see [`Chunked::move_charge`]). What was
    /// added, `None` when nothing was or no id is free, or the bound it
    /// would pass (nothing changed).
    pub fn raise_charge(
        &mut self,
        request: &[u8],
        score_ms: i64,
        held: u64,
        to: u64,
    ) -> Result<Option<Raised>, Bound> {
        let n = to.saturating_sub(held);
        match self.add_charge_units(request, score_ms, n) {
            Ok(added) => Ok(added.map(|(score, first)| Raised {
                score,
                first,
                count: n,
                moved: false,
            })),
            Err(Bound::Strays | Bound::ChargeSpans) if held > 0 => {
                let moved = self.edit(|c| c.move_charge(request, to))?;
                Ok(moved.map(|(score, first)| Raised {
                    score,
                    first,
                    count: to,
                    moved: true,
                }))
            }
            Err(b) => Err(b),
        }
    }

    /// Keeps the first `keep` units of the charge under `request`, the
    /// rest removed (none: the charge goes); how many entries it removed,
    /// or the bound it would pass (nothing changed).
    pub fn cut_charge(&mut self, request: &[u8], keep: u64) -> Result<u64, Bound> {
        self.promote_charges();
        if self
            .log
            .charge_of(request)
            .is_none_or(|(_, units)| units <= keep)
        {
            return Ok(0);
        }
        self.edit(|c| c.remove_units(request, keep))
    }
}

impl WindowLog for Held<'_> {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        if let Some((b, s)) = self.held_small() {
            if let Some(removed) = small::trim(b, s, cutoff_ms) {
                if removed > 0 {
                    self.hold.dirty = true;
                }
                return Ok(removed);
            }
        }
        // Not done in place (a small form's runs leaving with charges):
        // held as chunks.
        self.promote();
        // Nothing to trim: no rewrite.
        if self.log.view().oldest_score().is_none_or(|s| s > cutoff_ms) {
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
        self.log.view().count_above(cutoff_ms)
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, Self::Error> {
        self.promote();
        self.log.view().nth_above(cutoff_ms, k, n)
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        self.promote();
        self.log.view().newest_above(min_ms)
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        if let Some(newest) = self.hold.small.as_ref().and_then(small::newest_entry) {
            return Ok(newest);
        }
        self.promote();
        self.log.view().newest_entry()
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        self.promote();
        Ok(self.log.view().holds_above(id, i64::MIN))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        Ok(self.add_scored(now_ms, id).is_some())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.set_expiry(at_ms);
        Ok(())
    }

    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error> {
        Ok(self.charge_of(request).map(|(score, units)| Charge {
            score_ms: score as f64,
            units,
        }))
    }

    // A bound the change would pass is a refusal here (the store names it).
    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error> {
        let n = to.saturating_sub(held);
        match self.add_charge_units(request, score_ms as i64, n) {
            Ok(Some(_)) => Ok(()),
            Ok(None) if n == 0 => Ok(()),
            _ => Err(NoFreeMember),
        }
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, _held: u64) -> Result<u64, Self::Error> {
        self.cut_charge(request, keep).map_err(|_| NoFreeMember)
    }
}

/// The log not held by a command: every change through the chunks.
impl WindowLog for CompactLog {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        self.unheld(|h| h.trim(cutoff_ms))
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.count_entries())
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        self.unheld(|h| h.count_above(cutoff_ms))
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, Self::Error> {
        self.unheld(|h| h.nth_above(cutoff_ms, k, n))
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        self.unheld(|h| h.newest_above(min_ms))
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        self.unheld(|h| h.newest_entry())
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        self.unheld(|h| h.has_member(id))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        self.unheld(|h| h.add(now_ms, id))
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.set_expiry(at_ms);
        Ok(())
    }

    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error> {
        self.unheld(|h| h.charge(request))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error> {
        self.unheld(|h| h.add_units(request, score_ms, held, to))
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, Self::Error> {
        self.unheld(|h| h.remove_units(request, keep, held))
    }
}
