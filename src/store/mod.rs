//! The stores: each encoding of a log is a `WindowLog` the pure decision
//! (`window.rs`) runs on, and `key_log` picks the one a key holds.
//!
//! - `zset` (the safe wrapper over the low-level key API) and `zset_log`
//!   (a sorted-set key as the log; its effects replicate as native commands):
//!   the default, readable without the module.
//! - `compact` (pure: the compact log and its encoding), `effect` (pure:
//!   `SLIDEWIN.APPLY`'s effect) and `compact_store` (the compact log as the
//!   data type `slidewlog` and as a store): `slidewin.log-type compact`.
//! - `key_log`: the log in a key, whichever store holds it.

pub mod compact;
pub mod compact_store;
pub mod effect;
pub mod key_log;
pub mod zset;
pub mod zset_log;
