//! The Redis-backed [`WindowLog`]: a sorted set opened with the low-level
//! key API, plus the replication of every effect.
//!
//! Replication and the AOF receive the effects with absolute values, never
//! the command: `ZREMRANGEBYSCORE key -inf <cutoff>` when the trim removed
//! something, `ZADD key <now> <member> [<now> <member> ...]` and
//! `PEXPIREAT key <at>` when the call was allowed. The server wraps them in
//! MULTI/EXEC. A replica or an AOF load reproduces the data without the
//! module, and a denied call that trimmed nothing propagates nothing.
//! Keyspace notifications match what the seed's Lua script would have fired.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

use crate::ffi::key::{Key, KeyKind, ScoreRange};
use crate::ffi::ModuleString;
use crate::ffi::{Arg, CallError, Propagate};
use crate::member;
use crate::window::{Charge, NoFreeMember, WindowLog};

/// The sliding-window log stored in one sorted-set key.
pub struct ZsetLog<'c> {
    ctx: &'c Context,
    name: &'c Arg,
    /// `None` for a missing key opened read-only: an empty log.
    key: Option<Key<'c>>,
    /// Whether this call changed the key. The module turns off the server's
    /// implicit "modified on every write-mode close" (see `lib.rs`), so a
    /// denial that trimmed nothing does not abort other clients' WATCH; the
    /// key is signalled here, once, when it really changed.
    modified: bool,
    /// The entries added since the last `expire_at`, replicated as one
    /// `ZADD` by it: the score and the first member inline (cost 1, the
    /// common case, allocates no vector), the others after them.
    added: Option<(i64, ModuleString<'c>)>,
    added_more: Vec<ModuleString<'c>>,
}

impl Drop for ZsetLog<'_> {
    fn drop(&mut self) {
        // Adds whose call failed before its expiry are still data on this
        // node: replicate them, or a replica would miss them.
        if self.added.is_some() {
            // Nothing is left to report an error to.
            let _ = self.replicate_added();
        }
        if !self.modified {
            return;
        }
        crate::ffi::signal_modified(self.ctx, self.name);
    }
}

impl From<NoFreeMember> for CallError {
    fn from(_: NoFreeMember) -> Self {
        CallError::Failed("finding a free member")
    }
}

impl<'c> ZsetLog<'c> {
    /// The log in `key`, already opened and found to be a sorted set or
    /// missing (`None`: a missing key opened read-only).
    pub fn from_key(ctx: &'c Context, name: &'c Arg, key: Option<Key<'c>>) -> Self {
        ZsetLog {
            ctx,
            name,
            key,
            modified: false,
            added: None,
            added_more: Vec::new(),
        }
    }

    /// Removes the given members (SLIDEWIN.UNDO at `now_ms`); returns how
    /// many were there. A token `<id>@<ms>` removes the entry `id` only
    /// while it is scored `ms`; a member of a charge made with a request id
    /// (`#...`) is never removed by member; anything else is removed as
    /// the member it names. Removing an id scored `now_ms` raises the
    /// fence (see `member.rs`). Replicates `ZREM key <removed members>`.
    pub fn remove_members(&mut self, members: &[Arg], now_ms: i64) -> Result<u64, CallError> {
        let ctx = self.ctx;
        let Some(key) = existing_in(&mut self.key)? else {
            return Ok(0);
        };
        let mut removed: Vec<ModuleString<'c>> = Vec::new();
        for m in members {
            let bytes = m.as_slice();
            let (name, score) = match member::parse_token(bytes) {
                Some((id, ms)) => (ModuleString::from_i64(ctx, id)?, Some(ms)),
                None if member::is_charge_member(bytes) => continue,
                None => (ModuleString::from_bytes(ctx, bytes)?, None),
            };
            let Some(held) = key.score(&name)? else {
                continue;
            };
            if score.is_some_and(|ms| held != ms as f64) {
                continue;
            }
            if key.remove(&name)? {
                if held == now_ms as f64 {
                    if let Some(id) = name.to_i64().filter(|&id| id >= 0) {
                        member::fence(now_ms, id);
                    }
                }
                removed.push(name);
            }
        }
        self.removed(removed)
    }

