//! The compact log as a key: the data type `slidewlog` (registered only when
//! `slidewin.log-type` is `compact`), the [`WindowLog`] over the value a key
//! holds, and the replication of what a call changed as one effect command,
//! `SLIDEWIN.APPLY` (see `effect.rs`).
//!
//! A call records its changes (the trim's cutoff, members removed, runs
//! added, the expiry) while it runs; when the log is dropped at the end of
//! the call they are propagated as one `SLIDEWIN.APPLY` with absolute
//! times (a single propagated command is not wrapped in MULTI/EXEC), the
//! keyspace events a sorted-set log would fire are fired, and the key is
//! signalled as modified. A denial that trimmed nothing propagates nothing.
//! A log left empty is deleted, as the server deletes an empty sorted set.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

use super::effect::{ApplyError, Effect};
use super::log::{CompactLog, Held, Hold};
use super::run::Run;
use crate::ffi::key::Key;
use crate::ffi::module_type::{ModuleType, TypeValue};
use crate::ffi::{Arg, CallError, ModuleString, Propagate, Word, MAX_WORDS};
use crate::relocate::Relocate;
use crate::window::{Charge, NoFreeMember, WindowLog};

/// The compact log's data type; registered at load only in `compact` mode.
pub static LOG_TYPE: ModuleType<CompactLog> = ModuleType::new();

/// The effect command, which the AOF rewrite writes too.
pub const APPLY: &CStr = c"SLIDEWIN.APPLY";

impl TypeValue for CompactLog {
    const NAME: &'static CStr = c"slidewlog";
    const ENCODING_VERSION: c_int = 1;
    const AOF_COMMAND: &'static CStr = APPLY;
    const AOF_WORD: &'static CStr = c"LOG";

    fn to_bytes(&self) -> Vec<u8> {
        self.encode()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let log = CompactLog::decode(bytes).map_err(|e| e.to_string())?;
        // A key never holds an empty log (the last entry's removal deletes
        // it, as for a sorted set).
        if log.count_entries() == 0 {
            return Err("an empty log".to_string());
        }
        Ok(log)
    }

    fn digest(&self, group: &mut dyn FnMut(&[i64])) {
        // Group by group: a digest holds no list of the runs.
        self.for_each_canonical_run(|r| {
            let count = i64::try_from(r.count).unwrap_or(i64::MAX);
            group(&[r.score, r.first, count]);
        });
        // Then each charge made with an ID, by request id: -1 (no score
        // is negative), the id's length and bytes (eight to an integer),
        // the score, and each span's first member and count.
        for r in self.charges() {
            let mut words: Vec<i64> = vec![-1, r.request.len() as i64];
            for piece in r.request.chunks(8) {
                let mut b = [0u8; 8];
                for (d, s) in b.iter_mut().zip(piece) {
                    *d = *s;
                }
                words.push(i64::from_le_bytes(b));
            }
            words.push(r.score);
            for s in &r.spans {
                words.push(s.first);
                words.push(i64::try_from(s.count).unwrap_or(i64::MAX));
            }
            group(&words);
        }
    }

    fn heap_blocks(&self) -> Vec<*const u8> {
        CompactLog::heap_blocks(self)
    }

    fn free_effort(&self) -> usize {
        // One deallocation per chunk: UNLINK frees a large log off the main
        // thread (the server's threshold is 64).
        self.blocks()
    }

    fn relocate<R: Relocate>(&mut self, to: &mut R) {
        CompactLog::relocate(self, to)
    }
}

