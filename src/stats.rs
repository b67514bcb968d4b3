//! Counters since the module loaded, shown by `INFO slidewin`.
//!
//! Fields (the server prefixes each with `slidewin_`), derived from the
//! command table (each command lists the counters it moves):
//! `checks_allowed`, `checks_denied` (CHECK and MCHECK calls),
//! `cost_granted` (entries added by allowed checks, over all their keys),
//! `peeks`, `undone` (entries SLIDEWIN.UNDO removed), then `errors` (error
//! replies the commands gave; arity errors come from the server itself,
//! which checks the declared arity).
//!
//! A second section, `slidewin_capabilities`, says what the module found the
//! server able to do when it loaded (1 or 0): `acl_categories` (the server
//! exports `RedisModule_SetCommandACLCategories`, so the commands carry ACL
//! categories) and `cached_clock` (the server exports
//! `RedisModule_CachedMicroseconds`, so one clock value holds for a whole
//! MULTI or script) and `atomic_slot_migration` (the module declared that it
//! handles Valkey's atomic slot migration: the server knows the option flag
//! and has `CLUSTER MIGRATESLOTS`) and `repl_async_load` (the module
//! declared that a replica may serve its old data set while it loads the
//! master's, `repl-diskless-load swapdb`: the server knows the option flag).
//!
//! A third, `slidewin_top`, describes the heavy-hitters summary behind
//! SLIDEWIN.TOP: `top_capacity` (keys per epoch and outcome; 0 is off),
//! `top_period_ms`, `top_keys_tracked` (over every epoch and both outcomes)
//! and `top_memory_bytes` (what it holds; bounded by the capacity).

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::command_table::COMMANDS;
use crate::counters::{self, Counter};
use crate::ffi::InfoWriter;

/// The release, from Cargo.toml (`CARGO_PKG_VERSION`), as INFO takes it:
/// `slidewin_version`.
const VERSION_C: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(v) => v,
    Err(_) => panic!("the version holds a NUL"),
};

/// The same release as `MODULE LIST` shows it (`ver`), in the form modules
/// use: major * 10000 + minor * 100 + patch (0.1.0 is 100, 1.2.3 is 10203).
/// Each part must stay below 100: a larger one fails the build.
pub(crate) const MODULE_VERSION: i32 = {
    const fn part(s: &str) -> i32 {
        let b = s.as_bytes();
        assert!(!b.is_empty() && b.len() <= 2, "a version part must be 0-99");
        let mut v = 0;
        let mut i = 0;
        while i < b.len() {
            assert!(b[i].is_ascii_digit(), "a version part must be 0-99");
            v = v * 10 + (b[i] - b'0') as i32;
            i += 1;
        }
        v
    }
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
};

/// The counters the command table declares, each once, in table order.
pub fn declared() -> Vec<Counter> {
    let mut out: Vec<Counter> = Vec::new();
    for c in COMMANDS.iter().flat_map(|c| c.counters) {
        if !out.contains(c) {
            out.push(*c);
        }
    }
    out
}

/// The `slidewin_stats` fields as (field, value) pairs, in INFO order: the
/// declared counters, then `errors`.
pub fn snapshot() -> Vec<(&'static CStr, u64)> {
    let mut out: Vec<(&'static CStr, u64)> = declared()
        .into_iter()
        .map(|c| (c.field(), c.get()))
        .collect();
    out.push((c"errors", counters::errors()));
    out
}

/// Whether the module declared atomic slot migration at load.
static ATOMIC_SLOT_MIGRATION: AtomicBool = AtomicBool::new(false);

/// Records, at load, whether the module declared that it handles atomic
/// slot migration (the server knows the option flag).
pub fn declare_atomic_slot_migration(declared: bool) {
    ATOMIC_SLOT_MIGRATION.store(declared, Ordering::Relaxed);
}

/// Whether the module declared async replica loading at load.
static REPL_ASYNC_LOAD: AtomicBool = AtomicBool::new(false);

/// Records, at load, whether the module declared that a replica may serve
/// its old data set while it loads (the server knows the option flag).
pub fn declare_repl_async_load(declared: bool) {
    REPL_ASYNC_LOAD.store(declared, Ordering::Relaxed);
}

/// What the server supports, as (field, 0 or 1) pairs in INFO order: each
/// optional API is detected by its function pointer, each module option by
/// the server's own list of them, never by version.
pub fn capabilities() -> [(&'static CStr, u64); 4] {
    [
        (
            c"acl_categories",
            u64::from(crate::ffi::has_acl_categories()),
        ),
        (c"cached_clock", u64::from(crate::ffi::has_cached_clock())),
        (
            c"atomic_slot_migration",
            u64::from(ATOMIC_SLOT_MIGRATION.load(Ordering::Relaxed)),
        ),
        (
            c"repl_async_load",
            u64::from(REPL_ASYNC_LOAD.load(Ordering::Relaxed)),
        ),
    ]
}

/// The INFO sections: `slidewin_stats`, `slidewin_capabilities`,
/// `slidewin_config` (`version`, the release from Cargo.toml, and `log_type`), with compact logs `slidewin_compact`
/// (`compact_defrag_moved`: blocks active defragmentation moved), and
/// `slidewin_top`.
fn write_info(info: &mut InfoWriter) {
    info.section(c"stats");
    for (name, value) in snapshot() {
        info.field(name, value);
    }
    info.section(c"capabilities");
    for (name, value) in capabilities() {
        info.field(name, value);
    }
    info.section(c"config");
    info.text_field(c"version", VERSION_C);
    info.text_field(
        c"log_type",
        match crate::config::log_type() {
            crate::config::LogType::Zset => c"zset",
            crate::config::LogType::Compact => c"compact",
        },
    );
    if crate::config::log_type() == crate::config::LogType::Compact {
        info.section(c"compact");
        info.field(
            c"compact_defrag_moved",
            crate::ffi::module_type::defrag_moved(),
        );
    }
    let (capacity, period_ms, keys, bytes) =
        crate::top::hitters::info(crate::config::top_settings());
    info.section(c"top");
    info.field(c"top_capacity", capacity);
    info.field(c"top_period_ms", period_ms);
    info.field(c"top_keys_tracked", keys);
    info.field(c"top_memory_bytes", bytes);
}

/// Installs the module's INFO sections.
pub fn register(ctx: &redis_module::Context) {
    crate::ffi::register_info(ctx, write_info);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_declared_by_a_command_and_shown_once() {
        let declared = declared();
        for c in Counter::ALL {
            assert!(declared.contains(&c), "{c:?}: no command declares it");
        }
        let fields: Vec<&CStr> = snapshot().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            fields,
            [
                c"checks_allowed",
                c"checks_denied",
                c"cost_granted",
                c"repeated",
                c"checks_shadow_refused",
                c"peeks",
                c"undone",
                c"settled",
                c"errors"
            ]
        );
        for spec in COMMANDS.iter() {
            let mut seen = Vec::new();
            for c in spec.counters {
                assert!(!seen.contains(c), "{:?} twice", spec.doc.name);
                seen.push(*c);
            }
        }
    }
}
