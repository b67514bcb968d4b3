//! Request ids (`ID <request-id>` on CHECK and MCHECK, `UNDO key ID`,
//! `SLIDEWIN.SETTLE`) and the tokens WITHMEMBERS hands out, on every server
//! of the suite: a repeated id is charged once, UNDO by id is exact and
//! idempotent, SETTLE moves a charge down, up past the limit and to zero,
//! a stale token never removes a later call's entry, and a replica and an
//! AOF replay reach the same data after each.
#![allow(clippy::unwrap_used)]

mod support;

use redis::Value;
use support::*;

on_every_server! {
    a_repeated_id_is_charged_once => repeated_check(Zset, Compact);
    a_repeated_mcheck_is_charged_once_even_when_one_key_forgot_it => repeated_mcheck(Zset, Compact);
    undo_by_id_is_exact_and_idempotent => undo_by_id(Zset, Compact);
    settle_moves_a_charge_down_up_and_to_zero => settle(Zset, Compact);
    a_stale_token_never_removes_a_later_entry => stale_tokens(Zset, Compact);
    bad_input_changes_and_replicates_nothing => bad_input(Zset, Compact);
    replicas_and_the_aof_reach_the_same_entries => replication_and_aof(Zset, Compact);
    settle_and_undo_see_no_charge_that_left_its_window => out_of_window(Zset, Compact);
    settle_keeps_a_key_within_max_limit_entries => within_max_limit(Zset, Compact);

    // Sorted sets only: a compact log stores members as deltas, so a wide
    // member costs it no more than a short one (and a charge's units take
    // fresh ids above every other there).
    what_an_id_costs_is_what_performance_md_says => memory_figures;
    plain_calls_after_a_charge_keep_short_members => short_after_charges(Zset);
    a_crafted_charge_layout_costs_only_its_entries => crafted_units;
}

fn call(c: &mut Connection, command: &str, args: &[&str]) -> Value {
    slidewin(c, command, args).unwrap_or_else(|e| panic!("{command} {args:?}: {e}"))
}

fn int(v: &Value) -> i64 {
    redis::from_redis_value_ref(v).unwrap_or_else(|_| panic!("an integer: {v:?}"))
}

/// The replication offset: it moves when anything is propagated.
fn offset(c: &mut Connection) -> String {
    info_field(c, "replication", "master_repl_offset").expect("master_repl_offset")
}

fn repeated_check(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let k = "llm:key:1";
    // Reserve 3 of 5 under an id; the reply is lost, the client retries.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "3", "ID", "req-1"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 3);
    let offset_before = offset(&mut c);
    for _ in 0..3 {
        assert_eq!(
            call(
                &mut c,
                "SLIDEWIN.CHECK",
                &[k, "5", "60000", "COST", "3", "ID", "req-1"]
            ),
            Value::Int(1)
        );
    }
    assert_eq!(zcard(&mut c, k), 3, "a repeat charges nothing");
    assert_eq!(offset(&mut c), offset_before, "a repeat replicates nothing");
    // A repeat with DETAIL: allowed, the state as it is now.
    let d = detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &[k, "5", "60000", "COST", "3", "ID", "req-1", "DETAIL"],
    );
    assert_eq!(d[..4], [1, 5, 2, 0]);
    assert!((59_000..=60_000).contains(&d[4]), "{d:?}");
    // A repeat with another COST is still the first charge.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "5", "ID", "req-1"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 3);
    // Another id is a new call: 3 more do not fit; denied, so not remembered.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "3", "ID", "req-2"]
        ),
        Value::Int(0)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "2", "ID", "req-2"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 5);
    // A binary id, 128 bytes: its own charge.
    let long = vec![0xffu8; 128];
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(k)
        .arg("10")
        .arg("60000")
        .arg("ID")
        .arg(&long)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, Value::Int(1));
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(k)
        .arg("10")
        .arg("60000")
        .arg("ID")
        .arg(&long)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, Value::Int(1));
    assert_eq!(zcard(&mut c, k), 6);
    let repeated: i64 = info_field(&mut c, "slidewin", "slidewin_repeated")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(repeated, 6, "INFO counts the repeats");
    // Once the charge has left the window the id is forgotten: charged anew.
    let short = "llm:key:short";
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100", "ID", "r"]),
        Value::Int(1)
    );
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100", "ID", "r"]),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, short), 1);
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100"]),
        Value::Int(0),
        "and it counts"
    );
}

