//! Changing a log of chunks: adding runs (to the chain or the strays) and removing members.

use super::super::bounds::*;
use super::super::chunk::*;
use super::super::run::*;
use super::form::{chain_key, Chunked};

impl Chunked {
    /// Replaces chunks `range` by chunks of `runs` (chain runs in order).
    pub(super) fn replace_chunks(&mut self, range: std::ops::Range<usize>, runs: &[Run]) {
        let pieces: Vec<Chunk> = runs
            .chunks(CHUNK_RUNS)
            .filter_map(Chunk::from_runs)
            .collect();
        if range.end <= self.chunks.len() && range.start <= range.end {
            self.chunks.splice(range, pieces);
        }
    }

    /// Removes member `id` (SLIDEWIN.UNDO); whether it was there, or the
    /// bound that taking it out would pass (splitting a run in two makes
    /// one more: nothing is changed then).
    /// A unit of a charge made with an ID is never removed this way (see
    /// [`Chunked::remove_units`]): `Ok(false)`.
    pub fn remove(&mut self, id: i64) -> Result<bool, Bound> {
        if self.charged(id) {
            return Ok(false);
        }
        let Some((run, at)) = self.run_holding_at(id) else {
            return Ok(false);
        };
        self.cut_out(run, id, id, at)?;
        Ok(true)
    }

    /// Removes members `lo ..= hi`, all in `run` (a run of the log; `at`:
    /// where its record starts, when [`Chunked::run_holding_at`] said);
    /// or the bound that splitting the run in two would pass (nothing
    /// changed).
    pub(super) fn cut_out(
        &mut self,
        run: Run,
        lo: i64,
        hi: i64,
        at: Option<RecordAt>,
    ) -> Result<(), Bound> {
        let id = lo;
        // `first <= lo <= hi <= last`: no difference can overflow.
        let before = u64::try_from(lo.saturating_sub(run.first)).unwrap_or(0);
        let gone = u64::try_from(hi.saturating_sub(lo))
            .unwrap_or(0)
            .saturating_add(1);
        let after = run.count.saturating_sub(before).saturating_sub(gone);
        let splits = before > 0 && after > 0;
        if splits && self.runs >= MAX_RUNS {
            return Err(Bound::Runs);
        }
        let mut pieces = Vec::with_capacity(2);
        if before > 0 {
            pieces.push(Run {
                count: before,
                ..run
            });
        }
        if after > 0 {
            pieces.push(Run {
                score: run.score,
                first: hi.saturating_add(1),
                count: after,
            });
        }
        if let Some(si) = self.stray_for(id) {
            if splits && self.strays.len() >= MAX_STRAYS {
                return Err(Bound::Strays);
            }
            self.strays.splice(si..=si, pieces.iter().copied());
        } else {
            let Some(ci) = self.chunk_for(id) else {
                return Ok(());
            };
            // In place: the last run's members (a recent entry), or the
            // run's record replaced by its pieces (the records after it
            // written again, no other).
            let removed_in_place = self.chunks.get_mut(ci).is_some_and(|c| {
                c.remove_range_from_last(lo, hi) || c.splice_record(run, &pieces, at)
            });
            if !removed_in_place {
                let Some(mut runs) = self.chunks.get(ci).map(Chunk::decode) else {
                    return Ok(());
                };
                let Some(ri) = runs.iter().position(|r| r.holds(id)) else {
                    return Ok(());
                };
                runs.splice(ri..=ri, pieces.iter().copied());
                self.replace_chunks(ci..ci + 1, &runs);
            }
        }
        self.entries = self.entries.saturating_sub(gone);
        self.runs = (self.runs + pieces.len() as u64).saturating_sub(1);
        if self.chunks.is_empty() && self.strays.is_empty() {
            self.max_id = None;
        }
        // A stray is out of order because a run after it starts at or below
        // its end. Only this run changed, and its start only when the
        // removal took it: only a stray scored at or before it ending at or
        // above its old start may now rejoin (a cheap scan; the full one,
        // with its sort and chunk lookups, runs only then).
        let unblocks = lo == run.first
            && self
                .strays
                .iter()
                .any(|s| s.score <= run.score && s.last() >= run.first);
        if unblocks {
            self.rejoin_strays();
        }
        Ok(())
    }

