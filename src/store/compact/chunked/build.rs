//! Building a log of chunks: from runs, from an encoding (untrusted bytes), and its encoding.

use super::super::bounds::*;
use super::super::charge::*;
use super::super::chunk::*;
use super::super::codec::*;
use super::super::form_codec::{put_form_run, put_head, read_form_run, read_head, Head};
use super::super::run::*;
use super::form::Chunked;

struct Builder {
    chunks: Vec<Chunk>,
    /// The chain's tail not yet cut into chunks (a run arriving below it
    /// sends part of it to the strays): at most `2 * CHUNK_RUNS`.
    pending: Vec<Run>,
    strays: Vec<Run>,
    entries: u64,
    runs: u64,
    max_id: Option<i64>,
    /// A block the first chunk's records may reuse.
    spare: Vec<u8>,
}

impl Builder {
    fn new() -> Builder {
        Self::with(Vec::new(), (Vec::new(), Vec::new()))
    }

    /// A builder reusing a block for the first chunk's records and the
    /// lists' allocations (emptied).
    fn with(spare: Vec<u8>, (mut chunks, mut strays): (Vec<Chunk>, Vec<Run>)) -> Builder {
        chunks.clear();
        strays.clear();
        Builder {
            chunks,
            pending: Vec::new(),
            strays,
            entries: 0,
            runs: 0,
            max_id: None,
            spare,
        }
    }

    /// The chain's last run, taken off (from the pending tail, or from the
    /// last chunk, whose runs become the pending tail again).
    fn pop_chain(&mut self) -> Option<Run> {
        if self.pending.is_empty() {
            let c = self.chunks.pop()?;
            self.pending = c.decode();
        }
        self.pending.pop()
    }

    fn chain_last(&self) -> Option<Run> {
        self.pending
            .last()
            .copied()
            .or_else(|| self.chunks.last().map(|c| c.last))
    }

    /// Adds the next run in order. Its score must not be below the last
    /// one's (the readers make sure of it: gaps are unsigned).
    fn push(&mut self, run: Run) -> Result<(), DecodeError> {
        if !(0..=MAX_SCORE).contains(&run.score) || run.first < 0 || run.count == 0 {
            return Err(DecodeError::Range);
        }
        self.entries = self
            .entries
            .checked_add(run.count)
            .filter(|&e| e <= MAX_ENTRIES)
            .ok_or(DecodeError::Bound(Bound::Entries))?;
        self.runs = self.runs.saturating_add(1);
        if self.runs > MAX_RUNS {
            return Err(DecodeError::Bound(Bound::Runs));
        }
        self.max_id = Some(self.max_id.map_or(run.last(), |m| m.max(run.last())));
        // Chain runs ending at or above this run's first member have a run
        // after them that starts below their end: strays.
        while self.chain_last().is_some_and(|t| t.last() >= run.first) {
            if let Some(t) = self.pop_chain() {
                self.strays.push(t);
            }
            if self.strays.len() > MAX_STRAYS {
                return Err(DecodeError::Bound(Bound::Strays));
            }
        }
        self.pending.push(run);
        if self.pending.len() >= 2 * CHUNK_RUNS {
            let rest = self.pending.split_off(CHUNK_RUNS);
            let full = std::mem::replace(&mut self.pending, rest);
            self.commit(&full);
        }
        Ok(())
    }

    /// Cuts `runs` (chain runs, in order) into a chunk after the others.
    fn commit(&mut self, runs: &[Run]) {
        let Some((&first, rest)) = runs.split_first() else {
            return;
        };
        if self.chunks.is_empty() && self.spare.capacity() > 0 && runs.len() < CHUNK_RUNS {
            // A small log's promotion: the records go into the block kept
            // for them (written as bytes, as the calls append).
            let mut c = Chunk::of_in(first, std::mem::take(&mut self.spare));
            for &r in rest {
                c.push(r);
            }
            self.chunks.push(c);
            return;
        }
        if let Some(c) = self.chunks.last_mut() {
            c.seal();
        }
        self.chunks.extend(Chunk::from_runs(runs));
    }