fn repeated_mcheck(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    // Requests per second and tokens per minute.
    let rules = ["2", "{k}:rps", "200", "200", "{k}:tpm", "1000", "60000"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v: Vec<&'static str> = rules.to_vec();
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.MCHECK",
            &with(&["COST", "100", "ID", "q1"])
        ),
        Value::Int(1)
    );
    assert_eq!(
        (zcard(&mut c, "{k}:rps"), zcard(&mut c, "{k}:tpm")),
        (100, 100)
    );
    let d: Vec<Value> = redis::from_redis_value_ref(&call(
        &mut c,
        "SLIDEWIN.MCHECK",
        &with(&["COST", "100", "ID", "q1", "DETAIL"]),
    ))
    .unwrap();
    assert_eq!(d[0], Value::Int(1), "a repeat is allowed: {d:?}");
    assert_eq!(d[1], Value::Int(0));
    let tpm: Vec<i64> = redis::from_redis_value_ref(&d[3]).unwrap();
    assert_eq!(tpm[..4], [1, 1000, 900, 0], "as the key is now");
    assert_eq!(
        (zcard(&mut c, "{k}:rps"), zcard(&mut c, "{k}:tpm")),
        (100, 100)
    );
    // The per-second key forgets the charge; the minute key still holds it:
    // a retry is still a repeat, charged nowhere.
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.MCHECK",
            &with(&["COST", "100", "ID", "q1"])
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, "{k}:tpm"), 100);
    assert_eq!(zcard(&mut c, "{k}:rps"), 0, "trimmed, not charged again");
    // UNDO by id on each key gives it back everywhere.
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["{k}:tpm", "ID", "q1"])),
        100
    );
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["{k}:rps", "ID", "q1"])),
        0
    );
    assert!(!exists(&mut c, "{k}:tpm"));
}

fn undo_by_id(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let k = "sms:phone:1";
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "10", "60000", "COST", "2"]),
        Value::Int(1)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "3", "ID", "a"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "4", "ID", "b"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 9);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])), 3);
    assert_eq!(zcard(&mut c, k), 6, "exactly a's entries");
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])),
        0,
        "a second UNDO removes nothing"
    );
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "id", "never"])), 0);
    assert_eq!(zcard(&mut c, k), 6);
    // b is untouched, and still a repeat.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "4", "ID", "b"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 6);
    // After UNDO the id is forgotten: the same id is a new charge.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "3", "ID", "a"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 9);
    // UNDO by member never removes an entry of a charge made with an id,
    // whatever name it is given.
    // (A compact log names a charge's units by member ids, like any
    // entry's: every id but the call's without an id, plain and as a token.)
    let members: Vec<Vec<u8>> = match log {
        LogType::Zset => redis::cmd("ZRANGE")
            .arg(k)
            .arg(0)
            .arg(-1)
            .query(&mut c)
            .unwrap(),
        LogType::Compact => entries(&mut c, k.as_bytes())
            .into_iter()
            // The first call's members, 1 and 2, are the call's without an id.
            .filter(|(m, _)| m.as_slice() != b"1" && m.as_slice() != b"2")
            .flat_map(|(m, s)| {
                let token = [m.clone(), format!("@{s}").into_bytes()].concat();
                [[b"#".to_vec(), m].concat(), token]
            })
            .collect(),
    };
    let mut undo = redis::cmd("SLIDEWIN.UNDO");
    undo.arg(k);
    for m in members.iter().filter(|m| m.first() == Some(&b'#')) {
        undo.arg(m);
    }
    if log == LogType::Compact {
        for m in members.iter().filter(|m| m.first() != Some(&b'#')) {
            undo.arg(m);
            undo.arg(m.split(|&b| b == b'@').next().unwrap_or(&[]));
        }
    }
    assert_eq!(undo.query::<i64>(&mut c).unwrap(), 0);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "b"])), 4);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])), 3);
    assert_eq!(zcard(&mut c, k), 2, "the call without an id is left");
    let undone: i64 = info_field(&mut c, "slidewin", "slidewin_undone")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(undone, 10);
}

