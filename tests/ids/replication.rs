//! Bad input changes and replicates nothing; a replica and an AOF replay
//! reach the same entries as the master.

use redis::Value;

use crate::support::*;
use crate::{call, int, offset};

pub(crate) fn bad_input(flavor: Flavor, log: LogType) {
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

pub(crate) fn replication_and_aof(flavor: Flavor, log: LogType) {
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
