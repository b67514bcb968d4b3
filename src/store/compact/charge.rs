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
//! Every call touches only what it changes, O(log n) in the live charges
//! however the ids and scores are laid out:
//! - the records sit in a slab (`slots`), each at an index that stays its
//!   own while it lives;
//! - `by_request`, an open-addressing hash table of slot indexes keyed by
//!   the request id (a hash keyed at random per process: ids a client
//!   chooses cannot be made to collide), finds a charge by id in O(1);
//! - `by_score`, a min-heap of (score, slot), lets a trim take the records
//!   scored at or below its cutoff in score order without a scan. An entry
//!   of a record that went earlier (UNDO, SETTLE to 0) stays until it comes
//!   to the top: its slot is freed only then, so no entry ever names a
//!   record it was not made for;
//! - `held`, every span of every record as (first, last) sorted by member,
//!   answers "is this member a unit of a charge" (UNDO by member must never
//!   remove one) by a binary search. New spans take ids above every other
//!   and are appended; a span that goes is marked dead in place and the
//!   dead ones are swept out when they are as many as the live ones (each
//!   sweep is paid for by the removals before it).
//!
//! The heap and `held` are swept together with the slab when dead entries
//! outnumber the live records, so the table never holds more than about
//! twice what its live charges need.
//!
//! The bounds on charges (`bounds.rs`) are checked by the decoder and
//! refused by every change, as the log's own bounds are.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::BinaryHeap;
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

impl Record {
    /// The units the charge holds.
    pub fn units(&self) -> u64 {
        self.spans
            .iter()
            .fold(0u64, |n, s| n.saturating_add(s.count))
    }
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

/// A free place in `by_request`.
const EMPTY: u32 = u32::MAX;
/// A place whose slot went (probing goes on past it).
const GONE: u32 = u32::MAX - 1;

/// A span of `held`: members `first ..= last`; `last < first` marks one
/// that went (its `first` keeps the order for the binary search).
type Held = (i64, i64);

fn alive(h: &Held) -> bool {
    h.0 <= h.1
}

/// The charge records of a log (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// The records; `None` where one went (its index is in `free` once no
    /// heap entry names it any more).
    slots: Vec<Option<Record>>,
    /// Slots free for a new record.
    free: Vec<u32>,
    /// Live records.
    live: usize,
    /// Slot indexes by request id: linear probing over a power of two
    /// places (`EMPTY`, `GONE` or a slot); empty while no record was made.
    by_request: Vec<u32>,
    /// Places of `by_request` that are not `EMPTY`.
    used: usize,
    /// (score, slot) of every record made and not yet taken from the top,
    /// the oldest on top.
    by_score: BinaryHeap<Reverse<(i64, u32)>>,
    /// Every span of every record, sorted by `first`, the dead among them
    /// marked (see [`Held`]).
    held: Vec<Held>,
    /// Dead spans in `held`.
    held_dead: usize,
}

