//! The window decision's queries on a log of chunks.

use super::super::bounds::*;
use super::super::run::*;
use super::form::Chunked;
use crate::window::NoFreeMember;

impl Chunked {
    /// Whether a chain run holds a member in `first ..= last`: the chunks
    /// whose ranges meet it are found by a binary search; at most one is
    /// decoded (a later one meeting it starts inside it).
    pub(super) fn chain_meets(&self, first: i64, last: i64) -> bool {
        self.chain_first_above(first, last, i64::MIN).is_some()
    }

    /// A chain run holding a member in `first ..= last` and scored above
    /// `cutoff_ms`, if any (at most two chunks decoded: the chain's scores
    /// increase with its members).
    pub(super) fn chain_first_above(&self, first: i64, last: i64, cutoff_ms: i64) -> Option<Run> {
        // Both are prefixes: the chain's scores increase with its members.
        let start = self
            .chunks
            .partition_point(|c| c.max_id < first)
            .max(self.chunks.partition_point(|c| c.last_score() <= cutoff_ms));
        for c in self.chunks.get(start..)?.iter() {
            if c.min_id > last {
                return None;
            }
            if c.min_id >= first && c.first_score() > cutoff_ms {
                // Its first run starts inside the range.
                return c.find_run(|_| true);
            }
            let hit = c.find_run(|r| r.score > cutoff_ms && r.first <= last && r.last() >= first);
            if hit.is_some() {
                return hit;
            }
        }
        None
    }

    /// The first of the sorted, disjoint ranges `ranges` (members `first
    /// ..= last`) that overlaps a member scored above `cutoff_ms`.
    pub(in crate::store::compact) fn first_overlap_above(
        &self,
        ranges: &[(i64, i64)],
        cutoff_ms: i64,
    ) -> Option<(i64, i64)> {
        ranges.iter().copied().find(|&(first, last)| {
            if self.chain_first_above(first, last, cutoff_ms).is_some() {
                return true;
            }
            let si = self.strays.partition_point(|s| s.last() < first);
            self.strays
                .get(si..)
                .unwrap_or(&[])
                .iter()
                .take_while(|s| s.first <= last)
                .any(|s| s.score > cutoff_ms)
        })
    }

    /// Whether member `id` is in the log and scored above `cutoff_ms`.
    pub fn holds_above(&self, id: i64, cutoff_ms: i64) -> bool {
        self.run_holding(id).is_some_and(|r| r.score > cutoff_ms)
    }
}

/// The byte-wise greatest decimal form among the ids `first ..= last`
/// (non-negative, `first <= last`): within one length the numeric order is
/// the byte order, so the candidates are the largest id of each length.
pub(in crate::store::compact) fn greatest_decimal(first: i64, last: i64) -> i64 {
    let mut best = last;
    let mut bound: i64 = 9;
    while bound < last {
        if bound >= first && bound.to_string() > best.to_string() {
            best = bound;
        }
        bound = match bound.checked_mul(10).and_then(|b| b.checked_add(9)) {
            Some(b) => b,
            None => break,
        };
    }
    best
}

/// The window decision's queries and changes, on the chunks (what
/// [`CompactLog`]'s `WindowLog` runs).
impl Chunked {
    pub(in crate::store::compact) fn trim(&mut self, cutoff_ms: i64) -> Result<u64, NoFreeMember> {
        let whole = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        let mut runs_gone: u64 = 0;
        let mut removed: u64 = 0;
        for c in self.chunks.drain(..whole) {
            removed = removed.saturating_add(c.entries);
            runs_gone = runs_gone.saturating_add(u64::from(c.runs));
        }
        // The chunk the cutoff falls in, if any: its expired records are
        // stepped over, not rewritten.
        if let Some(c) = self.chunks.first_mut() {
            if c.first_score() <= cutoff_ms {
                let runs_before = c.runs;
                removed = removed.saturating_add(c.trim_front(cutoff_ms));
                runs_gone = runs_gone.saturating_add(u64::from(runs_before.saturating_sub(c.runs)));
            }
        }
        // Expired strays (a trim takes a prefix of the canonical order: no
        // other run changes side).
        if self.strays.iter().any(|s| s.score <= cutoff_ms) {
            self.strays.retain(|s| {
                let keep = s.score > cutoff_ms;
                if !keep {
                    removed = removed.saturating_add(s.count);
                    runs_gone = runs_gone.saturating_add(1);
                }
                keep
            });
        }
        self.entries = self.entries.saturating_sub(removed);
        self.runs = self.runs.saturating_sub(runs_gone);
        if self.chunks.is_empty() && self.strays.is_empty() {
            self.max_id = None;
        }
        // The charges scored at or below the cutoff went with their entries.
        if let Some(records) = self.records.as_mut() {
            records.trim(cutoff_ms);
            if records.is_empty() {
                self.records = None;
            }
        }
        Ok(removed)
    }

    /// The entries scored above `cutoff_ms`: all of them less those at or
    /// below it (see [`Chunked::count_at_or_below`]), so the work is in the
    /// entries a trim at the cutoff would take, never in the live ones (a
    /// SETTLE raise and an effect check it before their trim; PEEK steps
    /// over the expired entries).
    pub(in crate::store::compact) fn count_above(
        &self,
        cutoff_ms: i64,
    ) -> Result<u64, NoFreeMember> {
        Ok(self
            .entries
            .saturating_sub(self.count_at_or_below(cutoff_ms)))
    }

