//! The one layer between slidewin and the server's module API: looking up
//! a function pointer (never unwrapped), checking a status, the error type
//! of raw calls, the clock,
//! capability checks, keyspace notifications, signal-modified, key
//! positions, module options and configuration, INFO, command creation and
//! ACL categories, the server log and the panic hook; `replicate.rs`
//! propagates effects to replicas and the AOF; `set_command_info.rs`
//! hands COMMAND DOCS metadata to the server; `key.rs` is the handle of a
//! key of any type. Only this layer holds `unsafe`.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

pub mod base;
pub mod key;
pub mod module_type;
pub mod replicate;
pub mod set_command_info;
pub mod string;

pub use replicate::{replicate_verbatim, replicate_words, Propagate, Word, MAX_WORDS};
pub use string::{ModuleString, RawString};

pub(crate) use base::api;
pub use base::{get_command, log, status, CallError};

/// One argument of the command being run: the server's own string,
/// borrowed for the call. Unlike `redis_module::RedisString`, it is
/// neither retained nor freed, and the arguments come as a slice of the
/// server's argv, not a new vector.
#[repr(transparent)]
pub struct Arg(*mut raw::RedisModuleString);

impl Arg {
    /// The argument's bytes.
    pub fn as_slice(&self) -> &[u8] {
        let Ok(ptr_len) = api!(RedisModule_StringPtrLen) else {
            return &[];
        };
        let mut len = 0usize;
        // SAFETY: `self.0` is a string of the current command's argv, alive
        // for the whole call, which outlives `&self`.
        let ptr = unsafe { ptr_len(self.0, &mut len) };
        if ptr.is_null() {
            return &[];
        }
        // SAFETY: the server returned `len` readable bytes at `ptr`, owned by
        // the string, which is neither changed nor freed during the call.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }
}

impl RawString for Arg {
    fn raw(&self) -> *mut raw::RedisModuleString {
        self.0
    }
}

/// The command's arguments as a slice of [`Arg`], for the duration of the
/// call (`'a` is the handler's own scope).
///
/// # Safety
/// `argv` must hold `argc` valid string pointers (or be null), alive for `'a`.
pub unsafe fn command_args<'a>(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> &'a [Arg] {
    let Ok(n) = usize::try_from(argc) else {
        return &[];
    };
    if argv.is_null() {
        return &[];
    }
    // SAFETY: the caller guarantees `argc` pointers at `argv` alive for
    // `'a`; `Arg` is a transparent wrapper of one such pointer.
    unsafe { std::slice::from_raw_parts(argv.cast::<Arg>(), n) }
}

/// The server's cached command time in microseconds
/// (`RedisModule_CachedMicroseconds`: one value for a whole MULTI or script),
/// where the server has it.
pub fn cached_microseconds() -> Option<i64> {
    let cached = api!(RedisModule_CachedMicroseconds).ok()?;
    // SAFETY: a plain getter with no arguments.
    Some(unsafe { cached() })
}

/// The server's wall clock in milliseconds (`RedisModule_Milliseconds`).
pub fn milliseconds() -> Option<i64> {
    let millis = api!(RedisModule_Milliseconds).ok()?;
    // SAFETY: a plain getter with no arguments.
    Some(unsafe { millis() })
}

/// Whether the server lets modules give commands ACL categories.
pub fn has_acl_categories() -> bool {
    api!(RedisModule_SetCommandACLCategories).is_ok()
}

/// Whether the server has `RedisModule_CachedMicroseconds`.
pub fn has_cached_clock() -> bool {
    api!(RedisModule_CachedMicroseconds).is_ok()
}

/// Signals `key` as modified (WATCH, client-side caching).
pub fn signal_modified(ctx: &Context, key: &impl RawString) {
    if let Ok(signal) = api!(RedisModule_SignalModifiedKey) {
        // SAFETY: the live command context and a key name from argv.
        unsafe { signal(ctx.ctx, key.raw()) };
    }
}

/// Fires the keyspace notification `event` of `class` on `key`.
pub fn notify(ctx: &Context, class: c_int, event: &CStr, key: &impl RawString) {
    if let Ok(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
        // SAFETY: the live command context, a NUL-terminated event name and a
        // key name from argv; the server copies what it keeps.
        unsafe { notify(ctx.ctx, class, event.as_ptr(), key.raw()) };
    }
}

/// Whether this call only asks for the command's key positions
/// (COMMAND GETKEYS, cluster routing, ACL key checks).
pub fn is_keys_position_request(ctx: &Context) -> bool {
    match api!(RedisModule_IsKeysPositionRequest) {
        // SAFETY: the live command context.
        Ok(is_request) => (unsafe { is_request(ctx.ctx) }) != 0,
        Err(_) => false,
    }
}

/// Reports argument `pos` as a key, answering a key-position request.
pub fn key_at_pos(ctx: &Context, argc: usize, pos: usize) -> Result<(), CallError> {
    let key_at_pos = api!(RedisModule_KeyAtPos)?;
    if pos >= argc {
        return Err(CallError::Failed("reporting a key position"));
    }
    let pos = c_int::try_from(pos).map_err(|_| CallError::Failed("reporting a key position"))?;
    // SAFETY: the context of a key-position request, and a position inside
    // the command's argv (checked above).
    unsafe { key_at_pos(ctx.ctx, pos) };
    Ok(())
}

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (`1 << 5`;
/// no `REDISMODULE_` alias exists): the module copes with keys of a slot
/// being loaded on the target of `CLUSTER MIGRATESLOTS` before the slot is
/// owned there. Without it the server refuses atomic slot migration on both
/// ends while the module is loaded.
pub const OPTION_HANDLE_ATOMIC_SLOT_MIGRATION: u32 = 1 << 5;

/// Every module option flag the server knows
/// (`RedisModule_GetModuleOptionsAll`), or None where it cannot say (the
/// function is missing: Redis 7.0); a flag outside it is unknown there.
pub fn module_options_all() -> Option<u32> {
    let all = api!(RedisModule_GetModuleOptionsAll).ok()?;
    // SAFETY: takes no arguments and only reads a server constant.
    let mask = unsafe { all() };
    u32::try_from(mask).ok()
}

/// `REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD` (`1 << 2` on Redis and
/// Valkey alike): the module copes with a replica serving its old data set
/// while it loads the master's (`repl-diskless-load swapdb`). Without it
/// such a replica loads from disk instead, refusing commands while it loads.
pub const OPTION_HANDLE_REPL_ASYNC_LOAD: u32 = 1 << 2;

/// `REDISMODULE_CTX_FLAGS_ASYNC_LOADING` (`1 << 23`): the context flag of a
/// replica loading in the background; it came with the option above.
const CTX_FLAG_ASYNC_LOADING: u32 = 1 << 23;

/// Whether the server knows [`OPTION_HANDLE_REPL_ASYNC_LOAD`]: in its list
/// of module options where it has one (`RedisModule_GetModuleOptionsAll`),
/// else (Redis 7.0) where its context flags
/// (`RedisModule_GetContextFlagsAll`) include async loading, which the
/// server gained together with the option.
pub fn knows_repl_async_load() -> bool {
    if let Some(all) = module_options_all() {
        return all & OPTION_HANDLE_REPL_ASYNC_LOAD != 0;
    }
    let Ok(flags_all) = api!(RedisModule_GetContextFlagsAll) else {
        return false;
    };
    // SAFETY: takes no arguments and only reads a server constant.
    let flags = unsafe { flags_all() };
    u32::try_from(flags).is_ok_and(|f| f & CTX_FLAG_ASYNC_LOADING != 0)
}

/// Sets module option flags (`REDISMODULE_OPTION_*`), at load time. The
/// server keeps the last call's flags only, so every flag goes in one call.
pub fn set_module_options(ctx: &Context, flags: u32) {
    if let (Ok(set_options), Ok(flags)) =
        (api!(RedisModule_SetModuleOptions), c_int::try_from(flags))
    {
        // SAFETY: the load-time context and documented option flags.
        unsafe { set_options(ctx.ctx, flags) };
    }
}

/// Whether the server has module configuration (CONFIG SET of module settings).
pub fn has_module_config() -> bool {
    api!(RedisModule_RegisterNumericConfig).is_ok()
}

/// Applies the module settings found in redis.conf, at load time.
pub fn load_configs(ctx: &Context) {
    if let Ok(load) = api!(RedisModule_LoadConfigs) {
        // SAFETY: the load-time context, as the API requires.
        unsafe { load(ctx.ctx) };
    }
}

/// Writes the module's INFO sections, inside the INFO callback only.
pub struct InfoWriter {
    ctx: *mut raw::RedisModuleInfoCtx,
}

impl InfoWriter {
    /// Starts the section `<module>_<name>`.
    pub fn section(&mut self, name: &CStr) {
        if let Ok(section) = api!(RedisModule_InfoAddSection) {
            // SAFETY: `ctx` is the INFO context the server passed to the
            // running callback (a writer exists only there); the name is
            // NUL-terminated and copied by the server.
            unsafe { section(self.ctx, name.as_ptr()) };
        }
    }

    /// Adds the field `<module>_<name>:<value>` to the current section.
    pub fn field(&mut self, name: &CStr, value: u64) {
        if let Ok(field) = api!(RedisModule_InfoAddFieldULongLong) {
            // SAFETY: as in `section`.
            unsafe { field(self.ctx, name.as_ptr(), value) };
        }
    }
}

impl InfoWriter {
    /// Adds the field `<module>_<name>:<text>` to the current section.
    pub fn text_field(&mut self, name: &CStr, text: &CStr) {
        if let Ok(field) = api!(RedisModule_InfoAddFieldCString) {
            // SAFETY: as in `section`; `text` is NUL-terminated and copied.
            unsafe { field(self.ctx, name.as_ptr(), text.as_ptr()) };
        }
    }
}

static INFO_SECTIONS: std::sync::OnceLock<fn(&mut InfoWriter)> = std::sync::OnceLock::new();

extern "C" fn info_callback(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    if let Some(write) = INFO_SECTIONS.get() {
        write(&mut InfoWriter { ctx });
    }
}

/// Makes `write` the module's INFO callback.
pub fn register_info(ctx: &Context, write: fn(&mut InfoWriter)) {
    // Set once per load of the module (an unload drops the statics with it).
    let _ = INFO_SECTIONS.set(write);
    if let Ok(register) = api!(RedisModule_RegisterInfoFunc) {
        // SAFETY: the load-time context and a callback of the expected type.
        unsafe { register(ctx.ctx, Some(info_callback)) };
    }
}

/// A command handler as the server calls it.
pub type CommandFn =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Turns `fn(&Context, &[Arg]) -> RedisResult` into a [`CommandFn`] that
/// hands over the server's argv as it is (no copy, no retain) and sends the
/// reply.
macro_rules! command_fn {
    ($handler:path) => {{
        extern "C" fn handler(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            let context = redis_module::Context::new(ctx);
            // SAFETY: the server calls a command handler with `argc` valid
            // argument strings at `argv`, alive until the handler returns;
            // `args` does not outlive this function.
            let args = unsafe { $crate::ffi::command_args(argv, argc) };
            context.reply($handler(&context, args)) as std::os::raw::c_int
        }
        handler as $crate::ffi::CommandFn
    }};
}
pub(crate) use command_fn;

/// Creates a command (at load time) with its flags and legacy key triple.
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    handler: CommandFn,
    flags: &CStr,
    keys: (c_int, c_int, c_int),
) -> Result<(), CallError> {
    let create = api!(RedisModule_CreateCommand)?;
    // SAFETY: the load-time context, NUL-terminated name and flags (copied
    // by the server) and a handler of the type the server calls.
    let created = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
            Some(handler),
            flags.as_ptr(),
            keys.0,
            keys.1,
            keys.2,
        )
    };
    status(created, "creating a command")
}