    /// After a removal: the strays with no run after them starting at or
    /// below their end any more join the chain (the split stays a function
    /// of the runs). O(strays) binary searches, one chunk decoded each.
    pub(super) fn rejoin_strays(&mut self) {
        if self.strays.is_empty() {
            return;
        }
        // The strays in the canonical order, and for each the least first
        // member of the strays after it.
        let mut order: Vec<Run> = self.strays.clone();
        order.sort_unstable_by(|a, b| {
            (a.score, std::cmp::Reverse(a.first)).cmp(&(b.score, std::cmp::Reverse(b.first)))
        });
        // Wider than a member: "no run after it" is above every member,
        // i64::MAX included.
        let mut joining = Vec::new();
        let mut least_after = i128::MAX;
        for s in order.iter().rev() {
            // The first chain run after the stray: the first scored at or
            // above it (strays come before the chain among equal scores).
            let chain_next = self.chain_first_at_or_after(s.score);
            let next = chain_next
                .map_or(i128::MAX, |r| i128::from(r.first))
                .min(least_after);
            if i128::from(s.last()) < next {
                joining.push(*s);
            }
            least_after = least_after.min(i128::from(s.first));
        }
        for s in joining {
            if let Some(si) = self.stray_for(s.first) {
                self.strays.remove(si);
            }
            self.insert_chain(s);
        }
    }

    /// The first chain run scored at or after `score`.
    pub(super) fn chain_first_at_or_after(&self, score: i64) -> Option<Run> {
        let ci = self.chunks.partition_point(|c| c.last_score() < score);
        let c = self.chunks.get(ci)?;
        if c.first_score() >= score {
            return c.find_run(|_| true);
        }
        c.find_run(|r| r.score >= score)
    }

    /// Puts `run` into the chain at its place (the caller made sure it
    /// belongs there: it neither joins nor sends anything to the strays).
    pub(super) fn insert_chain(&mut self, run: Run) {
        let key = chain_key(&run);
        let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
        match self.chunks.get(ci) {
            None => {
                if self.append_chain(run) {
                    self.runs = self.runs.saturating_sub(1);
                }
            }
            Some(c) => {
                let mut runs = c.decode();
                let at = runs.partition_point(|r| chain_key(r) < key);
                runs.insert(at, run);
                self.replace_chunks(ci..ci + 1, &runs);
            }
        }
    }

    /// Appends `run` at the chain's end (after every chain run), extending
    /// the last run when it continues it.
    /// Returns whether it extended the last run (no new run).
    pub(super) fn append_chain(&mut self, run: Run) -> bool {
        match self.chunks.last_mut() {
            Some(c) if c.last.is_continued_by(run.score, run.first) => {
                c.last.count = c.last.count.saturating_add(run.count);
                c.entries = c.entries.saturating_add(run.count);
                c.max_id = c.last.last();
                return true;
            }
            Some(c) if (c.runs as usize) < CHUNK_RUNS => c.push(run),
            _ => {
                // The full chunk is sealed; the new one is written in the
                // kind chosen for it (arrivals change slowly), and sealed in
                // its own turn.
                let mut kind = BYTES;
                if let Some(c) = self.chunks.last_mut() {
                    c.seal();
                    kind = c.kind;
                }
                // Grow by a quarter, not double: a small log keeps one
                // chunk's room, a large one at most a quarter spare.
                if self.chunks.len() == self.chunks.capacity() {
                    self.chunks.reserve_exact((self.chunks.len() / 4).max(1));
                }
                self.chunks.push(Chunk {
                    kind,
                    ..Chunk::of(run)
                });
            }
        }
        false
    }

