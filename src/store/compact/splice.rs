//! A chunk's records found and changed in the middle (an UNDO of an
//! older entry, of a charge): the marks that bound the reading (see
//! [`Marks`]), a record replaced in place, the last record made the open
//! run again.

use super::chunk::*;
use super::run::Run;

/// Where a splice replaced records (see [`Chunk::splice_record`]): the
/// target's record at `from`, the record after it at `after_target`, the
/// bytes or bits `from .. to` replaced by `new_len`, of which the pieces'
/// records take `pieces_len`, read after to `state`; the records now end at
/// `ends`.
struct Moved {
    from: usize,
    after_target: usize,
    to: usize,
    new_len: usize,
    pieces_len: usize,
    state: (i64, i64),
    ends: usize,
}

impl Chunk {
    /// The marks after a splice (see [`Moved`]) of a record into `pieces`
    /// records: those before it kept, the one at the record after it
    /// moved after the pieces, those after moved with the records.
    fn move_marks(&mut self, mv: &Moved, pieces: usize) {
        let Some(m) = self.marks.as_deref_mut() else {
            return;
        };
        let last_before = m.list.last().is_none_or(|l| l.at <= mv.from);
        let mut dropped = false;
        let mut list: Vec<RecordAt> = Vec::with_capacity(m.list.len());
        for &mk in &m.list {
            let moved = if mk.at <= mv.from {
                mk
            } else if mk.at == mv.after_target {
                RecordAt {
                    at: mv.from.saturating_add(mv.pieces_len),
                    score: mv.state.0,
                    expected: mv.state.1,
                }
            } else {
                RecordAt {
                    at: mk
                        .at
                        .saturating_sub(mv.to.saturating_sub(mv.from))
                        .saturating_add(mv.new_len),
                    ..mk
                }
            };
            if moved.at >= mv.ends {
                // The target was the last record, and nothing is left.
                dropped = true;
            } else if list.last().is_none_or(|l| l.at < moved.at) {
                list.push(moved);
            }
        }
        m.list = list;
        if dropped {
            // More than the records after the last mark left: a mark
            // comes with the next record written.
            m.since = MARK_EVERY;
        } else if last_before {
            m.since = (m.since.saturating_add(pieces as u32)).saturating_sub(1);
        }
    }

    /// Adds the mark `r` (a record's start and its state), `before`
    /// records after the one before it.
    fn add_mark(&mut self, r: RecordAt, before: u32) {
        let Some(m) = self.marks.as_deref_mut() else {
            return;
        };
        let i = m.list.partition_point(|x| x.at < r.at);
        if m.list.get(i).is_some_and(|x| x.at == r.at) {
            return;
        }
        if i == m.list.len() {
            m.since = m.since.saturating_sub(before);
        }
        m.list.insert(i, r);
    }

    /// Where to start reading for the record holding member `id`: the
    /// last mark before it (its records before it end below `id`), else
    /// the first live record.
    fn mark_before(&self, id: i64) -> RecordAt {
        let first = RecordAt {
            at: self.start,
            score: self.base_score,
            expected: self.base_id,
        };
        let Some(m) = self.marks.as_deref() else {
            return first;
        };
        let i = m.list.partition_point(|r| r.expected <= id);
        i.checked_sub(1)
            .and_then(|i| m.list.get(i))
            .filter(|r| r.at >= self.start)
            .copied()
            .unwrap_or(first)
    }

    /// Makes the marks (see [`Marks`]) when the chunk has none and holds
    /// more than twice [`MARK_EVERY`] records: one read of the records.
    pub(super) fn make_marks(&mut self) {
        if self.marks.is_some() || self.runs <= MARKS_FROM {
            return;
        }
        let mut m = Marks::default();
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        while at < end {
            if m.since >= MARK_EVERY {
                m.list.push(RecordAt {
                    at,
                    score,
                    expected,
                });
                m.since = 0;
            }
            if self.read(&mut at, &mut score, &mut expected).is_err() {
                return;
            }
            m.since = m.since.saturating_add(1);
        }
        self.marks = Some(Box::new(m));
    }