fn settle(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let k = "tpm:key:1";
    // Reserve an estimate of 40 of 100 tokens.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "100", "60000", "COST", "40", "ID", "r1"]
        ),
        Value::Int(1)
    );
    // The charge's time (a compact log names its units by ids: the first
    // call's entries, which come first).
    let at: f64 = match log {
        LogType::Zset => redis::cmd("ZSCORE")
            .arg(k)
            .arg("#1:r1")
            .query(&mut c)
            .unwrap(),
        LogType::Compact => entries(&mut c, k.as_bytes())[0].1,
    };
    // Down: the response used 25.
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "r1", "COST", "25"]
        )),
        25
    );
    assert_eq!(zcard(&mut c, k), 25);
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "100", "60000", "COST", "75", "ID", "r2"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "100", "60000"]),
        Value::Int(0),
        "full"
    );
    // Up past the limit: r1 really used 60; added at r1's own time, the
    // expiry untouched.
    let expiry = pexpiretime(&mut c, k);
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "r1", "COST", "60"]
        )),
        60
    );
    assert_eq!(zcard(&mut c, k), 135);
    let scores: Vec<(Vec<u8>, f64)> = entries(&mut c, k.as_bytes());
    let r1: Vec<f64> = match log {
        LogType::Zset => scores
            .iter()
            .filter(|(m, _)| m.starts_with(b"#") && m.ends_with(b":r1"))
            .map(|&(_, s)| s)
            .collect(),
        // r1's 25 units, then r2's 75, then r1's 35 more.
        LogType::Compact => {
            let mut by_id: Vec<(i64, f64)> = scores
                .iter()
                .map(|(m, s)| (String::from_utf8_lossy(m).parse().unwrap(), *s))
                .collect();
            by_id.sort_by_key(|e| e.0);
            by_id[..25]
                .iter()
                .chain(&by_id[100..])
                .map(|e| e.1)
                .collect()
        }
    };
    assert_eq!(r1.len(), 60);
    assert!(
        r1.iter().all(|&s| s == at),
        "every unit at the charge's own time"
    );
    assert_eq!(pexpiretime(&mut c, k), expiry);
    // The following calls wait: the key holds 135 of 100.
    let d = detail(&mut c, "SLIDEWIN.CHECK", &[k, "100", "60000", "DETAIL"]);
    assert_eq!(d[..3], [0, 100, 0]);
    assert!(d[3] > 0, "{d:?}");
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "r2"])), 75);
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "100", "60000", "COST", "41"]),
        Value::Int(0)
    );
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "100", "60000", "COST", "40"]),
        Value::Int(1)
    );
    // Settling to the same units changes nothing and replicates nothing.
    let before = (digest(&mut c), offset(&mut c));
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "r1", "COST", "60"]
        )),
        60
    );
    assert_eq!((digest(&mut c), offset(&mut c)), before);
    // To zero: all of it back; the id is then forgotten.
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "r1", "COST", "0"]
        )),
        0
    );
    assert_eq!(zcard(&mut c, k), 40);
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "r1", "COST", "5"]
        )),
        -1
    );
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["no:such:key", "ID", "r1", "COST", "5"]
        )),
        -1
    );
    assert!(
        !exists(&mut c, "no:such:key"),
        "SETTLE on a missing key creates nothing"
    );
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "100", "60000", "COST", "60"]),
        Value::Int(1)
    );
    // A key emptied by SETTLE is deleted.
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &["one", "5", "60000", "ID", "x"]),
        Value::Int(1)
    );
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["one", "ID", "x", "COST", "0"]
        )),
        0
    );
    assert!(!exists(&mut c, "one"));
    let settled: i64 = info_field(&mut c, "slidewin", "slidewin_settled")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(settled, 5);
}

