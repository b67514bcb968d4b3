//! The log a server makes for new keys, and the one way a test chooses it:
//! a body that runs on either log type takes a [`LogType`], starts its
//! servers with [`Options::log_type`](super::Options::log_type), and is
//! declared once with the log types it runs on (`name => body(Zset,
//! Compact);` in [`on_every_server!`](crate::on_every_server)).

use super::{Flavor, Options};

/// The log the module makes for new keys (its `log-type` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogType {
    /// Sorted sets, the module's default.
    Zset,
    /// `log-type compact`.
    Compact,
}

impl LogType {
    /// The value of `slidewin.log-type` (and of the load argument).
    pub fn name(self) -> &'static str {
        match self {
            LogType::Zset => "zset",
            LogType::Compact => "compact",
        }
    }
}

/// A server whose new keys are compact logs: short for
/// `Options::new(flavor).log_type(LogType::Compact)`, for the tests that
/// are about the compact log alone.
pub fn compact(flavor: Flavor) -> Options {
    Options::new(flavor).log_type(LogType::Compact)
}

/// Declares one test per server of the suite for each entry, in modules
/// named after the server (`redis_7_0`, `redis_8_2`, `valkey_8_1`,
/// `valkey_9_1`):
///
/// - `name => body;` declares `<server>::name`, calling `body(Flavor)`;
/// - `name => body(Zset, Compact);` declares `<server>::name`, calling
///   `body(Flavor, LogType::Zset)`, and its compact-log twin
///   `on_compact_logs::<server>::name`, calling `body(Flavor,
///   LogType::Compact)`: a body that runs on both log types is declared
///   once, with the types it runs on;
/// - `name => body(Zset);` or `name => body(Compact);` declares only the
///   one (the compact one under `on_compact_logs::`).
///
/// So `make itest T=check::redis_7_0::window_slides` runs a test on both
/// log types, and `TEST_ARGS=--exact` the sorted-set one alone. One
/// invocation per file (it declares the modules).
#[macro_export]
macro_rules! on_every_server {
    (@sort [$($z:tt)*] [$($c:tt)*]) => {
        $crate::on_every_server!(@servers [$($z)*]);
        /// The tests declared with `Compact` among their log types.
        mod on_compact_logs {
            #[allow(unused_imports)]
            use super::*;
            $crate::on_every_server!(@servers [$($c)*]);
        }
    };
    (@sort [$($z:tt)*] [$($c:tt)*] $name:ident => $body:ident; $($rest:tt)*) => {
        $crate::on_every_server!(@sort [$($z)* ($name $body)] [$($c)*] $($rest)*);
    };
    (@sort [$($z:tt)*] [$($c:tt)*] $name:ident => $body:ident(Zset); $($rest:tt)*) => {
        $crate::on_every_server!(@sort [$($z)* ($name $body Zset)] [$($c)*] $($rest)*);
    };
    (@sort [$($z:tt)*] [$($c:tt)*] $name:ident => $body:ident(Compact); $($rest:tt)*) => {
        $crate::on_every_server!(@sort [$($z)*] [$($c)* ($name $body Compact)] $($rest)*);
    };
    (@sort [$($z:tt)*] [$($c:tt)*] $name:ident => $body:ident(Zset, Compact); $($rest:tt)*) => {
        $crate::on_every_server!(
            @sort [$($z)* ($name $body Zset)] [$($c)* ($name $body Compact)] $($rest)*
        );
    };
    (@servers [$($entry:tt)*]) => {
        $crate::on_every_server!(@server redis_7_0 Redis70 [$($entry)*]);
        $crate::on_every_server!(@server redis_8_2 Redis82 [$($entry)*]);
        $crate::on_every_server!(@server valkey_8_1 Valkey81 [$($entry)*]);
        $crate::on_every_server!(@server valkey_9_1 Valkey91 [$($entry)*]);
    };
    (@server $module:ident $flavor:ident [$(($name:ident $body:ident $($log:ident)?))*]) => {
        mod $module {
            $( #[test] fn $name() {
                super::$body(
                    $crate::support::Flavor::$flavor
                    $(, $crate::support::LogType::$log)?
                )
            } )*
        }
    };
    ($($entries:tt)*) => {
        $crate::on_every_server!(@sort [] [] $($entries)*);
    };
}