/// Equal when they hold the same records (the indexes follow from them).
impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
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

    /// The records, by request id (sorted here: only encoding, the digest
    /// and the checks walk them all).
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        let mut all: Vec<&Record> = self.slots.iter().flatten().collect();
        all.sort_unstable_by(|a, b| a.request.cmp(&b.request));
        all.into_iter()
    }

    /// The place of `request` in `by_request`, if it holds it.
    fn place_of(&self, request: &[u8]) -> Option<usize> {
        let mask = self.by_request.len().checked_sub(1)?;
        let mut i = (hash(request) as usize) & mask;
        // At most every place once (one is always EMPTY: see `index`).
        for _ in 0..self.by_request.len() {
            match *self.by_request.get(i)? {
                EMPTY => return None,
                GONE => {}
                s => {
                    let r = self.slots.get(s as usize).and_then(Option::as_ref);
                    if r.is_some_and(|r| *r.request == *request) {
                        return Some(i);
                    }
                }
            }
            i = (i + 1) & mask;
        }
        None
    }

    fn slot_of(&self, request: &[u8]) -> Option<usize> {
        let place = self.place_of(request)?;
        self.by_request.get(place).map(|&s| s as usize)
    }

    /// The record under `request`, if any.
    pub fn get(&self, request: &[u8]) -> Option<&Record> {
        self.slots.get(self.slot_of(request)?)?.as_ref()
    }

    /// Puts slot `s`, whose record (in `slots` already) holds `request`,
    /// into `by_request`; or makes the table anew (twice the live records'
    /// size, every one of them in it) when the places in use would pass
    /// 7/8: so one is always EMPTY and a probe ends.
    fn index(&mut self, request: &[u8], s: u32) {
        if self.used.saturating_add(1).saturating_mul(8) > self.by_request.len().saturating_mul(7) {
            self.rehash();
            return;
        }
        self.place(request, s);
    }

    /// Puts slot `s` at the first free place of `request`'s probe.
    fn place(&mut self, request: &[u8], s: u32) {
        let Some(mask) = self.by_request.len().checked_sub(1) else {
            return;
        };
        let mut i = (hash(request) as usize) & mask;
        for _ in 0..self.by_request.len() {
            match self.by_request.get_mut(i) {
                Some(p) if *p == EMPTY || *p == GONE => {
                    if *p == EMPTY {
                        self.used += 1;
                    }
                    *p = s;
                    return;
                }
                Some(_) => i = (i + 1) & mask,
                None => return,
            }
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
        self.by_request = vec![EMPTY; places];
        self.used = 0;
        let slots = std::mem::take(&mut self.slots);
        for (s, r) in slots.iter().enumerate() {
            if let Some(r) = r {
                self.place(&r.request, s as u32);
            }
        }
        self.slots = slots;
    }

    /// Whether member `id` is a unit of a charge. The spans, live and dead,
    /// are disjoint (new ones take ids above every other, and one placed
    /// among them sweeps the dead out first), so only the last one starting
    /// at or below `id` can hold it.
    pub fn holds(&self, id: i64) -> bool {
        let i = self.held.partition_point(|h| h.0 <= id);
        i.checked_sub(1)
            .and_then(|i| self.held.get(i))
            .is_some_and(|h| alive(h) && h.1 >= id)
    }

    /// The index in `held` of the span starting at `first`.
    fn held_at(&self, first: i64) -> Option<usize> {
        let i = self.held.partition_point(|h| h.0 < first);
        (self.held.get(i)?.0 == first).then_some(i)
    }

    /// Marks the span starting at `first` dead.
    fn kill_span(&mut self, first: i64) {
        if let Some(i) = self.held_at(first) {
            if let Some(h) = self.held.get_mut(i) {
                if alive(h) {
                    h.1 = h.0.saturating_sub(1);
                    self.held_dead += 1;
                }
            }
        }
    }

    /// Adds a live span to `held`: appended when above every span (what
    /// every call but a client's `SLIDEWIN.APPLY ... CHARGE` does), else
    /// placed after the dead spans are swept out.
    fn hold(&mut self, span: Span) {
        let h = (span.first, span.last());
        if self.held.last().is_none_or(|l| l.0 < h.0 && l.1 < h.0) {
            grow(&mut self.held);
            self.held.push(h);
            return;
        }
        self.sweep_held();
        let i = self.held.partition_point(|x| x.0 < h.0);
        grow(&mut self.held);
        self.held.insert(i, h);
    }

    fn sweep_held(&mut self) {
        if self.held_dead > 0 {
            self.held.retain(alive);
            self.held_dead = 0;
        }
    }

    /// The dead entries swept out of `held` and `by_score` once they
    /// outnumber the live ones (amortized over the removals that made
    /// them).
    fn tidy(&mut self) {
        let live_spans = self.held.len().saturating_sub(self.held_dead);
        if self.held_dead > live_spans.saturating_add(32) {
            self.sweep_held();
            shrink(&mut self.held);
        }
        if self.by_score.len() > self.live.saturating_mul(2).saturating_add(32) {
            let mut heap = std::mem::take(&mut self.by_score).into_vec();
            heap.retain(|Reverse((_, s))| self.slots.get(*s as usize).is_some_and(Option::is_some));
            // Every slot no entry names any more is free.
            self.free = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, r)| r.is_none())
                .map(|(s, _)| s as u32)
                .collect();
            self.by_score = BinaryHeap::from(heap);
            shrink_heap(&mut self.by_score);
        }
    }

    /// Whether [`Records::add_span`] would pass a bound (nothing changed).
    pub fn can_add(&self, request: &[u8], span: Span) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        match self.get(request) {
            None if self.live >= MAX_CHARGES => Err(Bound::Charges),
            Some(r)
                if r.spans.len() >= MAX_CHARGE_SPANS
                    && r.spans
                        .last()
                        .is_none_or(|l| l.last().checked_add(1) != Some(span.first)) =>
            {
                Err(Bound::ChargeSpans)
            }
            _ => Ok(()),
        }
    }

    /// Adds `span` (ids the log holds, scored `score`, in no charge) to the
    /// charge under `request`, made when missing (scored `score`; an
    /// existing one keeps its score, which the caller scored the ids at).
    pub fn add_span(&mut self, request: &[u8], score: i64, span: Span) -> Result<(), Bound> {
        self.can_add(request, span)?;
        if let Some(s) = self.slot_of(request) {
            let Some(Some(r)) = self.slots.get_mut(s) else {
                return Ok(());
            };
            match r.spans.last_mut() {
                Some(l) if l.last().checked_add(1) == Some(span.first) => {
                    let first = l.first;
                    l.count = l.count.saturating_add(span.count);
                    let last = l.last();
                    if let Some(i) = self.held_at(first) {
                        if let Some(h) = self.held.get_mut(i) {
                            h.1 = last;
                        }
                        // A dead span may start among the ids it grew over
                        // (a client's CHARGE over given-back ids): swept.
                        if self.held.get(i + 1).is_some_and(|n| n.0 <= last) {
                            self.sweep_held();
                        }
                    }
                }
                _ => {
                    r.spans.push(span);
                    self.hold(span);
                }
            }
            return Ok(());
        }
        let record = Record {
            request: request.into(),
            score,
            spans: vec![span],
        };
        let s = match self.free.pop() {
            Some(s) => {
                if let Some(slot) = self.slots.get_mut(s as usize) {
                    *slot = Some(record);
                }
                s
            }
            None => {
                grow(&mut self.slots);
                self.slots.push(Some(record));
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        self.index(request, s);
        self.by_score.push(Reverse((score, s)));
        self.hold(span);
        Ok(())
    }

    /// The spans [`Records::cut`] would take off the charge under
    /// `request` to keep its first `keep` units, the highest first
    /// (nothing changed).
    pub fn plan_cut(&self, request: &[u8], keep: u64) -> Vec<Span> {
        let Some(r) = self.get(request) else {
            return Vec::new();
        };
        let mut over = r.units().saturating_sub(keep);
        let mut gone = Vec::new();
        for s in r.spans.iter().rev() {
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
        let Some(place) = self.place_of(request) else {
            return gone;
        };
        let Some(s) = self.by_request.get(place).map(|&s| s as usize) else {
            return gone;
        };
        let Some(Some(r)) = self.slots.get_mut(s) else {
            return gone;
        };
        // Whole spans die; a shortened one keeps its start.
        let mut dead = Vec::new();
        let mut shortened = None;
        for g in &gone {
            let Some(l) = r.spans.last_mut() else {
                break;
            };
            if l.first == g.first {
                dead.push(l.first);
                r.spans.pop();
            } else {
                l.count = l.count.saturating_sub(g.count);
                shortened = Some((l.first, l.last()));
            }
        }
        let empty = r.spans.is_empty();
        for first in dead {
            self.kill_span(first);
        }
        if let Some((first, last)) = shortened {
            if let Some(h) = self.held_at(first).and_then(|i| self.held.get_mut(i)) {
                h.1 = last;
            }
        }
        if empty {
            // The slot stays taken until its heap entry comes to the top.
            if let Some(slot) = self.slots.get_mut(s) {
                *slot = None;
            }
            if let Some(p) = self.by_request.get_mut(place) {
                *p = GONE;
            }
            self.live = self.live.saturating_sub(1);
        }
        self.tidy();
        gone
    }

    /// Every span of every record with its score, sorted by member.
    pub fn spans_by_member(&self) -> Vec<(Span, i64)> {
        let mut out: Vec<(Span, i64)> = self
            .slots
            .iter()
            .flatten()
            .flat_map(|r| r.spans.iter().map(move |s| (*s, r.score)))
            .collect();
        out.sort_unstable_by_key(|(s, _)| s.first);
        out
    }

    /// Drops the records scored at or below `cutoff_ms` (their entries
    /// went with the trim); returns how many. Takes them off the heap's
    /// top: O(log n) each, nothing else looked at.
    pub fn trim(&mut self, cutoff_ms: i64) -> usize {
        let mut dropped = 0usize;
        while let Some(&Reverse((score, s))) = self.by_score.peek() {
            if score > cutoff_ms {
                break;
            }
            self.by_score.pop();
            let Some(slot) = self.slots.get_mut(s as usize) else {
                continue;
            };
            if let Some(r) = slot.take() {
                let firsts: Vec<i64> = r.spans.iter().map(|sp| sp.first).collect();
                if let Some(place) = self.place_of_slot(&r.request, s) {
                    if let Some(p) = self.by_request.get_mut(place) {
                        *p = GONE;
                    }
                }
                for first in firsts {
                    self.kill_span(first);
                }
                self.live = self.live.saturating_sub(1);
                dropped += 1;
            }
            grow(&mut self.free);
            self.free.push(s);
        }
        if dropped > 0 {
            self.tidy();
        }
        dropped
    }

    /// The place in `by_request` that names slot `s` (whose record, taken
    /// out of it, holds `request`).
    fn place_of_slot(&self, request: &[u8], s: u32) -> Option<usize> {
        let mask = self.by_request.len().checked_sub(1)?;
        let mut i = (hash(request) as usize) & mask;
        for _ in 0..self.by_request.len() {
            match *self.by_request.get(i)? {
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
        if self.free.capacity() > 0 {
            out.push(self.free.as_ptr().cast());
        }
        if self.by_request.capacity() > 0 {
            out.push(self.by_request.as_ptr().cast());
        }
        if self.by_score.capacity() > 0 {
            out.push(self.by_score.as_slice().as_ptr().cast());
        }
        if self.held.capacity() > 0 {
            out.push(self.held.as_ptr().cast());
        }
        for r in self.slots.iter().flatten() {
            if !r.request.is_empty() {
                out.push(r.request.as_ptr());
            }
            if r.spans.capacity() > 0 {
                out.push(r.spans.as_ptr().cast());
            }
        }
    }

    /// How many heap blocks freeing the records releases.
    pub fn blocks(&self) -> usize {
        self.live.saturating_mul(2).saturating_add(5)
    }

    /// Hands every block to `to` (active defragmentation).
    pub fn relocate<R: crate::relocate::Relocate>(&mut self, to: &mut R) {
        let mut slots = to.vec(std::mem::take(&mut self.slots));
        for r in slots.iter_mut().flatten() {
            let request = std::mem::take(&mut r.request);
            r.request = to.vec(Vec::from(request)).into_boxed_slice();
            r.spans = to.vec(std::mem::take(&mut r.spans));
        }
        self.slots = slots;
        self.free = to.vec(std::mem::take(&mut self.free));
        self.by_request = to.vec(std::mem::take(&mut self.by_request));
        let heap = std::mem::take(&mut self.by_score).into_vec();
        self.by_score = BinaryHeap::from(to.vec(heap));
        self.held = to.vec(std::mem::take(&mut self.held));
    }
}

/// Room for one more in `v`: a quarter more when full, not double (as the
/// chunk list grows: a table keeps at most a quarter spare).
fn grow<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.len() / 4).max(1));
    }
}

