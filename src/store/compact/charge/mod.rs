//! Charges made with an ID (`SLIDEWIN.CHECK ... ID request-id`): the table
//! of *charge records* a log holds beside its runs.
//!
//! A charge is the entries one allowed call with an ID added to the key,
//! all scored alike (the call's time). Its entries are ordinary entries of
//! the log (counted, trimmed and decided on as any other); the record only
//! names them: the request id, the score, and the member ids of its units
//! as *spans* of consecutive ids, in unit order (unit 1 is the first id of
//! the first span). A SETTLE that raises the units adds them under fresh
//! ids (a new span, unless they continue the last one).
//!
//! The table is packed for memory (a charge costs its id plus a few dozen
//! bytes):
//! - the records sit in a slab (`slots`) of 32-byte [`Slot`](table::Slot)s: the score,
//!   the first span, where the id is, and where any further spans are;
//! - the request ids sit one after another in one byte arena (`ids`), each
//!   behind its length byte; the bytes of the ones that went are reclaimed
//!   when they are as many as the live ones (each compaction is paid for
//!   by the removals before it);
//! - a charge's second and later spans (rare: a SETTLE raise after later
//!   calls took the ids after it) are in a side table (`extras`), made
//!   only while a charge has one.
//!
//! Up to [`SMALL_CHARGES`] charges the table is that and nothing more: a call
//! looks at each record (at most [`SMALL_CHARGES`], so O(1)). Beyond, an index
//! (`index`) keeps every call O(log n) in the live charges however the ids
//! and scores are laid out:
//! - `by_request`, an open-addressing hash table of slot indexes keyed by
//!   the request id (a hash keyed at random per process: ids a client
//!   chooses cannot be made to collide), finds a charge by id in O(1);
//!   beside each place, `tags` holds seven more bits of its id's hash, so
//!   a probe passes the places of other ids without reading their slots;
//! - `by_score`, a min-heap of slot indexes ordered by their record's
//!   score, lets a trim take the records scored at or below its cutoff in
//!   score order without a scan. A slot whose record went earlier (UNDO,
//!   SETTLE to 0) keeps its score and stays out of `free` until its heap
//!   entry comes to the top, so no entry ever names a record it was not
//!   made for;
//! - `held`, every span of every record as (first, last) sorted by member,
//!   answers "is this member a unit of a charge" (UNDO by member must never
//!   remove one) by a binary search. New spans take ids above every other
//!   and are appended; a span that goes is marked dead in place and the
//!   dead ones are swept out when they are as many as the live ones (each
//!   sweep is paid for by the removals before it).
//!
//! The heap and `held` are swept when dead entries outnumber the live
//! records, so the table never holds more than about twice what its live
//! charges need; the index is dropped when the charges fall to
//! [`SMALL_CHARGES`] / 2.
//!
//! A log of at most [`SMALL_CHARGES`] charges (and few runs, see `small.rs`)
//! is not held in this table between commands but in its small form, one
//! block with the records in a few bytes each besides their ids (see
//! `codec.rs`'s `put_small_records`); a command decodes it into this table.
//!
//! The bounds on charges (`bounds.rs`) are checked by the decoder and
//! refused by every change, as the log's own bounds are.
//!
//! One file a layer, each importing only the ones above it:
//! - `table.rs`: the types, the layout above, a record read from its slot,
//!   and the heap blocks the table owns;
//! - `heap.rs`: `by_score`, the heap of slots by score;
//! - `index.rs`: a record found by its id and a member among the spans, in
//!   either form; the index made, dropped, and `by_request` and `held` kept;
//! - `records.rs`: what a call asks: a charge found, added to, cut, the
//!   ones that left the window trimmed, and the table tidied after each;
//! - `build.rs`: [`RecordsBuilder`], the records a payload holds;
//! - `check.rs`: what every table holds (the unit tests, the fuzz targets);
//! - `tests.rs`: the records against a plain model.
//!
//! [`SMALL_CHARGES`]: table::SMALL_CHARGES

mod build;
#[cfg(any(test, feature = "fuzzing"))]
mod check;
mod heap;
mod index;
mod records;
mod table;

pub use build::{RecordsBuilder, SmallRecords};
pub use records::Found;
pub use table::{valid_request, Record, Records, Span, SMALL_CHARGES};

#[cfg(test)]
mod tests;