fn stale_tokens(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let token = |v: &Value| -> String {
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        let members: Vec<String> = redis::from_redis_value_ref(items.last().unwrap()).unwrap();
        assert_eq!(members.len(), 1, "{v:?}");
        members[0].clone()
    };
    // A caller got member 1; the window passes and the key empties.
    let first = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:a", "1", "150", "WITHMEMBERS"],
    ));
    assert!(first.starts_with("1@"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let second = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:a", "1", "150", "WITHMEMBERS"],
    ));
    assert!(second.starts_with("1@"), "the key started over: {second}");
    assert_ne!(first, second);
    // The first caller's late UNDO never takes the second caller's entry.
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:a", &first])), 0);
    assert_eq!(zcard(&mut c, "h:a"), 1);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:a", &second])), 1);
    assert!(!exists(&mut c, "h:a"));
    // Within one millisecond (MULTI keeps the clock where the server
    // caches it): UNDO, then a new call, then the first UNDO again.
    for _ in 0..20 {
        let replies: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .query(&mut c)
            .unwrap();
        let (t1, t2) = (token(&replies[0]), token(&replies[1]));
        let replies: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("SLIDEWIN.UNDO")
            .arg("h:b")
            .arg(&t2)
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .cmd("SLIDEWIN.UNDO")
            .arg("h:b")
            .arg(&t2)
            .query(&mut c)
            .unwrap();
        assert_eq!(int(&replies[0]), 1);
        let t3 = token(&replies[1]);
        assert_ne!(
            t3, t2,
            "a freed id is not handed out again in its millisecond"
        );
        assert_eq!(int(&replies[2]), 0, "the stale token removes nothing");
        assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:b", &t1, &t3])), 2);
        assert!(!exists(&mut c, "h:b"));
    }
    // Bare members (0.1.0's replies, other writers' members) still work.
    let t = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:c", "5", "60000", "WITHMEMBERS"],
    ));
    let bare = String::from_utf8(token_member(t.as_bytes())).unwrap();
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:c", &bare])), 1);
}

fn bad_input(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &["k", "5", "60000", "ID", "x"]),
        Value::Int(1)
    );
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    let before = (digest(&mut c), offset(&mut c));
    let long = "x".repeat(129);
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("SLIDEWIN.CHECK", vec!["k", "5", "60000", "ID", ""], "ERR ID must be 1 to 128 bytes"),
        ("SLIDEWIN.CHECK", vec!["k", "5", "60000", "ID", &long], "ERR ID must be 1 to 128 bytes"),
        ("SLIDEWIN.CHECK", vec!["k", "5", "60000", "ID"], "ERR ID needs a request id"),
        ("SLIDEWIN.CHECK", vec!["k", "5", "60000", "ID", "a", "ID", "b"], "ERR option ID given more than once"),
        (
            "SLIDEWIN.CHECK",
            vec!["k", "5", "60000", "ID", "a", "WITHMEMBERS"],
            "ERR WITHMEMBERS and ID cannot be combined: give a charge made with an ID back with SLIDEWIN.UNDO key ID request-id",
        ),
        ("SLIDEWIN.PEEK", vec!["k", "5", "60000", "ID", "a"], "ERR PEEK records nothing: ID applies to CHECK and MCHECK"),
        ("SLIDEWIN.MCHECK", vec!["1", "k", "5", "60000", "ID", ""], "ERR ID must be 1 to 128 bytes"),
        ("SLIDEWIN.UNDO", vec!["k", "ID", ""], "ERR ID must be 1 to 128 bytes"),
        ("SLIDEWIN.UNDO", vec!["k", "ID"], "ERR syntax error: SLIDEWIN.UNDO key ID request-id"),
        ("SLIDEWIN.UNDO", vec!["k", "id", "x", "y"], "ERR syntax error: SLIDEWIN.UNDO key ID request-id"),
        ("SLIDEWIN.UNDO", vec!["str", "ID", "x", "y"], "ERR syntax error: SLIDEWIN.UNDO key ID request-id"),
        (
            "SLIDEWIN.SETTLE",
            vec!["k", "ID", "x", "COST", "-1"],
            "ERR COST units must be an integer between 0 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.SETTLE",
            vec!["k", "ID", "x", "COST", "1.5"],
            "ERR COST units must be an integer between 0 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.SETTLE",
            vec!["k", "ID", "x", "COST", "100001"],
            "ERR COST units must be an integer between 0 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.SETTLE",
            vec!["k", "REQ", "x", "COST", "1"],
            "ERR syntax error: SLIDEWIN.SETTLE key ID request-id COST units",
        ),
        ("SLIDEWIN.SETTLE", vec!["k", "ID", "", "COST", "1"], "ERR ID must be 1 to 128 bytes"),
        ("SLIDEWIN.SETTLE", vec!["str", "ID", "x", "COST", "1"], "WRONGTYPE"),
        ("SLIDEWIN.UNDO", vec!["str", "ID", "x"], "WRONGTYPE"),
        ("SLIDEWIN.CHECK", vec!["str", "5", "60000", "ID", "x"], "WRONGTYPE"),
    ];
    for (command, args, want) in &cases {
        let err = slidewin(&mut c, command, args).expect_err(&format!("{command} {args:?}"));
        let text = error_text(&err);
        assert!(text.starts_with(want), "{command} {args:?}: {text}");
    }
    // Arity, as the server words it.
    for args in [
        &["k", "ID", "x", "COST"][..],
        &["k", "ID", "x", "COST", "1", "2"][..],
        &["k"][..],
    ] {
        let err = slidewin(&mut c, "SLIDEWIN.SETTLE", args).expect_err("arity");
        assert!(
            error_text(&err).contains("wrong number of arguments"),
            "{}",
            error_text(&err)
        );
    }
    // SETTLE's increase is bounded per call as COST is.
    config_set(&mut c, "slidewin.max-entries-per-call", "10");
    let err =
        slidewin(&mut c, "SLIDEWIN.SETTLE", &["k", "ID", "x", "COST", "12"]).expect_err("bound");
    assert_eq!(
        error_text(&err),
        "ERR SETTLE to 12 units would add 11 entries; slidewin.max-entries-per-call allows 10 a call"
    );
    assert_eq!(
        (digest(&mut c), offset(&mut c)),
        before,
        "nothing changed or replicated"
    );
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["k", "ID", "x", "COST", "11"]
        )),
        11
    );
}