    /// Whether the marks are sound: each where a record starts, with the
    /// state it is read after, in order, at most [`MARK_EVERY`] records
    /// apart (and from the first live record, and to the end), `since`
    /// the records after the last (the unit tests and the fuzz targets).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(super) fn check_marks(&self) -> Result<(), String> {
        let Some(m) = self.marks.as_deref() else {
            return Ok(());
        };
        let (end, mut at) = (self.end(), self.start);
        let (mut score, mut expected) = (self.base_score, self.base_id);
        let (mut next, mut gap) = (m.list.iter().peekable(), 0u32);
        while at < end {
            if let Some(&&mark) = next.peek() {
                if mark.at < at {
                    return Err(format!("mark {mark:?} is no record's start"));
                }
                if mark.at == at {
                    if (mark.score, mark.expected) != (score, expected) {
                        return Err(format!("mark {mark:?}: the state is {score}, {expected}"));
                    }
                    next.next();
                    gap = 0;
                }
            }
            self.read(&mut at, &mut score, &mut expected)
                .map_err(|e| format!("{e:?}"))?;
            gap += 1;
            if gap > MARK_EVERY {
                return Err(format!("{gap} records without a mark: {m:?}"));
            }
        }
        if let Some(extra) = next.next() {
            return Err(format!("mark {extra:?} past the records"));
        }
        if gap > m.since {
            return Err(format!(
                "since {} but {gap} records after the last mark",
                m.since
            ));
        }
        Ok(())
    }

    /// Hands the marks' blocks to `to`, which may move them (active
    /// defragmentation).
    pub(super) fn relocate_marks<R: crate::relocate::Relocate>(&mut self, to: &mut R) {
        if let Some(m) = self.marks.take() {
            let mut m = to.boxed(m);
            m.list = to.vec(std::mem::take(&mut m.list));
            self.marks = Some(m);
        }
    }

    /// How many heap blocks the marks own.
    pub(super) fn mark_block_count(&self) -> usize {
        self.marks
            .as_deref()
            .map_or(0, |m| 1 + usize::from(m.list.capacity() > 0))
    }

    /// The heap blocks the marks own (for MEMORY USAGE).
    pub(super) fn mark_blocks(&self, out: &mut Vec<*const u8>) {
        if let Some(m) = self.marks.as_deref() {
            out.push((m as *const Marks).cast());
            if m.list.capacity() > 0 {
                out.push(m.list.as_ptr().cast());
            }
        }
    }

    /// Replaces the record of `target` (one of the chunk's runs, not its
    /// last) by records of `pieces` (what is left of it, in order: none
    /// when it goes whole, two when it is split), in the chunk's kind (an
    /// UNDO of an entry in the middle of a chunk; the chunk is sealed again
    /// only when rebuilt): the target is found from the mark before it,
    /// its pieces and, when what it is read after changed, the record
    /// after it are written, and the records after those are moved as
    /// they are (each is relative to the one before, which is unchanged),
    /// so the work is a few records and a move of the bytes, never a read
    /// of the whole chunk. False, changing nothing, when `target` is not a
    /// record of the chunk, or a split would make the chunk twice its
    /// size.
    /// `place`, when given, is where [`Chunk::record_holding`] found it
    /// (nothing changed since): read from there when the chunk has no
    /// marks.
    pub(super) fn splice_record(
        &mut self,
        target: Run,
        pieces: &[Run],
        place: Option<RecordAt>,
    ) -> bool {
        let grows = pieces.len().saturating_sub(1);
        if (self.runs as usize).saturating_add(grows) > SPLICED_RUNS {
            return false;
        }
        let end = self.end();
        // From the mark before it when there are marks (counting the
        // records read, to keep them), else from where it was found.
        let marked = self.marks.is_some();
        let mark = self.mark_before(target.first);
        let (mut at, mut score, mut expected) = (mark.at, mark.score, mark.expected);
        let mut read = 0u32;
        let mut found = None;
        if let Some(p) = place.filter(|p| !marked && p.at >= self.start && p.at < end) {
            let (mut a, mut sc, mut ex) = (p.at, p.score, p.expected);
            if self.read(&mut a, &mut sc, &mut ex).ok() == Some(target) {
                found = Some((p.at, p.score, p.expected));
                (at, score, expected) = (a, sc, ex);
            }
        }
        while found.is_none() && at < end {
            let state = (at, score, expected);
            match self.read(&mut at, &mut score, &mut expected) {
                Ok(run) if run == target => {
                    found = Some(state);
                    break;
                }
                // The members increase along the chunk: it is not here.
                Ok(run) if run.first > target.first => return false,
                Ok(_) => read = read.saturating_add(1),
                Err(_) => return false,
            }
        }
        let Some((from, score0, expected0)) = found else {
            return false;
        };
        // The record after it is written again only when the state it is
        // read after changes (a head kept, or nothing: a tail kept ends
        // where the run did); the records after that are the same bytes,
        // moved.
        let (after_target, after_state) = (at, (score, expected));
        let state = pieces.last().map_or((score0, expected0), |p| {
            (p.score, p.last().saturating_add(1))
        });
        let mut next = None;
        let mut to = at;
        if at < end {
            match self.read(&mut at, &mut score, &mut expected) {
                Ok(run) => next = Some(run),
                Err(_) => return false,
            }
            if state != after_state {
                to = at;
            }
        }
        let rewrite_next = to > after_target;
        // The new records of [from, to), in the chunk's kind.
        let (mut out, mut pad) = (Vec::new(), 0u8);
        let (mut s, mut e) = (score0, expected0);
        let mut head_end = 0usize;
        for (i, &r) in pieces.iter().enumerate() {
            write_record(self.kind, &mut out, &mut pad, &mut s, &mut e, r);
            if i == 0 {
                head_end = records_len(self.kind, &out, pad);
            }
        }
        let pieces_len = records_len(self.kind, &out, pad);
        if let Some(r) = next.filter(|_| rewrite_next) {
            write_record(self.kind, &mut out, &mut pad, &mut s, &mut e, r);
        }
        let new_len = records_len(self.kind, &out, pad);
        // Records between the mark before the target and the next mark
        // (or the end): a split adds one, and a mark goes between its
        // pieces when the stretch would pass MARK_EVERY.
        let split = pieces.len() == 2 && marked && {
            let next_mark = self
                .marks
                .as_deref()
                .and_then(|m| m.list.iter().find(|r| r.at > from))
                .map_or(end, |r| r.at);
            let (mut a, mut sc, mut ex) = (after_target, after_state.0, after_state.1);
            let mut stretch = read.saturating_add(2);
            while a < next_mark && stretch <= MARK_EVERY {
                if self.read(&mut a, &mut sc, &mut ex).is_err() {
                    break;
                }
                stretch = stretch.saturating_add(1);
            }
            stretch > MARK_EVERY
        };
        self.replace_records(from, to, &out, new_len);
        if to >= end {
            self.tail_score = s;
            self.tail_expected = e;
        }
        let moved = Moved {
            from,
            after_target,
            to,
            new_len,
            pieces_len,
            state,
            ends: self.end(),
        };
        self.move_marks(&moved, pieces.len());
        if split {
            if let Some(head) = pieces.first() {
                let at = RecordAt {
                    at: from.saturating_add(head_end),
                    score: head.score,
                    expected: head.last().saturating_add(1),
                };
                self.add_mark(at, read.saturating_add(1));
            }
        }
        let kept: u64 = pieces.iter().map(|r| r.count).sum();
        self.entries = self
            .entries
            .saturating_sub(target.count)
            .saturating_add(kept);
        self.runs = (self.runs.saturating_add(pieces.len() as u32)).saturating_sub(1);
        if from == self.start {
            let first = pieces.first().or(next.as_ref()).unwrap_or(&self.last);
            self.min_id = first.first;
        }
        true
    }

    /// The run holding member `id` when a record holds it (not the last
    /// run), and where that record starts: the records are read up to it.
    /// Read from the mark before it (see [`Marks`]), when there are marks.
    pub(super) fn record_holding(&self, id: i64) -> Option<(Run, RecordAt)> {
        let end = self.end();
        let mark = self.mark_before(id);
        let (mut at, mut score, mut expected) = (mark.at, mark.score, mark.expected);
        while at < end {
            let place = RecordAt {
                at,
                score,
                expected,
            };
            let run = self.read(&mut at, &mut score, &mut expected).ok()?;
            if run.last() >= id {
                return run.holds(id).then_some((run, place));
            }
        }
        None
    }

    /// Drops the marks at or after `at` (a record's start, where the
    /// records are cut), `read` records after the last one kept: the
    /// next record written there gets a mark again when one was there.
    fn cut_marks(&mut self, at: usize, read: u32) {
        if let Some(m) = self.marks.as_deref_mut() {
            let keep = m.list.partition_point(|r| r.at < at);
            let was_there = m.list.get(keep).is_some_and(|r| r.at == at);
            m.list.truncate(keep);
            m.since = if was_there { MARK_EVERY } else { read };
        }
    }

    /// Makes the last record the open last run (the last run is gone):
    /// the records are read to find where the last one starts, and cut
    /// there. False, changing nothing, when there is no record.
    /// Read from the last mark (made first when due, see [`Marks`]).
    pub(super) fn pop_record(&mut self) -> bool {
        self.make_marks();
        let end = self.end();
        let mark = self.mark_before(i64::MAX);
        let (mut at, mut score, mut expected) = (mark.at, mark.score, mark.expected);
        let mut found = None;
        let mut read = 0u32;
        while at < end {
            let state = (at, score, expected);
            match self.read(&mut at, &mut score, &mut expected) {
                Ok(run) => found = Some((state, run, read)),
                Err(_) => return false,
            }
            read = read.saturating_add(1);
        }
        let Some(((at, score, expected), run, read)) = found else {
            return false;
        };
        self.truncate_records(at);
        self.cut_marks(at, read);
        self.tail_score = score;
        self.tail_expected = expected;
        self.last = run;
        self.max_id = run.last();
        self.runs = self.runs.saturating_sub(1);
        true
    }
}
