//! Module configuration: `slidewin.max-limit`, `slidewin.max-window-ms`,
//! `slidewin.top-capacity` and `slidewin.top-period-ms`.
//!
//! Both can be given as load arguments (`--loadmodule libslidewin.so
//! max-limit 1000`), in redis.conf (`slidewin.max-limit 1000`) and at runtime
//! (`CONFIG SET slidewin.max-limit 1000`); `CONFIG GET slidewin.*` shows them.
//! Load arguments are checked strictly here (an unknown name or a bad value
//! refuses the load with a message in the server log); the server checks the
//! range on CONFIG SET.

use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::configuration::{register_i64_configuration, ConfigurationFlags};
use redis_module::Context;

use crate::args::{parse_i64, printable, Bounds, DEFAULT_MAX_LIMIT, DEFAULT_MAX_WINDOW_MS};
use crate::top;

/// The largest value `slidewin.max-limit` itself accepts.
pub const MAX_MAX_LIMIT: i64 = 10_000_000;
/// The largest value `slidewin.max-window-ms` accepts: 100 years.
pub const MAX_MAX_WINDOW_MS: i64 = 3_155_760_000_000;

static MAX_LIMIT: AtomicI64 = AtomicI64::new(DEFAULT_MAX_LIMIT);
static MAX_WINDOW_MS: AtomicI64 = AtomicI64::new(DEFAULT_MAX_WINDOW_MS);
static TOP_CAPACITY: AtomicI64 = AtomicI64::new(top::DEFAULT_CAPACITY);
static TOP_PERIOD_MS: AtomicI64 = AtomicI64::new(top::DEFAULT_PERIOD_MS);

/// One configuration setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    MaxLimit,
    MaxWindowMs,
    TopCapacity,
    TopPeriodMs,
}

impl Setting {
    pub const ALL: [Setting; 4] = [
        Setting::MaxLimit,
        Setting::MaxWindowMs,
        Setting::TopCapacity,
        Setting::TopPeriodMs,
    ];

    /// The name without the `slidewin.` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Setting::MaxLimit => "max-limit",
            Setting::MaxWindowMs => "max-window-ms",
            Setting::TopCapacity => "top-capacity",
            Setting::TopPeriodMs => "top-period-ms",
        }
    }

    pub fn default_value(self) -> i64 {
        match self {
            Setting::MaxLimit => DEFAULT_MAX_LIMIT,
            Setting::MaxWindowMs => DEFAULT_MAX_WINDOW_MS,
            Setting::TopCapacity => top::DEFAULT_CAPACITY,
            Setting::TopPeriodMs => top::DEFAULT_PERIOD_MS,
        }
    }

    pub fn min_value(self) -> i64 {
        match self {
            Setting::MaxLimit | Setting::MaxWindowMs => 1,
            // 0 turns the summary off.
            Setting::TopCapacity => 0,
            Setting::TopPeriodMs => top::MIN_PERIOD_MS,
        }
    }

    pub fn max_value(self) -> i64 {
        match self {
            Setting::MaxLimit => MAX_MAX_LIMIT,
            Setting::MaxWindowMs => MAX_MAX_WINDOW_MS,
            Setting::TopCapacity => top::MAX_CAPACITY,
            Setting::TopPeriodMs => top::MAX_PERIOD_MS,
        }
    }

    fn variable(self) -> &'static AtomicI64 {
        match self {
            Setting::MaxLimit => &MAX_LIMIT,
            Setting::MaxWindowMs => &MAX_WINDOW_MS,
            Setting::TopCapacity => &TOP_CAPACITY,
            Setting::TopPeriodMs => &TOP_PERIOD_MS,
        }
    }
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
    Bounds {
        max_limit: MAX_LIMIT.load(Ordering::Relaxed),
        max_window_ms: MAX_WINDOW_MS.load(Ordering::Relaxed),
    }
}

/// Parses load arguments: `name value` pairs of known settings, names
/// case-insensitive, with or without the `slidewin.` prefix. Returns the
/// value for each setting (its default when not given).
pub fn parse_load_args(args: &[&[u8]]) -> Result<[(Setting, i64); 4], String> {
    let mut values = Setting::ALL.map(|s| (s, s.default_value()));
    let mut rest = args;
    while let [name, tail @ ..] = rest {
        let lower = name.to_ascii_lowercase();
        let bare = lower.strip_prefix(b"slidewin.").unwrap_or(&lower);
        let Some(slot) = values.iter_mut().find(|(s, _)| s.name().as_bytes() == bare) else {
            return Err(format!(
                "unknown module argument '{}' (known: max-limit, max-window-ms, top-capacity, top-period-ms)",
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
    Ok(values)
}

/// Registers the settings with the server (where it supports module
/// configuration) using `values` as defaults, then applies any values from
/// redis.conf. Without config support the load-argument values stay fixed.
pub fn register(ctx: &Context, values: &[(Setting, i64)]) {
    for &(setting, value) in values {
        setting.variable().store(value, Ordering::Relaxed);
    }
    if !crate::ffi::has_module_config() {
        crate::ffi::log(
            Some(ctx),
            c"warning",
            "slidewin: this server has no module configuration; CONFIG SET slidewin.* is unavailable",
        );
        return;
    }
    for &(setting, value) in values {
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
    crate::ffi::load_configs(ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<[(Setting, i64); 4], String> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_load_args(&bytes)
    }

    #[test]
    fn defaults_without_arguments() {
        assert_eq!(
            parse(&[]),
            Ok([
                (Setting::MaxLimit, 100_000),
                (Setting::MaxWindowMs, 31_622_400_000),
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
                "0"
            ]),
            Ok([
                (Setting::MaxLimit, 1000),
                (Setting::MaxWindowMs, 5000),
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
                &["top-period-ms", "99"],
                "between 100 and 86400000, got '99'",
            ),
        ];
        for (args, expected) in cases {
            let err = parse(args).expect_err("must be refused");
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }
}
