//! The charges made with an ID on a log of chunks.

use super::super::bounds::*;
use super::super::charge::*;
use super::super::run::*;
use super::form::Chunked;

/// The charges made with an ID (see `charge/`): their entries are
/// entries of the log; the records name them.
impl Chunked {
    /// Whether member `id` is a unit of a charge made with an ID.
    pub(in crate::store::compact) fn charged(&self, id: i64) -> bool {
        self.records.as_ref().is_some_and(|r| r.holds(id))
    }

    /// The charge under `request`: its score and units.
    pub(in crate::store::compact) fn charge(&self, request: &[u8]) -> Option<(i64, u64)> {
        let r = self.records.as_ref()?.get(request)?;
        Some((r.score, r.units()))
    }

    /// Whether every unit of every record is an entry of the log scored as
    /// its record: one pass over the runs in member order (the chain's
    /// chunks decoded once each, the strays merged in) and the spans.
    pub(in crate::store::compact) fn holds_units_of(&self, records: &Records) -> bool {
        let spans = records.spans_by_member();
        let mut next = spans.iter().peekable();
        // The span being covered: the next member it needs, its last, its
        // score.
        let mut cur: Option<(i64, i64, i64)> = None;
        let mut ok = true;
        let mut visit = |r: Run| {
            while ok {
                let (need, last, score) = match cur {
                    Some(c) => c,
                    None => match next.next() {
                        Some((s, score)) => (s.first, s.last(), *score),
                        None => return,
                    },
                };
                cur = Some((need, last, score));
                if r.last() < need {
                    return;
                }
                if r.first > need || r.score != score {
                    ok = false;
                    return;
                }
                if r.last() >= last {
                    cur = None;
                } else {
                    cur = Some((r.last().saturating_add(1), last, score));
                    return;
                }
            }
        };
        let mut strays = self.strays.iter().copied().peekable();
        for c in &self.chunks {
            c.for_each_run(|r| {
                while let Some(s) = strays.next_if(|s| s.first < r.first) {
                    visit(s);
                }
                visit(r);
            });
        }
        strays.for_each(&mut visit);
        ok && cur.is_none() && next.peek().is_none()
    }

    /// Adds `n` units to the charge under `request` (a new one scored
    /// `score_ms`, an existing one at its own score) under fresh member ids
    /// above every other: the score given and the first id (a new charge
    /// that would put more than [`MAX_STRAYS`] runs out of member order is
    /// scored as the newest entry, as `add` does), `None` when `n` is 0 or
    /// no such id is left (ids up to i64::MAX, which only SLIDEWIN.APPLY
    /// can place), or the bound it would pass (nothing changed).
    pub(in crate::store::compact) fn add_units(
        &mut self,
        request: &[u8],
        score_ms: i64,
        n: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        if !valid_request(request) {
            return Err(Bound::RequestId);
        }
        // One lookup of the id for the test, the bounds and the add (the
        // records do not change in between: `insert` touches the runs).
        let found = self.records.as_ref().map(|r| (r.find(request), r));
        let existing = found.and_then(|(f, r)| r.found_score(f));
        let found = found.map(|(f, _)| f);
        if n == 0 {
            return Ok(None);
        }
        if !(0..=MAX_SCORE).contains(&score_ms) {
            return Ok(None);
        }
        let first = match self.max_id {
            None => 1,
            Some(m) => match m.checked_add(1) {
                Some(f) => f.max(1),
                None => return Ok(None),
            },
        };
        if i64::try_from(n - 1)
            .ok()
            .and_then(|m| first.checked_add(m))
            .is_none()
        {
            return Ok(None);
        }
        let mut run = Run {
            score: existing.unwrap_or(score_ms),
            first,
            count: n,
        };
        match self.add_charge_found(found, request, run) {
            Ok(()) => {}
            Err(Bound::Strays) if existing.is_none() => {
                let Some(top) = self.top_score().filter(|&t| t > run.score) else {
                    return Err(Bound::Strays);
                };
                run.score = top;
                self.add_charge_found(found, request, run)?;
            }
            Err(b) => return Err(b),
        }
        Ok(Some((run.score, first)))
    }

    /// Moves the charge under `request` to the newest score with `units`
    /// units under fresh member ids (appended: no run goes out of member
    /// order): what a SETTLE raising an older charge does when placing the
    /// new units at the charge's own score would pass the bound on runs out
    /// of member order or on a charge's runs of ids. The charge then leaves
    /// the window later, never earlier: the limit stays exact or stricter.
    /// The score and first member given, `None` when there is no such
    /// charge or no id is free, or the bound it would pass (nothing
    /// changed).
    pub(in crate::store::compact) fn move_charge(
        &mut self,
        request: &[u8],
        units: u64,
    ) -> Result<Option<(i64, i64)>, Bound> {
        let Some((score, _)) = self.charge(request) else {
            return Ok(None);
        };
        if units == 0 {
            return Ok(None);
        }
        let top = self.top_score().unwrap_or(score).max(score);
        let Some(first) = self
            .max_id
            .map_or(Some(1), |m| m.checked_add(1).map(|f| f.max(1)))
        else {
            return Ok(None);
        };
        if i64::try_from(units - 1)
            .ok()
            .and_then(|m| first.checked_add(m))
            .is_none()
        {
            return Ok(None);
        }
        let run = Run {
            score: top,
            first,
            count: units,
        };
        // Appended after the charge's units are gone: the removal leaves
        // no more runs or entries than the log holds now, but for the runs
        // it splits, which `remove_units` checks first.
        if !self.appends(&run) {
            return Ok(None);
        }
        let gone = self.records.as_ref().map(|r| r.plan_cut(request, 0));
        self.cut_fits(gone.as_deref().unwrap_or(&[]), 1)?;
        self.can_insert(&run)?;
        self.remove_units(request, 0)?;
        self.add_charge(request, run)?;
        Ok(Some((top, first)))
    }

