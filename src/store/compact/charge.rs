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
//! Two orders, both binary-searched: the records by request id (lookups,
//! O(log n)), and every span of every record by member (UNDO by member
//! must never remove an entry of a charge: O(log n) per member asked).
//! A record goes when its units reach 0 or when a trim removes its entries
//! (they share one score, so a trim takes all of them or none).
//!
//! The bounds below are checked by the decoder and refused by every change,
//! as the log's own bounds are (`run.rs`).

use super::run::Bound;

/// The longest request id (bytes); the shortest is one byte.
pub const MAX_REQUEST_ID: usize = 128;

/// The most charge records a log may hold: far above the charges of any
/// window a CHECK can fill (an allowed call leaves at most `limit`
/// entries, `slidewin.max-limit` at most 10,000,000), and a bound on what
/// a payload can make the decoder build.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_CHARGES: usize = 1 << 24;
/// In the unit tests and the fuzz targets: within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_CHARGES: usize = 64;

/// The most spans one charge may hold: its first, and one more for each
/// SETTLE that raised it while later entries had taken the ids after it.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_CHARGE_SPANS: usize = 64;
/// In the unit tests and the fuzz targets: within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_CHARGE_SPANS: usize = 4;

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

/// The charge records of a log (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// Sorted by request id, unique.
    by_request: Vec<Record>,
    /// Every span of every record as (first, last), sorted, disjoint.
    held: Vec<(i64, i64)>,
    /// No record is scored below it (a bound, not the minimum: a trim
    /// below it has nothing to drop and looks at no record).
    oldest: i64,
}

/// Equal when they hold the same records (the index follows from them;
/// `oldest` is a bound, not a fact of the records).
impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        self.by_request == other.by_request
    }
}

impl Eq for Records {}

/// Room for one more in `v`: a quarter more when full, not double (as the
/// chunk list grows: a table keeps at most a quarter spare).
fn grow<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.len() / 4).max(1));
    }
}

/// Whether `request` is a request id a record may carry.
pub fn valid_request(request: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID).contains(&request.len())
}

impl Records {
    pub fn is_empty(&self) -> bool {
        self.by_request.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_request.len()
    }

    /// The records, by request id.
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        self.by_request.iter()
    }

    fn find(&self, request: &[u8]) -> Result<usize, usize> {
        self.by_request
            .binary_search_by(|r| r.request.as_ref().cmp(request))
    }

    /// The record under `request`, if any.
    pub fn get(&self, request: &[u8]) -> Option<&Record> {
        self.find(request).ok().and_then(|i| self.by_request.get(i))
    }

    /// Whether member `id` is a unit of a charge.
    pub fn holds(&self, id: i64) -> bool {
        let i = self.held.partition_point(|&(_, last)| last < id);
        self.held.get(i).is_some_and(|&(first, _)| first <= id)
    }

    /// Whether [`Records::add_span`] would pass a bound (nothing changed).
    pub fn can_add(&self, request: &[u8], span: Span) -> Result<(), Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        match self.get(request) {
            None if self.by_request.len() >= MAX_CHARGES => Err(Bound::Charges),
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
        match self.find(request) {
            Ok(i) => {
                let Some(r) = self.by_request.get_mut(i) else {
                    return Ok(());
                };
                match r.spans.last_mut() {
                    Some(l) if l.last().checked_add(1) == Some(span.first) => {
                        let old_last = l.last();
                        l.count = l.count.saturating_add(span.count);
                        let new_last = l.last();
                        let hi = self.held.partition_point(|&(_, last)| last < old_last);
                        if let Some(h) = self.held.get_mut(hi) {
                            h.1 = new_last;
                        }
                        return Ok(());
                    }
                    _ => r.spans.push(span),
                }
            }
            Err(i) => {
                if self.by_request.is_empty() || score < self.oldest {
                    self.oldest = score;
                }
                grow(&mut self.by_request);
                self.by_request.insert(
                    i,
                    Record {
                        request: request.into(),
                        score,
                        spans: vec![span],
                    },
                );
            }
        }
        let hi = self.held.partition_point(|&(first, _)| first < span.first);
        grow(&mut self.held);
        self.held.insert(hi, (span.first, span.last()));
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
        let Ok(i) = self.find(request) else {
            return gone;
        };
        let Some(r) = self.by_request.get_mut(i) else {
            return gone;
        };
        for g in &gone {
            let Some(l) = r.spans.last_mut() else {
                break;
            };
            if l.first == g.first {
                r.spans.pop();
            } else {
                l.count = l.count.saturating_sub(g.count);
            }
        }
        let left = r.spans.last().copied();
        if r.spans.is_empty() {
            self.by_request.remove(i);
        }
        // The held index: whole spans out, a shortened one cut.
        for g in &gone {
            let hi = self.held.partition_point(|&(_, last)| last < g.first);
            match self.held.get_mut(hi) {
                Some(h) if h.0 == g.first => {
                    self.held.remove(hi);
                }
                Some(h) => {
                    if let Some(l) = left {
                        h.1 = l.last();
                    }
                }
                None => {}
            }
        }
        gone
    }

    /// Every span of every record with its score, sorted by member.
    pub fn spans_by_member(&self) -> Vec<(Span, i64)> {
        let mut out: Vec<(Span, i64)> = self
            .by_request
            .iter()
            .flat_map(|r| r.spans.iter().map(move |s| (*s, r.score)))
            .collect();
        out.sort_unstable_by_key(|(s, _)| s.first);
        out
    }

    /// Drops the records scored at or below `cutoff_ms` (their entries
    /// went with the trim); returns how many. Looks at no record when none
    /// can be that old.
    pub fn trim(&mut self, cutoff_ms: i64) -> usize {
        if self.by_request.is_empty() || cutoff_ms < self.oldest {
            return 0;
        }
        let before = self.by_request.len();
        let mut oldest = i64::MAX;
        self.by_request.retain(|r| {
            let keep = r.score > cutoff_ms;
            if keep {
                oldest = oldest.min(r.score);
            }
            keep
        });
        self.oldest = oldest;
        let dropped = before.saturating_sub(self.by_request.len());
        if dropped > 0 {
            self.reindex();
        }
        dropped
    }

    /// The held index made again from the records.
    fn reindex(&mut self) {
        self.held.clear();
        for r in &self.by_request {
            self.held
                .extend(r.spans.iter().map(|s| (s.first, s.last())));
        }
        self.held.sort_unstable();
        self.held.shrink_to(self.held.len().saturating_mul(2));
    }

    /// Every heap block the records own (for MEMORY USAGE).
    pub fn heap_blocks(&self, out: &mut Vec<*const u8>) {
        if self.by_request.capacity() > 0 {
            out.push(self.by_request.as_ptr().cast());
        }
        if self.held.capacity() > 0 {
            out.push(self.held.as_ptr().cast());
        }
        for r in &self.by_request {
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
        self.by_request.len().saturating_mul(2).saturating_add(2)
    }

    /// Hands every block to `to` (active defragmentation).
    pub fn relocate<R: crate::relocate::Relocate>(&mut self, to: &mut R) {
        let mut records = to.vec(std::mem::take(&mut self.by_request));
        for r in records.iter_mut() {
            let request = std::mem::take(&mut r.request);
            r.request = to.vec(Vec::from(request)).into_boxed_slice();
            r.spans = to.vec(std::mem::take(&mut r.spans));
        }
        self.by_request = records;
        self.held = to.vec(std::mem::take(&mut self.held));
    }
}

