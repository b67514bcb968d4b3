//! The effect command's unit tests: parsing, words, applying.

use super::*;
use crate::window::WindowLog;

fn parse(args: &[&str]) -> Result<Effect, ApplyError> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    Effect::parse(&bytes)
}

fn log_of(entries: &[(i64, i64)]) -> CompactLog {
    let mut log = CompactLog::new();
    for &(score, id) in entries {
        assert!(log.add(score, id).unwrap());
    }
    log
}

#[test]
fn applies_in_a_fixed_order_and_round_trips() {
    let mut log = log_of(&[(10, 1), (20, 2), (30, 3)]);
    let e = parse(&[
        "pxat", "1000", "ADD", "40", "4", "3", "REMOVE", "3", "TRIM", "10",
    ])
    .unwrap();
    e.apply(&mut log).unwrap();
    let entries: Vec<(i64, i64)> = log.entries().collect();
    assert_eq!(entries, [(20, 2), (40, 4), (40, 5), (40, 6)]);
    assert_eq!(log.expire_at_ms(), Some(1000));
    let args = e.to_args();
    let again: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    assert_eq!(Effect::parse(&again).unwrap(), e);
}

/// The words the store propagates from the stack say what `to_args`
/// says, word for word (request ids as their bytes, NUL included),
/// or there are none (too many, a LOG payload, a count past i64).
#[test]
fn the_words_are_the_arguments() {
    let text = |w: &Word<'_>| -> Vec<u8> {
        match *w {
            Word::Text(t) => t.to_bytes().to_vec(),
            Word::Int(v) | Word::Repeated(v) => v.to_string().into_bytes(),
            Word::Bytes(b) => b.to_vec(),
        }
    };
    let effects: [&[&str]; 6] = [
        &["TRIM", "10", "ADD", "40", "4", "3", "PXAT", "1000"],
        &["CHARGE", "req", "40", "7", "2", "PXAT", "1000"],
        &[
            "TRIM", "5", "CUT", "r", "0", "CHARGE", "r", "50", "9", "3", "PXAT", "9",
        ],
        &["CUT", "a", "3", "CUT", "b", "0"],
        &[
            "REMOVE", "3", "REMOVE", "4", "ADD", "40", "5", "1", "CHARGE", "x", "41", "6", "1",
        ],
        &[
            "TRIM", "1", "REMOVE", "3", "REMOVE", "4", "ADD", "40", "5", "1", "CHARGE", "x", "41",
            "6", "1", "PXAT", "9",
        ],
    ];
    for args in effects {
        let mut e = parse(args).unwrap();
        // A request id with a NUL and a byte past ASCII.
        if let Some(ids) = e.ids.as_mut() {
            let requests = ids.charge.iter_mut().map(|(r, _)| r);
            for r in requests.chain(ids.cut.iter_mut().map(|(r, _)| r)) {
                if r.starts_with(b"req") {
                    *r = b"req\0\xff".to_vec();
                }
            }
        }
        let mut out = [Word::Int(0); crate::ffi::MAX_WORDS];
        match e.words(&mut out) {
            Some(n) => {
                let words: Vec<Vec<u8>> = out[..n].iter().map(text).collect();
                assert_eq!(words, e.to_args(), "{args:?}");
            }
            None => assert!(e.to_args().len() > crate::ffi::MAX_WORDS, "{args:?}"),
        }
    }
    let e = Effect {
        log: Some(log_of(&[(5, 1)])),
        ..Effect::default()
    };
    assert_eq!(e.words(&mut [Word::Int(0); crate::ffi::MAX_WORDS]), None);
}

#[test]
fn a_log_payload_replaces_the_log() {
    let source = log_of(&[(5, 1), (5, 2), (9, 7)]);
    let payload = source.encode();
    let e = Effect {
        log: Some(source.clone()),
        ..Effect::default()
    };
    let mut target = log_of(&[(1, 1)]);
    e.apply(&mut target).unwrap();
    assert_eq!(target, source);
    let bytes: Vec<&[u8]> = vec![b"LOG", &payload];
    assert_eq!(Effect::parse(&bytes).unwrap(), e);
}

