//! Charges made with an ID on compact logs at scale, on every server of the
//! suite: the per-key bound `slidewin.max-charges-per-key` (a new charge
//! past it is refused with an error naming the setting, nothing changed,
//! MCHECK refused whole), and a day-window token key whose older charges
//! are raised by SETTLE one after another: none fails, and a replica and a
//! reload reach the same data. (Times are measured by bench/charges.py,
//! never asserted here.)
#![allow(clippy::unwrap_used)]

mod support;

use redis::Value;
use support::*;

on_every_server! {
    max_charges_per_key_refuses_a_new_charge_and_changes_nothing => max_charges_per_key;
    every_raise_of_an_older_charge_on_a_day_key_succeeds => day_key_raises;
}

fn call(c: &mut Connection, command: &str, args: &[&str]) -> redis::RedisResult<Value> {
    slidewin(c, command, args)
}

fn int(v: redis::RedisResult<Value>) -> i64 {
    match v {
        Ok(Value::Int(n)) => n,
        other => panic!("an integer: {other:?}"),
    }
}

fn max_charges_per_key(flavor: Flavor) {
    let master = compact(flavor).start();
    let replica = replica_with(&master, compact(flavor));
    let mut c = master.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slidewin.max-charges-per-key")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "5000", "the documented default");
    config_set(&mut c, "slidewin.max-charges-per-key", "3");
    for i in 0..3 {
        let id = format!("r{i}");
        assert_eq!(
            int(call(
                &mut c,
                "SLIDEWIN.CHECK",
                &["k", "100", "60000", "ID", &id]
            )),
            1
        );
    }
    let before = digest(&mut c);
    let err = call(&mut c, "SLIDEWIN.CHECK", &["k", "100", "60000", "ID", "r3"]).unwrap_err();
    let text = error_text(&err);
    assert!(text.contains("slidewin.max-charges-per-key"), "{text}");
    assert!(text.starts_with("ERR "), "{text}");
    // MCHECK is refused whole: the other key is not created.
    let err = call(
        &mut c,
        "SLIDEWIN.MCHECK",
        &[
            "2", "other", "100", "60000", "k", "100", "60000", "ID", "r4",
        ],
    )
    .unwrap_err();
    assert!(error_text(&err).contains("slidewin.max-charges-per-key"));
    assert!(!exists(&mut c, "other"));
    assert_eq!(digest(&mut c), before, "a refused call changes nothing");
    // A repeat of a held charge, a call without ID, and a SETTLE still work.
    assert_eq!(
        int(call(
            &mut c,
            "SLIDEWIN.CHECK",
            &["k", "100", "60000", "ID", "r1"]
        )),
        1
    );
    assert_eq!(
        int(call(&mut c, "SLIDEWIN.CHECK", &["k", "100", "60000"])),
        1
    );
    assert_eq!(
        int(call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["k", "ID", "r1", "COST", "5"]
        )),
        5
    );
    // Given back, a charge makes room for another.
    assert_eq!(int(call(&mut c, "SLIDEWIN.UNDO", &["k", "ID", "r0"])), 1);
    assert_eq!(
        int(call(
            &mut c,
            "SLIDEWIN.CHECK",
            &["k", "100", "60000", "ID", "r3"]
        )),
        1
    );
    // The bound is the setting's range: 1 to 2^24.
    for bad in ["0", "16777217"] {
        let r: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("slidewin.max-charges-per-key")
            .arg(bad)
            .query(&mut c);
        assert!(r.is_err(), "{bad} accepted");
    }
    assert_replica_matches(&master, &replica);
}

/// The token key: a day window, 1,100 charges of COST 1 made one
/// after another, then each older charge raised by one unit (a response
/// that used more than its estimate). Raising an older charge puts its new
/// units out of member order; past the bound on such runs the charge moves
/// to the newest score instead of failing.
fn day_key_raises(flavor: Flavor) {
    let master = compact(flavor).start();
    let replica = replica_with(&master, compact(flavor));
    let mut c = master.conn();
    config_set(&mut c, "slidewin.max-charges-per-key", "2000");
    let k = "tpm:day";
    let n = 1_100;
    for i in 0..n {
        let id = format!("req-{i:05}");
        // Apart in time, as a gateway's requests are: each charge is a run
        // of its own, so each raise puts one more run out of member order.
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            int(call(
                &mut c,
                "SLIDEWIN.CHECK",
                &[k, "100000", "86400000", "ID", &id]
            )),
            1
        );
    }
    let mut failed = Vec::new();
    for i in 0..n {
        let id = format!("req-{i:05}");
        match call(&mut c, "SLIDEWIN.SETTLE", &[k, "ID", &id, "COST", "2"]) {
            Ok(Value::Int(2)) => {}
            other => failed.push((i, format!("{other:?}"))),
        }
    }
    assert!(
        failed.is_empty(),
        "{} raises failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    let peek = detail(&mut c, "SLIDEWIN.PEEK", &[k, "100000", "86400000"]);
    assert_eq!(peek[2], 100_000 - 2 * n, "every charge holds 2 units");
    assert_replica_matches(&master, &replica);
    // The key saves and loads again as it was.
    let before = digest(&mut c);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before);
}
