//! DETAIL (on seeded and empty keys, and over RESP3), COST and the options:
//! in any order and case, and the errors naming them.

use redis::Value;

use crate::support::*;
use crate::{assert_detail, five, seeded};

pub(crate) fn detail_values(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let frozen = server.clock_frozen_in_script();
    let mut c = server.conn();
    let ages = [9000, 5000, 1000];
    // (key, command, args, expected) with entries 9000, 5000, 1000 ms old.
    let cases: &[(&str, &str, &[&str], [i64; 5])] = &[
        (
            "a",
            "SLIDEWIN.CHECK",
            &["3", "10000", "DETAIL"],
            [0, 3, 0, 1000, 9000],
        ),
        (
            "b",
            "SLIDEWIN.CHECK",
            &["3", "10000", "COST", "2", "DETAIL"],
            [0, 3, 0, 5000, 9000],
        ),
        (
            "c",
            "SLIDEWIN.CHECK",
            &["4", "10000", "COST", "2", "DETAIL"],
            [0, 4, 1, 1000, 9000],
        ),
        (
            "d",
            "SLIDEWIN.CHECK",
            &["3", "10000", "COST", "4", "DETAIL"],
            [0, 3, 0, -1, 9000],
        ),
        (
            "e",
            "SLIDEWIN.CHECK",
            &["5", "10000", "COST", "2", "DETAIL"],
            [1, 5, 0, 0, 10000],
        ),
        ("f", "SLIDEWIN.PEEK", &["3", "10000"], [0, 3, 0, 1000, 9000]),
        (
            "g",
            "SLIDEWIN.PEEK",
            &["3", "10000", "COST", "3"],
            [0, 3, 0, 9000, 9000],
        ),
        (
            "h",
            "SLIDEWIN.PEEK",
            &["6", "10000", "COST", "3"],
            [1, 6, 3, 0, 9000],
        ),
        // A 6 s window: the 9000 ms old entry is outside and not counted.
        ("i", "SLIDEWIN.PEEK", &["2", "6000"], [0, 2, 0, 1000, 5000]),
        (
            "j",
            "SLIDEWIN.CHECK",
            &["2", "6000", "DETAIL"],
            [0, 2, 0, 1000, 5000],
        ),
    ];
    for (key, command, args, expected) in cases {
        let (_, reply) = seeded(&mut c, key, &ages, command, args);
        assert_detail(
            frozen,
            five(&reply),
            *expected,
            &format!("{command} {key} {args:?}"),
        );
    }
    // CHECK trimmed the expired entry of "j"; PEEK left the one of "i".
    assert_eq!(zcard(&mut c, "j"), 2);
    assert_eq!(zcard(&mut c, "i"), 3);
    // The plain reply is the first field.
    let (_, plain) = seeded(&mut c, "k", &ages, "SLIDEWIN.CHECK", &["3", "10000"]);
    assert_eq!(plain, Value::Int(0));
}

pub(crate) fn detail_empty(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    assert_eq!(
        detail(&mut c, "SLIDEWIN.CHECK", &["k", "3", "10000", "DETAIL"]),
        [1, 3, 2, 0, 10000]
    );
    assert_eq!(
        detail(&mut c, "SLIDEWIN.PEEK", &["missing", "3", "10000"]),
        [1, 3, 3, 0, 0]
    );
    let r = detail(&mut c, "SLIDEWIN.CHECK", &["k", "3", "10000", "DETAIL"]);
    assert_eq!(r[..4], [1, 3, 1, 0]);
    assert!((9_000..=10_000).contains(&r[4]));
}