#[test]
fn refusals_name_the_argument_and_change_nothing() {
    let cases: &[(&[&str], &str)] = &[
        (&["TRIM"], "ERR TRIM cutoff_ms needs a value"),
        (&["TRIM", "x"], "ERR TRIM cutoff_ms must be an integer"),
        (
            &["TRIM", "1", "TRIM", "2"],
            "ERR option TRIM given more than once",
        ),
        (
            &["REMOVE", "-1"],
            "ERR REMOVE member must be an integer between 0 and",
        ),
        (&["ADD", "5", "1"], "ERR ADD count needs a value"),
        (
            &["ADD", "5", "1", "0"],
            "ERR ADD count must be an integer between 1 and",
        ),
        (
            &["ADD", "5", "-3", "1"],
            "ERR ADD first_member must be an integer between 0",
        ),
        (
            &["ADD", "5", "9223372036854775807", "2"],
            "ERR ADD count 2 from member 9223372036854775807 passes",
        ),
        (
            &["PXAT", "-5"],
            "ERR PXAT unix_ms must be an integer between 0 and",
        ),
        (
            &["PXAT", "1", "PXAT", "1"],
            "ERR option PXAT given more than once",
        ),
        (&["LOG"], "ERR LOG needs a payload"),
        (
            &["LOG", "\u{3}"],
            "ERR LOG payload is not a compact log: unknown encoding version 3",
        ),
        (
            &["ZADD", "1"],
            "ERR unknown option 'ZADD' (known: LOG, TRIM, REMOVE, CUT, ADD, CHARGE, PXAT)",
        ),
    ];
    for (args, expected) in cases {
        let err = parse(args).expect_err("must be refused").to_string();
        assert!(err.starts_with(expected), "{args:?}: {err}");
    }
    let before = log_of(&[(10, 1), (20, 2)]);
    let refused: &[(&[&str], &str)] = &[
        (&["REMOVE", "3"], "ERR REMOVE member 3 is not in the log"),
        (
            &["TRIM", "10", "REMOVE", "1"],
            "ERR REMOVE member 1 is not in the log",
        ),
        (
            &["REMOVE", "2", "REMOVE", "2"],
            "ERR REMOVE member 2 given twice",
        ),
        (
            &["ADD", "30", "2", "1"],
            "ERR ADD members 2 to 2 are already in the log",
        ),
        (
            &["ADD", "30", "0", "5", "PXAT", "9"],
            "ERR ADD members 0 to 4 are already",
        ),
        (
            &["ADD", "30", "5", "2", "ADD", "31", "6", "1"],
            "ERR ADD members 6 to 6 given twice",
        ),
    ];
    for (args, expected) in refused {
        let mut log = before.clone();
        let err = parse(args)
            .unwrap()
            .apply(&mut log)
            .expect_err("must be refused")
            .to_string();
        assert!(err.starts_with(expected), "{args:?}: {err}");
        assert_eq!(log, before, "{args:?} changed the log");
    }
    // A member the trim frees may be added again.
    let mut log = before.clone();
    parse(&["TRIM", "10", "ADD", "30", "1", "1"])
        .unwrap()
        .apply(&mut log)
        .unwrap();
    assert_eq!(log.entries().collect::<Vec<_>>(), [(20, 2), (30, 1)]);
}

/// Found by review: scores outside 0 ..= 2^53 (a member stored twice
/// through an i64::MIN score, a gap the encoding would clamp) are
/// refused, and the entry limit counts what the trim leaves.
#[test]
fn scores_are_bounded_and_the_limit_counts_after_the_trim() {
    for bad in ["-9223372036854775808", "-1", "9007199254740993"] {
        let err = parse(&["ADD", bad, "5", "1"])
            .expect_err("refused")
            .to_string();
        assert!(
            err.starts_with("ERR ADD score_ms must be an integer between 0 and 9007199254740992"),
            "{err}"
        );
    }
    let mut stale = CompactLog::new();
    parse(&["ADD", "1000", "1", "1099511627776"])
        .unwrap()
        .apply(&mut stale)
        .unwrap();
    // The master trims the 2^40 stale entries and adds one: the same
    // effect applies on a replica.
    parse(&["TRIM", "1000", "ADD", "5000", "1", "1", "PXAT", "9000"])
        .unwrap()
        .apply(&mut stale)
        .unwrap();
    assert_eq!(stale.count_entries(), 1);
    // A payload with a negative score is refused.
    let mut log = log_of(&[(5, 1)]);
    log.add_run(Run {
        score: 6,
        first: 2,
        count: 1,
    })
    .unwrap();
    let mut bytes = log.encode();
    // The first score is the zigzag varint after version, flag, count:
    // 5 is 0x0A; 0x09 is -5.
    let at = bytes
        .iter()
        .position(|&b| b == 0x0A)
        .expect("the first score");
    bytes[at] = 0x09;
    assert_eq!(CompactLog::decode(&bytes), Err(DecodeError::Range));
}

#[test]
fn recorded_adds_join_into_runs() {
    let mut e = Effect::default();
    for id in 4..8 {
        e.record_add(50, id);
    }
    e.record_add(50, 100);
    e.record_add(51, 101);
    assert_eq!(
        e.add,
        [
            Run {
                score: 50,
                first: 4,
                count: 4
            },
            Run {
                score: 50,
                first: 100,
                count: 1
            },
            Run {
                score: 51,
                first: 101,
                count: 1
            },
        ]
    );
}

/// An effect recycled leaves nothing of its CUTs and CHARGEs to the next
/// one: the kept blocks come back emptied (a shorter id after a longer
/// one reads as itself), and the effects print what a fresh one prints.
#[test]
fn a_recycled_effect_leaves_nothing_behind() {
    let long = vec![b'x'; MAX_REQUEST_ID];
    for round in 0..3 {
        let mut e = Effect::default();
        e.record_charge(&long, 10, 1, 2);
        e.record_cut(b"cut-a-long-request-id", 3);
        e.record_charge(b"second", 11, 3, 1);
        e.recycle();
        assert!(e.ids.is_none(), "round {round}");

        let mut next = Effect::default();
        next.record_charge(b"ab", 12, 4, 1);
        next.record_cut(b"c", 0);
        let fresh_args = ["CUT", "c", "0", "CHARGE", "ab", "12", "4", "1"];
        assert_eq!(
            next.charges(),
            &[(
                b"ab".to_vec(),
                Run {
                    score: 12,
                    first: 4,
                    count: 1
                }
            )]
        );
        assert_eq!(next.cuts(), &[(b"c".to_vec(), 0)]);
        assert_eq!(next, parse(&fresh_args).unwrap(), "round {round}");
        next.recycle();
    }
}
