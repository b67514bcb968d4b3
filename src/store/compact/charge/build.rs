//! [`RecordsBuilder`]: the records a payload holds, checked as they load.

use super::super::bounds::{Bound, MAX_CHARGES, MAX_CHARGE_SPANS};
use super::table::{valid_request, Held, Record, Records, Slot, Span, DEAD, SMALL_CHARGES};

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

/// Builds the records of a small form (at most [`SMALL_CHARGES`]) straight
/// into a table, in any order: no list of records, one block for the ids.
/// Checks what [`RecordsBuilder`] checks (the caller checks the spans
/// against the log).
pub struct SmallRecords {
    records: Records,
    /// While every record so far is one span, each after the one before
    /// (the order the small form writes): the last member of the last.
    ordered_end: Option<i64>,
}

impl SmallRecords {
    /// A builder whose ids take at most `id_bytes` bytes with their length
    /// bytes (one block of that size for them).
    pub fn with_capacity(id_bytes: usize) -> SmallRecords {
        SmallRecords {
            records: Records {
                slots: Vec::with_capacity(SMALL_CHARGES),
                ids: Vec::with_capacity(id_bytes),
                ..Records::default()
            },
            ordered_end: Some(-1),
        }
    }

    /// Adds a record; `Err` names the bound, or `None`: a fault (no span,
    /// more than [`SMALL_CHARGES`] records, an id twice, spans that meet).
    pub fn push(
        &mut self,
        request: &[u8],
        score: i64,
        spans: &[Span],
    ) -> Result<(), Option<Bound>> {
        if !valid_request(request) {
            return Err(Some(Bound::RequestId));
        }
        let Some((&first, rest)) = spans.split_first() else {
            return Err(None);
        };
        if spans.len() > MAX_CHARGE_SPANS {
            return Err(Some(Bound::ChargeSpans));
        }
        let r = &mut self.records;
        if r.live >= SMALL_CHARGES {
            return Err(None);
        }
        if r.slots.iter().any(|s| r.request_of(s) == request) {
            return Err(None);
        }
        // Disjoint from every span so far: in order, after the last one;
        // else every pair looked at (at most SMALL_CHARGES records of at
        // most MAX_CHARGE_SPANS spans: a bounded number).
        match self.ordered_end {
            Some(end) if rest.is_empty() && first.first > end => {
                self.ordered_end = Some(first.last());
            }
            _ => {
                self.ordered_end = None;
                let meets = |a: &Span, b: &Span| a.first <= b.last() && b.first <= a.last();
                for (i, a) in spans.iter().enumerate() {
                    let later = spans.get(i + 1..).unwrap_or(&[]);
                    if later.iter().any(|b| meets(a, b)) {
                        return Err(None);
                    }
                }
                for s in &r.slots {
                    let mut held = std::iter::once(&s.span).chain(r.extras_of(s));
                    if held.any(|h| spans.iter().any(|b| meets(h, b))) {
                        return Err(None);
                    }
                }
            }
        }
        let id = u32::try_from(r.ids.len()).map_err(|_| None)?;
        if id == DEAD {
            return Err(None);
        }
        r.ids.push(request.len() as u8);
        r.ids.extend_from_slice(request);
        let mut more = 0;
        if !rest.is_empty() {
            let extras = r.extras.get_or_insert_with(Box::default);
            extras.spans.push(rest.to_vec());
            more = u32::try_from(extras.spans.len()).map_err(|_| None)?;
        }
        r.slots.push(Slot {
            score,
            span: first,
            id,
            more,
        });
        r.live += 1;
        Ok(())
    }

    pub fn finish(self) -> Records {
        self.records
    }
}

impl Records {
    /// Each live record, in the order of their first members, as its id,
    /// first span and further spans (the small form's order); `false`, and
    /// nothing done, when there are more than [`SMALL_CHARGES`] of them.
    pub fn each_by_member(&self, mut f: impl FnMut(&[u8], Span, &[Span])) -> bool {
        if self.live > SMALL_CHARGES {
            return false;
        }
        let mut order = [0usize; SMALL_CHARGES];
        let mut n = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if s.live() {
                let Some(o) = order.get_mut(n) else {
                    return false;
                };
                *o = i;
                n += 1;
            }
        }
        let Some(order) = order.get_mut(..n) else {
            return false;
        };
        order.sort_unstable_by_key(|&i| self.slots.get(i).map_or(0, |s| s.span.first));
        for &i in order.iter() {
            if let Some(s) = self.slots.get(i) {
                f(self.request_of(s), s.span, self.extras_of(s));
            }
        }
        true
    }
}
