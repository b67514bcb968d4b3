//! Finding a record by its id and a member among the spans, in either
//! form, and the index beyond [`SMALL_CHARGES`] charges: made, dropped,
//! and its parts `by_request` and `held` kept.
//!
//! [`SMALL_CHARGES`]: super::table::SMALL_CHARGES

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use super::super::bounds::MAX_REQUEST_ID;

use super::heap::heapify;
use super::table::{alive, grow, shrink, Held, Index, Records, Slot, Span};

/// The hash of a request id: SipHash under keys drawn once per process.
/// The last id hashed and its hash are kept (per thread: commands run on
/// one), since a call looks the same id up several times (is it charged,
/// may it be added, add it, index it): one SipHash a call, the others a
/// comparison of the bytes.
fn hash(request: &[u8]) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let sip = || KEYS.get_or_init(RandomState::new).hash_one(request);
    // Ids are 1 to MAX_REQUEST_ID bytes; anything else is not kept.
    if request.is_empty() || request.len() > MAX_REQUEST_ID {
        return sip();
    }
    LAST_HASHED
        .try_with(|cell| {
            let Ok(mut last) = cell.try_borrow_mut() else {
                return sip();
            };
            let len = request.len();
            if usize::from(last.len) == len && last.bytes.get(..len) == Some(request) {
                return last.hash;
            }
            let h = sip();
            if let Some(to) = last.bytes.get_mut(..len) {
                to.copy_from_slice(request);
                last.len = len as u8;
                last.hash = h;
            }
            h
        })
        .unwrap_or_else(|_| sip())
}

/// The last request id [`hash`] hashed (`len` 0: none yet; an id is at
/// least one byte), and its hash.
struct LastHashed {
    bytes: [u8; MAX_REQUEST_ID],
    len: u8,
    hash: u64,
}

thread_local! {
    static LAST_HASHED: std::cell::RefCell<LastHashed> = const {
        std::cell::RefCell::new(LastHashed { bytes: [0; MAX_REQUEST_ID], len: 0, hash: 0 })
    };
}

/// A free place in `by_request`.
pub(super) const EMPTY: u32 = u32::MAX;
/// A place whose slot went (probing goes on past it).
pub(super) const GONE: u32 = u32::MAX - 1;

impl Records {
    /// The place of `request` in `by_request`, if it holds it.
    fn place_of(&self, request: &[u8]) -> Option<usize> {
        let index = self.index.as_ref()?;
        let mask = index.by_request.len().checked_sub(1)?;
        let h = hash(request);
        let (mut i, tag) = ((h as usize) & mask, tag(h));
        // At most every place once (one is always EMPTY: see `index_id`).
        for _ in 0..index.by_request.len() {
            match *index.by_request.get(i)? {
                EMPTY => return None,
                GONE => {}
                _ if index.tags.get(i) != Some(&tag) => {}
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
    pub(super) fn slot_of(&self, request: &[u8]) -> Option<usize> {
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

    /// The place in `by_request` that names slot `s` (whose record holds
    /// `request`).
    pub(super) fn place_of_slot(&self, request: &[u8], s: u32) -> Option<usize> {
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

    /// Puts slot `s`, whose record holds `request`, into `by_request`; or
    /// makes the table anew when the places in use would pass 7/8: so one
    /// is always EMPTY and a probe ends.
    pub(super) fn index_id(&mut self, request: &[u8], s: u32) {
        let Some(index) = self.index.as_ref() else {
            return;
        };
        if index.used.saturating_add(1).saturating_mul(8) > index.by_request.len().saturating_mul(7)
        {
            self.rehash();
            return;
        }
        if let Some(index) = self.index.as_mut() {
            place(
                &mut index.by_request,
                &mut index.tags,
                &mut index.used,
                request,
                s,
            );
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
        let mut tags = vec![0; places];
        let mut used = 0;
        for (s, slot) in self.slots.iter().enumerate() {
            if slot.live() {
                place(
                    &mut table,
                    &mut tags,
                    &mut used,
                    self.request_of(slot),
                    s as u32,
                );
            }
        }
        if let Some(index) = self.index.as_mut() {
            index.by_request = table;
            index.tags = tags;
            index.used = used;
        }
    }

    /// The index made for the records (none dead: the table had no index).
    pub(super) fn build_index(&mut self) {
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

    /// The index dropped (a table of [`SMALL_CHARGES`](super::table::SMALL_CHARGES) / 2 charges or fewer): the
    /// dead slots go with it.
    pub(super) fn drop_index(&mut self) {
        self.index = None;
        self.slots.retain(Slot::live);
        shrink(&mut self.slots);
    }
}

/// The tag of a place holding an id of hash `h`: seven bits of the hash
/// that do not choose the place (its top bits; a table has far fewer than
/// 2^57 places).
pub(super) fn tag(h: u64) -> u8 {
    (h >> 57) as u8
}

/// The tag of `request` (see [`tag`]).
#[cfg(any(test, feature = "fuzzing"))]
pub(super) fn tag_of(request: &[u8]) -> u8 {
    tag(hash(request))
}

/// Puts slot `s` at the first free place of `request`'s probe, and its
/// tag beside it (`tags` is as long as `table`).
fn place(table: &mut [u32], tags: &mut [u8], used: &mut usize, request: &[u8], s: u32) {
    let Some(mask) = table.len().checked_sub(1) else {
        return;
    };
    let h = hash(request);
    let mut i = (h as usize) & mask;
    for _ in 0..table.len() {
        match table.get_mut(i) {
            Some(p) if *p == EMPTY || *p == GONE => {
                if *p == EMPTY {
                    *used += 1;
                }
                *p = s;
                if let Some(t) = tags.get_mut(i) {
                    *t = tag(h);
                }
                return;
            }
            Some(_) => i = (i + 1) & mask,
            None => return,
        }
    }
}

/// The index in `held` of the span starting at `first`.
pub(super) fn held_at(held: &[Held], first: i64) -> Option<usize> {
    let i = held.partition_point(|h| h.0 < first);
    (held.get(i)?.0 == first).then_some(i)
}

/// Marks the span starting at `first` dead.
pub(super) fn kill_span(index: &mut Index, first: i64) {
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
pub(super) fn hold(index: &mut Index, span: Span) {
    let h = (span.first, span.last());
    // Dead spans at the end from the new one's first member on go first
    // (each paid for by the removal that killed it): a charge made after
    // the newest were given back (UNDO ID, then CHECK) takes ids among
    // theirs, and is then appended instead of sweeping every span.
    while index.held.last().is_some_and(|l| !alive(l) && l.0 >= h.0) {
        index.held.pop();
        index.held_dead = index.held_dead.saturating_sub(1);
    }
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

pub(super) fn sweep_held(index: &mut Index) {
    if index.held_dead > 0 {
        index.held.retain(alive);
        index.held_dead = 0;
    }
}
