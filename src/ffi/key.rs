//! The key handle: a small safe wrapper around the low-level key API, for a
//! key of any type (a sorted set, a module value, or a type to refuse).
//!
//! The `redis-module` crate does not wrap sorted sets, so this module makes
//! the raw calls on keys and strings: opening and closing a key, reading its
//! type and length, score-range iteration, adding, removing and setting an
//! absolute expiry, and reading the strings it hands back. Strings ([`ModuleString`]) and every
//! other raw call (replication, notifications, the clock, INFO, ...) are in
//! the rest of `ffi/`, which imports nothing of this file. Resources are released by `Drop` (RAII): a [`Key`]
//! closes its handle, a [`Range`] stops its iterator (a `ModuleString` frees its
//! string). Every function pointer is checked for null before use
//! and reported as an error instead of unwrapped.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

use redis_module::{raw, Context};

use super::base::{api, status as ok_status, CallError};
use super::module_type::{ModuleType, TypeValue};
use super::string::{ModuleString, RawString};

/// What a key holds, as far as slidewin cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Zset,
    Other,
}

/// A module value a key holds: its type's server handle and its pointer.
type ModuleValue = (NonNull<raw::RedisModuleType>, NonNull<c_void>);

/// An open key handle, closed on drop. Borrowing the context for `'c` keeps
/// the handle from outliving the command that opened it.
pub struct Key<'c> {
    ptr: NonNull<raw::RedisModuleKey>,
    /// The module value the key holds and its type, once read: a command
    /// reaches the compact log several times (trim, count, add, expiry,
    /// settle), and each reading was a type check and a value lookup of the
    /// server's. This handle's `set_value` and `delete` update it. Nothing
    /// else may change what the key holds while the handle is open: slidewin
    /// opens one handle per key per command (MCHECK opens a repeated key
    /// once), and a write from elsewhere meanwhile (another module's
    /// keyspace-event subscriber deleting the key) would leave the server's
    /// own handle pointing at a freed object just the same: it keeps the
    /// value object it found at open. Active defragmentation, which moves
    /// values, runs between commands.
    module: std::cell::Cell<Option<ModuleValue>>,
    _ctx: PhantomData<&'c Context>,
}

/// `RedisModule_ZsetFirstInScoreRange` and `RedisModule_ZsetLastInScoreRange`.
// SAFETY: a function type, not an unsafe block; its one call site says why
// the call is sound.
type RangeStart = unsafe extern "C" fn(*mut raw::RedisModuleKey, f64, f64, c_int, c_int) -> c_int;

/// A score interval for range iteration.
#[derive(Debug, Clone, Copy)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub min_exclusive: bool,
    pub max_exclusive: bool,
}

impl ScoreRange {
    /// `[-inf, max]`: everything scored at or below `max`.
    pub fn at_most(max: f64) -> Self {
        ScoreRange {
            min: f64::NEG_INFINITY,
            max,
            min_exclusive: false,
            max_exclusive: false,
        }
    }

    /// `[-inf, +inf]`: every entry.
    pub fn all() -> Self {
        Self::at_most(f64::INFINITY)
    }

    /// `(min, +inf]`: everything scored strictly above `min`.
    pub fn above(min: f64) -> Self {
        ScoreRange {
            min,
            max: f64::INFINITY,
            min_exclusive: true,
            max_exclusive: false,
        }
    }
}

impl<'c> Key<'c> {
    /// Opens `name` for reading and writing.
    pub fn open_write(ctx: &'c Context, name: &impl RawString) -> Result<Self, CallError> {
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_WRITE;
        Self::open(ctx, name, mode)?.ok_or(CallError::Failed("opening the key"))
    }

    /// Opens `name` for reading only; `None` when the key does not exist
    /// (older servers return no handle for a missing key in read mode).
    pub fn open_read(ctx: &'c Context, name: &impl RawString) -> Result<Option<Self>, CallError> {
        Self::open(ctx, name, raw::REDISMODULE_READ)
    }

    fn open(ctx: &'c Context, name: &impl RawString, mode: u32) -> Result<Option<Self>, CallError> {
        let open = api!(RedisModule_OpenKey)?;
        // SAFETY: `ctx.ctx` is the live command context and `name` a valid
        // string owned by the command's argv for the whole call.
        let ptr = unsafe { open(ctx.ctx, name.raw(), mode as c_int) };
        Ok(
            NonNull::new(ptr.cast::<raw::RedisModuleKey>()).map(|ptr| Key {
                ptr,
                module: std::cell::Cell::new(None),
                _ctx: PhantomData,
            }),
        )
    }

