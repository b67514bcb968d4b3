//! The sliding-window decision, written against an abstract log of scores.
//!
//! Nothing here knows about Redis: the log is a trait ([`WindowLog`]) and the
//! clock is a plain argument, so the decision is tested with an in-memory log
//! and a fake clock. The Redis-backed log lives in `zset_log.rs`.
//!
//! The rule: the window at `now` is the half-open interval
//! `(now - window_ms, now]`. Entries with a score `<= now - window_ms` have
//! expired and are trimmed. If fewer than `limit` entries remain, one entry is
//! added at `now` and the log expires once its newest entry has left the
//! window; otherwise the call is denied and nothing is added.

use crate::args::CheckArgs;

/// A log of accepted calls, one entry per call, scored in milliseconds.
pub trait WindowLog {
    /// The error a backing store may report.
    type Error;

    /// Removes every entry whose score is `<= cutoff_ms`, returning how many
    /// entries were removed.
    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error>;

    /// The number of entries in the log.
    fn count(&self) -> Result<u64, Self::Error>;

    /// The largest score strictly greater than `now_ms`, if the log holds an
    /// entry from the future (a clock that stepped back, or entries written
    /// by a client whose clock runs ahead).
    fn newest_after(&mut self, now_ms: i64) -> Result<Option<f64>, Self::Error>;

    /// Adds one entry scored `now_ms` under a member unique in the log.
    fn append(&mut self, now_ms: i64) -> Result<(), Self::Error>;

    /// Sets the absolute time (ms) at which the whole log expires.
    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error>;
}

/// What one check decided and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the call was accepted (and recorded).
    pub allowed: bool,
    /// How many expired entries the trim removed.
    pub trimmed: u64,
    /// Entries in the window after this call.
    pub count: u64,
    /// The absolute expiry set on the log, when the call was accepted.
    pub expire_at_ms: Option<i64>,
}

/// The oldest score that has already expired at `now_ms`: entries scored at
/// or below it are outside the window.
pub fn cutoff(now_ms: i64, window_ms: i64) -> i64 {
    now_ms.saturating_sub(window_ms)
}

/// When a log whose newest entry is scored `newest_ms` stops mattering.
///
/// Normally the newest entry is the one just added at `now_ms`; when the log
/// holds entries from the future, the expiry follows the newest of them so
/// the key never disappears while an entry still counts.
pub fn expiry(now_ms: i64, newest_after_now: Option<f64>, window_ms: i64) -> i64 {
    let newest = match newest_after_now {
        // Scores are milliseconds; round up so a fractional score is covered.
        // `as` saturates for huge or non-finite values, which is what we want.
        Some(score) if score > now_ms as f64 => score.ceil() as i64,
        _ => now_ms,
    };
    newest.saturating_add(window_ms)
}

/// Runs one `SLIDEWIN.CHECK` against `log` at time `now_ms`.
pub fn check<L: WindowLog>(
    log: &mut L,
    now_ms: i64,
    args: &CheckArgs,
) -> Result<Outcome, L::Error> {
    let trimmed = log.trim(cutoff(now_ms, args.window_ms))?;
    let count = log.count()?;
    if count >= args.limit {
        return Ok(Outcome {
            allowed: false,
            trimmed,
            count,
            expire_at_ms: None,
        });
    }
    let newest = log.newest_after(now_ms)?;
    log.append(now_ms)?;
    let at = expiry(now_ms, newest, args.window_ms);
    log.expire_at(at)?;
    Ok(Outcome {
        allowed: true,
        trimmed,
        count: count.saturating_add(1),
        expire_at_ms: Some(at),
    })
}

/// An in-memory [`WindowLog`] for tests: a vector of scores and an expiry.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub scores: Vec<f64>,
    pub expire_at_ms: Option<i64>,
}

