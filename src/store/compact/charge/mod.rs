//! Charges made with an ID (`SLIDEWIN.CHECK ... ID request-id`): the table
//! of *charge records* a log holds beside its runs.
//!
//! A charge is the entries one allowed call with an ID added to the key,
//! all scored alike (the call's time). Its entries are ordinary entries of
//! the log (counted, trimmed and decided on as any other); the record only
//! names them: the request id, the score, and the member ids of its units
//! as *spans* of consecutive ids, in unit order (unit 1 is the first id of
//! the first span). A SETTLE that raises the units adds them under fresh
//! ids (a new span, unless they continue the last one).
//!
//! The table is packed for memory (a charge costs its id plus a few dozen
//! bytes):
//! - the records sit in a slab (`slots`) of 32-byte [`Slot`]s: the score,
//!   the first span, where the id is, and where any further spans are;
//! - the request ids sit one after another in one byte arena (`ids`), each
//!   behind its length byte; the bytes of the ones that went are reclaimed
//!   when they are as many as the live ones (each compaction is paid for
//!   by the removals before it);
//! - a charge's second and later spans (rare: a SETTLE raise after later
//!   calls took the ids after it) are in a side table (`extras`), made
//!   only while a charge has one.
//!
//! Up to [`SMALL_CHARGES`] charges the table is that and nothing more: a call
//! looks at each record (at most [`SMALL_CHARGES`], so O(1)). Beyond, an index
//! (`index`) keeps every call O(log n) in the live charges however the ids
//! and scores are laid out:
//! - `by_request`, an open-addressing hash table of slot indexes keyed by
//!   the request id (a hash keyed at random per process: ids a client
//!   chooses cannot be made to collide), finds a charge by id in O(1);
//! - `by_score`, a min-heap of slot indexes ordered by their record's
//!   score, lets a trim take the records scored at or below its cutoff in
//!   score order without a scan. A slot whose record went earlier (UNDO,
//!   SETTLE to 0) keeps its score and stays out of `free` until its heap
//!   entry comes to the top, so no entry ever names a record it was not
//!   made for;
//! - `held`, every span of every record as (first, last) sorted by member,
//!   answers "is this member a unit of a charge" (UNDO by member must never
//!   remove one) by a binary search. New spans take ids above every other
//!   and are appended; a span that goes is marked dead in place and the
//!   dead ones are swept out when they are as many as the live ones (each
//!   sweep is paid for by the removals before it).
//!
//! The heap and `held` are swept when dead entries outnumber the live
//! records, so the table never holds more than about twice what its live
//! charges need; the index is dropped when the charges fall to
//! [`SMALL_CHARGES`] / 2.
//!
//! The bounds on charges (`bounds.rs`) are checked by the decoder and
//! refused by every change, as the log's own bounds are.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use super::bounds::{Bound, MAX_CHARGES, MAX_CHARGE_SPANS, MAX_REQUEST_ID};

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

/// The hash of a request id: SipHash under keys drawn once per process.
fn hash(request: &[u8]) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).hash_one(request)
}

/// Up to this many charges a table has no index: each call looks at every
/// record (a fixed bound, so O(1)).
#[cfg(not(any(test, feature = "fuzzing")))]
pub const SMALL_CHARGES: usize = 8;
/// In the unit tests and the fuzz targets: both forms within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const SMALL_CHARGES: usize = 4;

/// A free place in `by_request`.
const EMPTY: u32 = u32::MAX;
/// A place whose slot went (probing goes on past it).
const GONE: u32 = u32::MAX - 1;
/// The `id` of a slot whose record went.
const DEAD: u32 = u32::MAX;

/// A span of `held`: members `first ..= last`; `last < first` marks one
/// that went (its `first` keeps the order for the binary search).
type Held = (i64, i64);

fn alive(h: &Held) -> bool {
    h.0 <= h.1
}

/// One record's fixed part (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// The score of all its units (kept after the record went, while its
    /// heap entry waits: the heap's order).
    score: i64,
    /// The first span of its units.
    span: Span,
    /// The offset in `ids` of its id's length byte (the id follows);
    /// `DEAD` once the record went.
    id: u32,
    /// 0: no more spans; `k`: the rest of its spans are `extras.spans[k - 1]`.
    more: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

impl Slot {
    fn live(&self) -> bool {
        self.id != DEAD
    }
}

/// The second and later spans of the charges that have them.
#[derive(Debug, Clone, Default)]
struct Extras {
    spans: Vec<Vec<Span>>,
    /// Entries of `spans` free for reuse (empty, no block).
    free: Vec<u32>,
}

/// The index of a table beyond [`SMALL_CHARGES`] charges (see the module comment).
#[derive(Debug, Clone, Default)]
struct Index {
    /// Slots free for a new record: dead, and named by no heap entry.
    free: Vec<u32>,
    /// Slot indexes by request id: linear probing over a power of two
    /// places (`EMPTY`, `GONE` or a slot).
    by_request: Vec<u32>,
    /// Places of `by_request` that are not `EMPTY`.
    used: usize,
    /// A min-heap of slots by (score, slot): every record made and not yet
    /// taken from the top.
    by_score: Vec<u32>,
    /// Every span of every record, sorted by `first`, the dead among them
    /// marked (see [`Held`]).
    held: Vec<Held>,
    /// Dead spans in `held`.
    held_dead: usize,
}

/// A charge found by its id: its score and units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundCharge {
    pub score: i64,
    units: u64,
}

impl FoundCharge {
    /// The units the charge holds.
    pub fn units(&self) -> u64 {
        self.units
    }
}

