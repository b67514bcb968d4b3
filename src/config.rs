//! Module configuration: `slidewin.max-limit`, `slidewin.max-window-ms`,
//! `slidewin.max-entries-per-call`, `slidewin.max-charges-per-key`,
//! `slidewin.top-capacity`,
//! `slidewin.top-period-ms` and `slidewin.log-type`.
//!
//! Each can be given as load arguments (`--loadmodule libslidewin.so
//! max-limit 1000`), in redis.conf (`slidewin.max-limit 1000`) and at runtime
//! (`CONFIG SET slidewin.max-limit 1000`); `CONFIG GET slidewin.*` shows them.
//! Load arguments are checked strictly here (an unknown name or a bad value
//! refuses the load with a message in the server log); the server checks the
//! range on CONFIG SET. `slidewin.log-type` (`zset`, the default, or
//! `compact`) is immutable: it decides at load whether the compact log's
//! data type is registered at all, so it cannot change afterwards.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use redis_module::configuration::{
    register_enum_configuration, register_i64_configuration, ConfigurationContext,
    ConfigurationFlags, ConfigurationValue, EnumConfigurationValue,
};
use redis_module::{Context, RedisError};

use crate::args::{
    parse_i64, printable, Bounds, DEFAULT_MAX_LIMIT, DEFAULT_MAX_WINDOW_MS, MAX_RULES,
};
use crate::top;

/// The largest value `slidewin.max-limit` itself accepts.
pub const MAX_MAX_LIMIT: i64 = 10_000_000;
/// The largest value `slidewin.max-window-ms` accepts: 100 years.
pub const MAX_MAX_WINDOW_MS: i64 = 3_155_760_000_000;
/// The default of `slidewin.max-charges-per-key`: a call that finds every
/// charge of a key expired at once (0.2 to 0.3 µs each, measured in
/// bench/results-charges.md) stays near a millisecond.
pub const DEFAULT_MAX_CHARGES_PER_KEY: i64 = 5_000;
/// The largest value `slidewin.max-charges-per-key` accepts: what a compact
/// log may hold at all (the loader's bound).
pub const MAX_MAX_CHARGES_PER_KEY: i64 = 1 << 24;
/// The largest value `slidewin.max-entries-per-call` accepts: what one
/// MCHECK could add at the largest `max-limit` on all its keys.
pub const MAX_MAX_ENTRIES_PER_CALL: i64 = MAX_MAX_LIMIT * MAX_RULES;

static MAX_LIMIT: AtomicI64 = AtomicI64::new(DEFAULT_MAX_LIMIT);
static MAX_WINDOW_MS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_WINDOW_MS);
/// 0 (the default): the value of `slidewin.max-limit`.
static MAX_ENTRIES_PER_CALL: AtomicI64 = AtomicI64::new(0);
/// The most charges made with an ID one compact log may hold.
static MAX_CHARGES_PER_KEY: AtomicI64 = AtomicI64::new(DEFAULT_MAX_CHARGES_PER_KEY);
static TOP_CAPACITY: AtomicI64 = AtomicI64::new(top::DEFAULT_CAPACITY);
static TOP_PERIOD_MS: AtomicI64 = AtomicI64::new(top::DEFAULT_PERIOD_MS);

/// What CHECK and MCHECK create a missing key as (`slidewin.log-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogType {
    /// A plain sorted set (the default): readable without the module.
    Zset,
    /// The compact log, a module data type (about two bytes an entry).
    Compact,
}

impl LogType {
    pub const ALL: [LogType; 2] = [LogType::Zset, LogType::Compact];

    pub fn name(self) -> &'static str {
        match self {
            LogType::Zset => "zset",
            LogType::Compact => "compact",
        }
    }
}

impl From<LogType> for i32 {
    fn from(t: LogType) -> i32 {
        match t {
            LogType::Zset => 0,
            LogType::Compact => 1,
        }
    }
}

impl TryFrom<i32> for LogType {
    type Error = RedisError;
    fn try_from(v: i32) -> Result<Self, RedisError> {
        match v {
            0 => Ok(LogType::Zset),
            1 => Ok(LogType::Compact),
            _ => Err(RedisError::Str(
                "ERR slidewin.log-type must be zset or compact",
            )),
        }
    }
}

