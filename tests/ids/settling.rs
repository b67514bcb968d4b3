//! SETTLE moves a charge down, up past the limit and to zero; SETTLE and
//! UNDO see no charge that left the key's window; SETTLE keeps a key within
//! `slidewin.max-limit` entries.

use redis::Value;

use crate::support::*;
use crate::{call, int, offset};

pub(crate) fn settle(flavor: Flavor, log: LogType) {
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
pub(crate) fn out_of_window(flavor: Flavor, log: LogType) {
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
pub(crate) fn within_max_limit(flavor: Flavor, log: LogType) {
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
