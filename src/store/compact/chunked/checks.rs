//! The invariants every log of chunks holds, checked by the unit tests and the fuzz targets.

use super::super::bounds::*;
use super::super::run::*;
use super::form::{chain_key, Chunked};

/// What every log holds, checked by the unit tests after each change: the
/// chain's members increase with its keys, the chunks' bounds are exact,
/// the strays are sorted and disjoint, the totals add up, and the split is
/// the one the decoder finds in the canonical order. Also the fuzz targets'
/// oracle (feature `fuzzing`, through [`CompactLog::check`]).
#[cfg(any(test, feature = "fuzzing"))]
impl Chunked {
    pub(in crate::store::compact) fn check(&self) -> Result<(), String> {
        let mut prev: Option<Run> = None;
        let (mut entries, mut runs) = (0u64, 0u64);
        for c in &self.chunks {
            c.check_marks()?;
            let rs = c.decode();
            let (Some(first), Some(last)) = (rs.first(), rs.last()) else {
                return Err("an empty chunk".into());
            };
            if c.min_id != first.first || c.max_id != last.last() || c.runs as usize != rs.len() {
                return Err(format!(
                    "chunk bounds {}..{} / {} runs, runs {rs:?}",
                    c.min_id, c.max_id, c.runs
                ));
            }
            if c.entries != rs.iter().map(|r| r.count).sum::<u64>() {
                return Err("chunk entries".into());
            }
            for r in rs {
                if let Some(p) = prev {
                    if chain_key(&p) >= chain_key(&r) || p.last() >= r.first {
                        return Err(format!("chain out of order: {p:?} then {r:?}"));
                    }
                }
                prev = Some(r);
                entries += r.count;
                runs += 1;
            }
        }
        if self.strays.len() > MAX_STRAYS {
            return Err("too many strays".into());
        }
        if self.strays.windows(2).any(|w| w[0].last() >= w[1].first) {
            return Err(format!("strays unsorted or overlapping: {:?}", self.strays));
        }
        for s in &self.strays {
            entries += s.count;
            runs += 1;
            if self.chain_meets(s.first, s.last()) {
                return Err(format!("stray {s:?} meets the chain"));
            }
        }
        if entries != self.entries || runs != self.runs {
            return Err(format!(
                "totals {} / {} against {entries} / {runs}",
                self.entries, self.runs
            ));
        }
        if runs > MAX_RUNS || entries > MAX_ENTRIES {
            return Err("past a bound".into());
        }
        if let Some(m) = self.max_id {
            if self.runs().iter().any(|r| r.last() > m) {
                return Err("max_id below a member".into());
            }
        } else if runs > 0 {
            return Err("no max_id".into());
        }
        if let Some(records) = &self.records {
            records.check()?;
            if !self.holds_units_of(records) {
                return Err(format!(
                    "a charge's units are not entries at its score: {records:?}"
                ));
            }
        }
        let again =
            Chunked::decode(&self.encode()).map_err(|e| format!("does not load again: {e}"))?;
        if again.records != self.records {
            return Err(format!(
                "the charges do not load again the same: {:?} against {:?}",
                self.records, again.records
            ));
        }
        if again.strays != self.strays || again.runs() != self.runs() {
            return Err(format!(
                "the split is not the canonical one: strays {:?} against {:?}",
                self.strays, again.strays
            ));
        }
        Ok(())
    }
}
