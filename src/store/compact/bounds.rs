//! The bounds every compact log holds, whichever way it was made (decoded
//! or changed by a command), and [`Bound`], why a change is refused: the
//! one file the layers import them from.

// Every bound below is checked by the decoder (RDB, RESTORE, `SLIDEWIN.APPLY
// ... LOG`) AND refused by every change (`Bound`), so the logs a key can hold
// are exactly the logs the loader accepts: a log never fails to load again.

/// The most entries a log may hold: far above any `slidewin.max-limit`
/// times the costs of a window, far below where sums could overflow.
pub const MAX_ENTRIES: u64 = 1 << 40;

/// Scores are server times in ms, from 0 to 2^53 (where an `f64`, the
/// core's score, is still exact): a bound that keeps every gap between two
/// scores representable, so no score can be altered by the encoding.
pub const MAX_SCORE: i64 = 1 << 53;

/// The most runs a log may hold: above any log CHECKs make (an allowed
/// call leaves at most `limit` entries, and `slidewin.max-limit` is at most
/// 10,000,000), and a bound on what a payload can make the decoder build.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_RUNS: u64 = 1 << 24;
/// In the unit tests (and the fuzz targets, feature `fuzzing`), few enough
/// for a test to build a log at the bound.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_RUNS: u64 = 1 << 14;

/// The most runs a log may hold out of member order (the *strays*, see
/// `chunked/mod.rs`): the rest, the *chain*, has members increasing with the
/// score, so a member is found by a binary search; the strays are searched
/// apart. A log CHECKs make has strays only after the server's clock stepped
/// back (an entry scored before newer ones with a greater member): past
/// this many, such an entry is scored as the newest one instead (later,
/// never earlier: the limiter stays exact or stricter).
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_STRAYS: usize = 1024;
/// In the unit tests (and the fuzz targets), above the entries the model
/// tests keep (their limits are below 12: they must never meet it) and
/// within reach of the property tests of changes and of fuzz inputs.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_STRAYS: usize = 16;

/// The longest request id (bytes); the shortest is one byte.
pub const MAX_REQUEST_ID: usize = 128;

/// The most charge records a log may hold: the loader's bound (a key made
/// under a larger `slidewin.max-charges-per-key` still loads), far above
/// that setting's largest value.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_CHARGES: usize = 1 << 24;
/// In the unit tests and the fuzz targets: within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_CHARGES: usize = 64;

/// The most spans one charge may hold: its first, and one more for each
/// SETTLE that raised it while later entries had taken the ids after it.
#[cfg(not(any(test, feature = "fuzzing")))]
pub const MAX_CHARGE_SPANS: usize = 64;
/// In the unit tests and the fuzz targets: within reach.
#[cfg(any(test, feature = "fuzzing"))]
pub const MAX_CHARGE_SPANS: usize = 4;

/// Why a change to a log is refused: it would leave one of the bounds
/// above. Nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// More than [`MAX_RUNS`] runs.
    Runs,
    /// More than [`MAX_STRAYS`] runs out of member order.
    Strays,
    /// More than [`MAX_ENTRIES`] entries.
    Entries,
    /// More than [`MAX_CHARGES`] charges made
    /// with an ID.
    Charges,
    /// A charge in more than
    /// [`MAX_CHARGE_SPANS`] spans of ids.
    ChargeSpans,
    /// A request id empty or longer than
    /// [`MAX_REQUEST_ID`] bytes.
    RequestId,
}

impl Bound {
    /// What the refusal says (after `ERR `).
    pub fn message(&self) -> &'static str {
        static TEXTS: std::sync::OnceLock<[String; 6]> = std::sync::OnceLock::new();
        let [runs, strays, entries, charges, spans, request] = TEXTS.get_or_init(|| {
            [
                format!("the log would hold more than {MAX_RUNS} runs"),
                format!("the log would hold more than {MAX_STRAYS} runs out of member order"),
                format!("the log would hold more than {MAX_ENTRIES} entries"),
                format!("the log would hold more than {MAX_CHARGES} charges made with an ID"),
                format!(
                    "a charge made with an ID would hold more than {MAX_CHARGE_SPANS} runs of members"
                ),
                format!("ID must be 1 to {MAX_REQUEST_ID} bytes"),
            ]
        });
        match self {
            Bound::Runs => runs,
            Bound::Strays => strays,
            Bound::Entries => entries,
            Bound::Charges => charges,
            Bound::ChargeSpans => spans,
            Bound::RequestId => request,
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}