impl EnumConfigurationValue for LogType {
    fn get_options(&self) -> (Vec<String>, Vec<i32>) {
        (
            LogType::ALL.iter().map(|t| t.name().to_string()).collect(),
            LogType::ALL.iter().map(|&t| i32::from(t)).collect(),
        )
    }
}

/// `slidewin.log-type`, fixed at load.
static COMPACT: AtomicBool = AtomicBool::new(false);

/// The storage the server reads `slidewin.log-type` from (the server sets
/// it only while loading: the setting is immutable).
struct LogTypeVariable;

static LOG_TYPE_VARIABLE: LogTypeVariable = LogTypeVariable;

impl ConfigurationValue<LogType> for LogTypeVariable {
    fn get(&self, _: &ConfigurationContext) -> LogType {
        log_type()
    }
    fn set(&self, _: &ConfigurationContext, v: LogType) -> Result<(), RedisError> {
        COMPACT.store(v == LogType::Compact, Ordering::Relaxed);
        Ok(())
    }
}

/// `slidewin.log-type` as loaded.
pub fn log_type() -> LogType {
    if COMPACT.load(Ordering::Relaxed) {
        LogType::Compact
    } else {
        LogType::Zset
    }
}

/// What the load arguments set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadArgs {
    pub numbers: [(Setting, i64); 6],
    pub log_type: LogType,
}

/// One configuration setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    MaxLimit,
    MaxWindowMs,
    /// The entries one call may add in all keys; 0: `max-limit`.
    MaxEntriesPerCall,
    /// The charges made with an ID one compact log may hold.
    MaxChargesPerKey,
    TopCapacity,
    TopPeriodMs,
}

impl Setting {
    pub const ALL: [Setting; 6] = [
        Setting::MaxLimit,
        Setting::MaxWindowMs,
        Setting::MaxEntriesPerCall,
        Setting::MaxChargesPerKey,
        Setting::TopCapacity,
        Setting::TopPeriodMs,
    ];

    /// The name without the `slidewin.` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Setting::MaxLimit => "max-limit",
            Setting::MaxWindowMs => "max-window-ms",
            Setting::MaxEntriesPerCall => "max-entries-per-call",
            Setting::MaxChargesPerKey => "max-charges-per-key",
            Setting::TopCapacity => "top-capacity",
            Setting::TopPeriodMs => "top-period-ms",
        }
    }

    pub fn default_value(self) -> i64 {
        match self {
            Setting::MaxLimit => DEFAULT_MAX_LIMIT,
            Setting::MaxWindowMs => DEFAULT_MAX_WINDOW_MS,
            Setting::MaxEntriesPerCall => 0,
            Setting::MaxChargesPerKey => DEFAULT_MAX_CHARGES_PER_KEY,
            Setting::TopCapacity => top::DEFAULT_CAPACITY,
            Setting::TopPeriodMs => top::DEFAULT_PERIOD_MS,
        }
    }

    pub fn min_value(self) -> i64 {
        match self {
            Setting::MaxLimit | Setting::MaxWindowMs | Setting::MaxChargesPerKey => 1,
            // 0 follows `max-limit`; 0 turns the summary off.
            Setting::MaxEntriesPerCall | Setting::TopCapacity => 0,
            Setting::TopPeriodMs => top::MIN_PERIOD_MS,
        }
    }

    pub fn max_value(self) -> i64 {
        match self {
            Setting::MaxLimit => MAX_MAX_LIMIT,
            Setting::MaxWindowMs => MAX_MAX_WINDOW_MS,
            Setting::MaxEntriesPerCall => MAX_MAX_ENTRIES_PER_CALL,
            Setting::MaxChargesPerKey => MAX_MAX_CHARGES_PER_KEY,
            Setting::TopCapacity => top::MAX_CAPACITY,
            Setting::TopPeriodMs => top::MAX_PERIOD_MS,
        }
    }

    fn variable(self) -> &'static AtomicI64 {
        match self {
            Setting::MaxLimit => &MAX_LIMIT,
            Setting::MaxWindowMs => &MAX_WINDOW_MS,
            Setting::MaxEntriesPerCall => &MAX_ENTRIES_PER_CALL,
            Setting::MaxChargesPerKey => &MAX_CHARGES_PER_KEY,
            Setting::TopCapacity => &TOP_CAPACITY,
            Setting::TopPeriodMs => &TOP_PERIOD_MS,
        }
    }
}