    /// What inserting `run` would take: whether it goes to the chain, and
    /// how many chain runs it sends to the strays; or the bound it would
    /// pass. Nothing is changed.
    pub(super) fn plan(&self, run: &Run) -> Result<(bool, usize), Bound> {
        let key = chain_key(run);
        let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
        // The first chain run after the run's place in the chain is in
        // chunk `ci`, so its first member is at most that chunk's largest:
        // a run above it (fresh members at an older score: a SETTLE
        // raise) is no chain run, and the chunk need not be read.
        let chain = self.chunks.get(ci).is_none_or(|c| c.max_id >= run.first) && {
            let succ = self
                .chunks
                .get(ci)
                .and_then(|c| c.find_run(|r| chain_key(&r) >= key));
            // Wider than a member: "no run after it" is above every member.
            let stray_after = self
                .strays
                .iter()
                .filter(|s| s.score > run.score)
                .map(|s| i128::from(s.first))
                .min()
                .unwrap_or(i128::MAX);
            let next = succ
                .map_or(i128::MAX, |s| i128::from(s.first))
                .min(stray_after);
            i128::from(run.last()) < next
        };
        // The chain runs before it (scored at or below it with smaller
        // members when it joins the chain, scored below it when it does
        // not) ending at or above its first member become strays: a
        // stretch at the end of that part of the chain.
        let capacity = MAX_STRAYS.saturating_sub(self.strays.len());
        let flips = self.chain_tail_at_or_above(run, chain, capacity.saturating_add(1));
        let new_strays = flips.saturating_add(usize::from(!chain));
        if new_strays > capacity {
            return Err(Bound::Strays);
        }
        Ok((chain, flips))
    }

    /// How many chain runs before `run`'s place (see `plan`) end at or
    /// above its first member, counting up to `most`.
    pub(super) fn chain_tail_at_or_above(&self, run: &Run, chain: bool, most: usize) -> usize {
        let before = |r: &Run| {
            if chain {
                chain_key(r) < chain_key(run)
            } else {
                r.score < run.score
            }
        };
        // Chunks before `end` lie wholly before the place; chunk `end`, if
        // any, holds it.
        let end = self.chunks.partition_point(|c| before(&c.last));
        // The chain's members increase: when chunk `end` ends below the
        // run's first member, so does every run before it (a SETTLE raise's
        // fresh members), and no chunk need be read.
        if self.chunks.get(end).is_some_and(|c| c.max_id < run.first) {
            return 0;
        }
        let mut n = 0usize;
        if let Some(c) = self.chunks.get(end) {
            let runs = c.decode();
            let upto = runs.partition_point(before);
            let head = runs.get(..upto).unwrap_or(&[]);
            let tail = head
                .iter()
                .rev()
                .take_while(|r| r.last() >= run.first)
                .count();
            n = tail;
            if tail < upto {
                return n;
            }
        }
        for c in self.chunks.get(..end).unwrap_or(&[]).iter().rev() {
            if n > most || c.max_id < run.first {
                break;
            }
            if c.min_id >= run.first {
                n = n.saturating_add(c.runs as usize);
                continue;
            }
            let tail = c
                .decode()
                .iter()
                .rev()
                .take_while(|r| r.last() >= run.first)
                .count();
            n = n.saturating_add(tail);
            break;
        }
        n
    }

    /// Adds a whole run whose members the caller checked are free and
    /// valid (see `effect.rs`), joining the run before it as `add` would;
    /// or the bound it would pass (nothing changed).
    pub fn add_run(&mut self, run: Run) -> Result<(), Bound> {
        self.insert(run)
    }

    /// Whether `run` can be inserted without passing a bound.
    pub(in crate::store::compact) fn can_insert(&self, run: &Run) -> Result<(), Bound> {
        // At the bound, only an entry extending the last run (no new run).
        let extends = self.appends(run)
            && self
                .chunks
                .last()
                .is_some_and(|c| c.last.is_continued_by(run.score, run.first));
        if self.runs >= MAX_RUNS && !extends {
            return Err(Bound::Runs);
        }
        if self
            .entries
            .checked_add(run.count)
            .is_none_or(|e| e > MAX_ENTRIES)
        {
            return Err(Bound::Entries);
        }
        if self.appends(run) {
            return Ok(());
        }
        self.plan(run).map(|_| ())
    }

    /// Whether `run` goes at the chain's end with nothing else to do: the
    /// common case (a CHECK's entries), O(1).
    pub(in crate::store::compact) fn appends(&self, run: &Run) -> bool {
        match self.chunks.last() {
            None => self.strays.is_empty(),
            Some(c) => chain_key(&c.last) < chain_key(run) && c.last.last() < run.first,
        }
    }

