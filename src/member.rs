//! Member ids for log entries: the decimal form of a non-negative integer,
//! unique among the entries of its key.
//!
//! **Short ids first.** A new entry takes one more than the member of the
//! key's newest entry ([`first_choice`]), or 1 when the key is empty or its
//! newest member is not an id (an entry of the seed script). A key's ids
//! thus count up 1, 2, 3... while it lives: 1-2 bytes each in a listpack,
//! where a 19-digit id takes 9. Integer members never collide with the
//! script's `<ms>-<uuid>` members, which are not integers.
//!
//! **Wide ids as the fallback.** When the short id is taken (a tie of
//! scores put another entry last, or a foreign integer member), the entry
//! takes a wide id, `now_ms << SEQ_BITS | sequence` ([`fresh`]), where the
//! sequence counts every wide id this server made: two share an id only
//! after 2^20 of them within one millisecond, or after the clock steps
//! back. The decision adds with NX and, if a wide id is taken too, moves
//! on to [`next`]; among `n + 1` consecutive ids one is free.
//!
//! **Tokens.** What WITHMEMBERS hands out is not the bare id but a token
//! `<id>@<ms>`, the id and the entry's score ([`token`]): UNDO by token
//! removes the entry only while its score is still `ms`. A key that
//! empties starts its ids over at 1, but its new entries are scored later,
//! so an old token never names them. Within one millisecond an id freed by
//! an UNDO could be chosen again: the [`fence`] makes the ids chosen in the
//! rest of that millisecond start above it.
//!
//! **Request ids.** The entries of a charge made with `ID <request-id>` are
//! named by the store from the request id (`#<unit>:<request-id>` in a
//! sorted set), never handed out, and never removed by member.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Bits of the per-process sequence inside a member id.
pub const SEQ_BITS: u32 = 20;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The largest millisecond timestamp that fits (year 2248).
pub const MAX_MS: i64 = i64::MAX >> SEQ_BITS;

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Builds the member id for an entry scored `now_ms`, with sequence `seq`.
/// Timestamps outside `0..=MAX_MS` are clamped, so the id is always a
/// non-negative `i64`.
pub fn member_id(now_ms: i64, seq: u64) -> i64 {
    let ms = now_ms.clamp(0, MAX_MS);
    // `ms <= MAX_MS` so the shift stays within 63 bits; the sequence is
    // masked into the freed low bits.
    let low = (seq & SEQ_MASK) as i64;
    (ms << SEQ_BITS) | low
}

/// The id to try after `id` was found taken: the next integer, wrapping to 0
/// instead of overflowing.
pub fn next(id: i64) -> i64 {
    id.checked_add(1).unwrap_or(0)
}

/// The first id to try for a new entry of a log whose newest entry has
/// member id `newest` (`None`: the log is empty, or that member is not an
/// id): one more, or 1.
pub fn first_choice(newest: Option<i64>) -> i64 {
    match newest {
        Some(id) if id >= 0 => next(id).max(1),
        _ => 1,
    }
}

/// A fresh wide member id for an entry scored `now_ms`.
pub fn fresh(now_ms: i64) -> i64 {
    member_id(now_ms, SEQUENCE.fetch_add(1, Ordering::Relaxed))
}

/// The longest request id `ID` takes, in bytes.
pub const MAX_REQUEST_ID: usize = 128;

/// The token WITHMEMBERS hands out for the entry `id` scored `score_ms`.
pub fn token(id: i64, score_ms: i64) -> String {
    format!("{id}@{score_ms}")
}

/// A token's parts, when `bytes` is one: `<id>@<ms>`, both canonical
/// non-negative decimal integers (no sign, no leading zero) that fit `i64`.
pub fn parse_token(bytes: &[u8]) -> Option<(i64, i64)> {
    let at = bytes.iter().position(|&b| b == b'@')?;
    let (id, ms) = (bytes.get(..at)?, bytes.get(at + 1..)?);
    Some((canonical(id)?, canonical(ms)?))
}

/// A canonical non-negative decimal integer.
fn canonical(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || (digits.len() > 1 && digits.first() == Some(&b'0')) {
        return None;
    }
    digits.iter().try_fold(0i64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(i64::from(d - b'0'))
    })
}

/// Whether the bare member `bytes` names an entry of a charge made with a
/// request id (`#...` in a sorted set): UNDO by member never removes those.
pub fn is_charge_member(bytes: &[u8]) -> bool {
    bytes.first() == Some(&b'#')
}

/// The sorted-set member of unit `unit` (1-based) of the charge made under
/// `request`: `#`, the unit in decimal, `:`, the request id verbatim.
pub fn charge_member(unit: u64, request: &[u8]) -> Vec<u8> {
    let mut m = format!("#{unit}:").into_bytes();
    m.extend_from_slice(request);
    m
}

/// The millisecond of the last UNDO that removed an entry scored at the
/// time it ran, and the largest id it removed then (see [`fence`]).
static FENCE_MS: AtomicI64 = AtomicI64::new(i64::MIN);
static FENCE_ID: AtomicI64 = AtomicI64::new(-1);

