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