    /// Replicates and announces the removal of `removed`; returns how many.
    fn removed(&mut self, removed: Vec<ModuleString<'c>>) -> Result<u64, CallError> {
        if removed.is_empty() {
            return Ok(0);
        }
        self.modified = true;
        let Some(key) = self.key.as_ref() else {
            return Err(CallError::Failed("removing from a missing key"));
        };
        let emptied = key.kind()? == KeyKind::Empty;
        Propagate::new(self.ctx, c"ZREM")
            .key(self.name)
            .strings(removed.iter())
            .send()?;
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zrem");
        if emptied {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        Ok(removed.len() as u64)
    }

    /// Whether unit `unit` of the charge under `request` is in the key, and
    /// its score.
    fn unit_score(&mut self, request: &[u8], unit: u64) -> Result<Option<f64>, CallError> {
        let ctx = self.ctx;
        let Some(key) = self.existing()? else {
            return Ok(None);
        };
        let m = ModuleString::from_bytes(ctx, &member::charge_member(unit, request))?;
        key.score(&m)
    }

    /// Records an add for the `ZADD` that replicates it (see `added`).
    fn note_added(&mut self, score_ms: i64, m: ModuleString<'c>) -> Result<(), CallError> {
        match &self.added {
            None => self.added = Some((score_ms, m)),
            // Every add of one call has the same score.
            Some((at, _)) if *at == score_ms => self.added_more.push(m),
            Some(_) => return Err(CallError::Failed("adding at two times in one call")),
        }
        Ok(())
    }

    /// The key, when it exists and holds entries.
    fn existing(&mut self) -> Result<Option<&mut Key<'c>>, CallError> {
        existing_in(&mut self.key)
    }

    /// The key, for a write: from here on the call counts as a change.
    fn writable(&mut self) -> Result<&mut Key<'c>, CallError> {
        self.modified = true;
        self.key
            .as_mut()
            .ok_or(CallError::Failed("writing a read-only key"))
    }

    /// Propagates `ZADD key now m1 [now m2 ...]` for the members added
    /// since the last call (the strings themselves, no new formatting) and
    /// fires `zadd`; nothing when none was added.
    fn replicate_added(&mut self) -> Result<(), CallError> {
        let Some((now_ms, first)) = self.added.take() else {
            return Ok(());
        };
        let more = std::mem::take(&mut self.added_more);
        // One score string for every pair.
        let score = ModuleString::from_i64(self.ctx, now_ms)?;
        let mut zadd = Propagate::new(self.ctx, c"ZADD").key(self.name);
        for m in std::iter::once(&first).chain(&more) {
            zadd = zadd.string(&score).string(m);
        }
        zadd.send()?;
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zadd");
        Ok(())
    }

    fn notify(&self, class: c_int, event: &CStr) {
        crate::ffi::notify(self.ctx, class, event, self.name);
    }
}

/// The key in `slot`, when it exists and holds entries (a free function so
/// that callers can borrow the other fields of the log alongside it).
fn existing_in<'a, 'c>(
    slot: &'a mut Option<Key<'c>>,
) -> Result<Option<&'a mut Key<'c>>, CallError> {
    match slot {
        Some(key) if key.kind()? == KeyKind::Zset => Ok(Some(key)),
        _ => Ok(None),
    }
}