    fn raw(&self) -> *mut raw::RedisModuleKey {
        self.ptr.as_ptr()
    }

    /// The type of the value, or `Empty` when the key does not exist.
    pub fn kind(&self) -> Result<KeyKind, CallError> {
        Ok(match self.raw_kind()? {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        })
    }

    fn raw_kind(&self) -> Result<isize, CallError> {
        let key_type = api!(RedisModule_KeyType)?;
        // SAFETY: the handle is open until `self` drops.
        Ok(unsafe { key_type(self.raw()) } as isize)
    }

    /// The number of members (0 for a missing key).
    pub fn cardinality(&self) -> Result<u64, CallError> {
        let value_length = api!(RedisModule_ValueLength)?;
        // SAFETY: the handle is open until `self` drops.
        let n = unsafe { value_length(self.raw()) };
        Ok(n as u64)
    }

    /// Starts iterating the members scored within `range`, lowest first.
    /// The iterator stops when the returned [`Range`] drops.
    pub fn range_first(&mut self, range: ScoreRange) -> Result<Range<'_, 'c>, CallError> {
        self.start_range(api!(RedisModule_ZsetFirstInScoreRange)?, range)
    }

    /// Starts iterating the members scored within `range`, highest first.
    pub fn range_last(&mut self, range: ScoreRange) -> Result<Range<'_, 'c>, CallError> {
        self.start_range(api!(RedisModule_ZsetLastInScoreRange)?, range)
    }

    fn start_range(
        &mut self,
        start: RangeStart,
        range: ScoreRange,
    ) -> Result<Range<'_, 'c>, CallError> {
        // SAFETY: the handle is open; the server validates the interval and
        // the key type and returns an error status for a non-zset.
        let status = unsafe {
            start(
                self.raw(),
                range.min,
                range.max,
                c_int::from(range.min_exclusive),
                c_int::from(range.max_exclusive),
            )
        };
        ok_status(status, "starting a score range")?;
        Ok(Range { key: self })
    }

    /// Removes `member`; returns whether it was there. The server deletes the
    /// key when its last member goes.
    pub fn remove(&mut self, member: &impl RawString) -> Result<bool, CallError> {
        let rem = api!(RedisModule_ZsetRem)?;
        let mut deleted: c_int = 0;
        // SAFETY: the handle is open for writing and `member` is a live
        // string (an argument of the running command, or one we own).
        let status = unsafe { rem(self.raw(), member.raw(), &mut deleted) };
        ok_status(status, "removing a member")?;
        Ok(deleted != 0)
    }

    /// Adds `member` with `score` unless it exists (ZADD NX); returns whether
    /// it was added. Creates the key when it is missing.
    pub fn add_nx(&mut self, score: f64, member: &ModuleString<'_>) -> Result<bool, CallError> {
        let add = api!(RedisModule_ZsetAdd)?;
        let mut flags = raw::REDISMODULE_ZADD_NX as c_int;
        // SAFETY: the handle is open for writing, `member` is a live string and
        // `flags` a valid in/out pointer for the duration of the call.
        let status = unsafe { add(self.raw(), score, member.as_ptr(), &mut flags) };
        ok_status(status, "adding a member")?;
        Ok(flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0)
    }

    /// The score of `member`, or `None` when it is not in the set.
    pub fn score(&mut self, member: &ModuleString<'_>) -> Result<Option<f64>, CallError> {
        let score = api!(RedisModule_ZsetScore)?;
        let mut value = 0.0f64;
        // SAFETY: the handle is open and `member` a live string; the server
        // returns an error status when the member (or the set) is missing.
        let status = unsafe { score(self.raw(), member.as_ptr(), &mut value) };
        Ok((status == raw::REDISMODULE_OK as c_int).then_some(value))
    }

    /// Sets the key's expiry to the absolute unix time `at_ms`.
    pub fn set_abs_expire(&mut self, at_ms: i64) -> Result<(), CallError> {
        let set = api!(RedisModule_SetAbsExpire)?;
        // SAFETY: the handle is open for writing on an existing key.
        let status = unsafe { set(self.raw(), at_ms) };
        ok_status(status, "setting the expiry")
    }