/// Records that an UNDO at `now_ms` removed the entry `id` scored `now_ms`:
/// until the clock moves on, new ids start above it, so a token handed out
/// this millisecond never names a later call's entry. One fence for the
/// whole server (ids only need to be unique within a key; a higher first id
/// costs nothing else); the server runs commands one at a time.
pub fn fence(now_ms: i64, id: i64) {
    if FENCE_MS.load(Ordering::Relaxed) != now_ms {
        FENCE_MS.store(now_ms, Ordering::Relaxed);
        FENCE_ID.store(id, Ordering::Relaxed);
    } else if id > FENCE_ID.load(Ordering::Relaxed) {
        FENCE_ID.store(id, Ordering::Relaxed);
    }
}

/// The first id to try at `now_ms`: `first`, or above the fence when an
/// UNDO this millisecond removed an id at or above it.
pub fn above_fence(now_ms: i64, first: i64) -> i64 {
    if FENCE_MS.load(Ordering::Relaxed) == now_ms {
        first.max(next(FENCE_ID.load(Ordering::Relaxed)))
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tokens_round_trip_and_refuse_what_is_not_canonical() {
        assert_eq!(token(1, 1_795_996_800_000), "1@1795996800000");
        assert_eq!(
            parse_token(b"1@1795996800000"),
            Some((1, 1_795_996_800_000))
        );
        assert_eq!(parse_token(b"0@0"), Some((0, 0)));
        for bad in [
            &b"1"[..],
            b"@5",
            b"5@",
            b"01@5",
            b"1@05",
            b"-1@5",
            b"1@-5",
            b"1@5@6",
            b"+1@5",
            b"1 @5",
            b"1@99999999999999999999",
            b"1780-abc",
        ] {
            assert_eq!(parse_token(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn charge_members_are_never_ids_nor_tokens() {
        let m = charge_member(12, b"req\x00:1");
        assert_eq!(m, b"#12:req\x00:1".to_vec());
        assert!(is_charge_member(&m));
        assert_eq!(parse_token(&m), None);
        assert!(!is_charge_member(b"12"));
    }

    #[test]
    fn the_fence_holds_for_its_millisecond_only() {
        // Far from any time another test uses.
        let ms = -77_777;
        assert_eq!(above_fence(ms, 1), 1);
        fence(ms, 5);
        fence(ms, 3);
        assert_eq!(above_fence(ms, 1), 6);
        assert_eq!(above_fence(ms, 9), 9);
        assert_eq!(above_fence(ms + 1, 1), 1);
        fence(ms, i64::MAX);
        assert_eq!(
            above_fence(ms, 1),
            1,
            "wraps to the lowest id, never overflows"
        );
    }

    #[test]
    fn ids_are_time_then_sequence() {
        assert_eq!(member_id(0, 0), 0);
        assert_eq!(member_id(1, 0), 1 << SEQ_BITS);
        assert_eq!(member_id(1, 5), (1 << SEQ_BITS) + 5);
        // The sequence wraps inside its bits.
        assert_eq!(member_id(1, (1 << SEQ_BITS) + 2), (1 << SEQ_BITS) + 2);
        assert_eq!(member_id(-7, 3), 3);
        assert_eq!(member_id(i64::MAX, u64::MAX), i64::MAX);
        assert_eq!(next(i64::MAX), 0);
        assert_eq!(next(41), 42);
    }

    #[test]
    fn a_current_timestamp_gives_a_short_integer() {
        // 2026-11-30 in ms: the id decodes back to the time and the sequence,
        // and its decimal form is a canonical 19-digit integer, which the
        // server stores as an integer (8 bytes) in a listpack.
        let ms = 1_795_996_800_000_i64;
        let id = member_id(ms, 12_345);
        assert_eq!(id >> SEQ_BITS, ms);
        assert_eq!(id as u64 & SEQ_MASK, 12_345);
        let text = id.to_string();
        assert_eq!(text, "1883239140556812345");
        assert_eq!(text.parse::<i64>().ok(), Some(id));
    }

    #[test]
    fn short_ids_count_up_from_the_newest() {
        assert_eq!(first_choice(None), 1);
        assert_eq!(first_choice(Some(1)), 2);
        assert_eq!(first_choice(Some(41)), 42);
        // Not an id of ours (negative): start over; at the top: wrap to 1.
        assert_eq!(first_choice(Some(-5)), 1);
        assert_eq!(first_choice(Some(i64::MAX)), 1);
        // A wide id keeps counting up from itself.
        let wide = member_id(1_795_996_800_000, 7);
        assert_eq!(first_choice(Some(wide)), wide + 1);
    }

    #[test]
    fn fresh_ids_at_one_instant_are_distinct() {
        let ids: std::collections::HashSet<i64> = (0..10_000).map(|_| fresh(1_000)).collect();
        assert_eq!(ids.len(), 10_000);
    }

    proptest! {
        #[test]
        fn ids_are_non_negative_and_ordered_by_time(a in any::<i64>(), b in any::<i64>(), s in any::<u64>(), t in any::<u64>()) {
            let (ia, ib) = (member_id(a, s), member_id(b, t));
            prop_assert!(ia >= 0 && ib >= 0);
            if a.clamp(0, MAX_MS) < b.clamp(0, MAX_MS) {
                prop_assert!(ia < ib);
            }
        }
    }
}