fn replication_and_aof(flavor: Flavor, log: LogType) {
    let master = Options::new(flavor)
        .log_type(log)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let replica = match log {
        LogType::Zset => replica_without_module(&master, flavor),
        LogType::Compact => replica_with(&master, compact(flavor)),
    };
    let mut m = master.conn();
    for i in 0..200 {
        let key = format!("{{r}}:k{}", i % 7);
        let id = format!("req-{}", i % 23);
        let cost = (1 + i % 4).to_string();
        match i % 5 {
            0 | 1 => {
                call(
                    &mut m,
                    "SLIDEWIN.CHECK",
                    &[&key, "20", "600000", "COST", &cost, "ID", &id],
                );
            }
            2 => {
                call(
                    &mut m,
                    "SLIDEWIN.MCHECK",
                    &[
                        "2", &key, "20", "600000", "{r}:all", "200", "600000", "COST", &cost, "ID",
                        &id,
                    ],
                );
            }
            3 => {
                call(
                    &mut m,
                    "SLIDEWIN.SETTLE",
                    &[&key, "ID", &id, "COST", &((i * 7) % 9).to_string()],
                );
            }
            _ => {
                call(&mut m, "SLIDEWIN.UNDO", &[&key, "ID", &id]);
            }
        }
        if i % 40 == 39 {
            assert_replica_matches(&master, &replica);
        }
    }
    let r = assert_replica_matches(&master, &replica);
    drop(r);
    let before = digest(&mut m);
    let names: std::collections::HashSet<String> = aof_commands(&master.dir)
        .iter()
        .map(|cmd| String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase())
        .collect();
    assert!(
        // (A compact log's effects are SLIDEWIN.APPLY.)
        names
            .iter()
            .all(|n| !n.contains("SLIDEWIN") || (log == LogType::Compact && n == "SLIDEWIN.APPLY")),
        "effects, never the command: {names:?}"
    );
    let _: () = redis::cmd("DEBUG")
        .arg("LOADAOF")
        .query(&mut m)
        .expect("DEBUG LOADAOF");
    assert_eq!(
        digest(&mut m),
        before,
        "the AOF reproduces the entries and ids"
    );
}

/// The row of docs/performance.md's request-id memory table for `server`:
/// `| server | a | b | c | d |`, numbers without separators.
fn documented_memory(server: &str) -> Vec<f64> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/performance.md"))
        .expect("docs/performance.md");
    let section = page
        .split("\n## ")
        .find(|s| s.starts_with("Request IDs"))
        .expect("a 'Request IDs' section");
    let row = section
        .lines()
        .find(|l| l.starts_with(&format!("| {server} ")))
        .unwrap_or_else(|| panic!("no row for {server}"));
    row.split('|')
        .skip(2)
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().replace(',', "").parse().expect("a number"))
        .collect()
}

