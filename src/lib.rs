//! slidewin: exact sliding-window rate limiting as a native Redis/Valkey
//! module. See docs/reference.md for the command reference.
//!
//! Layout:
//! - `args`: argument parsing (pure);
//! - `window`: the window decision over an abstract log (pure);
//! - `store::compact`: the compact log, a second store (a folder: the pure
//!   log and its encoding, `effect` the effect command's changes, `store`
//!   the data type and store);
//! - `key_log`: the log in a key, whichever store holds it;
//! - `member`: member ids for log entries (pure);
//! - `ffi`: the raw server calls: API lookup, status checks, errors, the
//!   clock, notifications, key positions, INFO, and the replication builder;
//! - `clock`: the server clock;
//! - `zset`: the safe wrapper over the low-level sorted-set key API;
//! - `zset_log`: the sorted-set log and the replication of its effects;
//! - `commands`: thin command wrappers;
//! - `command_info`: COMMAND INFO / DOCS metadata;
//! - `command_table`: the one table of commands (registration, flags, ACL
//!   categories, docs);
//! - `config`: the `slidewin.*` configuration;
//! - `counters`: the INFO counters the commands move;
//! - `stats`: the INFO sections;
//! - this file: module load (arguments, configuration, INFO, commands).

pub mod args;
pub mod clock;
pub mod command_info;
pub mod command_table;
pub mod commands;
pub mod config;
pub mod counters;
pub mod ffi;
pub mod hitters;
pub mod member;
pub mod relocate;
pub mod stats;
pub mod store;
pub mod top;
pub mod window;

use redis_module::{redis_module, Context, RedisString, Status};

// The Redis allocator only exists inside a server; unit tests run as a plain
// process and use the system allocator instead.
#[cfg(not(test))]
type ModuleAlloc = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const MODULE_ALLOC: ModuleAlloc = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type ModuleAlloc = std::alloc::System;
#[cfg(test)]
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
    version: 1,
    allocator: (ModuleAlloc, MODULE_ALLOC),
    data_types: [],
    init: init,
}