    /// The entries scored at or below `cutoff_ms`, counted from the front:
    /// the chunks wholly there by their summaries, the records of the
    /// chunk the cutoff falls in up to it (read no further), the strays.
    pub(in crate::store::compact) fn count_at_or_below(&self, cutoff_ms: i64) -> u64 {
        let whole = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        let mut n = self
            .chunks
            .get(..whole)
            .unwrap_or(&[])
            .iter()
            .fold(0u64, |n, c| n.saturating_add(c.entries));
        if let Some(c) = self.chunks.get(whole) {
            c.find_run(|r| {
                if r.score > cutoff_ms {
                    return true;
                }
                n = n.saturating_add(r.count);
                false
            });
        }
        self.strays
            .iter()
            .filter(|s| s.score <= cutoff_ms)
            .fold(n, |n, s| n.saturating_add(s.count))
    }

    pub(in crate::store::compact) fn nth_above(
        &self,
        cutoff_ms: i64,
        k: u64,
        _n: u64,
    ) -> Result<Option<f64>, NoFreeMember> {
        if k == 0 {
            return Ok(None);
        }
        // The strays above the cutoff, by score, counted in as the walk
        // over the chain passes their scores.
        let mut strays: Vec<Run> = self
            .strays
            .iter()
            .filter(|s| s.score > cutoff_ms)
            .copied()
            .collect();
        strays.sort_unstable_by_key(|s| s.score);
        let mut next = strays.into_iter().peekable();
        let mut seen = 0u64;
        let start = self.chunks.partition_point(|c| c.last_score() <= cutoff_ms);
        for c in self.chunks.iter().skip(start) {
            // Strays scored before the chunk's first run.
            while let Some(s) = next.next_if(|s| s.score < c.first_score()) {
                seen = seen.saturating_add(s.count);
                if seen >= k {
                    return Ok(Some(s.score as f64));
                }
            }
            let strays_inside = next.peek().is_some_and(|s| s.score <= c.last_score());
            if !strays_inside && c.first_score() > cutoff_ms && seen.saturating_add(c.entries) < k {
                seen = seen.saturating_add(c.entries);
                continue;
            }
            // The runs are read up to the one holding the k-th entry only.
            let mut hit = None;
            c.find_run(|r| {
                while let Some(s) = next.next_if(|s| s.score <= r.score) {
                    seen = seen.saturating_add(s.count);
                    if seen >= k {
                        hit = Some(s.score);
                        return true;
                    }
                }
                if r.score <= cutoff_ms {
                    return false;
                }
                seen = seen.saturating_add(r.count);
                if seen >= k {
                    hit = Some(r.score);
                }
                seen >= k
            });
            if let Some(score) = hit {
                return Ok(Some(score as f64));
            }
        }
        for s in next {
            seen = seen.saturating_add(s.count);
            if seen >= k {
                return Ok(Some(s.score as f64));
            }
        }
        Ok(None)
    }

    /// The highest score, if any.
    pub(super) fn top_score(&self) -> Option<i64> {
        let chain = self.chunks.last().map(|c| c.last_score());
        let stray = self.strays.iter().map(|s| s.score).max();
        chain.into_iter().chain(stray).max()
    }

    pub(in crate::store::compact) fn newest_above(
        &self,
        min_ms: i64,
    ) -> Result<Option<f64>, NoFreeMember> {
        Ok(self.top_score().filter(|&s| s > min_ms).map(|s| s as f64))
    }

    pub(in crate::store::compact) fn newest_entry(
        &self,
    ) -> Result<Option<(f64, Option<i64>)>, NoFreeMember> {
        let Some(top) = self.top_score() else {
            return Ok(None);
        };
        // The greatest member among the runs at the highest score, in the
        // server's order of equal scores. Usually the last run alone holds
        // it; the chunks are only decoded when other runs share the score.
        let mut best: Option<i64> = None;
        let mut consider = |r: &Run| {
            let g = greatest_decimal(r.first, r.last());
            if best.is_none_or(|b| g.to_string() > b.to_string()) {
                best = Some(g);
            }
        };
        for s in self.strays.iter().filter(|s| s.score == top) {
            consider(s);
        }
        for c in self.chunks.iter().rev() {
            if c.last_score() != top {
                break;
            }
            if c.runs == 1 || c.tail_score < top {
                consider(&c.last);
            } else {
                for r in c.decode().iter().filter(|r| r.score == top) {
                    consider(r);
                }
            }
            if c.first_score() < top {
                break;
            }
        }
        Ok(Some((top as f64, best)))
    }

    /// Adds an entry scored `now_ms` under member `id`, or scored as the
    /// newest entry when `now_ms` would put more than [`MAX_STRAYS`] runs
    /// out of member order (see [`MAX_STRAYS`]): the score it was given, or
    /// `None` when the member is taken or no place keeps every bound.
    pub(in crate::store::compact) fn add(&mut self, now_ms: i64, id: i64) -> Option<i64> {
        if id < 0 || self.run_holding(id).is_some() {
            return None;
        }
        let run = Run {
            score: now_ms,
            first: id,
            count: 1,
        };
        match self.insert(run) {
            Ok(()) => Some(now_ms),
            Err(Bound::Strays) => {
                let top = self.top_score().filter(|&t| t > now_ms)?;
                self.insert(Run { score: top, ..run }).ok().map(|()| top)
            }
            Err(_) => None,
        }
    }
}