/// MEMORY USAGE of sorted-set keys made with and without 16-byte ids: five
/// calls of COST 1 (five charges with ids), and one call of COST 100 (bytes
/// per entry), against the figures docs/performance.md prints.
fn memory_figures(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let usage = |c: &mut Connection, key: &str| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(c)
            .unwrap()
    };
    let id = |i: usize| format!("{i:016x}");
    for i in 0..5 {
        call(&mut c, "SLIDEWIN.CHECK", &["five:plain", "5", "60000"]);
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &["five:ids", "5", "60000", "ID", &id(i)],
        );
    }
    call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["cost:plain", "1000", "60000", "COST", "100"],
    );
    call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["cost:ids", "1000", "60000", "COST", "100", "ID", &id(9)],
    );
    let got = [
        usage(&mut c, "five:plain") as f64,
        usage(&mut c, "five:ids") as f64,
        (usage(&mut c, "cost:plain") as f64 / 100.0 * 10.0).round() / 10.0,
        (usage(&mut c, "cost:ids") as f64 / 100.0 * 10.0).round() / 10.0,
    ];
    assert_eq!(
        got.to_vec(),
        documented_memory(flavor.name()),
        "{}: measured {got:?}",
        flavor.name()
    );
}

/// A call without an ID after one with an ID (whose entries are not
/// integers) still gets a short member, not a 19-digit wide one.
fn short_after_charges(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let members = |c: &mut Connection| -> Vec<String> {
        let v = call(
            c,
            "SLIDEWIN.CHECK",
            &["mix", "100", "60000", "COST", "2", "WITHMEMBERS"],
        );
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        redis::from_redis_value_ref(items.last().unwrap()).unwrap()
    };
    assert_eq!(
        members(&mut c)
            .iter()
            .map(|t| t.split('@').next().unwrap().to_string())
            .collect::<Vec<_>>(),
        ["1", "2"]
    );
    for round in 0..3 {
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[
                "mix",
                "100",
                "60000",
                "COST",
                "3",
                "ID",
                &format!("r{round}"),
            ],
        );
        for t in members(&mut c) {
            let id: i64 = t.split('@').next().unwrap().parse().unwrap();
            assert!(id < 100, "round {round}: a short member, got {t}");
        }
    }
}

/// The key's absolute expiry in ms, exact (`PEXPIRETIME`, Redis 7.0+; the
/// support's TIME + PTTL may be 1 ms off).
/// Another writer lays out a "charge" with units 1, 2, 4 ... 2^40 in a
/// sorted set: UNDO and SETTLE by its ID cost what the key holds (41
/// entries), not 2^40 steps, and remove only those entries.
fn crafted_units(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut zadd = redis::cmd("ZADD");
    zadd.arg("crafted");
    for p in 0..=40u32 {
        zadd.arg(1).arg(format!("#{}:r", 1u64 << p));
    }
    let _: i64 = zadd.query(&mut c).unwrap();
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["crafted", "ID", "r", "COST", "40"]
        )),
        40
    );
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["crafted", "ID", "r"])),
        14,
        "#1, #2, #4 ... #32 and the #33..#40 SETTLE added, nothing beyond"
    );
    assert_eq!(zcard(&mut c, "crafted"), 35);
}

/// The number of entries in `key`, whichever log holds it.
fn held(c: &mut Connection, key: &str) -> usize {
    entries(c, key.as_bytes()).len()
}