/// Gives a created command its ACL categories where the server lets modules
/// do so (not Redis 7.0: there it is a no-op, and `Ok(false)`).
pub fn set_acl_categories(
    ctx: &Context,
    name: &CStr,
    categories: &CStr,
) -> Result<bool, CallError> {
    let Ok(set) = api!(RedisModule_SetCommandACLCategories) else {
        return Ok(false);
    };
    let command = get_command(ctx, name)?;
    // SAFETY: a command handle from GetCommand and a NUL-terminated list of
    // category names, copied by the server.
    let set_status = unsafe { set(command, categories.as_ptr()) };
    status(set_status, "setting ACL categories")?;
    Ok(true)
}

/// Sends every panic's message and location to the server log, then to
/// the hook that was installed before (Rust's default prints to stderr,
/// which a daemonized server discards). A panic inside a command is caught
/// and answered with an error reply that points at this log line. The hook
/// belongs to this module's own copy of the Rust runtime (each cdylib has
/// one), so it never sees another module's panics; installed once even if
/// the module is loaded again.
pub fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(install_panic_hook_now);
}

fn install_panic_hook_now() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        log(
            None,
            c"warning",
            &format!("slidewin: internal error (a bug; please report it): panic{place}: {what}"),
        );
        previous(info);
    }));
}