pub(crate) fn cost_edges(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    // COST equal to the limit fills the window at once, one entry per unit.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["full", "4", "60000", "COST", "4", "DETAIL"]
        ),
        [1, 4, 0, 0, 60000]
    );
    let members: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg("full")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    assert_eq!(members.len(), 4);
    let distinct: std::collections::HashSet<&String> = members.iter().map(|(m, _)| m).collect();
    assert_eq!(distinct.len(), 4, "one member per unit");
    assert!(members.iter().all(|(_, s)| *s == members[0].1), "one score");
    // Now even a cost of 1 is denied, and must wait for all four (same score).
    let r = detail(&mut c, "SLIDEWIN.CHECK", &["full", "4", "60000", "DETAIL"]);
    assert_eq!(r[..3], [0, 4, 0]);
    assert!(r[3] >= 1 && r[3] <= 60000 && r[3] == r[4], "{r:?}");
    // A cost above the limit never passes, writes nothing, creates nothing.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["none", "3", "60000", "COST", "4", "DETAIL"]
        ),
        [0, 3, 3, -1, 0]
    );
    let exists: i64 = redis::cmd("EXISTS").arg("none").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    // A cost that fits partly is all-or-nothing.
    assert_eq!(check(&mut c, "part", 5, 60000), 1);
    let r = detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["part", "5", "60000", "COST", "5", "DETAIL"],
    );
    assert_eq!(r[..3], [0, 5, 4]);
    let n: i64 = redis::cmd("ZCARD").arg("part").query(&mut c).unwrap();
    assert_eq!(n, 1);
    // The largest accepted cost is max-limit.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["big", "100000", "60000", "COST", "100000", "DETAIL"]
        ),
        [1, 100000, 0, 0, 60000]
    );
    let n: i64 = redis::cmd("ZCARD").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 100_000);
}

pub(crate) fn options_parsing(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    for (i, opts) in [
        &["COST", "2", "DETAIL"][..],
        &["DETAIL", "COST", "2"][..],
        &["detail", "cost", "2"][..],
        &["Detail", "CoSt", "2"][..],
    ]
    .iter()
    .enumerate()
    {
        let key = format!("opts:{i}");
        let mut args = vec![key.as_str(), "5", "60000"];
        args.extend_from_slice(opts);
        assert_eq!(
            detail(&mut c, "SLIDEWIN.CHECK", &args),
            [1, 5, 3, 0, 60000],
            "{opts:?}"
        );
    }
    let mut args = vec!["opts:peek", "5", "60000", "cost", "6"];
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args)[..4], [0, 5, 5, -1]);
    args.truncate(3);
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args), [1, 5, 5, 0, 0]);
    // PEEK always replies in detail; DETAIL is accepted and changes nothing.
    args.push("detail");
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args), [1, 5, 5, 0, 0]);
}

pub(crate) fn option_errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let cases: &[(&str, &[&[u8]], &str)] = &[
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"FOO"],
            "ERR unknown option 'FOO'",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"\xff\r\n"],
            "ERR unknown option '\\xff\\x0d\\x0a'",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST"],
            "ERR COST needs a count",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"0"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"-2"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"1.5"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"100001"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"1", b"cost", b"2"],
            "ERR option COST given more than once",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"DETAIL", b"DETAIL"],
            "ERR option DETAIL given more than once",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5", b"1000", b"WITHMEMBERS"],
            "ERR PEEK records nothing, so it takes no WITHMEMBERS (CHECK and MCHECK do)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"0", b"1000"],
            "ERR limit must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5", b"0"],
            "ERR window_ms must be an integer between 1 and 31622400000 (slidewin.max-window-ms)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5"],
            "ERR wrong number of arguments for 'slidewin.peek' command",
        ),
    ];
    let before = digest(&mut c);
    for (command, args, expected) in cases {
        let mut cmd = redis::cmd(command);
        for a in *args {
            cmd.arg(*a);
        }
        let err = cmd.query::<Value>(&mut c).expect_err("must be refused");
        assert_eq!(error_text(&err), *expected, "{command} {args:?}");
    }
    assert_eq!(digest(&mut c), before, "errors change nothing");
}

pub(crate) fn resp3_detail(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", server.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    // The connection really speaks RESP3: the server says so, and a score
    // comes back as a RESP3 double.
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(info.split_whitespace().any(|f| f == "resp=3"), "{info}");
    let _: i64 = redis::cmd("ZADD")
        .arg("d")
        .arg(1.5)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let score: Value = redis::cmd("ZSCORE")
        .arg("d")
        .arg("m")
        .query(&mut c)
        .unwrap();
    assert_eq!(score, Value::Double(1.5));
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(&["r3", "3", "10000", "DETAIL"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Int(1),
            Value::Int(3),
            Value::Int(2),
            Value::Int(0),
            Value::Int(10000)
        ])
    );
    let v: Value = redis::cmd("SLIDEWIN.PEEK")
        .arg(&["r3", "3", "10000"])
        .query(&mut c)
        .unwrap();
    assert!(
        matches!(&v, Value::Array(items) if items.len() == 5),
        "{v:?}"
    );
}
