//! The errors of the library (FUNCTION and EVAL forms) against the
//! module's.

use redis::Value;

use crate::support::*;
use crate::{both, Pair, LONG_ID};

pub(crate) fn errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    errors_on(&mut Pair::one(server.conn(), false));
}

pub(crate) fn eval_errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    errors_on(&mut Pair::one(server.conn(), true));
}

pub(crate) fn errors_on(pair: &mut Pair) {
    let _: () = redis::cmd("SET")
        .arg("{m}str")
        .arg("v")
        .query(&mut pair.m)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{f}str")
        .arg("v")
        .query(pair.lib())
        .unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        ("CHECK", "k", &["0", "1000"]),
        ("CHECK", "k", &["100001", "1000"]),
        ("CHECK", "k", &["1.5", "1000"]),
        ("CHECK", "k", &["05", "1000"]),
        ("CHECK", "k", &["+5", "1000"]),
        ("CHECK", "k", &["99999999999999999999", "1000"]),
        ("CHECK", "k", &["5", "0"]),
        ("CHECK", "k", &["5", "31622400001"]),
        ("CHECK", "k", &["5", "-1"]),
        ("CHECK", "k", &["5", "1000", "FOO"]),
        ("CHECK", "k", &["5", "1000", "bad\u{1}opt"]),
        ("CHECK", "k", &["5", "1000", "COST"]),
        ("CHECK", "k", &["5", "1000", "COST", "0"]),
        ("CHECK", "k", &["5", "1000", "COST", "1", "cost", "2"]),
        ("CHECK", "k", &["5", "1000", "DETAIL", "detail"]),
        ("CHECK", "k", &["5"]),
        ("CHECK", "str", &["5", "1000"]),
        ("PEEK", "k", &["5", "1000", "WITHMEMBERS"]),
        ("PEEK", "k", &["5", "1000", "DETAIL", "detail"]),
        ("PEEK", "k", &["0", "1000"]),
        ("PEEK", "str", &["5", "1000"]),
        ("UNDO", "str", &["m"]),
        // Request ids (issue 32).
        ("CHECK", "k", &["5", "1000", "ID"]),
        ("CHECK", "k", &["5", "1000", "ID", ""]),
        ("CHECK", "k", &["5", "1000", "ID", LONG_ID]),
        ("CHECK", "k", &["5", "1000", "ID", "a", "id", "b"]),
        ("CHECK", "k", &["5", "1000", "ID", "a", "WITHMEMBERS"]),
        (
            "CHECK",
            "k",
            &["5", "1000", "WITHMEMBERS", "DETAIL", "id", "a"],
        ),
        ("CHECK", "k", &["5", "1000", "ID", "a", "COST", "0"]),
        ("CHECK", "str", &["5", "1000", "ID", "a"]),
        ("PEEK", "k", &["5", "1000", "ID", "a"]),
        ("PEEK", "k", &["5", "1000", "DETAIL", "id", "a"]),
        ("UNDO", "k", &["ID", ""]),
        ("UNDO", "k", &["id", LONG_ID]),
        ("UNDO", "str", &["ID", "a"]),
        ("UNDO", "str", &["1@1"]),
        // `ID` first takes exactly one request id (issue 39).
        ("UNDO", "k", &["ID"]),
        ("UNDO", "k", &["id", "a", "b"]),
        ("UNDO", "str", &["ID", "a", "b"]),
        ("SETTLE", "k", &["ID", "a", "COST", "-1"]),
        ("SETTLE", "k", &["ID", "a", "COST", "1.5"]),
        ("SETTLE", "k", &["ID", "a", "COST", "01"]),
        ("SETTLE", "k", &["ID", "a", "COST", "100001"]),
        ("SETTLE", "k", &["ID", "a", "COST", ""]),
        ("SETTLE", "k", &["ID", "", "COST", "1"]),
        ("SETTLE", "k", &["ID", LONG_ID, "COST", "1"]),
        ("SETTLE", "k", &["XX", "a", "COST", "1"]),
        ("SETTLE", "k", &["ID", "a", "UNITS", "1"]),
        ("SETTLE", "k", &["COST", "1", "ID", "a"]),
        ("SETTLE", "k", &["ID", "a", "COST"]),
        ("SETTLE", "k", &["ID", "a", "COST", "1", "DETAIL"]),
        ("SETTLE", "k", &[]),
        ("SETTLE", "str", &["ID", "a", "COST", "1"]),
        // SHADOW (issue 40).
        ("CHECK", "k", &["5", "1000", "SHADOW", "shadow"]),
        ("CHECK", "k", &["5", "1000", "SHADOWS"]),
        ("PEEK", "k", &["5", "1000", "SHADOW"]),
        ("CHECK", "str", &["5", "1000", "SHADOW"]),
    ];
    for (kind, key, args) in cases {
        let keys = vec![key.to_string()];
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let m = both(kind, &keys, &args, "m", &pair.form).query::<Value>(&mut pair.m);
        let f = both(kind, &keys, &args, "f", &pair.form).query::<Value>(pair.lib());
        match (m, f) {
            (Err(m), Err(f)) => assert_eq!(
                error_text(&m).replace("slidewin.", ""),
                error_text(&f).replace("slidewin.", ""),
                "{kind} {key} {args:?}"
            ),
            other => panic!("{kind} {key} {args:?}: both must fail: {other:?}"),
        }
    }
    // Above the per-call bound (COST times the distinct keys: the
    // module's default, max-limit), refused before the keys are read.
    let mut many: Vec<String> = vec!["64".to_string()];
    for i in 0..64 {
        many.extend([format!("k{i}"), "100000".to_string(), "1000".to_string()]);
    }
    many.extend(["COST".to_string(), "100000".to_string()]);
    let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    for args in [
        &["0", "k", "5", "1000"][..],
        &["1", "k", "0", "1000"][..],
        &["1", "k", "5", "1000", "PEEK"][..],
        &["2", "k", "5", "1000", "str", "5", "1000"][..],
        &[
            "2", "k", "100000", "1000", "k2", "100000", "1000", "COST", "60000",
        ][..],
        &[
            "2", "k", "100000", "1000", "str", "100000", "1000", "COST", "60000",
        ][..],
        &many[..],
        &["1", "k", "5", "1000", "ID"][..],
        &["1", "k", "5", "1000", "ID", ""][..],
        &[
            "2",
            "k",
            "5",
            "1000",
            "k2",
            "5",
            "1000",
            "ID",
            "a",
            "WITHMEMBERS",
        ][..],
        &[
            "2", "k", "5", "1000", "k2", "5", "1000", "ID", "a", "ID", "a",
        ][..],
        &["2", "k", "5", "1000", "str", "5", "1000", "ID", "a"][..],
        &["1", "k", "5", "1000", "SHADOW", "DETAIL", "Shadow"][..],
    ] {
        let n: usize = args[0].parse().unwrap();
        let keys: Vec<String> = (0..n).map(|i| args[1 + 3 * i].to_string()).collect();
        let mut flat: Vec<String> = Vec::new();
        for i in 0..n {
            flat.push(args[2 + 3 * i].to_string());
            flat.push(args[3 + 3 * i].to_string());
        }
        flat.extend(args[1 + 3 * n..].iter().map(|a| a.to_string()));
        let m = both("MCHECK", &keys, &flat, "m", &pair.form).query::<Value>(&mut pair.m);
        let f = both("MCHECK", &keys, &flat, "f", &pair.form).query::<Value>(pair.lib());
        match (m, f) {
            (Err(m), Err(f)) => {
                assert_eq!(error_text(&m), error_text(&f), "{args:?}");
                // The texts docs/reference.md shows.
                if args.contains(&"COST") {
                    let (cost, entries) = if n == 64 {
                        ("100000", "6400000")
                    } else {
                        ("60000", "120000")
                    };
                    assert_eq!(
                        error_text(&m),
                        format!("ERR COST {cost} on {n} keys would add {entries} entries; slidewin.max-entries-per-call allows 100000 a call"),
                    );
                }
            }
            other => panic!("{args:?}: both must fail: {other:?}"),
        }
    }
    // SLIDEWIN.TOP needs the module's summary: the function says so.
    let err = both("TOP", &[], &[], "f", &pair.form)
        .query::<Value>(pair.lib())
        .expect_err("slidewin_top is not available");
    assert!(
        error_text(&err).starts_with("ERR slidewin_top is not available without the module"),
        "{err:?}"
    );
}