/// SETTLE and UNDO trim to the key's own window first (the key's expiry
/// less its newest entry's score), as CHECK trims to its: a charge made
/// at t0 with a 1000 ms window, a later call at t0 + 600 that keeps the
/// key alive, and at t0 + 1200 the first charge has left its window but is
/// still in the key: SETTLE answers -1, UNDO by ID 0, an UNDO of a token
/// removes nothing, and the entries out of the window are gone, on the
/// replica too. A key without an expiry is not trimmed. The margins are
/// 200 ms and more each way; a slow machine only widens the first.
fn out_of_window(flavor: Flavor, log: LogType) {
    let master = Options::new(flavor).log_type(log).start();
    let replica = match log {
        LogType::Zset => replica_without_module(&master, flavor),
        LogType::Compact => replica_with(&master, compact(flavor)),
    };
    let mut c = master.conn();
    let keys = ["{w}settle", "{w}undo", "{w}token", "{w}persist"];
    for k in keys {
        let args = [k, "5", "1000", "COST", "2", "ID", "old"];
        assert_eq!(call(&mut c, "SLIDEWIN.CHECK", &args), Value::Int(1));
    }
    let args = ["{w}token", "5", "1000", "WITHMEMBERS"];
    let Value::Array(fields) = call(&mut c, "SLIDEWIN.CHECK", &args) else {
        panic!("a detail reply")
    };
    let tokens: Vec<String> = redis::from_redis_value_ref(fields.last().unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    for k in keys {
        let args = [k, "5", "1000", "ID", "new"];
        assert_eq!(call(&mut c, "SLIDEWIN.CHECK", &args), Value::Int(1));
    }
    let _: i64 = redis::cmd("PERSIST")
        .arg("{w}persist")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    // Still in the keys (nothing has trimmed them since).
    assert_eq!(held(&mut c, "{w}settle"), 3);
    assert_eq!(held(&mut c, "{w}token"), 4);
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["{w}settle", "ID", "old", "COST", "5"]
        )),
        -1,
        "a charge out of its window is none"
    );
    assert_eq!(held(&mut c, "{w}settle"), 1, "its entries are gone");
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["{w}undo", "ID", "old"])),
        0
    );
    assert_eq!(held(&mut c, "{w}undo"), 1);
    let mut undo = vec!["{w}token"];
    undo.extend(tokens.iter().map(|t| t.as_str()));
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &undo)), 0);
    assert_eq!(held(&mut c, "{w}token"), 1);
    // The charge within the window settles as before.
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["{w}settle", "ID", "new", "COST", "3"]
        )),
        3
    );
    // Without an expiry, the key has no window: nothing is trimmed.
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["{w}persist", "ID", "old", "COST", "3"]
        )),
        3
    );
    assert_eq!(held(&mut c, "{w}persist"), 4);
    drop(assert_replica_matches(&master, &replica));
}

/// With `slidewin.max-limit` 50, a limit-10 key holding two charges of 5
/// cannot pass 50 entries through SETTLE: a raise past it is refused with
/// an error naming the setting, nothing changed or replicated; up to it
/// the raise settles, a lowering always does; the replica the same.
fn within_max_limit(flavor: Flavor, log: LogType) {
    let master = Options::new(flavor).log_type(log).start();
    let replica = match log {
        LogType::Zset => replica_without_module(&master, flavor),
        LogType::Compact => replica_with(&master, compact(flavor)),
    };
    let mut c = master.conn();
    config_set(&mut c, "slidewin.max-limit", "50");
    let k = "cap";
    for id in ["a", "b"] {
        let args = [k, "10", "60000", "COST", "5", "ID", id];
        assert_eq!(call(&mut c, "SLIDEWIN.CHECK", &args), Value::Int(1));
    }
    wait_caught_up(&master, &replica);
    let before = (digest(&mut c), offset(&mut c));
    let err = slidewin(&mut c, "SLIDEWIN.SETTLE", &[k, "ID", "a", "COST", "46"])
        .expect_err("past max-limit");
    assert_eq!(
        error_text(&err),
        "ERR SETTLE to 46 units would leave the key with 51 entries; slidewin.max-limit allows 50"
    );
    assert_eq!(
        (digest(&mut c), offset(&mut c)),
        before,
        "nothing changed or replicated"
    );
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "a", "COST", "45"]
        )),
        45
    );
    assert_eq!(held(&mut c, k), 50);
    // Every further raise, of either charge, is refused; the key stays at 50.
    for (id, units) in [("a", "46"), ("b", "6"), ("b", "50"), ("a", "50")] {
        let err = slidewin(&mut c, "SLIDEWIN.SETTLE", &[k, "ID", id, "COST", units])
            .expect_err("past max-limit");
        assert!(
            error_text(&err).ends_with("slidewin.max-limit allows 50"),
            "{}",
            error_text(&err)
        );
        assert_eq!(held(&mut c, k), 50);
    }
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "b", "COST", "2"]
        )),
        2
    );
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &[k, "ID", "a", "COST", "48"]
        )),
        48
    );
    assert_eq!(held(&mut c, k), 50);
    drop(assert_replica_matches(&master, &replica));
}