/// The charge records of a log (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// The records. Without an index: exactly the live ones. With one:
    /// dead ones too (see [`Index::free`]).
    slots: Vec<Slot>,
    /// Every live record's id behind its length byte, and the bytes of
    /// the ones that went (`ids_dead` of them).
    ids: Vec<u8>,
    ids_dead: usize,
    /// Live records.
    live: usize,
    extras: Option<Box<Extras>>,
    index: Option<Box<Index>>,
}

/// Equal when they hold the same records (the layout follows from them).
impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Records {}

/// `heap` (slots by score) ordered at `a` before `b`.
fn before(slots: &[Slot], a: u32, b: u32) -> bool {
    let key = |s: u32| (slots.get(s as usize).map_or(i64::MAX, |x| x.score), s);
    key(a) < key(b)
}

fn heap_up(heap: &mut [u32], slots: &[Slot], mut i: usize) {
    while i > 0 {
        let parent = (i - 1) / 2;
        match (heap.get(i), heap.get(parent)) {
            (Some(&c), Some(&p)) if before(slots, c, p) => heap.swap(i, parent),
            _ => return,
        }
        i = parent;
    }
}

fn heap_down(heap: &mut [u32], slots: &[Slot], mut i: usize) {
    loop {
        let l = i.saturating_mul(2).saturating_add(1);
        let r = l.saturating_add(1);
        let mut m = i;
        for c in [l, r] {
            if let (Some(&x), Some(&y)) = (heap.get(c), heap.get(m)) {
                if before(slots, x, y) {
                    m = c;
                }
            }
        }
        if m == i {
            return;
        }
        heap.swap(i, m);
        i = m;
    }
}

fn heap_push(heap: &mut Vec<u32>, slots: &[Slot], s: u32) {
    grow(heap, 1);
    heap.push(s);
    let at = heap.len() - 1;
    heap_up(heap, slots, at);
}

fn heap_pop(heap: &mut Vec<u32>, slots: &[Slot]) -> Option<u32> {
    let last = heap.len().checked_sub(1)?;
    heap.swap(0, last);
    let top = heap.pop();
    heap_down(heap, slots, 0);
    top
}

fn heapify(heap: &mut [u32], slots: &[Slot]) {
    for i in (0..heap.len() / 2).rev() {
        heap_down(heap, slots, i);
    }
}

impl Records {
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn len(&self) -> usize {
        self.live
    }