    /// The key's expiry as an absolute unix time in ms; `None` when it has
    /// none (or does not exist).
    pub fn abs_expire(&self) -> Result<Option<i64>, CallError> {
        // Asked only of an existing key: Redis 8.2 crashes reading the
        // expiry of a missing key opened for writing.
        if self.kind()? == KeyKind::Empty {
            return Ok(None);
        }
        let get = api!(RedisModule_GetAbsExpire)?;
        // SAFETY: the handle is open on an existing key; the server answers
        // REDISMODULE_NO_EXPIRE (-1) for a key without an expiry.
        let at = unsafe { get(self.raw()) };
        Ok((at >= 0).then_some(at))
    }
}

impl Key<'_> {
    /// The module value the key holds and its type's server handle, when it
    /// holds one: read from the server once, then from the handle's cache.
    /// The server checks the key's type itself (documented: a null type for
    /// an empty key or one not of a module type), so no
    /// `RedisModule_KeyType` call comes first.
    fn module_value(&self) -> Result<Option<ModuleValue>, CallError> {
        if let Some(cached) = self.module.get() {
            return Ok(Some(cached));
        }
        let get_type = api!(RedisModule_ModuleTypeGetType)?;
        // SAFETY: the handle is open; the server returns null unless it
        // holds a module value.
        let Some(t) = NonNull::new(unsafe { get_type(self.raw()) }) else {
            return Ok(None);
        };
        let get = api!(RedisModule_ModuleTypeGetValue)?;
        // SAFETY: the handle is open and holds a module value (its type is
        // not null): the server returns that value's pointer.
        let Some(v) = NonNull::new(unsafe { get(self.raw()) }) else {
            return Ok(None);
        };
        self.module.set(Some((t, v)));
        Ok(Some((t, v)))
    }

    /// The value pointer when the key holds a value of the registered type
    /// `ty`.
    fn value_of<T: TypeValue>(&self, ty: &ModuleType<T>) -> Result<Option<NonNull<T>>, CallError> {
        let Some(handle) = ty.handle() else {
            return Ok(None);
        };
        Ok(self
            .module_value()?
            .filter(|(t, _)| t.as_ptr() == handle)
            .map(|(_, v)| v.cast::<T>()))
    }

    /// Whether the key holds a value of the registered type `ty`.
    pub fn holds<T: TypeValue>(&self, ty: &ModuleType<T>) -> Result<bool, CallError> {
        Ok(self.value_of(ty)?.is_some())
    }

    /// The value of type `ty` the key holds, if it holds one.
    pub fn value<T: TypeValue>(&self, ty: &ModuleType<T>) -> Result<Option<&T>, CallError> {
        // SAFETY: the key holds a value of `ty`, the one type made for `T`,
        // so the pointer is a live `Box<T>` owned by the server (read from
        // it, or kept since: while the handle is open only its `set_value`
        // and `delete` change what the key holds, both borrowing the key
        // mutably and updating the cache; see `Key::module`); the reference
        // borrows the key, which keeps the value alive.
        Ok(self.value_of(ty)?.map(|v| unsafe { v.as_ref() }))
    }

    /// The value of type `ty` the key holds, for changing in place.
    pub fn value_mut<T: TypeValue>(
        &mut self,
        ty: &ModuleType<T>,
    ) -> Result<Option<&mut T>, CallError> {
        // SAFETY: as in `value`; the key is borrowed mutably for as long as
        // the reference lives, so nothing else reaches the value meanwhile.
        Ok(self.value_of(ty)?.map(|mut v| unsafe { v.as_mut() }))
    }

    /// The value of type `ty` the key holds, for changing in place; when it
    /// holds none (the key is missing), `make()` stored first. One type
    /// check, not one before and one after: `set_value` leaves the stored
    /// value in the cache.
    pub fn value_or_insert_with<T: TypeValue>(
        &mut self,
        ty: &ModuleType<T>,
        make: impl FnOnce() -> T,
    ) -> Result<&mut T, CallError> {
        if !self.holds(ty)? {
            self.set_value(ty, make())?;
        }
        self.value_mut(ty)?
            .ok_or(CallError::Failed("reading the compact log"))
    }

    /// Stores `value` as the key's value of type `ty` (the key must be
    /// open for writing; an existing value is freed by the server).
    pub fn set_value<T: TypeValue>(
        &mut self,
        ty: &ModuleType<T>,
        value: T,
    ) -> Result<(), CallError> {
        let set = api!(RedisModule_ModuleTypeSetValue)?;
        let handle = ty
            .handle()
            .ok_or(CallError::Failed("the compact log type is not registered"))?;
        let ptr = ModuleType::<T>::into_raw(value);
        // Whatever the key held is gone or about to be.
        self.module.set(None);
        // SAFETY: an open write handle, a registered type and a pointer the
        // server takes ownership of on success.
        let status = unsafe { set(self.raw(), handle, ptr) };
        if status != raw::REDISMODULE_OK as c_int {
            // SAFETY: not taken by the server: ours to free, once.
            drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
            return Err(CallError::Failed("storing the compact log"));
        }
        // The key now holds exactly this value of this type.
        if let (Some(t), Some(v)) = (NonNull::new(handle), NonNull::new(ptr)) {
            self.module.set(Some((t, v)));
        }
        Ok(())
    }

    /// Deletes the key (its value is freed by the server).
    pub fn delete(&mut self) -> Result<(), CallError> {
        let delete = api!(RedisModule_DeleteKey)?;
        self.module.set(None);
        // SAFETY: an open write handle.
        ok_status(unsafe { delete(self.raw()) }, "deleting the key")
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if let Ok(close) = api!(RedisModule_CloseKey) {
            // SAFETY: the handle was returned by OpenKey and is closed once.
            unsafe { close(self.raw()) }
        }
    }
}