/// What every record table holds, checked by the unit tests after each
/// change (and by the fuzz targets): the bounds, the order, the held index
/// made of exactly the records' spans, and `oldest` a lower bound.
#[cfg(any(test, feature = "fuzzing"))]
impl Records {
    pub fn check(&self) -> Result<(), String> {
        if self.by_request.is_empty() {
            return Err("an empty record table is kept".into());
        }
        if self.by_request.len() > MAX_CHARGES {
            return Err("too many charges".into());
        }
        if self
            .by_request
            .windows(2)
            .any(|w| w[0].request >= w[1].request)
        {
            return Err("records not sorted by request id".into());
        }
        for r in &self.by_request {
            if !valid_request(&r.request) {
                return Err(format!("request id of {} bytes", r.request.len()));
            }
            if r.spans.is_empty() || r.spans.len() > MAX_CHARGE_SPANS {
                return Err(format!("a charge of {} spans", r.spans.len()));
            }
            if r.spans.iter().any(|s| s.count == 0) {
                return Err("an empty span".into());
            }
            if r.score < self.oldest {
                return Err("oldest is above a record".into());
            }
        }
        let mut held: Vec<(i64, i64)> = self
            .by_request
            .iter()
            .flat_map(|r| r.spans.iter().map(|s| (s.first, s.last())))
            .collect();
        held.sort_unstable();
        if held != self.held {
            return Err(format!("held index {:?} against {held:?}", self.held));
        }
        if held.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err("two charges share a member".into());
        }
        Ok(())
    }
}

/// Builds the records a payload holds, in request id order, checking each
/// bound as it goes (the caller checks the spans against the log).
#[derive(Default)]
pub struct RecordsBuilder {
    records: Records,
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
        if self.records.by_request.len() >= MAX_CHARGES {
            return Err(Some(Bound::Charges));
        }
        if self
            .records
            .by_request
            .last()
            .is_some_and(|p| p.request >= record.request)
        {
            return Err(None);
        }
        if self.records.by_request.is_empty() || record.score < self.records.oldest {
            self.records.oldest = record.score;
        }
        self.records.by_request.push(record);
        Ok(())
    }

    /// The records, their spans checked disjoint (`Err` otherwise).
    pub fn finish(mut self) -> Result<Records, ()> {
        self.records.reindex();
        self.records.held.shrink_to_fit();
        self.records.by_request.shrink_to_fit();
        if self.records.held.windows(2).any(|w| w[1].0 <= w[0].1) {
            return Err(());
        }
        Ok(self.records)
    }
}