    /// The id of a live slot.
    fn request_of(&self, slot: &Slot) -> &[u8] {
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
    fn extras_of(&self, slot: &Slot) -> &[Span] {
        match (slot.more.checked_sub(1), &self.extras) {
            (Some(k), Some(e)) => e.spans.get(k as usize).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// The spans of a slot, in unit order.
    fn spans_of<'a>(&'a self, slot: &'a Slot) -> impl Iterator<Item = Span> + 'a {
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

    /// The place of `request` in `by_request`, if it holds it.
    fn place_of(&self, request: &[u8]) -> Option<usize> {
        let index = self.index.as_ref()?;
        let mask = index.by_request.len().checked_sub(1)?;
        let mut i = (hash(request) as usize) & mask;
        // At most every place once (one is always EMPTY: see `index_id`).
        for _ in 0..index.by_request.len() {
            match *index.by_request.get(i)? {
                EMPTY => return None,
                GONE => {}
                s => {
                    let slot = self.slots.get(s as usize)?;
                    if self.request_of(slot) == request {
                        return Some(i);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The slot of the record under `request`.
    fn slot_of(&self, request: &[u8]) -> Option<usize> {
        match &self.index {
            None => self
                .slots
                .iter()
                .position(|s| s.live() && self.request_of(s) == request),
            Some(index) => {
                let place = self.place_of(request)?;
                index.by_request.get(place).map(|&s| s as usize)
            }
        }
    }

    /// The charge under `request`, if any.
    pub fn get(&self, request: &[u8]) -> Option<FoundCharge> {
        let slot = self.slots.get(self.slot_of(request)?)?;
        Some(FoundCharge {
            score: slot.score,
            units: self
                .spans_of(slot)
                .fold(0u64, |n, s| n.saturating_add(s.count)),
        })
    }

    /// Puts slot `s`, whose record holds `request`, into `by_request`; or
    /// makes the table anew when the places in use would pass 7/8: so one
    /// is always EMPTY and a probe ends.
    fn index_id(&mut self, request: &[u8], s: u32) {
        let Some(index) = self.index.as_ref() else {
            return;
        };
        if index.used.saturating_add(1).saturating_mul(8) > index.by_request.len().saturating_mul(7)
        {
            self.rehash();
            return;
        }
        if let Some(index) = self.index.as_mut() {
            place(&mut index.by_request, &mut index.used, request, s);
        }
    }

    /// `by_request` made again for the live records (the places left by
    /// the ones that went are dropped): 2 to 4 places a record.
    fn rehash(&mut self) {
        let places = self
            .live
            .saturating_add(1)
            .saturating_mul(2)
            .max(8)
            .next_power_of_two();
        let mut table = vec![EMPTY; places];
        let mut used = 0;
        for (s, slot) in self.slots.iter().enumerate() {
            if slot.live() {
                place(&mut table, &mut used, self.request_of(slot), s as u32);
            }
        }
        if let Some(index) = self.index.as_mut() {
            index.by_request = table;
            index.used = used;
        }
    }

    /// The index made for the records (none dead: the table had no index).
    fn build_index(&mut self) {
        let mut held: Vec<Held> = self
            .slots
            .iter()
            .filter(|s| s.live())
            .flat_map(|s| self.spans_of(s).map(|sp| (sp.first, sp.last())))
            .collect();
        held.sort_unstable();
        let mut by_score: Vec<u32> = (0..self.slots.len() as u32).collect();
        heapify(&mut by_score, &self.slots);
        self.index = Some(Box::new(Index {
            by_score,
            held,
            ..Index::default()
        }));
        self.rehash();
    }

    /// The index dropped (a table of [`SMALL_CHARGES`] / 2 charges or fewer): the
    /// dead slots go with it.
    fn drop_index(&mut self) {
        self.index = None;
        self.slots.retain(Slot::live);
        shrink(&mut self.slots);
    }

    /// Whether member `id` is a unit of a charge. The spans, live and dead,
    /// are disjoint (new ones take ids above every other, and one placed
    /// among them sweeps the dead out first), so only the last one starting
    /// at or below `id` can hold it.
    pub fn holds(&self, id: i64) -> bool {
        match &self.index {
            None => self
                .slots
                .iter()
                .filter(|s| s.live())
                .any(|s| self.spans_of(s).any(|sp| sp.first <= id && id <= sp.last())),
            Some(index) => {
                let i = index.held.partition_point(|h| h.0 <= id);
                i.checked_sub(1)
                    .and_then(|i| index.held.get(i))
                    .is_some_and(|h| alive(h) && h.1 >= id)
            }
        }
    }

    /// Whether [`Records::add_span`] would pass a bound (nothing changed).
    pub fn can_add(&self, request: &[u8], span: Span) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        match self.slot_of(request).and_then(|s| self.slots.get(s)) {
            None if self.live >= MAX_CHARGES => Err(Bound::Charges),
            // The ids' offsets are 32-bit: out of reach under MAX_CHARGES
            // (2^24 ids of at most 129 bytes), refused all the same.
            None if self
                .ids
                .len()
                .saturating_sub(self.ids_dead)
                .saturating_add(request.len())
                .saturating_add(1)
                >= DEAD as usize =>
            {
                Err(Bound::Charges)
            }
            Some(slot) => {
                let extras = self.extras_of(slot);
                let last = extras.last().copied().unwrap_or(slot.span);
                if extras.len().saturating_add(1) >= MAX_CHARGE_SPANS
                    && last.last().checked_add(1) != Some(span.first)
                {
                    Err(Bound::ChargeSpans)
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    /// Adds `span` (ids the log holds, scored `score`, in no charge) to the
    /// charge under `request`, made when missing (scored `score`; an
    /// existing one keeps its score, which the caller scored the ids at).
    pub fn add_span(&mut self, request: &[u8], score: i64, span: Span) -> Result<(), Bound> {
        self.can_add(request, span)?;
        match self.slot_of(request) {
            Some(s) => self.extend(s, span),
            None => self.make(request, score, span),
        }
        Ok(())
    }

    /// Adds `span` to the record in slot `s`.
    fn extend(&mut self, s: usize, span: Span) {
        let Some(slot) = self.slots.get(s).copied() else {
            return;
        };
        let last = match (slot.more.checked_sub(1), self.extras.as_mut()) {
            (Some(k), Some(e)) => e.spans.get_mut(k as usize).and_then(|v| v.last_mut()),
            _ => None,
        };
        let last = match last {
            Some(l) => l,
            None => match self.slots.get_mut(s) {
                Some(sl) => &mut sl.span,
                None => return,
            },
        };
        if last.last().checked_add(1) == Some(span.first) {
            let first = last.first;
            last.count = last.count.saturating_add(span.count);
            let end = last.last();
            if let Some(index) = self.index.as_mut() {
                if let Some(i) = held_at(&index.held, first) {
                    if let Some(h) = index.held.get_mut(i) {
                        h.1 = end;
                    }
                    // A dead span may start among the ids it grew over (a
                    // client's CHARGE over given-back ids): swept.
                    if index.held.get(i + 1).is_some_and(|n| n.0 <= end) {
                        sweep_held(index);
                    }
                }
            }
            return;
        }
        let extras = self.extras.get_or_insert_with(Box::default);
        let k = match slot.more.checked_sub(1) {
            Some(k) => k,
            None => {
                let k = match extras.free.pop() {
                    Some(k) => k,
                    None => {
                        grow(&mut extras.spans, 1);
                        extras.spans.push(Vec::new());
                        (extras.spans.len() - 1) as u32
                    }
                };
                if let Some(sl) = self.slots.get_mut(s) {
                    sl.more = k.saturating_add(1);
                }
                k
            }
        };
        if let Some(v) = extras.spans.get_mut(k as usize) {
            grow(v, 1);
            v.push(span);
        }
        if let Some(index) = self.index.as_mut() {
            hold(index, span);
        }
    }

    /// Makes a record under `request` (checked new and within the bounds).
    fn make(&mut self, request: &[u8], score: i64, span: Span) {
        if self.index.is_none() && self.live >= SMALL_CHARGES {
            self.build_index();
        }
        if self.ids.len().saturating_add(request.len()) >= DEAD as usize {
            self.compact_ids();
        }
        let id = self.ids.len() as u32;
        grow(&mut self.ids, request.len().saturating_add(1));
        self.ids.push(request.len() as u8);
        self.ids.extend_from_slice(request);
        let slot = Slot {
            score,
            span,
            id,
            more: 0,
        };
        let reused = self.index.as_mut().and_then(|i| i.free.pop());
        let s = match reused.and_then(|s| Some((s, self.slots.get_mut(s as usize)?))) {
            Some((s, at)) => {
                *at = slot;
                s
            }
            None => {
                grow(&mut self.slots, 1);
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        if self.index.is_some() {
            self.index_id(request, s);
            if let Some(index) = self.index.as_mut() {
                heap_push(&mut index.by_score, &self.slots, s);
                hold(index, span);
            }
        }
    }

    /// The spans [`Records::cut`] would take off the charge under
    /// `request` to keep its first `keep` units, the highest first
    /// (nothing changed).
    pub fn plan_cut(&self, request: &[u8], keep: u64) -> Vec<Span> {
        let Some(slot) = self.slot_of(request).and_then(|s| self.slots.get(s)) else {
            return Vec::new();
        };
        let spans: Vec<Span> = self.spans_of(slot).collect();
        let units = spans.iter().fold(0u64, |n, s| n.saturating_add(s.count));
        let mut over = units.saturating_sub(keep);
        let mut gone = Vec::new();
        for s in spans.iter().rev() {
            if over == 0 {
                break;
            }
            if s.count <= over {
                over -= s.count;
                gone.push(*s);
            } else {
                let kept = s.count - over;
                let first = s
                    .first
                    .saturating_add(i64::try_from(kept).unwrap_or(i64::MAX));
                gone.push(Span { first, count: over });
                over = 0;
            }
        }
        gone
    }

    /// Keeps the first `keep` units of the charge under `request` (none:
    /// the record goes); returns the spans of the units it took off (their
    /// entries are the caller's to remove), the highest first.
    pub fn cut(&mut self, request: &[u8], keep: u64) -> Vec<Span> {
        let gone = self.plan_cut(request, keep);
        let Some(s) = self.slot_of(request) else {
            return gone;
        };
        let Some(slot) = self.slots.get(s).copied() else {
            return gone;
        };
        let mut extras: Vec<Span> = self.extras_of(&slot).to_vec();
        let mut first = Some(slot.span);
        // Whole spans die; a shortened one keeps its start.
        let mut dead = Vec::new();
        let mut shortened = None;
        for g in &gone {
            let l = match extras.last_mut() {
                Some(l) => l,
                None => match first.as_mut() {
                    Some(l) => l,
                    None => break,
                },
            };
            if l.first == g.first {
                dead.push(l.first);
                if extras.pop().is_none() {
                    first = None;
                }
            } else {
                l.count = l.count.saturating_sub(g.count);
                shortened = Some((l.first, l.last()));
            }
        }
        if let Some(index) = self.index.as_mut() {
            for f in dead {
                kill_span(index, f);
            }
            if let Some((f, last)) = shortened {
                if let Some(h) = held_at(&index.held, f).and_then(|i| index.held.get_mut(i)) {
                    h.1 = last;
                }
            }
        }
        match first {
            None => self.remove(s),
            Some(span) => {
                if let Some(sl) = self.slots.get_mut(s) {
                    sl.span = span;
                }
                self.set_extras(s, extras);
            }
        }
        self.tidy();
        gone
    }

    /// Sets the spans after the first of the record in slot `s`.
    fn set_extras(&mut self, s: usize, spans: Vec<Span>) {
        let Some(slot) = self.slots.get(s).copied() else {
            return;
        };
        let Some(k) = slot.more.checked_sub(1) else {
            return;
        };
        if !spans.is_empty() {
            if let Some(v) = self
                .extras
                .as_mut()
                .and_then(|e| e.spans.get_mut(k as usize))
            {
                *v = spans;
            }
            return;
        }
        self.free_extras(s);
    }

    /// Gives back the spans after the first of the record in slot `s`.
    fn free_extras(&mut self, s: usize) {
        let Some(slot) = self.slots.get_mut(s) else {
            return;
        };
        let Some(k) = slot.more.checked_sub(1) else {
            return;
        };
        slot.more = 0;
        let Some(e) = self.extras.as_mut() else {
            return;
        };
        if let Some(v) = e.spans.get_mut(k as usize) {
            *v = Vec::new();
        }
        grow(&mut e.free, 1);
        e.free.push(k);
        if e.free.len() >= e.spans.len() {
            self.extras = None;
        }
    }

    /// Removes the record in slot `s` (its spans already out of `held`):
    /// its id, its extras, its place by id; without an index, its slot.
    fn remove(&mut self, s: usize) {
        let Some(slot) = self.slots.get(s).copied() else {
            return;
        };
        if !slot.live() {
            return;
        }
        let len = self.request_of(&slot).len();
        if self.index.is_some() {
            let request: Vec<u8> = self.request_of(&slot).to_vec();
            let place = self.place_of_slot(&request, s as u32);
            if let (Some(index), Some(place)) = (self.index.as_mut(), place) {
                if let Some(p) = index.by_request.get_mut(place) {
                    *p = GONE;
                }
            }
        }
        self.free_extras(s);
        self.ids_dead = self.ids_dead.saturating_add(len).saturating_add(1);
        self.live = self.live.saturating_sub(1);
        if self.index.is_some() {
            // The slot stays taken (its score kept) until its heap entry
            // comes to the top.
            if let Some(sl) = self.slots.get_mut(s) {
                sl.id = DEAD;
            }
        } else if s < self.slots.len() {
            self.slots.remove(s);
        }
    }

    /// The dead ids' bytes reclaimed once they outnumber the live ones.
    fn tidy_ids(&mut self) {
        let live = self.ids.len().saturating_sub(self.ids_dead);
        if self.ids_dead > live.saturating_add(64) {
            self.compact_ids();
        }
    }

    /// The arena written again with the live ids only.
    fn compact_ids(&mut self) {
        let live = self.ids.len().saturating_sub(self.ids_dead);
        let mut ids: Vec<u8> = Vec::with_capacity(live);
        for slot in self.slots.iter_mut() {
            if !slot.live() {
                continue;
            }
            let at = slot.id as usize;
            let len = self.ids.get(at).map_or(0, |&n| n as usize);
            if let Some(bytes) = self.ids.get(at..at.saturating_add(1).saturating_add(len)) {
                slot.id = ids.len() as u32;
                ids.extend_from_slice(bytes);
            }
        }
        self.ids = ids;
        self.ids_dead = 0;
    }

    /// The dead entries swept out of `held` and `by_score` once they
    /// outnumber the live ones (amortized over the removals that made
    /// them); the index dropped at [`SMALL_CHARGES`] / 2 charges.
    fn tidy(&mut self) {
        self.tidy_ids();
        if self.index.is_some() && self.live <= SMALL_CHARGES / 2 {
            self.drop_index();
            return;
        }
        let live = self.live;
        let Some(index) = self.index.as_mut() else {
            return;
        };
        let live_spans = index.held.len().saturating_sub(index.held_dead);
        if index.held_dead > live_spans.saturating_add(32) {
            sweep_held(index);
            shrink(&mut index.held);
        }
        if index.by_score.len() > live.saturating_mul(2).saturating_add(32) {
            let slots = &self.slots;
            index
                .by_score
                .retain(|&s| slots.get(s as usize).is_some_and(Slot::live));
            heapify(&mut index.by_score, slots);
            shrink(&mut index.by_score);
            // Every slot no entry names any more is free.
            index.free = slots
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.live())
                .map(|(s, _)| s as u32)
                .collect();
        }
    }

    /// Every span of every record with its score, sorted by member.
    pub fn spans_by_member(&self) -> Vec<(Span, i64)> {
        let mut out: Vec<(Span, i64)> = self
            .slots
            .iter()
            .filter(|s| s.live())
            .flat_map(|s| self.spans_of(s).map(move |sp| (sp, s.score)))
            .collect();
        out.sort_unstable_by_key(|(s, _)| s.first);
        out
    }

    /// Drops the records scored at or below `cutoff_ms` (their entries
    /// went with the trim); returns how many. With an index, takes them
    /// off the heap's top: O(log n) each, nothing else looked at.
    pub fn trim(&mut self, cutoff_ms: i64) -> usize {
        let mut dropped = 0usize;
        if self.index.is_none() {
            let mut s = 0;
            while let Some(slot) = self.slots.get(s) {
                if slot.score <= cutoff_ms {
                    self.remove(s);
                    dropped += 1;
                } else {
                    s += 1;
                }
            }
        }
        while let Some(index) = self.index.as_mut() {
            let Some(&top) = index.by_score.first() else {
                break;
            };
            let Some(slot) = self.slots.get(top as usize).copied() else {
                heap_pop(&mut index.by_score, &self.slots);
                continue;
            };
            if slot.score > cutoff_ms {
                break;
            }
            heap_pop(&mut index.by_score, &self.slots);
            if slot.live() {
                for sp in self.spans_of(&slot).collect::<Vec<_>>() {
                    if let Some(index) = self.index.as_mut() {
                        kill_span(index, sp.first);
                    }
                }
                self.remove(top as usize);
                dropped += 1;
            }
            if let Some(index) = self.index.as_mut() {
                grow(&mut index.free, 1);
                index.free.push(top);
            }
        }
        if dropped > 0 {
            self.tidy();
        }
        dropped
    }

    /// The place in `by_request` that names slot `s` (whose record holds
    /// `request`).
    fn place_of_slot(&self, request: &[u8], s: u32) -> Option<usize> {
        let index = self.index.as_ref()?;
        let mask = index.by_request.len().checked_sub(1)?;
        let mut i = (hash(request) as usize) & mask;
        for _ in 0..index.by_request.len() {
            match *index.by_request.get(i)? {
                EMPTY => return None,
                p if p == s => return Some(i),
                _ => {}
            }
            i = (i + 1) & mask;
        }
        None
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
        let index = if self.index.is_some() { 5 } else { 0 };
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
            index.by_score = to.vec(std::mem::take(&mut index.by_score));
            index.held = to.vec(std::mem::take(&mut index.held));
            self.index = Some(index);
        }
    }
}

/// Puts slot `s` at the first free place of `request`'s probe.
fn place(table: &mut [u32], used: &mut usize, request: &[u8], s: u32) {
    let Some(mask) = table.len().checked_sub(1) else {
        return;
    };
    let mut i = (hash(request) as usize) & mask;
    for _ in 0..table.len() {
        match table.get_mut(i) {
            Some(p) if *p == EMPTY || *p == GONE => {
                if *p == EMPTY {
                    *used += 1;
                }
                *p = s;
                return;
            }
            Some(_) => i = (i + 1) & mask,
            None => return,
        }
    }
}

/// The index in `held` of the span starting at `first`.
fn held_at(held: &[Held], first: i64) -> Option<usize> {
    let i = held.partition_point(|h| h.0 < first);
    (held.get(i)?.0 == first).then_some(i)
}

/// Marks the span starting at `first` dead.
fn kill_span(index: &mut Index, first: i64) {
    if let Some(h) = held_at(&index.held, first).and_then(|i| index.held.get_mut(i)) {
        if alive(h) {
            h.1 = h.0.saturating_sub(1);
            index.held_dead += 1;
        }
    }
}

/// Adds a live span to `held`: appended when above every span (what every
/// call but a client's `SLIDEWIN.APPLY ... CHARGE` does), else placed
/// after the dead spans are swept out.
fn hold(index: &mut Index, span: Span) {
    let h = (span.first, span.last());
    if index.held.last().is_none_or(|l| l.0 < h.0 && l.1 < h.0) {
        grow(&mut index.held, 1);
        index.held.push(h);
        return;
    }
    sweep_held(index);
    let i = index.held.partition_point(|x| x.0 < h.0);
    grow(&mut index.held, 1);
    index.held.insert(i, h);
}

fn sweep_held(index: &mut Index) {
    if index.held_dead > 0 {
        index.held.retain(alive);
        index.held_dead = 0;
    }
}

/// Room for `n` more in `v`: a quarter more when full, not double (as the
/// chunk list grows: a table keeps at most a quarter spare).
fn grow<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity().saturating_sub(v.len()) < n {
        v.reserve_exact((v.len() / 4).max(n));
    }
}

/// Gives back what a vector keeps beyond twice its length.
fn shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len().saturating_mul(2).max(8) {
        v.shrink_to(v.len().saturating_add(v.len() / 4));
    }
}

/// What every record table holds, checked by the unit tests after each
/// change (and by the fuzz targets): the bounds, the form, every index made
/// of exactly the live records, and the heap naming every live record.
#[cfg(any(test, feature = "fuzzing"))]
impl Records {
    pub fn check(&self) -> Result<(), String> {
        if self.live == 0 {
            return Err("an empty record table is kept".into());
        }
        if self.live > MAX_CHARGES {
            return Err("too many charges".into());
        }
        if self.slots.iter().filter(|s| s.live()).count() != self.live {
            return Err("live count differs from the records".into());
        }
        let id_bytes: usize = self
            .slots
            .iter()
            .filter(|s| s.live())
            .map(|s| self.request_of(s).len() + 1)
            .sum();
        if id_bytes.saturating_add(self.ids_dead) != self.ids.len() {
            return Err(format!(
                "{} id bytes, {} live and {} dead",
                self.ids.len(),
                id_bytes,
                self.ids_dead
            ));
        }
        let mut mores: Vec<u32> = Vec::new();
        for (s, slot) in self.slots.iter().enumerate() {
            if !slot.live() {
                if slot.more != 0 {
                    return Err("a dead record keeps spans".into());
                }
                continue;
            }
            let request = self.request_of(slot);
            if !valid_request(request) {
                return Err(format!("request id of {} bytes", request.len()));
            }
            let spans: Vec<Span> = self.spans_of(slot).collect();
            if spans.len() > MAX_CHARGE_SPANS {
                return Err(format!("a charge of {} spans", spans.len()));
            }
            if spans.iter().any(|s| s.count == 0) {
                return Err("an empty span".into());
            }
            if slot.more != 0 {
                if self.extras_of(slot).is_empty() {
                    return Err("an empty list of further spans".into());
                }
                mores.push(slot.more);
            }
            if self.slot_of(request) != Some(s) {
                return Err(format!("record {request:?} not found by its id"));
            }
            if let Some(index) = &self.index {
                if !index.by_score.contains(&(s as u32)) {
                    return Err("a record missing from the heap".into());
                }
            }
        }
        mores.sort_unstable();
        if mores.windows(2).any(|w| w[0] == w[1]) {
            return Err("two records share their further spans".into());
        }
        match &self.extras {
            None if !mores.is_empty() => return Err("further spans without a table".into()),
            Some(e) => {
                if mores.is_empty() {
                    return Err("an empty table of further spans is kept".into());
                }
                if e.free.len() + mores.len() != e.spans.len()
                    || e.free
                        .iter()
                        .any(|&k| e.spans.get(k as usize).is_none_or(|v| v.capacity() > 0))
                {
                    return Err("further spans lost or shared".into());
                }
            }
            None => {}
        }
        let mut held: Vec<Held> = self
            .slots
            .iter()
            .filter(|s| s.live())
            .flat_map(|s| self.spans_of(s).map(|sp| (sp.first, sp.last())))
            .collect();
        held.sort_unstable();
        if held.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err("two spans share a member".into());
        }
        let Some(index) = &self.index else {
            if self.live > SMALL_CHARGES {
                return Err(format!("{} charges without an index", self.live));
            }
            if self.slots.iter().any(|s| !s.live()) {
                return Err("a dead record kept without an index".into());
            }
            return Ok(());
        };
        if self.live <= SMALL_CHARGES / 2 {
            return Err(format!("an index kept for {} charges", self.live));
        }
        let named = index
            .by_request
            .iter()
            .filter(|&&p| p != EMPTY && p != GONE)
            .count();
        if named != self.live {
            return Err(format!("{named} ids indexed for {} records", self.live));
        }
        if index.by_score.iter().enumerate().any(|(i, &s)| {
            i.checked_sub(1)
                .and_then(|p| index.by_score.get(p / 2))
                .is_some_and(|&p| before(&self.slots, s, p))
        }) {
            return Err("the heap out of order".into());
        }
        if index.free.iter().any(|&s| {
            self.slots.get(s as usize).is_none_or(Slot::live) || index.by_score.contains(&s)
        }) {
            return Err("a free slot in use".into());
        }
        let live: Vec<Held> = index.held.iter().copied().filter(alive).collect();
        if held != live {
            return Err(format!("held index {live:?} against {held:?}"));
        }
        if index.held.windows(2).any(|w| w[1].0 <= w[0].1.max(w[0].0)) {
            return Err("two held spans share a member".into());
        }
        if index.held.iter().filter(|h| !alive(h)).count() != index.held_dead {
            return Err("dead span count off".into());
        }
        Ok(())
    }
}

/// Builds the records a payload holds, in request id order, checking each
/// bound as it goes (the caller checks the spans against the log).
#[derive(Default)]
pub struct RecordsBuilder {
    records: Vec<Record>,
}

impl RecordsBuilder {
    /// Adds the next record (request ids strictly increasing); `Err` names
    /// the bound or the disorder.
    pub fn push(&mut self, record: Record) -> Result<(), Option<Bound>> {
        if !valid_request(&record.request) {
            return Err(Some(Bound::RequestId));
        }
        if record.spans.is_empty() {
            return Err(None);
        }
        if record.spans.len() > MAX_CHARGE_SPANS {
            return Err(Some(Bound::ChargeSpans));
        }
        if self.records.len() >= MAX_CHARGES {
            return Err(Some(Bound::Charges));
        }
        if self
            .records
            .last()
            .is_some_and(|p| p.request >= record.request)
        {
            return Err(None);
        }
        self.records.push(record);
        Ok(())
    }

    /// The records, their spans checked disjoint (`Err` otherwise).
    pub fn finish(self) -> Result<Records, ()> {
        let mut held: Vec<Held> = self
            .records
            .iter()
            .flat_map(|r| r.spans.iter().map(|s| (s.first, s.last())))
            .collect();
        held.sort_unstable();
        if held.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err(());
        }
        let n = self.records.len();
        let id_bytes: usize = self
            .records
            .iter()
            .map(|r| r.request.len().saturating_add(1))
            .sum();
        let mut records = Records {
            slots: Vec::with_capacity(n),
            ids: Vec::with_capacity(id_bytes),
            ..Records::default()
        };
        for r in self.records {
            let mut spans = r.spans.into_iter();
            let Some(first) = spans.next() else {
                return Err(());
            };
            let id = u32::try_from(records.ids.len()).map_err(|_| ())?;
            if id == DEAD {
                return Err(());
            }
            records.ids.push(r.request.len() as u8);
            records.ids.extend_from_slice(&r.request);
            records.slots.push(Slot {
                score: r.score,
                span: first,
                id,
                more: 0,
            });
            records.live += 1;
            let rest: Vec<Span> = spans.collect();
            if !rest.is_empty() {
                let extras = records.extras.get_or_insert_with(Box::default);
                extras.spans.push(rest);
                if let Some(slot) = records.slots.last_mut() {
                    slot.more = extras.spans.len() as u32;
                }
            }
        }
        if records.live > SMALL_CHARGES {
            records.build_index();
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain model of the records: (request, score, spans), by request.
    type Model = Vec<(Vec<u8>, i64, Vec<Span>)>;

    fn model_of(r: &Records) -> Model {
        r.iter()
            .map(|r| (r.request.to_vec(), r.score, r.spans))
            .collect()
    }

    fn units(spans: &[Span]) -> u64 {
        spans.iter().map(|s| s.count).sum()
    }

    /// A small xorshift: the same sequence every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Ids a client might pick to hurt: one byte, the longest, the same
    /// bytes at two lengths, prefixes of each other, all 0xff, all 0.
    fn hostile_ids() -> Vec<Vec<u8>> {
        let mut ids = vec![
            vec![0u8],
            vec![0u8; 2],
            vec![0u8; MAX_REQUEST_ID],
            vec![0xffu8; MAX_REQUEST_ID],
            vec![0xffu8],
            b"a".to_vec(),
            b"ab".to_vec(),
            b"abc".to_vec(),
            vec![b'x'; 127],
            vec![b'x'; 128],
        ];
        for i in 0..14u8 {
            ids.push(vec![b'k', i, 0, i]);
        }
        ids
    }

    #[test]
    fn small_and_large_forms_meet_at_the_boundary() {
        let mut r = Records::default();
        let mut next = 1i64;
        for i in 0..=SMALL_CHARGES {
            let id = [b'r', i as u8];
            r.add_span(
                &id,
                10 + i as i64,
                Span {
                    first: next,
                    count: 2,
                },
            )
            .unwrap();
            next += 2;
            r.check().unwrap();
            // No index up to SMALL_CHARGES charges, one past it.
            assert_eq!(
                r.index.is_some(),
                r.len() > SMALL_CHARGES,
                "{} charges",
                r.len()
            );
        }
        // Back down: the index stays above half, goes at half.
        let mut left = r.len();
        let mut i = 0u8;
        while left > 0 {
            let id = [b'r', i];
            assert_eq!(r.cut(&id, 0).len(), 1);
            left -= 1;
            i += 1;
            if left == 0 {
                assert!(r.is_empty());
                break;
            }
            r.check().unwrap();
            assert_eq!(
                r.index.is_some(),
                left > SMALL_CHARGES / 2,
                "{left} charges"
            );
            // Every member of the charges left is held, none of the gone.
            for m in 1..next {
                let owner = (m - 1) / 2;
                assert_eq!(r.holds(m), owner >= i64::from(i), "member {m}");
            }
        }
        // A table made at the boundary by the loader takes the same form.
        for n in [SMALL_CHARGES, SMALL_CHARGES + 1] {
            let mut b = RecordsBuilder::default();
            for i in 0..n {
                b.push(Record {
                    request: vec![b'r', i as u8].into(),
                    score: 5,
                    spans: vec![Span {
                        first: 3 * i as i64,
                        count: 2,
                    }],
                })
                .unwrap();
            }
            let r = b.finish().unwrap();
            r.check().unwrap();
            assert_eq!(r.index.is_some(), n > SMALL_CHARGES);
        }
    }

    #[test]
    fn a_few_charges_take_two_blocks() {
        let mut r = Records::default();
        for i in 0..SMALL_CHARGES {
            let mut id = [7u8; 16];
            id[0] = i as u8;
            r.add_span(
                &id,
                i as i64,
                Span {
                    first: 2 * i as i64,
                    count: 1,
                },
            )
            .unwrap();
        }
        let mut blocks = Vec::new();
        r.heap_blocks(&mut blocks);
        // The slots and the ids: no index, no further spans.
        assert_eq!(blocks.len(), 2);
        assert_eq!(r.slots.capacity(), r.len());
        assert_eq!(r.ids.len(), 17 * SMALL_CHARGES);
    }

    /// Every change against the model, over hostile ids, repeated ids,
    /// scores out of order, spans given back and taken again; the index
    /// and the forms checked after each.
    #[test]
    fn agrees_with_a_plain_model() {
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let ids = hostile_ids();
            let mut r = Records::default();
            let mut model: Model = Vec::new();
            let mut next = 1i64;
            for step in 0..400 {
                let ctx = format!("seed {seed} step {step}");
                match rng.below(10) {
                    0..=4 => {
                        let id = &ids[rng.below(ids.len() as u64) as usize];
                        let score = rng.below(100) as i64;
                        // Fresh ids, now and then right after the last.
                        let first = if rng.below(3) == 0 { next } else { next + 1 };
                        let span = Span {
                            first,
                            count: 1 + rng.below(3),
                        };
                        let at = model.iter().position(|m| &m.0 == id);
                        let expect = match at {
                            None if model.len() >= MAX_CHARGES => Err(Bound::Charges),
                            Some(i)
                                if model[i].2.len() >= MAX_CHARGE_SPANS
                                    && model[i].2.last().unwrap().last() + 1 != first =>
                            {
                                Err(Bound::ChargeSpans)
                            }
                            _ => Ok(()),
                        };
                        assert_eq!(r.add_span(id, score, span), expect, "{ctx}");
                        if expect.is_ok() {
                            next = span.last() + 1;
                            match at {
                                None => {
                                    model.push((id.clone(), score, vec![span]));
                                    model.sort_by(|a, b| a.0.cmp(&b.0));
                                }
                                Some(i) => {
                                    let spans = &mut model[i].2;
                                    let l = spans.last_mut().unwrap();
                                    if l.last() + 1 == span.first {
                                        l.count += span.count;
                                    } else {
                                        spans.push(span);
                                    }
                                }
                            }
                        }
                    }
                    5 | 6 => {
                        let id = &ids[rng.below(ids.len() as u64) as usize];
                        let at = model.iter().position(|m| &m.0 == id);
                        let keep = at.map_or(0, |i| rng.below(units(&model[i].2) + 1));
                        let gone = r.cut(id, keep);
                        let took: u64 = units(&gone);
                        if let Some(i) = at {
                            assert_eq!(took, units(&model[i].2) - keep, "{ctx}");
                            let mut left = keep;
                            let spans: Vec<Span> = model[i]
                                .2
                                .iter()
                                .filter_map(|s| {
                                    let c = s.count.min(left);
                                    left -= c;
                                    (c > 0).then_some(Span {
                                        first: s.first,
                                        count: c,
                                    })
                                })
                                .collect();
                            if spans.is_empty() {
                                model.remove(i);
                            } else {
                                model[i].2 = spans;
                            }
                        } else {
                            assert!(gone.is_empty(), "{ctx}");
                        }
                    }
                    7 => {
                        let cutoff = rng.below(60) as i64 - 10;
                        let before = model.len();
                        model.retain(|m| m.1 > cutoff);
                        assert_eq!(r.trim(cutoff), before - model.len(), "{ctx}");
                    }
                    _ => {
                        // A hundred new charges scored in order, then
                        // trimmed in order: the heap's order, kept.
                        if model.is_empty() && rng.below(4) == 0 {
                            for i in 0..40i64 {
                                let id = [b'o', i as u8];
                                r.add_span(
                                    &id,
                                    200 + i,
                                    Span {
                                        first: next,
                                        count: 1,
                                    },
                                )
                                .unwrap();
                                model.push((
                                    id.to_vec(),
                                    200 + i,
                                    vec![Span {
                                        first: next,
                                        count: 1,
                                    }],
                                ));
                                next += 1;
                            }
                            model.sort_by(|a, b| a.0.cmp(&b.0));
                            for cut in (200..240).step_by(7) {
                                let before = model.len();
                                model.retain(|m| m.1 > cut);
                                assert_eq!(r.trim(cut), before - model.len(), "{ctx}");
                                r.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                            }
                        }
                    }
                }
                if model.is_empty() {
                    assert!(r.is_empty(), "{ctx}");
                    r = Records::default();
                    continue;
                }
                r.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(model_of(&r), model, "{ctx}");
                for (id, score, spans) in &model {
                    let got = r.get(id).unwrap();
                    assert_eq!((got.score, got.units()), (*score, units(spans)), "{ctx}");
                }
                for _ in 0..8 {
                    let m = rng.below(next as u64 + 2) as i64;
                    let held = model
                        .iter()
                        .any(|(_, _, ss)| ss.iter().any(|s| s.first <= m && m <= s.last()));
                    assert_eq!(r.holds(m), held, "{ctx}: member {m}");
                }
                // What the loader builds from the same records is the same.
                let mut b = RecordsBuilder::default();
                for rec in r.iter() {
                    b.push(rec).unwrap();
                }
                let loaded = b.finish().unwrap();
                loaded.check().unwrap();
                assert_eq!(loaded, r, "{ctx}");
            }
        }
    }
}
