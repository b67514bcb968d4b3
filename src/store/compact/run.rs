//! A run: `count` entries scored alike under consecutive member ids, the
//! unit the log is made of; and the bounds every log holds, whichever way
//! it was made (decoded or changed by a command).

/// `count` entries scored `score` under members `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub score: i64,
    pub first: i64,
    pub count: u64,
}

impl Run {
    /// The last member of the run (`first + count - 1`; checked when the
    /// run was made).
    pub fn last(&self) -> i64 {
        let span = i64::try_from(self.count.saturating_sub(1)).unwrap_or(i64::MAX);
        self.first.saturating_add(span)
    }

    pub(super) fn holds(&self, id: i64) -> bool {
        self.first <= id && id <= self.last()
    }
}

/// The most entries a decoded log may hold: far above any `slidewin.max-limit`
/// times the costs of a window, far below where sums could overflow.
pub const MAX_ENTRIES: u64 = 1 << 40;

/// Scores are server times in ms, from 0 to 2^53 (where an `f64`, the
/// core's score, is still exact): a bound that keeps every gap between two
/// scores representable, so no score can be altered by the encoding.
pub const MAX_SCORE: i64 = 1 << 53;

/// The most runs a decoded log may hold: above any log the module makes
/// (`slidewin.max-limit` is at most 10,000,000), and a bound on what a
/// payload can make the decoder allocate.
pub const MAX_RUNS: u64 = 1 << 24;