    /// Inserts `run` at its place in the canonical order: the chain's end,
    /// its place in the chain, or the strays (sending the chain runs it
    /// puts out of order there too), joining the run before it when that
    /// one has the same score and ends just before it.
    pub(in crate::store::compact) fn insert(&mut self, run: Run) -> Result<(), Bound> {
        self.can_insert(&run)?;
        self.entries = self.entries.saturating_add(run.count);
        self.runs = self.runs.saturating_add(1);
        self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
        if self.appends(&run) {
            if self.append_chain(run) {
                self.runs = self.runs.saturating_sub(1);
            }
            return Ok(());
        }
        let (chain, flips) = self.plan(&run)?;
        if flips > 0 {
            self.send_to_strays(&run, chain, flips);
        }
        if chain {
            // Joins the chain run before it when it continues it.
            let key = chain_key(&run);
            let ci = self.chunks.partition_point(|c| chain_key(&c.last) < key);
            if ci == self.chunks.len() {
                if self.append_chain(run) {
                    self.runs = self.runs.saturating_sub(1);
                }
                return Ok(());
            }
            let Some(mut runs) = self.chunks.get(ci).map(Chunk::decode) else {
                return Ok(());
            };
            let at = runs.partition_point(|r| chain_key(r) < key);
            let joins = |p: &Run| p.is_continued_by(run.score, run.first);
            if at == 0 {
                if let Some(prev) = ci.checked_sub(1).and_then(|p| self.chunks.get_mut(p)) {
                    if joins(&prev.last) {
                        prev.last.count = prev.last.count.saturating_add(run.count);
                        prev.entries = prev.entries.saturating_add(run.count);
                        prev.max_id = prev.last.last();
                        self.runs = self.runs.saturating_sub(1);
                        return Ok(());
                    }
                }
                runs.insert(0, run);
            } else {
                match runs.get_mut(at - 1) {
                    Some(prev) if joins(prev) => {
                        prev.count = prev.count.saturating_add(run.count);
                        self.runs = self.runs.saturating_sub(1);
                    }
                    _ => runs.insert(at, run),
                }
            }
            self.replace_chunks(ci..ci + 1, &runs);
        } else {
            // Joins the stray it continues (the entries of one call).
            let si = self.strays.partition_point(|s| s.first < run.first);
            match si.checked_sub(1).and_then(|p| self.strays.get_mut(p)) {
                Some(prev) if prev.is_continued_by(run.score, run.first) => {
                    prev.count = prev.count.saturating_add(run.count);
                    self.runs = self.runs.saturating_sub(1);
                }
                _ => self.strays.insert(si, run),
            }
        }
        Ok(())
    }

    /// Moves the last `flips` chain runs before `run`'s place (see `plan`)
    /// to the strays.
    pub(super) fn send_to_strays(&mut self, run: &Run, chain: bool, flips: usize) {
        let before = |r: &Run| {
            if chain {
                chain_key(r) < chain_key(run)
            } else {
                r.score < run.score
            }
        };
        let Some(last_chunk) = self.chunks.len().checked_sub(1) else {
            return;
        };
        let end = self.chunks.partition_point(|c| before(&c.last));
        // The chunks from the first holding a moved run to the one holding
        // the place (or the last), decoded, cut, and written again.
        let last = end.min(last_chunk);
        let mut start = last;
        let mut seen = 0usize;
        while let Some(c) = self.chunks.get(start) {
            let upto = if start == end {
                c.decode().iter().filter(|r| before(r)).count()
            } else {
                c.runs as usize
            };
            seen = seen.saturating_add(upto);
            if seen >= flips || start == 0 {
                break;
            }
            start -= 1;
        }
        let mut runs: Vec<Run> = Vec::new();
        for c in self.chunks.get(start..=last).unwrap_or(&[]) {
            runs.extend(c.decode());
        }
        let place = runs.partition_point(before);
        let from = place.saturating_sub(flips);
        let moved: Vec<Run> = runs.drain(from..place).collect();
        for m in moved {
            let si = self.strays.partition_point(|s| s.first < m.first);
            self.strays.insert(si, m);
        }
        self.replace_chunks(start..last + 1, &runs);
    }
}
