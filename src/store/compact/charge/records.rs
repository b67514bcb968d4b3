//! What a call asks of the records: a charge found, added to, cut, and
//! the ones that left the window trimmed; the table tidied after each.

use super::super::bounds::{Bound, MAX_CHARGES, MAX_CHARGE_SPANS};
use super::heap::{heap_pop, heap_push, heapify};
use super::index::{held_at, hold, kill_span, sweep_held, GONE};
use super::table::{
    grow, shrink, valid_request, FoundCharge, Records, Slot, Span, DEAD, SMALL_CHARGES,
};

/// A record looked up by id (see [`Records::find`]): its slot, or none,
/// with the table's live records and id bytes then (a record made since
/// changes both: a stale absence is looked up again).
#[derive(Debug, Clone, Copy)]
pub struct Found {
    slot: Option<usize>,
    live: usize,
    ids: usize,
}

impl Records {
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

    /// Whether [`Records::add_span`] would pass a bound (nothing changed).
    pub fn can_add(&self, request: &[u8], span: Span) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        self.can_add_at(self.slot_of(request), request, span)
    }

    /// The record under `request`, looked up once for a call that then
    /// tests and adds with [`Records::can_add_found`] and
    /// [`Records::add_span_found`]: valid only while the table is not
    /// changed in between (each checks the slot still holds `request`,
    /// and looks it up again if not).
    pub fn find(&self, request: &[u8]) -> Found {
        Found {
            slot: self.slot_of(request),
            live: self.live,
            ids: self.ids.len(),
        }
    }

    /// The score of the record [`Records::find`] found.
    pub fn found_score(&self, found: Found) -> Option<i64> {
        found.slot.and_then(|s| self.slots.get(s)).map(|s| s.score)
    }

    /// `found` if it still names `request`'s record (or its absence, when
    /// the table has no index and looking again costs a scan of at most
    /// SMALL_CHARGES slots); else the record looked up again.
    fn refound(&self, found: Found, request: &[u8]) -> Option<usize> {
        match found.slot {
            Some(s)
                if self
                    .slots
                    .get(s)
                    .is_some_and(|slot| slot.live() && self.request_of(slot) == request) =>
            {
                Some(s)
            }
            Some(_) => self.slot_of(request),
            None if found.live == self.live && found.ids == self.ids.len() => None,
            None => self.slot_of(request),
        }
    }

    /// [`Records::can_add`] for the record `found` under `request`.
    pub fn can_add_found(&self, found: Found, request: &[u8], span: Span) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        self.can_add_at(self.refound(found, request), request, span)
    }

    /// [`Records::add_span`] for the record `found` under `request`.
    pub fn add_span_found(
        &mut self,
        found: Found,
        request: &[u8],
        score: i64,
        span: Span,
    ) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        let found = self.refound(found, request);
        self.can_add_at(found, request, span)?;
        match found {
            Some(s) => self.extend(s, span),
            None => self.make(request, score, span),
        }
        Ok(())
    }

    /// [`Records::can_add`] for the record in slot `found` (found under
    /// `request`, a valid id; `None`: no record holds it).
    fn can_add_at(&self, found: Option<usize>, request: &[u8], span: Span) -> Result<(), Bound> {
        match found.and_then(|s| self.slots.get(s)) {
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
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        // One lookup for the check and the change.
        let found = self.slot_of(request);
        self.can_add_at(found, request, span)?;
        match found {
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
}
