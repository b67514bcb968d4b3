//! The log a server makes for new keys, and the one way a test chooses it.

/// The log the module makes for new keys (its `log-type` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogType {
    /// Sorted sets, the module's default.
    Zset,
    /// `log-type compact`.
    Compact,
}

/// Declares one test per server: `mod redis_7_0 { fn name() }`, and the same
/// in `redis_8_2`, `valkey_8_1` and `valkey_9_1`, each calling `body(Flavor)`.
/// `name => body(Compact);` (or `(Zset)`) calls `body(Flavor, LogType)`
/// instead: a body that runs on both log types says which where it is
/// declared, and takes it as a parameter.
#[macro_export]
macro_rules! on_every_server {
    ($($name:ident => $body:ident $(($log:ident))?;)*) => {
        mod redis_7_0 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Redis70 $(, super::support::LogType::$log)?)
            } )*
        }
        mod redis_8_2 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Redis82 $(, super::support::LogType::$log)?)
            } )*
        }
        mod valkey_8_1 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Valkey81 $(, super::support::LogType::$log)?)
            } )*
        }
        mod valkey_9_1 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Valkey91 $(, super::support::LogType::$log)?)
            } )*
        }
    };
}