thread_local! {
    /// The runs vector of the last call's effect, emptied, for the next
    /// call's: recording an add then allocates nothing. Commands run on
    /// one thread.
    static SPARE_RUNS: std::cell::Cell<Vec<Run>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An empty runs vector, the kept one when there is one.
fn spare_runs() -> Vec<Run> {
    SPARE_RUNS
        .try_with(std::cell::Cell::take)
        .unwrap_or_default()
}

/// Keeps `runs` (emptied) for the next call, unless it grew large.
fn keep_runs(mut runs: Vec<Run>) {
    if runs.capacity() <= 16 {
        runs.clear();
        let _ = SPARE_RUNS.try_with(|s| s.set(runs));
    }
}

/// The compact log in one key, for one call.
pub struct CompactStore<'c> {
    ctx: &'c Context,
    name: &'c Arg,
    /// `None` for a missing key opened read-only.
    key: Option<Key<'c>>,
    /// What this call changed, propagated when the store drops.
    effect: Effect,
    /// Whether the trim removed anything (for the event).
    trimmed: bool,
    /// Whether `finish` propagates the effect (SLIDEWIN.APPLY propagates
    /// itself verbatim instead).
    replicate: bool,
    /// What the call keeps of the key's log while it holds it (the value
    /// itself stays as small as it can be: see `log.rs`).
    hold: Hold,
}

impl<'c> CompactStore<'c> {
    /// The log in `key`, already opened and found to hold a compact log or
    /// to be missing (then the first add creates it).
    pub fn from_key(ctx: &'c Context, name: &'c Arg, key: Option<Key<'c>>) -> Self {
        CompactStore {
            ctx,
            name,
            key,
            effect: Effect {
                add: spare_runs(),
                ..Effect::default()
            },
            trimmed: false,
            replicate: true,
            hold: Hold::default(),
        }
    }

    /// The log, when the key holds one.
    fn log(&self) -> Result<Option<&CompactLog>, CallError> {
        match &self.key {
            Some(key) => key.value(&LOG_TYPE),
            None => Ok(None),
        }
    }