    /// The log: the strays checked against each other and against the
    /// chain (members unique over the log).
    fn finish(mut self, expire_at_ms: Option<i64>) -> Result<Chunked, DecodeError> {
        let pending = std::mem::take(&mut self.pending);
        for piece in pending.chunks(CHUNK_RUNS) {
            self.commit(piece);
        }
        self.strays.sort_unstable_by_key(|r| r.first);
        if self.strays.windows(2).any(|w| w[1].first <= w[0].last()) {
            return Err(DecodeError::Invalid);
        }
        let mut c = Chunked {
            chunks: self.chunks,
            strays: self.strays,
            entries: self.entries,
            runs: self.runs,
            max_id: self.max_id,
            expire_at_ms,
            stash: Vec::new(),
            records: None,
        };
        if c.strays.iter().any(|s| c.chain_meets(s.first, s.last())) {
            return Err(DecodeError::Invalid);
        }
        c.chunks.shrink_to_fit();
        c.strays.shrink_to_fit();
        Ok(c)
    }
}

/// Why the records builder refused a record.
fn refused(b: Option<Bound>) -> DecodeError {
    match b {
        Some(b) => DecodeError::Bound(b),
        None => DecodeError::Invalid,
    }
}

impl Chunked {
    /// A log of `runs` (in score order, members unique).
    #[cfg(test)]
    pub(in crate::store::compact) fn from_runs(runs: &[Run], expire_at_ms: Option<i64>) -> Chunked {
        let mut b = Builder::new();
        for &r in runs {
            if b.push(r).is_err() {
                return Chunked::default();
            }
        }
        b.finish(expire_at_ms).unwrap_or_default()
    }

    /// Replaces the log by the one `bytes` encode, reusing this one's
    /// allocations. For the module's own encodings (a small form it wrote),
    /// checked all the same: unreadable bytes leave an empty log (as
    /// [`CompactLog::view`] does).
    pub(in crate::store::compact) fn decode_own(&mut self, bytes: &[u8]) {
        let spare = self
            .chunks
            .drain(..)
            .next()
            .map(|c| c.bytes)
            .unwrap_or_default();
        let stash = std::mem::take(&mut self.stash);
        let mut lists = (
            std::mem::take(&mut self.chunks),
            std::mem::take(&mut self.strays),
        );
        lists.1.clear();
        *self = if bytes.is_empty() {
            Chunked {
                chunks: lists.0,
                strays: lists.1,
                ..Chunked::default()
            }
        } else {
            Self::decode_with(bytes, Builder::with(spare, lists), true).unwrap_or_default()
        };
        self.stash = stash;
    }

    /// The encoding (see the module comment).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.min(1 << 16) as usize * 2);
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoding to `out`: the runs in the canonical order.
    /// Version 1 without charge records, 2 with them.
    pub(in crate::store::compact) fn encode_into(&self, out: &mut Vec<u8>) {
        self.write(out, false)
    }

    /// Appends a small log's form in memory to `out` (see `form_codec.rs`),
    /// its charge records in the tighter form of `codec.rs`'s
    /// `put_small_records`. Never carried out of the process:
    /// [`CompactLog::encode`] writes version 1 or 2. A log of more charges
    /// than a small form holds is written as its encoding (the callers
    /// check first).
    ///
    /// [`CompactLog::encode`]: super::super::log::CompactLog::encode
    pub(in crate::store::compact) fn encode_small_into(&self, out: &mut Vec<u8>) {
        self.write(out, true)
    }

    fn write(&self, out: &mut Vec<u8>, small: bool) {
        let records = self.records.as_deref().filter(|r| !r.is_empty());
        // A small form only of what it holds (the callers check first).
        if small && records.is_none_or(|r| r.len() <= SMALL_CHARGES) {
            let mut head = Head {
                charges: records.is_some(),
                runs: self.runs,
                first_score: 0,
                first_member: 0,
                expire_at_ms: self.expire_at_ms,
            };
            let mut state: Option<(i64, i64)> = None;
            self.for_each_run(|r| {
                let (score, expected) = state.get_or_insert_with(|| {
                    head.first_score = r.score;
                    head.first_member = r.first;
                    put_head(out, &head);
                    (r.score, r.first)
                });
                put_form_run(out, score, expected, r);
            });
            if state.is_none() {
                head.runs = 0;
                put_head(out, &head);
            }
            if let Some(records) = records {
                put_small_records(out, records);
            }
            return;
        }
        let version = match records {
            None => VERSION,
            Some(_) => VERSION_CHARGES,
        };
        write_header_of(out, version, self.expire_at_ms, self.runs);
        let mut runs = RunWriter::default();
        self.for_each_run(|r| runs.put(out, r));
        if let Some(records) = records {
            put_records(out, records.len(), records.iter());
        }
    }

