//! slidewin: exact sliding-window rate limiting as a native Redis/Valkey
//! module. See README.md for the command reference.
//!
//! Layout:
//! - `args`: argument parsing (pure);
//! - `window`: the window decision over an abstract log (pure);
//! - `member`: member ids for log entries (pure);
//! - `ffi`: the raw server calls: API lookup, status checks, errors, the
//!   clock, notifications, key positions, INFO, and the replication builder;
//! - `clock`: the server clock;
//! - `zset`: the safe wrapper over the low-level sorted-set key API;
//! - `zset_log`: the sorted-set log and the replication of its effects;
//! - `commands`: thin command wrappers;
//! - `command_info`: COMMAND INFO / DOCS metadata;
//! - `config`: the `slidewin.*` configuration;
//! - `stats`: INFO counters;
//! - this file: the one registration table.

pub mod args;
pub mod clock;
pub mod command_info;
pub mod commands;
pub mod config;
pub mod ffi;
pub mod member;
pub mod stats;
pub mod window;
pub mod zset;
pub mod zset_log;

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

/// Runs once the commands exist: checks the load arguments, registers the
/// configuration, the INFO section and the COMMAND DOCS metadata.
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // Keys are signalled as modified (WATCH, client-side caching) only when
    // a call really changed them, not on every close of a key opened for
    // writing: a denied CHECK that trimmed nothing changes nothing.
    ffi::set_module_options(
        ctx,
        redis_module::raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED,
    );
    let raw_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let values = match config::parse_load_args(&raw_args) {
        Ok(values) => values,
        Err(e) => {
            ctx.log_warning(&format!("slidewin: {e}; module not loaded"));
            return Status::Err;
        }
    };
    config::register(ctx, &values);
    stats::register(ctx);
    // MCHECK's keys are only known to the server through its key spec, so
    // without the metadata cluster routing and ACLs would be wrong: a
    // failure refuses the load.
    for doc in [
        &command_info::CHECK,
        &command_info::PEEK,
        &command_info::MCHECK,
        &command_info::UNDO,
    ] {
        if let Err(e) = command_info::set_command_info(ctx, doc) {
            ctx.log_warning(&format!(
                "slidewin: cannot set the command info of {}: {e}; module not loaded",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
    }
    Status::Ok
}

redis_module! {
    name: "slidewin",
    version: 1,
    allocator: (ModuleAlloc, MODULE_ALLOC),
    data_types: [],
    init: init,
    commands: [
        // name, handler, flags, first key, last key, key step,
        // mandatory ACL categories (none: Redis 7.0 has no API for them),
        // optional ACL categories (set where the server supports them; as
        // for Redis's own commands, what is not `fast` is `slow`).
        ["slidewin.check", commands::check, "write deny-oom", 1, 1, 1, "", "write sortedset slow"],
        // Not `fast`: PEEK steps over the expired entries a CHECK would have
        // trimmed, O(M) in them (like ZRANGEBYSCORE, which is @slow too).
        ["slidewin.peek", commands::peek, "readonly", 1, 1, 1, "", "read sortedset slow"],
        // MCHECK's keys (every third argument after numrules) are reported
        // by the command itself (getkeys-api) and declared by its key spec.
        ["slidewin.mcheck", commands::mcheck, "write deny-oom getkeys-api", 0, 0, 0, "", "write sortedset slow"],
        ["slidewin.undo", commands::undo, "write fast", 1, 1, 1, "", "write sortedset fast"],
    ],
}
