//! The compact log decides as the sorted-set log does, under its own
//! type (other commands get WRONGTYPE), beside the sorted sets made before
//! the switch; the setting is fixed at load and the default mode unchanged.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;

use crate::support::*;
use crate::{cmd, key_type, shape, text};

/// [`shape`], and MCHECK's own retry (its second field) by its sign.
fn shape_reply(v: Value, mcheck: bool) -> Value {
    match shape(v) {
        Value::Array(mut items) if mcheck => {
            if let Some(Value::Int(n)) = items.get_mut(1) {
                *n = n.signum();
            }
            Value::Array(items)
        }
        v => v,
    }
}

/// One random call of the command surface; long windows, so that two
/// servers judged a few milliseconds apart decide alike.
fn random_call(rng: &mut StdRng, given: &mut Vec<(String, String, String)>) -> Vec<String> {
    let keys = ["a", "b", "c"];
    let key = keys[rng.random_range(0..keys.len())].to_string();
    let limit = rng.random_range(1..8).to_string();
    let window = ["60000", "600000"][rng.random_range(0..2)].to_string();
    let cost = rng.random_range(1..4).to_string();
    match rng.random_range(0..10) {
        0..=4 => {
            let mut args = vec!["SLIDEWIN.CHECK".into(), key, limit, window];
            if rng.random_bool(0.4) {
                args.extend(["COST".into(), cost]);
            }
            args.extend(["DETAIL".into(), "WITHMEMBERS".into()]);
            args
        }
        5 => vec![
            "SLIDEWIN.PEEK".into(),
            key,
            limit,
            window,
            "COST".into(),
            cost,
        ],
        6 | 7 => {
            let other = keys[rng.random_range(0..keys.len())].to_string();
            vec![
                "SLIDEWIN.MCHECK".into(),
                "2".into(),
                key,
                limit,
                window.clone(),
                other,
                rng.random_range(1..8).to_string(),
                window,
                "COST".into(),
                cost,
                "DETAIL".into(),
                "WITHMEMBERS".into(),
            ]
        }
        _ => match given.is_empty() {
            true => vec!["SLIDEWIN.PEEK".into(), key, limit, window],
            false => {
                // The member each server gave, filled in per server.
                let (k, mz, mc) = given.swap_remove(rng.random_range(0..given.len()));
                vec!["SLIDEWIN.UNDO".into(), k, mz, mc]
            }
        },
    }
}

