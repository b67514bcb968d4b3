//! The table's layout: the types, a record's parts read from its slot,
//! and the heap blocks the table owns.

use super::super::bounds::MAX_REQUEST_ID;

/// `count` consecutive member ids from `first` (`count >= 1`, checked when
/// made: `first + count - 1` is an id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: i64,
    pub count: u64,
}

impl Span {
    pub fn last(&self) -> i64 {
        let span = i64::try_from(self.count.saturating_sub(1)).unwrap_or(i64::MAX);
        self.first.saturating_add(span)
    }
}

/// One charge: the request id, the score of all its units, and their
/// member ids in unit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub request: Box<[u8]>,
    pub score: i64,
    pub spans: Vec<Span>,
}

/// Whether `request` is a request id a record may carry.
pub fn valid_request(request: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID).contains(&request.len())
}

/// Up to this many charges a table has no index: each call looks at every
/// record (a fixed bound, so O(1)).
#[cfg(not(any(test, feature = "fuzzing")))]
pub const SMALL_CHARGES: usize = 8;
/// In the unit tests and the fuzz targets: both forms within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const SMALL_CHARGES: usize = 4;

/// The `id` of a slot whose record went.
pub(super) const DEAD: u32 = u32::MAX;

/// A span of `held`: members `first ..= last`; `last < first` marks one
/// that went (its `first` keeps the order for the binary search).
pub(super) type Held = (i64, i64);

pub(super) fn alive(h: &Held) -> bool {
    h.0 <= h.1
}

/// One record's fixed part (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    /// The score of all its units (kept after the record went, while its
    /// heap entry waits: the heap's order).
    pub(super) score: i64,
    /// The first span of its units.
    pub(super) span: Span,
    /// The offset in `ids` of its id's length byte (the id follows);
    /// `DEAD` once the record went.
    pub(super) id: u32,
    /// 0: no more spans; `k`: the rest of its spans are `extras.spans[k - 1]`.
    pub(super) more: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

impl Slot {
    pub(super) fn live(&self) -> bool {
        self.id != DEAD
    }
}

/// The second and later spans of the charges that have them.
#[derive(Debug, Clone, Default)]
pub(super) struct Extras {
    pub(super) spans: Vec<Vec<Span>>,
    /// Entries of `spans` free for reuse (empty, no block).
    pub(super) free: Vec<u32>,
}

/// The index of a table beyond [`SMALL_CHARGES`] charges (see `mod.rs`).
#[derive(Debug, Clone, Default)]
pub(super) struct Index {
    /// Slots free for a new record: dead, and named by no heap entry.
    pub(super) free: Vec<u32>,
    /// Slot indexes by request id: linear probing over a power of two
    /// places (`EMPTY`, `GONE` or a slot).
    pub(super) by_request: Vec<u32>,
    /// Beside each place of `by_request`, seven bits of its id's hash (see
    /// `index.rs`'s `tag`): a probe passes a place of another id without
    /// reading its slot and id (one in 128 it reads them to tell).
    pub(super) tags: Vec<u8>,
    /// Places of `by_request` that are not `EMPTY`.
    pub(super) used: usize,
    /// A min-heap of slots by (score, slot): every record made and not yet
    /// taken from the top.
    pub(super) by_score: Vec<u32>,
    /// Every span of every record, sorted by `first`, the dead among them
    /// marked (see [`Held`]).
    pub(super) held: Vec<Held>,
    /// Dead spans in `held`.
    pub(super) held_dead: usize,
}

/// A charge found by its id: its score and units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundCharge {
    pub score: i64,
    pub(super) units: u64,
}

impl FoundCharge {
    /// The units the charge holds.
    pub fn units(&self) -> u64 {
        self.units
    }
}

/// The charge records of a log (see `mod.rs`).
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// The records. Without an index: exactly the live ones. With one:
    /// dead ones too (see [`Index::free`]).
    pub(super) slots: Vec<Slot>,
    /// Every live record's id behind its length byte, and the bytes of
    /// the ones that went (`ids_dead` of them).
    pub(super) ids: Vec<u8>,
    pub(super) ids_dead: usize,
    /// Live records.
    pub(super) live: usize,
    pub(super) extras: Option<Box<Extras>>,
    pub(super) index: Option<Box<Index>>,
}

/// Equal when they hold the same records (the layout follows from them).
impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Records {}

impl Records {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn len(&self) -> usize {
        self.live
    }

    /// The id of a live slot.
    pub(super) fn request_of(&self, slot: &Slot) -> &[u8] {
        if !slot.live() {
            return &[];
        }
        let at = slot.id as usize;
        let len = self.ids.get(at).map_or(0, |&n| n as usize);
        at.checked_add(1)
            .and_then(|from| self.ids.get(from..from.checked_add(len)?))
            .unwrap_or(&[])
    }