#[cfg(test)]
impl WindowLog for MemoryLog {
    type Error = std::convert::Infallible;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let before = self.scores.len();
        self.scores.retain(|&s| s > cutoff_ms as f64);
        Ok((before - self.scores.len()) as u64)
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.scores.len() as u64)
    }

    fn newest_after(&mut self, now_ms: i64) -> Result<Option<f64>, Self::Error> {
        Ok(self
            .scores
            .iter()
            .copied()
            .filter(|&s| s > now_ms as f64)
            .reduce(f64::max))
    }

    fn append(&mut self, now_ms: i64) -> Result<(), Self::Error> {
        self.scores.push(now_ms as f64);
        Ok(())
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.expire_at_ms = Some(at_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(limit: u64, window_ms: i64) -> CheckArgs {
        CheckArgs { limit, window_ms }
    }

    fn run(log: &mut MemoryLog, now: i64, a: &CheckArgs) -> Outcome {
        match check(log, now, a) {
            Ok(outcome) => outcome,
            Err(never) => match never {},
        }
    }

    #[test]
    fn sms_example_allows_five_then_denies() {
        let mut log = MemoryLog::default();
        let a = args(5, 60_000);
        let replies: Vec<bool> = (0..7)
            .map(|i| run(&mut log, 1_000_000 + i, &a).allowed)
            .collect();
        assert_eq!(replies, [true, true, true, true, true, false, false]);
        assert_eq!(log.scores.len(), 5);
        // The expiry follows the newest accepted entry, not the denied calls.
        assert_eq!(log.expire_at_ms, Some(1_000_004 + 60_000));
    }

    #[test]
    fn table_of_boundaries() {
        // (existing scores, now, limit, window) -> (allowed, trimmed, count, expire)
        type Case = (&'static [f64], i64, u64, i64, (bool, u64, u64, Option<i64>));
        let cases: &[Case] = &[
            // An entry exactly window_ms old has expired.
            (&[0.0], 1000, 1, 1000, (true, 1, 1, Some(2000))),
            // One millisecond younger, it still counts.
            (&[1.0], 1000, 1, 1000, (false, 0, 1, None)),
            // Empty log.
            (&[], 5, 3, 10, (true, 0, 1, Some(15))),
            // Full log, nothing stale: denied, nothing trimmed.
            (&[1.0, 2.0, 3.0], 5, 3, 10, (false, 0, 3, None)),
            // Full log with one stale entry: the trim frees a slot.
            (&[1.0, 2.0, 3.0], 11, 3, 10, (true, 1, 3, Some(21))),
            // A future entry (clock stepped back) still counts and the expiry
            // covers it.
            (&[50.0], 10, 2, 10, (true, 0, 2, Some(60))),
            // A fractional score from a foreign writer rounds the expiry up.
            (&[50.5], 10, 2, 10, (true, 0, 2, Some(61))),
        ];
        for (scores, now, limit, window, expected) in cases {
            let mut log = MemoryLog {
                scores: scores.to_vec(),
                expire_at_ms: None,
            };
            let got = run(&mut log, *now, &args(*limit, *window));
            assert_eq!(
                (got.allowed, got.trimmed, got.count, got.expire_at_ms),
                *expected,
                "scores {scores:?} now {now} limit {limit} window {window}"
            );
            assert_eq!(log.expire_at_ms, expected.3);
        }
    }

    #[test]
    fn denied_calls_leave_the_log_and_expiry_alone() {
        let mut log = MemoryLog::default();
        let a = args(2, 100);
        assert!(run(&mut log, 10, &a).allowed);
        assert!(run(&mut log, 20, &a).allowed);
        let before = log.clone();
        let denied = run(&mut log, 30, &a);
        assert!(!denied.allowed);
        assert_eq!(log.scores, before.scores);
        assert_eq!(log.expire_at_ms, Some(120));
    }

    #[test]
    fn extreme_clock_values_saturate_instead_of_overflowing() {
        let mut log = MemoryLog::default();
        let a = args(1, crate::args::MAX_WINDOW_MS);
        let got = run(&mut log, i64::MAX, &a);
        assert_eq!(got.expire_at_ms, Some(i64::MAX));
        let mut log = MemoryLog::default();
        let got = run(&mut log, i64::MIN, &a);
        assert!(got.allowed);
        assert_eq!(cutoff(i64::MIN, 5), i64::MIN);
    }

    /// The naive model: accept at `t` when fewer than `limit` accepted calls
    /// are scored after `t - window`.
    fn model_allows(accepted: &[i64], t: i64, limit: u64, window: i64) -> bool {
        let in_window = accepted.iter().filter(|&&s| s > t - window).count();
        (in_window as u64) < limit
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn agrees_with_the_naive_model(
            limit in 1u64..8,
            window in 1i64..200,
            steps in proptest::collection::vec(0i64..60, 1..120),
        ) {
            let a = args(limit, window);
            let mut log = MemoryLog::default();
            let mut accepted: Vec<i64> = Vec::new();
            let mut now = 1_000i64;
            for step in steps {
                now += step;
                let expected = model_allows(&accepted, now, limit, window);
                let got = run(&mut log, now, &a);
                prop_assert_eq!(got.allowed, expected);
                if got.allowed {
                    accepted.push(now);
                    prop_assert_eq!(got.expire_at_ms, Some(now + window));
                }
                // The log holds exactly the accepted entries still in the window.
                let live: Vec<f64> = accepted
                    .iter()
                    .filter(|&&s| s > now - window)
                    .map(|&s| s as f64)
                    .collect();
                prop_assert_eq!(&log.scores, &live);
                prop_assert_eq!(got.count, live.len() as u64);
            }
            // The promise: no trailing window ever holds more than `limit`.
            for &end in &accepted {
                let n = accepted.iter().filter(|&&s| s > end - window && s <= end).count();
                prop_assert!(n as u64 <= limit);
            }
        }
    }
}