    /// The log for a change, created in the key when it is missing, held
    /// for the call.
    fn log_mut(&mut self) -> Result<Held<'_>, CallError> {
        let log = self
            .key
            .as_mut()
            .ok_or(CallError::Failed("writing a read-only key"))?
            .value_or_insert_with(&LOG_TYPE, CompactLog::new)?;
        let mut held = self.hold.on(log);
        held.expand();
        Ok(held)
    }

    /// The log, held for the call, when the key holds one.
    fn held(&mut self) -> Result<Option<Held<'_>>, CallError> {
        let log = match self.key.as_mut() {
            Some(key) => key.value_mut(&LOG_TYPE)?,
            None => None,
        };
        Ok(log.map(|log| {
            let mut held = self.hold.on(log);
            held.expand();
            held
        }))
    }

    /// Runs a query on the log (an empty one when the key is missing).
    fn query<R>(
        &mut self,
        f: impl FnOnce(&mut Held<'_>) -> Result<R, NoFreeMember>,
    ) -> Result<R, CallError> {
        Ok(match self.held()? {
            Some(mut log) => f(&mut log)?,
            None => f(&mut Hold::default().on(&mut CompactLog::new()))?,
        })
    }

    /// Removes the given members (SLIDEWIN.UNDO); returns how many were
    /// there. A token `<id>@<ms>` (what WITHMEMBERS hands out) removes
    /// member `id` only while it is scored `ms`; anything else is a plain
    /// member, and members that are not member ids cannot be in a compact
    /// log. The units of a charge made with an ID are never removed so.
    pub fn remove_members(&mut self, members: &[Arg], now_ms: i64) -> Result<u64, CallError> {
        let Some(log) = self.log()? else {
            return Ok(0);
        };
        // Whether entry `id` is scored exactly `ms`.
        let scored = |log: &CompactLog, id: i64, ms: i64| {
            log.holds_above(id, ms.saturating_sub(1)) && !log.holds_above(id, ms)
        };
        // The ids to remove: a token's only while its score matches, and
        // those removed at their own millisecond raise the fence.
        let mut ids = Vec::new();
        for m in members {
            let id = match crate::member::parse_token(m.as_slice()) {
                Some((id, ms)) if scored(log, id, ms) => id,
                Some(_) => continue,
                None => match crate::args::parse_i64(m.as_slice()).filter(|&id| id >= 0) {
                    Some(id) => id,
                    None => continue,
                },
            };
            // A unit of a charge made with an ID: only UNDO ... ID removes it.
            if log.charged(id) {
                continue;
            }
            if scored(log, id, now_ms) {
                crate::member::fence(now_ms, id);
            }
            ids.push(id);
        }
        let mut removed = 0u64;
        for id in ids {
            let was_there = self
                .log_mut()?
                .remove(id)
                .map_err(|b| CallError::Refused(b.message()))?;
            if was_there {
                self.effect.remove.push(id);
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The charge made under `request`: its score and units.
    pub fn charge_of(&mut self, request: &[u8]) -> Result<Option<(f64, u64)>, CallError> {
        // Held: a small log with charges is read once for the command.
        Ok(self
            .held()?
            .and_then(|mut h| h.charge_of(request))
            .map(|(score, units)| (score as f64, units)))
    }

    /// Adds units `held + 1 ..= to` to the charge under `request`, scored
    /// `score_ms` (a new charge: `held` 0; an existing one keeps its own
    /// score), under fresh member ids; the score given.
    pub fn add_charge_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<Option<f64>, CallError> {
        let n = to.saturating_sub(held);
        if n == 0 {
            return Ok(None);
        }
        // Scores are server times in ms, integers (see `bounds.rs`).
        let score = score_ms as i64;
        let raised = self
            .log_mut()?
            .raise_charge(request, score, held, to)
            .map_err(|b| CallError::Refused(b.message()))?;
        let Some(r) = raised else {
            return Err(NoFreeMember.into());
        };
        if r.moved {
            self.effect.record_cut(request, 0);
        }
        self.effect
            .record_charge(request, r.score, r.first, r.count);
        Ok(Some(r.score as f64))
    }

    /// Removes units `keep + 1 ..= held` of the charge under `request` (the
    /// highest first; all: the charge goes); how many it removed.
    pub fn remove_charge_units(&mut self, request: &[u8], keep: u64) -> Result<u64, CallError> {
        let Some(mut log) = self.held()? else {
            return Ok(0);
        };
        let removed = log
            .cut_charge(request, keep)
            .map_err(|b| CallError::Refused(b.message()))?;
        if removed > 0 {
            self.effect.record_cut(request, keep);
        }
        Ok(removed)
    }

    /// Propagates the call's effect, fires its events, signals the key and
    /// deletes the log when the call `emptied` it.
    fn finish(&mut self, emptied: bool) -> Result<(), CallError> {
        if self.effect.is_empty() {
            return Ok(());
        }
        if emptied {
            if let Some(key) = self.key.as_mut() {
                key.delete()?;
            }
        }
        let effect = &self.effect;
        if self.replicate {
            self.propagate(effect)?;
        }
        if self.trimmed {
            self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore");
        }
        if !effect.remove.is_empty() || !effect.cuts().is_empty() {
            self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zrem");
        }
        if !effect.add.is_empty() || !effect.charges().is_empty() {
            self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zadd");
        }
        if emptied {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        } else if effect.expire_at.is_some() {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        crate::ffi::signal_modified(self.ctx, self.name);
        Ok(())
    }

    /// Propagates `SLIDEWIN.APPLY key <effect>`: as words from the stack
    /// when they fit (the usual TRIM, ADD, PXAT, a few REMOVEs), else as
    /// strings.
    fn propagate(&self, effect: &Effect) -> Result<(), CallError> {
        let mut words = [Word::Int(0); MAX_WORDS];
        if let Some(n) = effect.words(&mut words) {
            return crate::ffi::replicate_words(
                self.ctx,
                APPLY,
                self.name,
                words.get(..n).unwrap_or(&[]),
            );
        }
        let args = effect.to_args();
        let strings = args
            .iter()
            .map(|a| ModuleString::from_bytes(self.ctx, a))
            .collect::<Result<Vec<_>, _>>()?;
        Propagate::new(self.ctx, APPLY)
            .key(self.name)
            .strings(strings.iter())
            .send()
    }

    fn notify(&self, class: c_int, event: &CStr) {
        crate::ffi::notify(self.ctx, class, event, self.name);
    }
}

impl Drop for CompactStore<'_> {
    fn drop(&mut self) {
        // Whether the call emptied the log (read while it is held: its
        // summary counts), then the log, held as chunks for this call, back
        // to its resting form, all before `finish` fires the events, which
        // may run other modules' code: nothing reads the log after them.
        let emptied = self
            .log()
            .ok()
            .flatten()
            .is_some_and(|l| self.hold.count(l) == 0);
        if let Some(key) = self.key.as_mut() {
            if let Ok(Some(log)) = key.value_mut(&LOG_TYPE) {
                self.hold.settle(log);
            }
        }
        // What changed is data on this node: replicate it even when the
        // call failed after changing it. Nothing is left to report to.
        let _ = self.finish(emptied);
        keep_runs(std::mem::take(&mut self.effect.add));
        self.effect.recycle();
    }
}

impl WindowLog for CompactStore<'_> {
    type Error = CallError;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        let Some(mut log) = self.held()? else {
            return Ok(0);
        };
        let removed = log.trim(cutoff_ms)?;
        if removed > 0 {
            self.trimmed = true;
            let c = self.effect.trim.map_or(cutoff_ms, |t| t.max(cutoff_ms));
            self.effect.trim = Some(c);
        }
        Ok(removed)
    }

    fn count(&self) -> Result<u64, CallError> {
        Ok(self.log()?.map_or(0, |l| self.hold.count(l)))
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        self.query(|l| l.count_above(cutoff_ms))
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, CallError> {
        self.query(|l| l.nth_above(cutoff_ms, k, n))
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, CallError> {
        self.query(|l| l.newest_above(min_ms))
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, CallError> {
        self.query(|l| l.newest_entry())
    }

    fn has_member(&mut self, id: i64) -> Result<bool, CallError> {
        self.query(|l| l.has_member(id))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, CallError> {
        // The score the entry was given (the newest one's, past the bound on
        // runs out of member order): the effect carries what was stored.
        let scored = self.log_mut()?.add_scored(now_ms, id);
        if let Some(score) = scored {
            self.effect.record_add(score, id);
        }
        Ok(scored.is_some())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), CallError> {
        self.log_mut()?.set_expiry(at_ms);
        self.key
            .as_mut()
            .ok_or(CallError::Failed("writing a read-only key"))?
            .set_abs_expire(at_ms)?;
        self.effect.expire_at = Some(at_ms);
        Ok(())
    }

    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error> {
        Ok(self
            .charge_of(request)?
            .map(|(score_ms, units)| Charge { score_ms, units }))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error> {
        self.add_charge_units(request, score_ms, held, to)
            .map(|_| ())
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, _held: u64) -> Result<u64, Self::Error> {
        self.remove_charge_units(request, keep)
    }

    fn may_charge(&mut self) -> Result<(), Self::Error> {
        let held = self.held()?.map_or(0, |mut h| h.charge_count());
        if held >= crate::config::max_charges_per_key() {
            return Err(CallError::Refused(MAX_CHARGES_REFUSAL));
        }
        Ok(())
    }
}

/// A new charge refused on a key at `slidewin.max-charges-per-key`.
pub const MAX_CHARGES_REFUSAL: &str =
    "the key holds slidewin.max-charges-per-key charges made with an ID: retry when one leaves the window, or raise the setting";

/// Applies `SLIDEWIN.APPLY`'s effect to `key` (missing, or holding a
/// compact log: the caller checked): checked first, so a refused effect
/// changes nothing; then the key's events fire as for the call that made
/// it. The caller propagates the command as it came.
pub fn apply(ctx: &Context, name: &Arg, key: Key<'_>, effect: &Effect) -> Result<(), ApplyError> {
    let mut store = CompactStore::from_key(ctx, name, Some(key));
    let Some(key) = store.key.as_mut() else {
        return Ok(());
    };
    match key.value_mut(&LOG_TYPE).map_err(ApplyError::Call)? {
        Some(log) => effect.apply(log)?,
        None => {
            let mut log = CompactLog::new();
            effect.apply(&mut log)?;
            if log.count_entries() == 0 {
                return Ok(());
            }
            key.set_value(&LOG_TYPE, log).map_err(ApplyError::Call)?;
        }
    }
    if let Some(at) = effect.expire_at {
        if key.holds(&LOG_TYPE).map_err(ApplyError::Call)? {
            key.set_abs_expire(at).map_err(ApplyError::Call)?;
        }
    }
    store.trimmed = effect.trim.is_some();
    store.effect = effect.clone();
    store.replicate = false;
    Ok(())
}
