//! The stores: each encoding of a log is a `WindowLog` the pure decision
//! (`window/`) runs on, and `key_log` picks the one a key holds.
//!
//! - `zset_log` (a sorted-set key as the log, through the key handle
//!   `ffi::key`; its effects replicate as native commands): the default,
//!   readable without the module.
//! - `compact`: the compact log (`slidewin.log-type compact`), a folder of
//!   its own: the pure log and its encoding, `compact::effect` (pure:
//!   `SLIDEWIN.APPLY`'s effect) and `compact::store` (the log as the data
//!   type `slidewlog` and as a store).
//! - `key_log`: the log in a key, whichever store holds it.

pub mod compact;
pub mod key_log;
pub mod zset_log;
