//! The command argument parsers (`src/args.rs`) on arbitrary words (one a
//! line). The first byte picks the parser and the bounds; every word is
//! also compared with a reference integer parser. Accepted arguments are
//! within the bounds and say what the words said; an error is `ERR ...`
//! and quotes at most a short, printable piece of the input.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use slidewin::fuzzing::args::{self, ArgError, Bounds, Command, MAX_RULES, MAX_TOP_COUNT};

/// Redis's `string2ll` as a reference: what Rust reads as an i64 and
/// writes back as the same bytes (no `+`, no leading zeros, no `-0`).
fn reference_i64(bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?;
    let v: i64 = s.parse().ok()?;
    (v.to_string() == s).then_some(v)
}

fn error_ok(e: &ArgError) {
    let text = e.to_string();
    assert!(text.starts_with("ERR "), "{text}");
    // The longest fixed text plus a quoted token of 32 bytes as \xNN.
    assert!(text.len() <= 200, "error too long: {text}");
    assert!(
        text.bytes().all(|b| b.is_ascii_graphic() || b == b' '),
        "{text:?}"
    );
}

fn in_range(v: u64, max: i64) -> bool {
    v >= 1 && i64::try_from(v).is_ok_and(|v| v <= max)
}

/// The per-call entries check: refused exactly when `cost` in each of
/// `keys` keys passes the bound, with an error like any other.
fn entries_ok(cost: u64, keys: usize, bounds: Bounds) {
    let entries = cost.saturating_mul(keys as u64);
    let fits = u64::try_from(bounds.max_call_entries).is_ok_and(|max| entries <= max);
    match args::entries_within(cost, keys, bounds) {
        Ok(()) => assert!(fits, "{cost} x {keys} accepted"),
        Err(e) => {
            assert!(!fits, "{cost} x {keys} refused");
            error_ok(&e);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let words = common::words(rest);
    for w in &words {
        assert_eq!(args::parse_i64(w), reference_i64(w), "parse_i64({w:?})");
        let shown = args::printable(w);
        assert!(shown.len() <= 32 * 4 + 3);
        assert!(shown.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
    }
    let bounds = if pick & 0x80 != 0 {
        Bounds {
            max_limit: 10,
            max_window_ms: 1_000,
            max_call_entries: 25,
        }
    } else {
        Bounds::default()
    };
    let it = words.iter().map(Vec::as_slice);
    match pick % 4 {
        0 | 1 => {
            let command = if pick % 4 == 0 {
                Command::Check
            } else {
                Command::Peek
            };
            match args::parse(command, it, bounds) {
                Ok(r) => {
                    assert!(in_range(r.rule.limit, bounds.max_limit));
                    assert!(r.rule.window_ms >= 1 && r.rule.window_ms <= bounds.max_window_ms);
                    assert!(in_range(r.rule.cost, bounds.max_limit));
                    assert_eq!(Some(r.rule.limit as i64), args::parse_i64(&words[0]));
                    assert_eq!(Some(r.rule.window_ms), args::parse_i64(&words[1]));
                    assert!(command == Command::Check || !r.reply.with_members);
                    assert!(r.reply.detail || !(r.reply.with_members || r.reply.with_oldest));
                    assert!(command == Command::Check || r.reply.detail);
                    entries_ok(r.rule.cost, 1, bounds);
                }
                Err(e) => error_ok(&e),
            }
        }
        2 => match args::parse_multi(it, bounds) {
            Ok(m) => {
                let n = args::parse_i64(&words[0]).unwrap_or(0);
                assert!((1..=MAX_RULES).contains(&n));
                assert_eq!(m.rules.len() as i64, n);
                // The keys the parser took are where the server is told
                // they are (argv counted from the command name).
                let keys: Vec<usize> = m.rules.iter().map(|r| r.key).collect();
                let told: Vec<usize> =
                    args::mcheck_key_positions(Some(&words[0]), words.len() + 1).collect();
                assert_eq!(keys, told);
                for r in &m.rules {
                    assert!(in_range(r.limit, bounds.max_limit));
                    assert!(r.window_ms >= 1 && r.window_ms <= bounds.max_window_ms);
                }
                assert!(in_range(m.cost, bounds.max_limit));
                assert!(!m.reply.with_oldest);
                let mut names: Vec<&[u8]> = m
                    .rules
                    .iter()
                    .map(|r| words[r.key - 1].as_slice())
                    .collect();
                names.sort_unstable();
                names.dedup();
                entries_ok(m.cost, names.len(), bounds);
            }
            Err(e) => error_ok(&e),
        },
        _ => match args::parse_top(it) {
            Ok(t) => {
                assert!(t.count >= 1 && t.count as i64 <= MAX_TOP_COUNT);
            }
            Err(e) => error_ok(&e),
        },
    }
});
