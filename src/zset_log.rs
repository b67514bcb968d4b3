//! The Redis-backed [`WindowLog`]: a sorted set opened with the low-level
//! key API, plus the replication of every effect.
//!
//! Replication and the AOF receive the effects with absolute values, never
//! the command: `ZREMRANGEBYSCORE key -inf <cutoff>` when the trim removed
//! something, `ZADD key <now> <member>` and `PEXPIREAT key <at>` when the call
//! was accepted. The server wraps them in MULTI/EXEC. A replica or an AOF load
//! reproduces the data without the module, and a denied call that trimmed
//! nothing propagates nothing. Keyspace notifications match what the seed's
//! Lua script would have fired.

use std::ffi::CStr;
use std::os::raw::{c_int, c_longlong};

use redis_module::{raw, Context, RedisString};

use crate::member;
use crate::window::WindowLog;
use crate::zset::{api, Key, KeyKind, ModuleString, ScoreRange, StoreError};

/// The sliding-window log stored in one sorted-set key.
pub struct ZsetLog<'c> {
    ctx: &'c Context,
    name: &'c RedisString,
    key: Key<'c>,
}

impl<'c> ZsetLog<'c> {
    /// Opens `name` for a write; a key of another type is refused with the
    /// server's WRONGTYPE error before anything changes.
    pub fn open(ctx: &'c Context, name: &'c RedisString) -> Result<Self, StoreError> {
        let key = Key::open_write(ctx, name)?;
        match key.kind()? {
            KeyKind::Empty | KeyKind::Zset => Ok(ZsetLog { ctx, name, key }),
            KeyKind::Other => Err(StoreError::WrongType),
        }
    }

    fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.key.kind()? == KeyKind::Empty)
    }

    fn notify(&self, class: c_int, event: &CStr) {
        if let Ok(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
            // SAFETY: live context, a NUL-terminated event name and the key
            // name from argv; the server copies what it keeps.
            unsafe { notify(self.ctx.ctx, class, event.as_ptr(), self.name.inner) };
        }
    }

    /// Propagates `cmd key <fmt args>` to replicas and the AOF.
    fn replicate_ll(
        &self,
        cmd: &CStr,
        a: c_longlong,
        b: Option<c_longlong>,
    ) -> Result<(), StoreError> {
        let replicate = api!(RedisModule_Replicate)?;
        // SAFETY: live context; the format string matches the arguments that
        // follow it exactly ('s' a module string, 'l' a long long).
        let status = unsafe {
            match b {
                Some(b) => replicate(
                    self.ctx.ctx,
                    cmd.as_ptr(),
                    c"sll".as_ptr(),
                    self.name.inner,
                    a,
                    b,
                ),
                None => replicate(
                    self.ctx.ctx,
                    cmd.as_ptr(),
                    c"sl".as_ptr(),
                    self.name.inner,
                    a,
                ),
            }
        };
        if status == raw::REDISMODULE_OK as c_int {
            Ok(())
        } else {
            Err(StoreError::Failed("replicating"))
        }
    }
}

impl WindowLog for ZsetLog<'_> {
    type Error = StoreError;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, StoreError> {
        if self.is_empty()? {
            return Ok(0);
        }
        // Collect first: the set must not change while a range iterates it.
        let mut stale: Vec<ModuleString> = Vec::new();
        {
            let mut range = self
                .key
                .range_first(ScoreRange::at_most(cutoff_ms as f64))?;
            while let Some((member, _)) = range.current(self.ctx)? {
                stale.push(member);
                if !range.advance()? {
                    break;
                }
            }
        }
        if stale.is_empty() {
            return Ok(0);
        }
        let mut removed = 0u64;
        for member in &stale {
            if self.key.remove(member)? {
                removed += 1;
            }
        }
        let replicate = api!(RedisModule_Replicate)?;
        // SAFETY: live context; "scl" is followed by a module string, a
        // NUL-terminated C string and a long long, in that order.
        let status = unsafe {
            replicate(
                self.ctx.ctx,
                c"ZREMRANGEBYSCORE".as_ptr(),
                c"scl".as_ptr(),
                self.name.inner,
                c"-inf".as_ptr(),
                cutoff_ms as c_longlong,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(StoreError::Failed("replicating"));
        }
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore");
        if self.is_empty()? {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        Ok(removed)
    }

    fn count(&self) -> Result<u64, StoreError> {
        self.key.cardinality()
    }

    fn newest_after(&mut self, now_ms: i64) -> Result<Option<f64>, StoreError> {
        if self.is_empty()? {
            return Ok(None);
        }
        let range = self.key.range_last(ScoreRange::above(now_ms as f64))?;
        range.current_score(self.ctx)
    }

    fn append(&mut self, now_ms: i64) -> Result<(), StoreError> {
        let score = now_ms as f64;
        let mut id = member::fresh(now_ms);
        // Among len + 1 consecutive ids at least one is free, so this loop
        // ends; it almost always ends on the first try.
        let attempts = self.key.cardinality()?.saturating_add(1);
        let mut added = false;
        for _ in 0..attempts {
            let member = ModuleString::from_i64(self.ctx, id)?;
            if self.key.add_nx(score, &member)? {
                added = true;
                break;
            }
            id = member::next(id);
        }
        if !added {
            return Err(StoreError::Failed("finding a free member"));
        }
        self.replicate_ll(c"ZADD", now_ms, Some(id))?;
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zadd");
        Ok(())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), StoreError> {
        self.key.set_abs_expire(at_ms)?;
        self.replicate_ll(c"PEXPIREAT", at_ms, None)?;
        self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
        Ok(())
    }
}