    /// Whether [`Chunked::add_charge`] of `run` passes no bound.
    pub(in crate::store::compact) fn charge_fits(&self, request: &[u8], run: &Run) -> bool {
        let span = Span {
            first: run.first,
            count: run.count,
        };
        let records = match &self.records {
            Some(r) => r.can_add(request, span).is_ok(),
            None => valid_request(request),
        };
        records && self.can_insert(run).is_ok()
    }

    /// Whether removing the charge under `request` and then appending
    /// `run` passes no bound.
    pub(in crate::store::compact) fn move_fits(&self, request: &[u8], run: &Run) -> bool {
        let Some(gone) = self.records.as_ref().map(|r| r.plan_cut(request, 0)) else {
            return false;
        };
        self.appends(run)
            && self.cut_fits(&gone, 1).is_ok()
            && self
                .entries
                .checked_add(run.count)
                .is_some_and(|e| e <= MAX_ENTRIES)
    }

    /// Adds `run` (members the caller checked are free, scored as the
    /// charge under `request` when there is one) as units of that charge,
    /// made when missing; or the bound it would pass (nothing changed).
    pub(in crate::store::compact) fn add_charge(
        &mut self,
        request: &[u8],
        run: Run,
    ) -> Result<(), Bound> {
        self.add_charge_found(None, request, run)
    }

    /// [`Chunked::add_charge`] with the record under `request` looked up
    /// already (`None`: no records then).
    fn add_charge_found(
        &mut self,
        found: Option<Found>,
        request: &[u8],
        run: Run,
    ) -> Result<(), Bound> {
        let span = Span {
            first: run.first,
            count: run.count,
        };
        match (&self.records, found) {
            (Some(r), Some(f)) => r.can_add_found(f, request, span)?,
            (Some(r), None) => r.can_add(request, span)?,
            (None, _) if !valid_request(request) => return Err(Bound::RequestId),
            (None, _) => {}
        }
        self.insert(run)?;
        let records = self.records.get_or_insert_with(Default::default);
        match found {
            Some(f) => records.add_span_found(f, request, run.score, span),
            None => records.add_span(request, run.score, span),
        }
    }

    /// Keeps the first `keep` units of the charge under `request` (the
    /// highest go first; none: the charge goes): removes their entries and
    /// returns how many, or the bound that splitting a run would pass
    /// (nothing changed).
    pub(in crate::store::compact) fn remove_units(
        &mut self,
        request: &[u8],
        keep: u64,
    ) -> Result<u64, Bound> {
        let Some(records) = self.records.as_ref() else {
            return Ok(0);
        };
        let gone = records.plan_cut(request, keep);
        if gone.is_empty() {
            return Ok(0);
        }
        self.cut_fits(&gone, 0)?;
        let mut removed = 0u64;
        for g in &gone {
            removed = removed.saturating_add(self.remove_span(*g));
        }
        if let Some(records) = self.records.as_mut() {
            records.cut(request, keep);
            if records.is_empty() {
                self.records = None;
            }
        }
        Ok(removed)
    }

    /// Whether removing the spans `gone` (each splitting the run it is
    /// taken out of the middle of) and then adding `more` runs passes the
    /// bound on runs or on runs out of member order.
    pub(super) fn cut_fits(&self, gone: &[Span], more: u64) -> Result<(), Bound> {
        // A span splits one run at most: when a split for each passes no
        // bound, no run need be looked up (a chunk read for each).
        let most = gone.len();
        if self.runs.saturating_add(most as u64).saturating_add(more) <= MAX_RUNS
            && self.strays.len().saturating_add(most) <= MAX_STRAYS
        {
            return Ok(());
        }
        let (mut splits, mut stray_splits) = (0u64, 0usize);
        for g in gone {
            if let Some(r) = self.run_holding(g.first) {
                if r.first < g.first && r.last() > g.last() {
                    splits += 1;
                    if self.stray_for(g.first).is_some() {
                        stray_splits += 1;
                    }
                }
            }
        }
        if self.runs.saturating_add(splits).saturating_add(more) > MAX_RUNS {
            return Err(Bound::Runs);
        }
        if self.strays.len().saturating_add(stray_splits) > MAX_STRAYS {
            return Err(Bound::Strays);
        }
        Ok(())
    }

    /// Removes the entries `span` names (all in the log), run by run from
    /// the highest; returns how many.
    pub(super) fn remove_span(&mut self, span: Span) -> u64 {
        let mut hi = span.last();
        let mut removed = 0u64;
        while let Some((r, at)) = self.run_holding_at(hi) {
            let lo = r.first.max(span.first);
            if self.cut_out(r, lo, hi, at).is_err() {
                break;
            }
            let n = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0);
            removed = removed.saturating_add(n).saturating_add(1);
            if lo <= span.first {
                break;
            }
            hi = lo.saturating_sub(1);
        }
        removed
    }
}