    /// The score of members `span`, when the log holds them all at one
    /// score: each step moves past a run (the one holding the next member
    /// needed), the first usually all of it.
    fn score_of_span(&self, span: Span) -> Option<i64> {
        let last = span.last();
        let run = self.run_holding(span.first)?;
        let mut covered = run.last();
        while covered < last {
            // `covered < last`: no overflow; the run holding the next
            // member ends past `covered`.
            let next = self
                .run_holding(covered.saturating_add(1))
                .filter(|r| r.score == run.score)?;
            covered = next.last();
        }
        Some(run.score)
    }

    /// Decodes bytes from anywhere (RDB, RESTORE, a client): a log that
    /// holds every invariant and bound, or why not. It holds nothing but
    /// the log it builds (no list of every run).
    pub fn decode(bytes: &[u8]) -> Result<Chunked, DecodeError> {
        Self::decode_with(bytes, Builder::new(), false)
    }

    /// Decodes a small log's form in memory (the module's own bytes, see
    /// [`Chunked::encode_small_into`]), checked as [`Chunked::decode`]
    /// checks any bytes.
    pub(in crate::store::compact) fn decode_small(bytes: &[u8]) -> Result<Chunked, DecodeError> {
        Self::decode_with(bytes, Builder::new(), true)
    }

    /// `own`: the bytes are a small form in memory (see `form_codec.rs`),
    /// which bytes from outside never are.
    fn decode_with(bytes: &[u8], mut b: Builder, own: bool) -> Result<Chunked, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        // The expiry, and where the charge records are: a version 2
        // payload's, or a small form's (to the end).
        let (expire_at_ms, stored_charges, small_charges) = if own {
            let head = read_head(&mut r)?;
            check_run_count(head.runs, bytes.len().saturating_sub(r.at))?;
            let (mut score, mut expected) = (head.first_score, head.first_member);
            for _ in 0..head.runs {
                b.push(read_form_run(&mut r, &mut score, &mut expected)?)?;
            }
            (head.expire_at_ms, false, head.charges)
        } else {
            let header = read_header(&mut r)?;
            let n = header.runs;
            check_run_count(n, bytes.len().saturating_sub(r.at))?;
            if n > 0 {
                let mut score = unzigzag(r.varint()?);
                let mut expected = 1i64;
                for _ in 0..n {
                    let run = read_run(&mut r, &mut score, &mut expected)?;
                    b.push(run)?;
                }
            }
            (
                header.expire_at_ms,
                header.version == VERSION_CHARGES,
                false,
            )
        };
        // A version 2 payload: the charge records, each checked as it is
        // read (bounds, order), then all against the log in one pass.
        let records = if stored_charges {
            let n = read_record_count(&mut r)?;
            let mut records = RecordsBuilder::default();
            for _ in 0..n {
                records.push(read_record(&mut r)?).map_err(refused)?;
            }
            Some(records.finish().map_err(|()| DecodeError::Invalid)?)
        } else {
            None
        };
        // A small form's records, to the end: read once the log is built
        // (each is scored as the entry of its first unit).
        let small_at = small_charges.then_some(r.at);
        if small_at.is_some() {
            r.at = bytes.len();
        }
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing);
        }
        let mut log = b.finish(expire_at_ms)?;
        if let Some(at) = small_at {
            // Every unit an entry at its record's score, checked as read.
            let records = read_small_records(
                &mut Reader { bytes, at },
                |span| log.score_of_span(span),
                |span, score| log.score_of_span(span) == Some(score),
            )?;
            log.records = Some(Box::new(records));
        }
        if let Some(records) = records {
            if !log.holds_units_of(&records) {
                return Err(DecodeError::Invalid);
            }
            log.records = Some(Box::new(records));
        }
        Ok(log)
    }
}

/// Refuses a run count past the bound, or past what `left` bytes hold
/// (each run takes at least one byte: a count beyond them is a lie, refused
/// before anything is built for it).
fn check_run_count(n: u64, left: usize) -> Result<(), DecodeError> {
    if n > MAX_RUNS {
        return Err(DecodeError::Bound(Bound::Runs));
    }
    if n > left as u64 {
        return Err(DecodeError::Truncated);
    }
    Ok(())
}