    /// The spans of a slot after its first.
    pub(super) fn extras_of(&self, slot: &Slot) -> &[Span] {
        match (slot.more.checked_sub(1), &self.extras) {
            (Some(k), Some(e)) => e.spans.get(k as usize).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// The spans of a slot, in unit order.
    pub(super) fn spans_of<'a>(&'a self, slot: &'a Slot) -> impl Iterator<Item = Span> + 'a {
        std::iter::once(slot.span).chain(self.extras_of(slot).iter().copied())
    }

    fn record_of(&self, slot: &Slot) -> Record {
        Record {
            request: self.request_of(slot).into(),
            score: slot.score,
            spans: self.spans_of(slot).collect(),
        }
    }

    /// The records, by request id (sorted here: only encoding, the digest
    /// and the checks walk them all).
    pub fn iter(&self) -> impl Iterator<Item = Record> {
        let mut all: Vec<&Slot> = self.slots.iter().filter(|s| s.live()).collect();
        all.sort_unstable_by(|a, b| self.request_of(a).cmp(self.request_of(b)));
        let records: Vec<Record> = all.into_iter().map(|s| self.record_of(s)).collect();
        records.into_iter()
    }

    /// Every heap block the records own (for MEMORY USAGE).
    pub fn heap_blocks(&self, out: &mut Vec<*const u8>) {
        if self.slots.capacity() > 0 {
            out.push(self.slots.as_ptr().cast());
        }
        if self.ids.capacity() > 0 {
            out.push(self.ids.as_ptr());
        }
        if let Some(e) = &self.extras {
            out.push((&**e as *const Extras).cast());
            if e.spans.capacity() > 0 {
                out.push(e.spans.as_ptr().cast());
            }
            if e.free.capacity() > 0 {
                out.push(e.free.as_ptr().cast());
            }
            for v in &e.spans {
                if v.capacity() > 0 {
                    out.push(v.as_ptr().cast());
                }
            }
        }
        if let Some(index) = &self.index {
            out.push((&**index as *const Index).cast());
            if index.free.capacity() > 0 {
                out.push(index.free.as_ptr().cast());
            }
            if index.by_request.capacity() > 0 {
                out.push(index.by_request.as_ptr().cast());
            }
            if index.tags.capacity() > 0 {
                out.push(index.tags.as_ptr());
            }
            if index.by_score.capacity() > 0 {
                out.push(index.by_score.as_ptr().cast());
            }
            if index.held.capacity() > 0 {
                out.push(index.held.as_ptr().cast());
            }
        }
    }

    /// How many heap blocks freeing the records releases.
    pub fn blocks(&self) -> usize {
        let extras = self
            .extras
            .as_ref()
            .map_or(0, |e| e.spans.len().saturating_add(3));
        let index = if self.index.is_some() { 6 } else { 0 };
        extras.saturating_add(index).saturating_add(2)
    }

    /// Hands every block to `to` (active defragmentation).
    pub fn relocate<R: crate::relocate::Relocate>(&mut self, to: &mut R) {
        self.slots = to.vec(std::mem::take(&mut self.slots));
        self.ids = to.vec(std::mem::take(&mut self.ids));
        if let Some(e) = self.extras.take() {
            let mut e = to.boxed(e);
            let mut spans = to.vec(std::mem::take(&mut e.spans));
            for v in spans.iter_mut() {
                *v = to.vec(std::mem::take(v));
            }
            e.spans = spans;
            e.free = to.vec(std::mem::take(&mut e.free));
            self.extras = Some(e);
        }
        if let Some(index) = self.index.take() {
            let mut index = to.boxed(index);
            index.free = to.vec(std::mem::take(&mut index.free));
            index.by_request = to.vec(std::mem::take(&mut index.by_request));
            index.tags = to.vec(std::mem::take(&mut index.tags));
            index.by_score = to.vec(std::mem::take(&mut index.by_score));
            index.held = to.vec(std::mem::take(&mut index.held));
            self.index = Some(index);
        }
    }
}

/// Room for `n` more in `v`: a quarter more when full, not double (as the
/// chunk list grows: a table keeps at most a quarter spare).
pub(super) fn grow<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity().saturating_sub(v.len()) < n {
        v.reserve_exact((v.len() / 4).max(n));
    }
}

/// Gives back what a vector keeps beyond twice its length.
pub(super) fn shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len().saturating_mul(2).max(8) {
        v.shrink_to(v.len().saturating_add(v.len() / 4));
    }
}
