//! slidewin: exact sliding-window rate limiting as a native Redis/Valkey
//! module. See docs/reference.md for the command reference.
//!
//! The layout, file by file (what each owns, how many `unsafe` blocks),
//! is the table in docs/testing.md, "Source layout": the one list, kept
//! with the tree. This file: module load (arguments, configuration, INFO,
//! commands).
//!
//! Every module is private to the crate, so rustc's dead-code lint sees
//! each item nothing uses, `pub` or not. The one public path is
//! `fuzzing`, the fuzz targets' facade, built only with the feature
//! `fuzzing` (fuzz/lib); the module itself exports only what
//! `redis_module!` generates.

mod args;
mod clock;
mod command_info;
mod command_table;
mod commands;
mod config;
mod counters;
mod ffi;
mod member;
mod relocate;
mod stats;
mod store;
mod top;
mod window;

/// The fuzz targets' view of the crate (fuzz/, whose lib/ builds this
/// source with the feature `fuzzing`): the argument parsers, the decision
/// and the compact log, nothing of the server. The only public path into
/// the crate; the module's own build has none, so rustc reports any item
/// nothing uses.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// The command argument parsers (`args.rs`).
    pub mod args {
        pub use crate::args::{
            entries_within, mcheck_key_positions, parse, parse_i64, parse_multi, parse_top,
            printable, ArgError, Bounds, Command, MAX_RULES, MAX_TOP_COUNT,
        };
    }

    /// The decision over an abstract log (`window/`).
    pub mod window {
        pub use crate::window::{
            check, check_request, cutoff, peek, settle, undo_request, Rule, SettleBounds, Verdict,
            Want, WindowLog,
        };
    }

    /// The compact log, its oracle and `SLIDEWIN.APPLY`'s effect
    /// (`store/compact/`).
    pub mod compact {
        pub use crate::store::compact::effect::Effect;
        pub use crate::store::compact::{canonical_by_sorting, CompactLog, Hold, MAX_ENTRIES};
    }
}

use redis_module::{redis_module, Context, RedisString, Status};

// The Redis allocator only exists inside a server; unit tests and the fuzz
// targets (feature `fuzzing`, fuzz/) run as plain processes and use the
// system allocator instead.
#[cfg(not(any(test, feature = "fuzzing")))]
type ModuleAlloc = redis_module::alloc::RedisAlloc;
#[cfg(not(any(test, feature = "fuzzing")))]
const MODULE_ALLOC: ModuleAlloc = redis_module::alloc::RedisAlloc;
#[cfg(any(test, feature = "fuzzing"))]
type ModuleAlloc = std::alloc::System;
#[cfg(any(test, feature = "fuzzing"))]
const MODULE_ALLOC: ModuleAlloc = std::alloc::System;

/// Runs at load: checks the load arguments, registers the configuration,
/// the INFO sections and every command of the command table.
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    ffi::install_panic_hook();
    // Keys are signalled as modified (WATCH, client-side caching) only when
    // a call really changed them, not on every close of a key opened for
    // writing: a denied CHECK that trimmed nothing changes nothing.
    let mut options = redis_module::raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED;
    // Valkey's atomic slot migration (CLUSTER MIGRATESLOTS) loads a slot's
    // keys on the target as plain ZADD / PEXPIREAT before the slot is owned
    // there, and forwards the source's writes as the same effects. slidewin
    // keeps no state about keys outside the keyspace (no timers, no keyspace
    // subscriptions; TOP is node-local counts), so it only has to say so.
    // Declared where the server both knows the flag's bit (option numbers
    // differ between Redis and Valkey, so the bit alone is not enough) and
    // has the command the flag is about.
    let atomic_slot_migration = ffi::module_options_all()
        .is_some_and(|all| all & ffi::OPTION_HANDLE_ATOMIC_SLOT_MIGRATION != 0)
        && has_command(ctx, "CLUSTER|MIGRATESLOTS");
    if atomic_slot_migration {
        options |= ffi::OPTION_HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    // With `repl-diskless-load swapdb` a replica loads the master's data
    // set into a temporary database while it keeps serving the old one,
    // unless a loaded module does not declare that it copes. slidewin does:
    // sorted-set logs are the server's own keys; a compact log's loader
    // reads its one buffer, then decodes it without touching anything
    // shared (the spare buffers of the commands, the INFO counters, TOP),
    // so commands on the old data set may run during any read; its values
    // may be freed on any thread (the old data set goes in the background);
    // TOP counts decisions on this node, not keys, so the swap leaves it
    // as true as it was. Declared wherever the server knows the option.
    let repl_async_load = ffi::knows_repl_async_load();
    if repl_async_load {
        options |= ffi::OPTION_HANDLE_REPL_ASYNC_LOAD;
    }
    let raw_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let values = match config::parse_load_args(&raw_args) {
        Ok(values) => values,
        Err(e) => {
            ffi::log(
                Some(ctx),
                c"warning",
                &format!("slidewin: {e}; module not loaded"),
            );
            return Status::Err;
        }
    };
    config::register(ctx, &values);
    // The compact log's data type exists only when asked for: a registered
    // type makes MODULE UNLOAD impossible and makes every replica, AOF or
    // RDB reader and RESTORE target need the module.
    let compact = config::log_type() == config::LogType::Compact;
    if compact {
        if let Err(e) = store::compact::store::LOG_TYPE.create(ctx) {
            ffi::log(
                Some(ctx),
                c"warning",
                &format!("slidewin: cannot register the compact log type: {e}; module not loaded"),
            );
            return Status::Err;
        }
    }
    if compact {
        // The compact log's loader checks every read (RedisModule_IsIOError),
        // so a replica may load an RDB straight from the socket.
        options |= redis_module::raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS;
    }
    // One call: SetModuleOptions replaces the options as a whole.
    ffi::set_module_options(ctx, options);
    stats::declare_atomic_slot_migration(atomic_slot_migration);
    stats::declare_repl_async_load(repl_async_load);
    stats::register(ctx);
    if let Err(e) = command_table::register(ctx, compact) {
        ffi::log(
            Some(ctx),
            c"warning",
            &format!("slidewin: {e}; module not loaded"),
        );
        return Status::Err;
    }
    Status::Ok
}

/// Whether the server has `command` (`COMMAND INFO` answers nil for one it
/// lacks), asked at load.
fn has_command(ctx: &Context, command: &str) -> bool {
    match ctx.call("COMMAND", &["INFO", command]) {
        Ok(redis_module::RedisValue::Array(items)) => items
            .first()
            .is_some_and(|i| !matches!(i, redis_module::RedisValue::Null)),
        _ => false,
    }
}

redis_module! {
    name: "slidewin",
    version: stats::MODULE_VERSION,
    allocator: (ModuleAlloc, MODULE_ALLOC),
    data_types: [],
    init: init,
}
