//! The invariants of a record table (the unit tests and the fuzz targets).

use super::super::bounds::{MAX_CHARGES, MAX_CHARGE_SPANS};
use super::heap::before;
use super::index::{tag_of, EMPTY, GONE};
use super::table::{alive, valid_request, Held, Records, Slot, Span, SMALL_CHARGES};

/// What every record table holds, checked by the unit tests after each
/// change (and by the fuzz targets): the bounds, the form, every index made
/// of exactly the live records, and the heap naming every live record.
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
        if index.tags.len() != index.by_request.len() {
            return Err("tags not one a place".into());
        }
        for (&p, &t) in index.by_request.iter().zip(&index.tags) {
            if p == EMPTY || p == GONE {
                continue;
            }
            let Some(slot) = self.slots.get(p as usize).filter(|s| s.live()) else {
                return Err(format!("place names slot {p}, not a live record"));
            };
            if t != tag_of(self.request_of(slot)) {
                return Err(format!("slot {p}'s place has another id's tag"));
            }
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