/// A running score-range iteration over a key; stopped on drop. It borrows
/// the key mutably, so the set cannot be changed while it runs.
pub struct Range<'k, 'c> {
    key: &'k mut Key<'c>,
}

impl Range<'_, '_> {
    /// The member and score under the iterator, or `None` past the end.
    pub fn current<'c>(
        &self,
        ctx: &'c Context,
    ) -> Result<Option<(ModuleString<'c>, f64)>, CallError> {
        let current = api!(RedisModule_ZsetRangeCurrentElement)?;
        let mut score = 0.0f64;
        // SAFETY: the range was started on this open key; the returned string
        // is a new reference that `ModuleString` frees.
        let ptr = unsafe { current(self.key.raw(), &mut score) };
        Ok(NonNull::new(ptr).map(|ptr| {
            // SAFETY: `ptr` is the one new reference the iterator just
            // handed over; nothing else frees it.
            (unsafe { ModuleString::adopt(ctx, ptr) }, score)
        }))
    }

    /// The score under the iterator, or `None` past the end.
    pub fn current_score(&self, ctx: &Context) -> Result<Option<f64>, CallError> {
        Ok(self.current(ctx)?.map(|(_, score)| score))
    }

    /// Moves to the next member; false when the range is exhausted.
    pub fn advance(&mut self) -> Result<bool, CallError> {
        let next = api!(RedisModule_ZsetRangeNext)?;
        // SAFETY: the range was started on this open key.
        Ok(unsafe { next(self.key.raw()) } != 0)
    }

    /// Moves to the previous member; false when the range is exhausted.
    pub fn retreat(&mut self) -> Result<bool, CallError> {
        let prev = api!(RedisModule_ZsetRangePrev)?;
        // SAFETY: the range was started on this open key.
        Ok(unsafe { prev(self.key.raw()) } != 0)
    }

    /// Whether the iterator is past the last member of the range.
    pub fn end_reached(&self) -> Result<bool, CallError> {
        let end = api!(RedisModule_ZsetRangeEndReached)?;
        // SAFETY: the range was started on this open key.
        Ok(unsafe { end(self.key.raw()) } != 0)
    }

    /// Moves `steps` members forward (or backward), stopping early at the
    /// end of the range; returns whether the iterator is still on a member.
    pub fn skip(&mut self, steps: u64, forward: bool) -> Result<bool, CallError> {
        for _ in 0..steps {
            let moved = if forward {
                self.advance()?
            } else {
                self.retreat()?
            };
            if !moved {
                return Ok(false);
            }
        }
        Ok(!self.end_reached()?)
    }
}

impl Drop for Range<'_, '_> {
    fn drop(&mut self) {
        if let Ok(stop) = api!(RedisModule_ZsetRangeStop) {
            // SAFETY: stopping a started range on an open key is always valid.
            unsafe { stop(self.key.raw()) }
        }
    }
}