/// Gives back what a vector keeps beyond twice its length.
fn shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len().saturating_mul(2).max(8) {
        v.shrink_to(v.len().saturating_add(v.len() / 4));
    }
}

fn shrink_heap<T: Ord>(h: &mut BinaryHeap<T>) {
    if h.capacity() > h.len().saturating_mul(2).max(8) {
        h.shrink_to(h.len().saturating_add(h.len() / 4));
    }
}

/// What every record table holds, checked by the unit tests after each
/// change (and by the fuzz targets): the bounds, every index made of
/// exactly the live records, and the heap naming every live record.
#[cfg(any(test, feature = "fuzzing"))]
impl Records {
    pub fn check(&self) -> Result<(), String> {
        if self.live == 0 {
            return Err("an empty record table is kept".into());
        }
        if self.live > MAX_CHARGES {
            return Err("too many charges".into());
        }
        if self.slots.iter().flatten().count() != self.live {
            return Err("live count differs from the records".into());
        }
        for (s, r) in self.slots.iter().enumerate() {
            let Some(r) = r else { continue };
            if !valid_request(&r.request) {
                return Err(format!("request id of {} bytes", r.request.len()));
            }
            if r.spans.is_empty() || r.spans.len() > MAX_CHARGE_SPANS {
                return Err(format!("a charge of {} spans", r.spans.len()));
            }
            if r.spans.iter().any(|s| s.count == 0) {
                return Err("an empty span".into());
            }
            if self.slot_of(&r.request) != Some(s) {
                return Err(format!("record {:?} not found by its id", r.request));
            }
            if !self
                .by_score
                .iter()
                .any(|Reverse((score, at))| *at as usize == s && *score == r.score)
            {
                return Err("a record missing from the heap".into());
            }
        }
        let named = self
            .by_request
            .iter()
            .filter(|&&p| p != EMPTY && p != GONE)
            .count();
        if named != self.live {
            return Err(format!("{named} ids indexed for {} records", self.live));
        }
        if self.free.iter().any(|&s| {
            self.slots.get(s as usize).is_none_or(Option::is_some)
                || self.by_score.iter().any(|Reverse((_, at))| *at == s)
        }) {
            return Err("a free slot in use".into());
        }
        let mut held: Vec<(i64, i64)> = self
            .slots
            .iter()
            .flatten()
            .flat_map(|r| r.spans.iter().map(|s| (s.first, s.last())))
            .collect();
        held.sort_unstable();
        let live: Vec<(i64, i64)> = self.held.iter().copied().filter(alive).collect();
        if held != live {
            return Err(format!("held index {live:?} against {held:?}"));
        }
        if self.held.windows(2).any(|w| w[1].0 <= w[0].1.max(w[0].0)) {
            return Err("two spans share a member".into());
        }
        if self.held.iter().filter(|h| !alive(h)).count() != self.held_dead {
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
        let heap: Vec<Reverse<(i64, u32)>> = self
            .records
            .iter()
            .enumerate()
            .map(|(s, r)| Reverse((r.score, s as u32)))
            .collect();
        let mut records = Records {
            live: self.records.len(),
            slots: self.records.into_iter().map(Some).collect(),
            by_score: BinaryHeap::from(heap),
            held,
            ..Records::default()
        };
        records.rehash();
        Ok(records)
    }
}