/// The members a reply gave (its last field with WITHMEMBERS), or none.
fn members_of(reply: &Value) -> Vec<String> {
    let Value::Array(items) = reply else {
        return Vec::new();
    };
    let Some(Value::Array(ms)) = items.last() else {
        return Vec::new();
    };
    ms.iter()
        .filter_map(|m| match m {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect()
}

/// A reply with its member list (if any) replaced by its length: which ids
/// a call gets depends on which calls fell in one millisecond (equal scores
/// order members as bytes), which differs between two servers.
fn without_members(reply: Value) -> Value {
    match reply {
        Value::Array(mut items) if matches!(items.last(), Some(Value::Array(_))) => {
            if let Some(Value::Array(ms)) = items.pop() {
                items.push(Value::Int(ms.len() as i64));
            }
            Value::Array(items)
        }
        v => v,
    }
}

pub(crate) fn same_decisions(flavor: Flavor) {
    let zset = Options::new(flavor).start();
    let comp = compact(flavor).start();
    let (mut z, mut c) = (zset.conn(), comp.conn());
    let mut rng = StdRng::seed_from_u64(20);
    let mut given = Vec::new();
    let mut outcomes = [0, 0];
    for i in 0..600 {
        let args = random_call(&mut rng, &mut given);
        let (az, ac): (Vec<&str>, Vec<&str>) = if args[0] == "SLIDEWIN.UNDO" {
            (
                vec![&args[0], &args[1], &args[2]],
                vec![&args[0], &args[1], &args[3]],
            )
        } else {
            let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            (a.clone(), a)
        };
        let mcheck = args[0] == "SLIDEWIN.MCHECK";
        let (rz, rc) = (cmd(&mut z, &az), cmd(&mut c, &ac));
        let (mz, mc) = (
            rz.as_ref().map(members_of).unwrap_or_default(),
            rc.as_ref().map(members_of).unwrap_or_default(),
        );
        let (rz, rc) = (
            rz.map(|v| shape_reply(without_members(v), mcheck))
                .map_err(|e| error_text(&e)),
            rc.map(|v| shape_reply(without_members(v), mcheck))
                .map_err(|e| error_text(&e)),
        );
        assert_eq!(rz, rc, "call {i}: {args:?}");
        if let Ok(Value::Array(items)) = &rz {
            match items.first() {
                Some(Value::Int(1)) => outcomes[0] += 1,
                Some(Value::Int(0)) => outcomes[1] += 1,
                _ => {}
            }
        }
        let keys: Vec<&String> = if mcheck {
            vec![&args[2], &args[5]]
        } else {
            vec![&args[1]]
        };
        for (m1, m2) in mz.iter().zip(&mc) {
            for k in &keys {
                // A name given again on either side (a key that emptied
                // starts its ids over, and whether a call took a short or a
                // wide id depends on which calls shared a millisecond on
                // that server) no longer names the older entry there: an
                // UNDO of it would take back the newer one on one side
                // only (docs/reference.md, UNDO). Only unambiguous names
                // are given back.
                given.retain(|(gk, gz, gc)| !(gk == *k && (gz == m1 || gc == m2)));
                given.push(((*k).clone(), m1.clone(), m2.clone()));
            }
        }
    }
    assert!(
        outcomes[0] > 50 && outcomes[1] > 50,
        "both outcomes: {outcomes:?}"
    );
    for k in ["a", "b", "c"] {
        if exists(&mut z, k) {
            assert_eq!(key_type(&mut c, k), "slidewlog", "{k}");
            let (tz, tc) = (pexpiretime(&mut z, k), pexpiretime(&mut c, k));
            assert!((tz - tc).abs() < 2_000, "{k}: expiry {tz} vs {tc}");
        } else {
            assert!(!exists(&mut c, k), "{k}");
        }
    }
}

pub(crate) fn module_type(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    assert_eq!(check(&mut c, "k", 3, 60_000), 1);
    assert_eq!(key_type(&mut c, "k"), "slidewlog");
    for args in [
        &["ZCARD", "k"][..],
        &["ZADD", "k", "1", "x"],
        &["GET", "k"],
        &["ZRANGE", "k", "0", "-1"],
    ] {
        assert_eq!(
            text(&mut c, args),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "{args:?}"
        );
    }
    // The FUNCTION library names a compact log instead of failing on it.
    load_function_library(&mut c);
    for args in [
        &["FCALL", "slidewin_check", "1", "k", "3", "60000"][..],
        &["FCALL", "slidewin_mcheck", "1", "k", "3", "60000"],
        &["FCALL", "slidewin_undo", "1", "k", "1"],
        &["FCALL", "slidewin_check", "1", "k", "3", "60000", "ID", "r"],
        &["FCALL", "slidewin_undo", "1", "k", "ID", "r"],
        &["FCALL", "slidewin_settle", "1", "k", "ID", "r", "COST", "1"],
    ] {
        let got = text(&mut c, args);
        assert!(
            got.starts_with("ERR the key holds a compact log (slidewin.log-type compact)"),
            "{args:?}: {got}"
        );
    }
    // The module's commands refuse other types as before.
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut c).unwrap();
    assert!(text(&mut c, &["SLIDEWIN.CHECK", "s", "3", "1000"]).starts_with("WRONGTYPE"));
    assert!(text(&mut c, &["SLIDEWIN.APPLY", "s", "TRIM", "1"]).starts_with("WRONGTYPE"));
    // MEMORY USAGE counts the log: more entries, more memory.
    let small: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("k")
        .query(&mut c)
        .unwrap();
    for _ in 0..2000 {
        let _: i64 = redis::cmd("SLIDEWIN.CHECK")
            .arg("big")
            .arg(100_000)
            .arg(3_600_000)
            .query(&mut c)
            .unwrap();
    }
    let big: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("big")
        .query(&mut c)
        .unwrap();
    assert!(small > 0 && big > small, "MEMORY USAGE {small} then {big}");
    // Events: the same names as the sorted-set log fires.
    let mut events = KeyEvents::subscribe(&server);
    assert_eq!(check(&mut c, "ev", 1, 60_000), 1);
    assert_eq!(check(&mut c, "ev", 1, 60_000), 0);
    let seen: Vec<String> = events
        .drain(&mut c)
        .into_iter()
        .filter(|(_, k)| k == "ev")
        .map(|(e, _)| e.rsplit(':').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(seen, ["zadd", "expire", "slidewin.denied"], "events");
    // WATCH: an allowed CHECK aborts the transaction; a denial that trimmed
    // nothing leaves it alone, as on a sorted set.
    let mut w = server.conn();
    for (limit, aborts) in [(5, true), (1, false)] {
        let _: () = redis::cmd("WATCH").arg("ev").query(&mut w).unwrap();
        assert_eq!(check(&mut c, "ev", limit, 60_000), i64::from(aborts));
        let _: () = redis::cmd("MULTI").query(&mut w).unwrap();
        let _: String = redis::cmd("SET")
            .arg("other")
            .arg("x")
            .query(&mut w)
            .unwrap();
        let exec: Value = redis::cmd("EXEC").query(&mut w).unwrap();
        assert_eq!(exec == Value::Nil, aborts, "limit {limit}: {exec:?}");
    }
    // TOP counts decisions on compact keys like any others.
    let top = text(&mut c, &["SLIDEWIN.TOP", "5", "DENIED"]);
    assert!(top.contains("ev"), "{top}");
}

pub(crate) fn existing_zsets(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let now = server_ms(&mut c);
    // A key of the seed script, made before the switch.
    let _: i64 = redis::cmd("ZADD")
        .arg("sms:limit:old")
        .arg(now)
        .arg(format!("{now}-0f6c"))
        .query(&mut c)
        .unwrap();
    assert_eq!(check(&mut c, "sms:limit:old", 2, 60_000), 1);
    assert_eq!(check(&mut c, "sms:limit:old", 2, 60_000), 0);
    assert_eq!(key_type(&mut c, "sms:limit:old"), "zset");
    assert_eq!(zcard(&mut c, "sms:limit:old"), 2);
    // MCHECK over both kinds at once: all or nothing on each.
    assert_eq!(check(&mut c, "new", 5, 60_000), 1);
    let both = [
        "SLIDEWIN.MCHECK",
        "2",
        "new",
        "5",
        "60000",
        "sms:limit:old",
        "3",
        "60000",
    ];
    assert_eq!(text(&mut c, &both), "int(1)");
    assert_eq!(text(&mut c, &both), "int(0)");
    assert_eq!(zcard(&mut c, "sms:limit:old"), 3);
    let peek = detail(&mut c, "SLIDEWIN.PEEK", &["new", "5", "60000"]);
    assert_eq!(&peek[..3], [1, 5, 3], "new holds 2 entries");
    assert_eq!(key_type(&mut c, "new"), "slidewlog");
}

pub(crate) fn setting(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slidewin.log-type")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["slidewin.log-type", "compact"]);
    let set = text(&mut c, &["CONFIG", "SET", "slidewin.log-type", "zset"]);
    assert!(set.contains("immutable"), "{set}");
    let unload = text(&mut c, &["MODULE", "UNLOAD", "slidewin"]);
    assert!(
        unload.starts_with("ERR"),
        "a data type keeps the module loaded: {unload}"
    );
    let info = info_field(&mut c, "slidewin", "slidewin_log_type");
    assert_eq!(info.as_deref(), Some("compact"));
    // The default: sorted sets, no effect command, UNLOAD works.
    let plain = Options::new(flavor).start();
    let mut p = plain.conn();
    assert_eq!(check(&mut p, "k", 3, 60_000), 1);
    assert_eq!(key_type(&mut p, "k"), "zset");
    assert!(text(&mut p, &["SLIDEWIN.APPLY", "k", "TRIM", "1"]).contains("unknown command"));
    assert_eq!(
        info_field(&mut p, "slidewin", "slidewin_log_type").as_deref(),
        Some("zset")
    );
    assert_eq!(text(&mut p, &["MODULE", "UNLOAD", "slidewin"]), "ok");
    // A bad value refuses the load, naming the setting.
    let log = Options::new(flavor)
        .module_args(&["log-type", "list"])
        .start_expecting_failure();
    assert!(
        log.contains("log-type must be zset or compact, got 'list'"),
        "{log}"
    );
}
