//! The v1 encoding byte for byte: these payloads are what RDB files, DUMP
//! payloads and AOF rewrites already hold, so every later version must
//! read them as they are (and write them so while the version is 1).

use super::super::chunked::Chunked;
use super::super::codec::*;
use super::super::run::Run;

fn run(score: i64, first: i64, count: u64) -> Run {
    Run {
        score,
        first,
        count,
    }
}

/// What a case is, its runs, its expiry, its bytes.
type Case = (&'static str, Vec<Run>, Option<i64>, Vec<u8>);

fn cases() -> Vec<Case> {
    vec![
        ("an empty log", vec![], None, vec![1, 0, 0]),
        (
            "an empty log with an expiry",
            vec![],
            Some(1_000),
            vec![1, 1, 0xD0, 0x0F, 0],
        ),
        (
            // Header, first score 1000 (zigzag 2000 = D0 0F), then one
            // byte a run: gap 0, gap 5, and a two-byte gap of 200.
            "one-entry runs in order",
            vec![run(1_000, 1, 1), run(1_005, 2, 1), run(1_205, 3, 1)],
            None,
            vec![1, 0, 3, 0xD0, 0x0F, 0, 5, 0x80, 200],
        ),
        (
            // A run of three (a COST 3 call), then a member out of
            // sequence: general records (C0, gap, zigzag delta, count-1).
            "general records",
            vec![run(10, 1, 3), run(10, 9, 1)],
            Some(70_010),
            vec![1, 1, 0xF4, 0xC5, 0x08, 2, 20, 0xC0, 0, 0, 2, 0xC0, 0, 10, 0],
        ),
        (
            "a member at i64::MAX",
            vec![run(0, i64::MAX, 1)],
            None,
            [
                vec![1, 0, 1, 0, 0xC0, 0],
                {
                    let mut v = Vec::new();
                    put_varint(&mut v, zigzag(i64::MAX - 1));
                    v
                },
                vec![0],
            ]
            .concat(),
        ),
    ]
}

#[test]
fn logs_encode_to_the_same_bytes_and_read_back() {
    for (what, runs, expiry, bytes) in cases() {
        let log = Chunked::from_runs(&runs, expiry);
        assert_eq!(log.encode(), bytes, "{what}: encoding");
        let back = Chunked::decode(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(back.runs(), runs, "{what}: runs");
        assert_eq!(back.expire_at_ms(), expiry, "{what}: expiry");
    }
}

/// Version 2: the same header and runs, then the charge records; a
/// log without charges is written as version 1.
#[test]
fn charges_encode_to_version_2() {
    use super::super::log::CompactLog;
    let mut log = CompactLog::new();
    log.add_charge_units(b"ab", 1_000, 3).unwrap();
    log.add_charge_units(b"c", 1_005, 1).unwrap();
    log.add_charge_units(b"ab", 1_000, 1).unwrap();
    // The runs in the canonical order: at 1000 the stray (member 5,
    // scored before member 4) first, then the chain.
    let bytes = vec![
        2, 0, 3, 0xD0, 0x0F, // version 2, no expiry, 3 runs, first score 1000
        0xC0, 0, 8, 0, // gap 0, member 5 (zigzag 4 after the expected 1), one
        0xC0, 0, 9, 2, // gap 0, members 1..=3 (zigzag -5 after 6)
        5, // gap 5, member 4 (the expected one)
        2, // two records, by request id:
        2, b'a', b'b', 0xE8, 0x07, 2, 1, 2, 5, 0, // "ab" at 1000: 1..=3, 5
        1, b'c', 0xED, 0x07, 1, 4, 0, // "c" at 1005: 4
    ];
    assert_eq!(log.encode(), bytes);
    let back = CompactLog::decode(&bytes).unwrap();
    assert_eq!(back.charges(), log.charges());
    assert_eq!(back, log);
}

#[test]
fn the_header_has_one_reader_and_one_writer() {
    let mut out = Vec::new();
    write_header(&mut out, Some(-3), 300);
    assert_eq!(out, [1, 1, 5, 0xAC, 0x02]);
    let h = read_header(&mut Reader { bytes: &out, at: 0 }).unwrap();
    assert_eq!((h.expire_at_ms, h.runs, h.runs_at), (Some(-3), 300, 3));
    // A newer version is refused, whatever follows.
    assert_eq!(
        read_header(&mut Reader {
            bytes: &[3, 0, 0],
            at: 0
        }),
        Err(DecodeError::Version(3))
    );
}
