//! A log held as a list of chunks, and the window decision's queries and
//! changes on it.
//!
//! **Chain and strays.** The runs in score order are split in two:
//! - the *chain*: runs whose members increase with the score, held in the
//!   chunks; the chunks' member ranges are therefore sorted and disjoint,
//!   so the chunk that may hold a member is found by a binary search, and
//!   one chunk is decoded to find it;
//! - the *strays*: the other runs, at most [`MAX_STRAYS`], held apart in a
//!   list sorted by member (binary-searched too).
//!
//! Which runs are strays is a function of the runs alone, never of the
//! history: a run is in the chain exactly when its last member is below the
//! first member of every run after it in the *canonical order*, (score,
//! strays before the chain, strays by member descending, the chain by
//! member ascending). The encoding writes the runs in that order; the
//! decoder finds the same split in one pass (a run arriving below the
//! chain's tail sends that tail to the strays); every change keeps it
//! (an insert may send chain runs to the strays, a removal may bring strays
//! back). So a log, its replica and its reload agree on it, and each change
//! is refused alike everywhere when it would pass [`MAX_STRAYS`].
//!
//! CHECKs append at the end with a member above every other: chain runs,
//! O(1). Strays come from entries scored before newer ones with a greater
//! member (the clock stepped back) and from `SLIDEWIN.APPLY`.

mod build;
mod charges;
#[cfg(any(test, feature = "fuzzing"))]
mod checks;
mod edit;
mod form;
mod queries;

pub(super) use form::Chunked;
pub(super) use queries::greatest_decimal;
