//! Argument parsing for the SLIDEWIN commands: pure Rust, no Redis types.
//!
//! Integers are parsed the way Redis parses them (`string2ll`): an optional
//! `-`, then decimal digits, no `+`, no spaces, no leading zeros, no
//! exponent, no fraction, and no overflow. Anything else is rejected with an
//! error naming the argument and its valid range.

use std::fmt;

/// Smallest accepted `limit`.
pub const MIN_LIMIT: i64 = 1;
/// Largest accepted `limit` (bounds the number of entries one key can hold).
pub const MAX_LIMIT: i64 = 100_000;
/// Smallest accepted `window_ms`.
pub const MIN_WINDOW_MS: i64 = 1;
/// Largest accepted `window_ms`: 366 days.
pub const MAX_WINDOW_MS: i64 = 366 * 24 * 60 * 60 * 1000;

/// The validated numeric arguments of `SLIDEWIN.CHECK key limit window_ms`.
/// The key itself is not parsed: it is binary-safe and passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckArgs {
    /// At most this many accepted calls in any trailing window.
    pub limit: u64,
    /// The window length in milliseconds.
    pub window_ms: i64,
}

/// Why an argument vector was refused. `Display` gives the exact reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// The number of arguments is wrong; the server words this reply itself.
    WrongArity,
    /// `limit` is not an integer in its range.
    Limit,
    /// `window_ms` is not an integer in its range.
    Window,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::WrongArity => f.write_str("ERR wrong number of arguments"),
            ArgError::Limit => write!(
                f,
                "ERR limit must be an integer between {MIN_LIMIT} and {MAX_LIMIT}"
            ),
            ArgError::Window => write!(
                f,
                "ERR window_ms must be an integer between {MIN_WINDOW_MS} and {MAX_WINDOW_MS}"
            ),
        }
    }
}

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does.
/// Returns `None` for anything Redis would refuse as "not an integer".
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        None => return None,
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] => return if negative { None } else { Some(0) },
        [b'0', ..] => return None,
        _ => {}
    }
    // Accumulate as a negative number so that i64::MIN is representable.
    let mut acc: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        acc = acc.checked_mul(10)?.checked_sub(d)?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// Parses `bytes` as an integer within `[min, max]`.
pub fn parse_in_range(bytes: &[u8], min: i64, max: i64) -> Option<i64> {
    parse_i64(bytes).filter(|v| (min..=max).contains(v))
}

/// Parses the arguments that follow the command name and key:
/// `limit window_ms`. `rest` must hold exactly those two arguments.
pub fn parse_check<A: AsRef<[u8]>>(rest: &[A]) -> Result<CheckArgs, ArgError> {
    let [limit, window] = rest else {
        return Err(ArgError::WrongArity);
    };
    let limit = parse_in_range(limit.as_ref(), MIN_LIMIT, MAX_LIMIT).ok_or(ArgError::Limit)?;
    let window_ms =
        parse_in_range(window.as_ref(), MIN_WINDOW_MS, MAX_WINDOW_MS).ok_or(ArgError::Window)?;
    // `limit` is within 1..=MAX_LIMIT, so the conversion cannot fail.
    let limit = u64::try_from(limit).map_err(|_| ArgError::Limit)?;
    Ok(CheckArgs { limit, window_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_parse_like_redis() {
        let cases: &[(&str, Option<i64>)] = &[
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("60000", Some(60_000)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("99999999999999999999999", None),
            ("", None),
            ("-", None),
            ("-0", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1e3", None),
            ("1.5", None),
            ("1.0", None),
            ("0x10", None),
            ("inf", None),
            ("nan", None),
            ("--1", None),
            ("1-", None),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_i64(input.as_bytes()), *expected, "input {input:?}");
        }
    }

    #[test]
    fn non_utf8_is_not_an_integer() {
        assert_eq!(parse_i64(&[0xff, b'1']), None);
        assert_eq!(parse_i64(&[b'1', 0x80]), None);
    }

    #[test]
    fn check_arguments_accept_the_valid_range() {
        assert_eq!(
            parse_check(&["5", "60000"]),
            Ok(CheckArgs {
                limit: 5,
                window_ms: 60_000
            })
        );
        assert_eq!(
            parse_check(&["1", "1"]),
            Ok(CheckArgs {
                limit: 1,
                window_ms: 1
            })
        );
        assert_eq!(
            parse_check(&["100000", "31622400000"]),
            Ok(CheckArgs {
                limit: 100_000,
                window_ms: MAX_WINDOW_MS
            })
        );
    }

    #[test]
    fn check_arguments_refuse_everything_else() {
        let cases: &[(&[&str], ArgError)] = &[
            (&["0", "1000"], ArgError::Limit),
            (&["-5", "1000"], ArgError::Limit),
            (&["100001", "1000"], ArgError::Limit),
            (&["1.5", "1000"], ArgError::Limit),
            (&["1e3", "1000"], ArgError::Limit),
            (&["", "1000"], ArgError::Limit),
            (&["abc", "1000"], ArgError::Limit),
            (&["99999999999999999999", "1000"], ArgError::Limit),
            (&["5", "0"], ArgError::Window),
            (&["5", "-1"], ArgError::Window),
            (&["5", "31622400001"], ArgError::Window),
            (&["5", "1.5"], ArgError::Window),
            (&["5", "1e3"], ArgError::Window),
            (&["5", ""], ArgError::Window),
            (&["5", "99999999999999999999"], ArgError::Window),
            // The limit is checked first when both are bad.
            (&["0", "0"], ArgError::Limit),
            (&["5"], ArgError::WrongArity),
            (&[], ArgError::WrongArity),
            (&["5", "1000", "extra"], ArgError::WrongArity),
        ];
        for (args, expected) in cases {
            assert_eq!(parse_check(args), Err(*expected), "args {args:?}");
        }
    }

    #[test]
    fn error_texts_name_the_argument_and_range() {
        assert_eq!(
            ArgError::Limit.to_string(),
            "ERR limit must be an integer between 1 and 100000"
        );
        assert_eq!(
            ArgError::Window.to_string(),
            "ERR window_ms must be an integer between 1 and 31622400000"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn every_i64_round_trips(v in any::<i64>()) {
            prop_assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_agree_with_std(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            let ours = parse_i64(&bytes);
            // The naive model: std's parser, restricted to Redis's canonical form.
            let model = std::str::from_utf8(&bytes).ok().and_then(|s| {
                let canonical = s.parse::<i64>().ok()?;
                (canonical.to_string() == s).then_some(canonical)
            });
            prop_assert_eq!(ours, model);
        }
    }
}