impl WindowLog for ZsetLog<'_> {
    type Error = CallError;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        let ctx = self.ctx;
        let Some(key) = existing_in(&mut self.key)? else {
            return Ok(0);
        };
        // Collect first: the set must not change while a range iterates it.
        let mut stale: Vec<ModuleString> = Vec::new();
        {
            let mut range = key.range_first(ScoreRange::at_most(cutoff_ms as f64))?;
            while let Some((member, _)) = range.current(ctx)? {
                stale.push(member);
                if !range.advance()? {
                    break;
                }
            }
        }
        if stale.is_empty() {
            return Ok(0);
        }
        self.modified = true;
        let mut removed = 0u64;
        for member in &stale {
            if key.remove(member)? {
                removed += 1;
            }
        }
        let emptied = key.kind()? == KeyKind::Empty;
        Propagate::new(ctx, c"ZREMRANGEBYSCORE")
            .key(self.name)
            .word(c"-inf")?
            .int(cutoff_ms)?
            .send()?;
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore");
        if emptied {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        Ok(removed)
    }

    fn count(&self) -> Result<u64, CallError> {
        match &self.key {
            Some(key) => key.cardinality(),
            None => Ok(0),
        }
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        let Some(key) = self.existing()? else {
            return Ok(0);
        };
        let total = key.cardinality()?;
        // Count the expired entries (few, usually none: CHECK trims them)
        // and subtract, instead of walking the whole window.
        let mut stale = 0u64;
        let mut range = key.range_first(ScoreRange::at_most(cutoff_ms as f64))?;
        while !range.end_reached()? {
            stale += 1;
            if !range.advance()? {
                break;
            }
        }
        Ok(total.saturating_sub(stale))
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, CallError> {
        let ctx = self.ctx;
        let Some(key) = self.existing()? else {
            return Ok(None);
        };
        if k == 0 || k > n {
            return Ok(None);
        }
        // Walk from whichever end of the window is nearer.
        let in_window = ScoreRange::above(cutoff_ms as f64);
        let from_oldest = k - 1;
        let from_newest = n - k;
        let mut range = if from_oldest <= from_newest {
            key.range_first(in_window)?
        } else {
            key.range_last(in_window)?
        };
        let forward = from_oldest <= from_newest;
        if !range.skip(from_oldest.min(from_newest), forward)? {
            return Ok(None);
        }
        range.current_score(ctx)
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, CallError> {
        let ctx = self.ctx;
        let Some(key) = self.existing()? else {
            return Ok(None);
        };
        let range = key.range_last(ScoreRange::above(min_ms as f64))?;
        range.current_score(ctx)
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, CallError> {
        let ctx = self.ctx;
        let Some(key) = self.existing()? else {
            return Ok(None);
        };
        let range = key.range_last(ScoreRange::all())?;
        Ok(range
            .current(ctx)?
            .map(|(member, score)| (score, member.to_i64().filter(|&id| id >= 0))))
    }

    fn has_member(&mut self, id: i64) -> Result<bool, CallError> {
        let ctx = self.ctx;
        let Some(key) = self.existing()? else {
            return Ok(false);
        };
        let m = ModuleString::from_i64(ctx, id)?;
        Ok(key.score(&m)?.is_some())
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, CallError> {
        let ctx = self.ctx;
        let key = self.writable()?;
        let m = ModuleString::from_i64(ctx, id)?;
        if !key.add_nx(now_ms as f64, &m)? {
            return Ok(false);
        }
        self.note_added(now_ms, m)?;
        Ok(true)
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), CallError> {
        self.replicate_added()?;
        let ctx = self.ctx;
        self.writable()?.set_abs_expire(at_ms)?;
        Propagate::new(ctx, c"PEXPIREAT")
            .key(self.name)
            .int(at_ms)?
            .send()?;
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
        Ok(())
    }

    /// Unit 1 of the charge is `#1:<request>`; its units are always the
    /// prefix `1..=units` (SETTLE removes the highest, UNDO by member never
    /// removes one), so the count is found by a binary search: O(log units)
    /// lookups, not one per unit.
    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, CallError> {
        let Some(score_ms) = self.unit_score(request, 1)? else {
            return Ok(None);
        };
        // A charge holds at most the key's entries: a key another writer
        // laid out (`#1:r`, `#2:r`, `#4:r` ... `#2^40:r`) must not make
        // UNDO or SETTLE walk 2^40 units. So `hi` stops past the entries.
        let entries = self.count()?;
        // Grow `hi` past the last unit, then search: `lo` is present, `hi`
        // is not.
        let (mut lo, mut hi) = (1u64, 2u64);
        while hi <= entries && self.unit_score(request, hi)?.is_some() {
            lo = hi;
            hi = hi.saturating_mul(2);
        }
        hi = hi.min(entries.saturating_add(1)).max(lo.saturating_add(1));
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.unit_score(request, mid)?.is_some() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Some(Charge {
            score_ms,
            units: lo,
        }))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), CallError> {
        // Every score the module gives is a whole millisecond; `as`
        // saturates whatever another writer left.
        let at = score_ms.floor() as i64;
        let ctx = self.ctx;
        for unit in held.saturating_add(1)..=to {
            let m = ModuleString::from_bytes(ctx, &member::charge_member(unit, request))?;
            if self.writable()?.add_nx(at as f64, &m)? {
                self.note_added(at, m)?;
            }
        }
        Ok(())
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, CallError> {
        let ctx = self.ctx;
        let Some(key) = existing_in(&mut self.key)? else {
            return Ok(0);
        };
        let mut removed = Vec::new();
        for unit in (keep.saturating_add(1)..=held).rev() {
            let m = ModuleString::from_bytes(ctx, &member::charge_member(unit, request))?;
            if key.remove(&m)? {
                removed.push(m);
            }
        }
        self.removed(removed)
    }
}
