//! The sliding-window decision, written against an abstract log of scores.
//!
//! Nothing here knows about Redis: the log is a trait ([`WindowLog`]) and the
//! clock is a plain argument, so the decision is tested with an in-memory log
//! and a fake clock. The Redis-backed logs live in `store/`.
//!
//! The rule: the window at `now` is the half-open interval
//! `(now - window_ms, now]`. Entries scored `<= now - window_ms` have expired.
//! With `n` entries in the window, a call of cost `c` is allowed when
//! `n + c <= limit`; it then adds `c` entries scored `now`, and the log
//! expires once its newest entry has left the window. A denied call adds
//! nothing.
//!
//! One file a concern: `log.rs` (the rules, the log trait, the verdicts),
//! `check.rs` (one key's decision), `ids.rs` (the member ids a call
//! gives), `mcheck.rs` (several rules at once), `memory.rs` (the tests'
//! in-memory log).

mod check;
mod ids;
mod log;
mod mcheck;
#[cfg(test)]
mod memory;

pub use check::*;
pub use log::*;
pub use mcheck::*;
#[cfg(test)]
pub use memory::*;

#[cfg(test)]
mod tests;