/// `slidewin.max-charges-per-key` now.
pub fn max_charges_per_key() -> usize {
    usize::try_from(MAX_CHARGES_PER_KEY.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
}

/// `slidewin.top-capacity` and `slidewin.top-period-ms` now.
pub fn top_settings() -> (i64, i64) {
    (
        TOP_CAPACITY.load(Ordering::Relaxed),
        TOP_PERIOD_MS.load(Ordering::Relaxed),
    )
}

/// The bounds in force now.
pub fn bounds() -> Bounds {
    let max_limit = MAX_LIMIT.load(Ordering::Relaxed);
    Bounds {
        max_limit,
        max_window_ms: MAX_WINDOW_MS.load(Ordering::Relaxed),
        max_call_entries: entries_per_call(MAX_ENTRIES_PER_CALL.load(Ordering::Relaxed), max_limit),
    }
}

/// The entries one call may add when `slidewin.max-entries-per-call` is
/// `setting` and `slidewin.max-limit` is `max_limit`: 0 follows max-limit.
pub fn entries_per_call(setting: i64, max_limit: i64) -> i64 {
    if setting > 0 {
        setting
    } else {
        max_limit
    }
}

/// Parses load arguments: `name value` pairs of known settings, names
/// case-insensitive, with or without the `slidewin.` prefix. Returns the
/// value for each setting (its default when not given).
pub fn parse_load_args(args: &[&[u8]]) -> Result<LoadArgs, String> {
    let mut values = Setting::ALL.map(|s| (s, s.default_value()));
    let mut log_type = LogType::Zset;
    let mut rest = args;
    while let [name, tail @ ..] = rest {
        let lower = name.to_ascii_lowercase();
        let bare = lower.strip_prefix(b"slidewin.").unwrap_or(&lower);
        if bare == b"log-type" {
            let [value, after @ ..] = tail else {
                return Err("module argument log-type needs a value".to_string());
            };
            let v = value.to_ascii_lowercase();
            log_type = LogType::ALL
                .into_iter()
                .find(|t| t.name().as_bytes() == v.as_slice())
                .ok_or_else(|| {
                    format!(
                        "module argument log-type must be zset or compact, got '{}'",
                        printable(value)
                    )
                })?;
            rest = after;
            continue;
        }
        let Some(slot) = values.iter_mut().find(|(s, _)| s.name().as_bytes() == bare) else {
            return Err(format!(
                "unknown module argument '{}' (known: max-limit, max-window-ms, max-entries-per-call, max-charges-per-key, top-capacity, top-period-ms, log-type)",
                printable(name)
            ));
        };
        let setting = slot.0;
        let [value, after @ ..] = tail else {
            return Err(format!("module argument {} needs a value", setting.name()));
        };
        slot.1 = parse_i64(value)
            .filter(|v| (setting.min_value()..=setting.max_value()).contains(v))
            .ok_or_else(|| {
                format!(
                    "module argument {} must be an integer between {} and {}, got '{}'",
                    setting.name(),
                    setting.min_value(),
                    setting.max_value(),
                    printable(value)
                )
            })?;
        rest = after;
    }
    Ok(LoadArgs {
        numbers: values,
        log_type,
    })
}

/// Registers the settings with the server (where it supports module
/// configuration) using `values` as defaults, then applies any values from
/// redis.conf. Without config support the load-argument values stay fixed.
pub fn register(ctx: &Context, values: &LoadArgs) {
    for &(setting, value) in &values.numbers {
        setting.variable().store(value, Ordering::Relaxed);
    }
    COMPACT.store(values.log_type == LogType::Compact, Ordering::Relaxed);
    if !crate::ffi::has_module_config() {
        crate::ffi::log(
            Some(ctx),
            c"warning",
            "slidewin: this server has no module configuration; CONFIG SET slidewin.* is unavailable",
        );
        return;
    }
    for &(setting, value) in &values.numbers {
        register_i64_configuration(
            ctx,
            setting.name(),
            setting.variable(),
            value,
            setting.min_value(),
            setting.max_value(),
            ConfigurationFlags::DEFAULT,
            None,
        );
    }
    register_enum_configuration(
        ctx,
        "log-type",
        &LOG_TYPE_VARIABLE,
        values.log_type,
        ConfigurationFlags::IMMUTABLE,
        None,
    );
    crate::ffi::load_configs(ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<[(Setting, i64); 6], String> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_load_args(&bytes).map(|a| a.numbers)
    }

    fn log_type_of(args: &[&str]) -> Result<LogType, String> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_load_args(&bytes).map(|a| a.log_type)
    }

    #[test]
    fn log_type_is_zset_unless_given() {
        assert_eq!(log_type_of(&[]), Ok(LogType::Zset));
        assert_eq!(log_type_of(&["log-type", "COMPACT"]), Ok(LogType::Compact));
        assert_eq!(
            log_type_of(&["max-limit", "5", "slidewin.log-type", "zset"]),
            Ok(LogType::Zset)
        );
        assert_eq!(
            parse(&["log-type", "compact", "max-limit", "7"]).map(|v| v[0].1),
            Ok(7)
        );
        for (args, expected) in [
            (&["log-type"][..], "module argument log-type needs a value"),
            (
                &["log-type", "list"][..],
                "log-type must be zset or compact, got 'list'",
            ),
        ] {
            let err = log_type_of(args).expect_err("must be refused");
            assert!(err.contains(expected), "{args:?}: {err}");
        }
        for t in LogType::ALL {
            assert_eq!(LogType::try_from(i32::from(t)).ok(), Some(t));
        }
        assert!(LogType::try_from(2).is_err());
    }

    #[test]
    fn defaults_without_arguments() {
        assert_eq!(
            parse(&[]),
            Ok([
                (Setting::MaxLimit, 100_000),
                (Setting::MaxWindowMs, 31_622_400_000),
                (Setting::MaxEntriesPerCall, 0),
                (Setting::MaxChargesPerKey, 5_000),
                (Setting::TopCapacity, 128),
                (Setting::TopPeriodMs, 300_000),
            ])
        );
    }

    #[test]
    fn known_arguments_in_any_case_and_order() {
        assert_eq!(
            parse(&[
                "MAX-WINDOW-MS",
                "5000",
                "slidewin.max-limit",
                "1000",
                "top-capacity",
                "0",
                "Max-Entries-Per-Call",
                "6400000"
            ]),
            Ok([
                (Setting::MaxLimit, 1000),
                (Setting::MaxWindowMs, 5000),
                (Setting::MaxEntriesPerCall, 6_400_000),
                (Setting::MaxChargesPerKey, 5_000),
                (Setting::TopCapacity, 0),
                (Setting::TopPeriodMs, 300_000),
            ])
        );
    }

    #[test]
    fn bad_arguments_are_refused_with_a_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["max-limt", "5"], "unknown module argument 'max-limt'"),
            (&["max-limit"], "module argument max-limit needs a value"),
            (&["max-limit", "0"], "between 1 and 10000000, got '0'"),
            (&["max-limit", "10000001"], "between 1 and 10000000"),
            (
                &["max-window-ms", "1.5"],
                "between 1 and 3155760000000, got '1.5'",
            ),
            (&["max-window-ms", "-1"], "max-window-ms must be an integer"),
            (&["top-capacity", "-1"], "between 0 and 100000, got '-1'"),
            (
                &["max-entries-per-call", "-1"],
                "max-entries-per-call must be an integer between 0 and 640000000, got '-1'",
            ),
            (
                &["max-entries-per-call", "640000001"],
                "between 0 and 640000000",
            ),
            (
                &["top-period-ms", "99"],
                "between 100 and 86400000, got '99'",
            ),
        ];
        for (args, expected) in cases {
            let err = parse(args).expect_err("must be refused");
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }

    #[test]
    fn entries_per_call_follows_max_limit_unless_set() {
        assert_eq!(entries_per_call(0, 100_000), 100_000);
        assert_eq!(entries_per_call(0, 200_000), 200_000);
        assert_eq!(entries_per_call(1_000, 200_000), 1_000);
        assert_eq!(entries_per_call(6_400_000, 100_000), 6_400_000);
        assert_eq!(
            MAX_MAX_ENTRIES_PER_CALL,
            Setting::MaxEntriesPerCall.max_value()
        );
    }
}
