//! The log in a key, whichever store holds it: a sorted set ([`ZsetLog`])
//! or, with `slidewin.log-type compact`, the compact log
//! ([`CompactStore`]). A missing key becomes what `slidewin.log-type` says;
//! an existing sorted set stays one (the seed script's keys, keys made
//! before the switch) until it expires; any other type is WRONGTYPE before
//! anything changes.

use redis_module::Context;

use crate::config::{self, LogType};
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::{Arg, CallError};
use crate::store::compact::store::{CompactStore, LOG_TYPE};
use crate::store::zset_log::ZsetLog;
use crate::window::{Charge, WindowLog};

pub enum KeyLog<'c> {
    Zset(ZsetLog<'c>),
    Compact(CompactStore<'c>),
}

/// What an open key holds, as a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Nothing: the key does not exist.
    Empty,
    Zset,
    Compact,
}

/// What `key` holds: a sorted set, a compact log or nothing; any other type
/// is WRONGTYPE. The one type check of the log commands (SLIDEWIN.APPLY
/// refuses a sorted set on top of it).
pub fn held(key: &Key<'_>) -> Result<Held, CallError> {
    match key.kind()? {
        KeyKind::Zset => Ok(Held::Zset),
        KeyKind::Empty => Ok(Held::Empty),
        KeyKind::Other if key.holds(&LOG_TYPE)? => Ok(Held::Compact),
        KeyKind::Other => Err(CallError::WrongType),
    }
}

/// Which store a key opened as `key` is (`None`: missing, read-only).
fn store_of(key: Option<&Key<'_>>) -> Result<Option<LogType>, CallError> {
    let Some(key) = key else {
        return Ok(None);
    };
    Ok(Some(match held(key)? {
        Held::Zset => LogType::Zset,
        Held::Empty => config::log_type(),
        Held::Compact => LogType::Compact,
    }))
}

impl<'c> KeyLog<'c> {
    fn of(ctx: &'c Context, name: &'c Arg, key: Option<Key<'c>>) -> Result<Self, CallError> {
        Ok(match store_of(key.as_ref())? {
            Some(LogType::Compact) => KeyLog::Compact(CompactStore::from_key(ctx, name, key)),
            Some(LogType::Zset) | None => KeyLog::Zset(ZsetLog::from_key(ctx, name, key)),
        })
    }

    /// Opens `name` for a write.
    pub fn open_write(ctx: &'c Context, name: &'c Arg) -> Result<Self, CallError> {
        Self::of(ctx, name, Some(Key::open_write(ctx, name)?))
    }

    /// Opens `name` for a write, with the key's expiry (absolute unix ms;
    /// `None`: it has none), read before the log takes the key: SETTLE and
    /// UNDO trim to the window it gives (`window::own_cutoff`).
    pub fn open_write_expiring(
        ctx: &'c Context,
        name: &'c Arg,
    ) -> Result<(Self, Option<i64>), CallError> {
        let key = Key::open_write(ctx, name)?;
        let at = key.abs_expire()?;
        Ok((Self::of(ctx, name, Some(key))?, at))
    }

    /// Opens `name` for reading only; a missing key reads as an empty log.
    pub fn open_read(ctx: &'c Context, name: &'c Arg) -> Result<Self, CallError> {
        Self::of(ctx, name, Key::open_read(ctx, name)?)
    }

    /// SLIDEWIN.UNDO at `now_ms`: removes the given members (or tokens);
    /// returns how many were there.
    pub fn remove_members(&mut self, members: &[Arg], now_ms: i64) -> Result<u64, CallError> {
        match self {
            KeyLog::Zset(l) => l.remove_members(members, now_ms),
            KeyLog::Compact(l) => l.remove_members(members, now_ms),
        }
    }
}

/// Forwards each call to the store the key holds.
macro_rules! forward {
    ($self:ident, $l:ident => $call:expr) => {
        match $self {
            KeyLog::Zset($l) => $call,
            KeyLog::Compact($l) => $call,
        }
    };
}

impl WindowLog for KeyLog<'_> {
    type Error = CallError;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        forward!(self, l => l.trim(cutoff_ms))
    }

    fn count(&self) -> Result<u64, CallError> {
        forward!(self, l => l.count())
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, CallError> {
        forward!(self, l => l.count_above(cutoff_ms))
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, n: u64) -> Result<Option<f64>, CallError> {
        forward!(self, l => l.nth_above(cutoff_ms, k, n))
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, CallError> {
        forward!(self, l => l.newest_above(min_ms))
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, CallError> {
        forward!(self, l => l.newest_entry())
    }

    fn has_member(&mut self, id: i64) -> Result<bool, CallError> {
        forward!(self, l => l.has_member(id))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, CallError> {
        forward!(self, l => l.add(now_ms, id))
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), CallError> {
        forward!(self, l => l.expire_at(at_ms))
    }
    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, CallError> {
        forward!(self, l => l.charge(request))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), CallError> {
        forward!(self, l => l.add_units(request, score_ms, held, to))
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, CallError> {
        forward!(self, l => l.remove_units(request, keep, held))
    }

    fn may_charge(&mut self) -> Result<(), CallError> {
        forward!(self, l => l.may_charge())
    }
}
