//! The compact log: a second [`WindowLog`](crate::window::WindowLog) store,
//! pure, with its byte encoding; `store.rs` makes it the server data type
//! `slidewlog` when `slidewin.log-type` is `compact`; `effect.rs` is the
//! effect command that replicates its changes.
//!
//! One file a layer, each importing only the ones above it:
//! - `bounds.rs`: the bounds every log holds (runs, strays, entries,
//!   scores, charges) and [`Bound`](bounds::Bound), why a change is refused;
//! - `run.rs`: a run, and the rule that joins a run to the next;
//! - `charge/`: the charge records (request id -> score and member ids of
//!   a charge made with an ID);
//! - `codec.rs`: the persisted encoding (version 1, and 2 with charge
//!   records): the header, the byte records, the readers for untrusted
//!   bytes; golden-bytes tests;
//! - `form_codec.rs`: a small log's form in memory (tighter than the
//!   persisted encoding; never leaves the process); golden-bytes tests;
//! - `rice.rs`: the Rice code a sealed chunk may use in memory;
//! - `chunk.rs`: a chunk of up to [`CHUNK_RUNS`](chunk::CHUNK_RUNS) runs and its summaries;
//! - `splice.rs`: a chunk's records found and changed in the middle, and
//!   the marks that bound the reading;
//! - `chunked/`: a log as a list of chunks (the type, building and
//!   encoding it, changes, charges, the decision's queries, the checks);
//! - `small.rs`: a small log's common changes made on its encoding in place,
//!   and the size of the small form ([`SMALL_RUNS`](small::SMALL_RUNS));
//! - `spare.rs`: what a small log's round trip through chunks reuses;
//! - `log.rs`: [`CompactLog`], the value a key holds (which form a log is
//!   held in), and [`Hold`], what a command keeps while it holds one, with
//!   their `WindowLog`s;
//! - `effect.rs` (pure) and `store.rs` (the server data type and store).
//!
//! A log is a list of *runs*, each `count` entries scored `score` (ms) under
//! the consecutive member ids `first .. first + count`. The core gives a new
//! entry one more than the newest member (see `member.rs`), so the entries
//! of one call, and calls in the same millisecond, extend one run: a call
//! of `COST 10000` is one run, not 10000 entries. Runs are kept in score
//! order; members are unique over the whole log. Every query answers what
//! the sorted-set store answers for the same entries, including the order
//! of equal scores (byte-wise on the members' decimal forms), so the core
//! decides identically on both (the property tests drive both).
//!
//! The encoding ([`CompactLog::encode`], [`CompactLog::decode`]) is what an
//! RDB, a RESTORE payload or an effect command will carry: a version byte,
//! the expiry, the first score, then one record per run, mostly one or two
//! bytes: a run of one entry whose member is the expected one (one more
//! than the previous run's last) and whose score is less than 128 ms after
//! the previous one takes one byte, less than 16384 ms two. Decoding treats
//! the bytes as hostile: every length, sum and order is checked, and a log
//! it returns satisfies every invariant the queries rely on.

mod bounds;
mod charge;
mod chunk;
mod chunked;
mod codec;
mod form_codec;
mod log;
mod rice;
mod run;
mod small;
mod spare;
mod splice;

pub mod effect;
pub mod store;

// The fuzz targets' view (lib.rs, `fuzzing`): the log, its bound and the
// oracle. Within the crate, each file imports what it uses from the file
// that defines it.
#[cfg(feature = "fuzzing")]
pub use bounds::MAX_ENTRIES;
#[cfg(feature = "fuzzing")]
pub use log::{CompactLog, Hold};
#[cfg(feature = "fuzzing")]
pub use run::canonical_by_sorting;

#[cfg(test)]
mod tests;
