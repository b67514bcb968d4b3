//! PEEK (it writes nothing, agrees with CHECK, answers on a replica and on
//! a wrong type), and keyspace events and WATCH.

use redis::Value;

use crate::support::*;
use crate::{assert_detail, five, seeded};

fn repl_offset(c: &mut Connection) -> String {
    info_field(c, "replication", "master_repl_offset").expect("offset")
}

/// PEEK, and denials that trim nothing, write nothing: with a replica and
/// the AOF attached, the replication offset, the AOF size, the data and the
/// keyspace events all stay as they were.
pub(crate) fn peek_writes_nothing(flavor: Flavor) {
    let server = Options::new(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        // No replication PINGs while the offset is compared.
        .arg("repl-ping-replica-period", "3600")
        .start();
    let replica = replica_without_module(&server, flavor);
    let mut c = server.conn();
    // A key with two expired entries that a CHECK would trim.
    let (_, _) = seeded(
        &mut c,
        "p",
        &[90_000, 80_000, 1000],
        "SLIDEWIN.PEEK",
        &["5", "60000"],
    );
    // A full key with nothing to trim, for denials.
    assert_eq!(check(&mut c, "full", 2, 600_000), 1);
    assert_eq!(check(&mut c, "full", 2, 600_000), 1);
    wait_caught_up(&server, &replica);
    let mut events = KeyEvents::subscribe(&server);
    assert!(events.drain(&mut c).is_empty());
    let aof_size = |c: &mut Connection| info_field(c, "persistence", "aof_current_size");
    let offset_before = repl_offset(&mut c);
    let before = (digest(&mut c), aof_size(&mut c));
    assert!(before.1.is_some(), "the AOF is on");
    for args in [
        &["p", "5", "60000"][..],
        &["p", "1", "60000"][..],
        &["p", "5", "60000", "COST", "9"][..],
        &["missing", "5", "60000"][..],
        &["missing", "5", "60000", "COST", "2"][..],
    ] {
        slidewin(&mut c, "SLIDEWIN.PEEK", args).expect("PEEK");
    }
    for (command, args) in [
        ("SLIDEWIN.CHECK", &["full", "2", "600000"][..]),
        ("SLIDEWIN.CHECK", &["full", "2", "600000", "DETAIL"][..]),
        ("SLIDEWIN.CHECK", &["full", "3", "600000", "COST", "2"][..]),
        (
            "SLIDEWIN.MCHECK",
            &["2", "full", "9", "600000", "full", "2", "600000"][..],
        ),
    ] {
        let v = slidewin(&mut c, command, args).expect(command);
        let allowed = match v {
            Value::Int(n) => n,
            Value::Array(ref items) => redis::from_redis_value_ref(&items[0]).expect("allowed"),
            ref other => panic!("{other:?}"),
        };
        assert_eq!(allowed, 0, "{command} {args:?} is denied");
    }
    // The marker write of drain() is the first thing propagated after this.
    assert_eq!((digest(&mut c), aof_size(&mut c)), before);
    assert_eq!(repl_offset(&mut c), offset_before, "nothing propagated");
    // The only events: one slidewin.denied per denial (module class `d`,
    // not a write), on both channels; the MCHECK names its key once.
    let seen = events.drain(&mut c);
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(
        seen.iter().all(
            |(ch, msg)| (ch == "__keyspace@0__:full" && msg == "slidewin.denied")
                || (ch == "__keyevent@0__:slidewin.denied" && msg == "full")
        ),
        "no keyspace event but the denials: {seen:?}"
    );
    // The check can fail: a write moves the offset and fires an event.
    assert_eq!(check(&mut c, "full", 3, 600_000), 1);
    assert_ne!(repl_offset(&mut c), offset_before);
    assert!(!events.drain(&mut c).is_empty());
    let n: i64 = redis::cmd("ZCARD").arg("p").query(&mut c).unwrap();
    assert_eq!(n, 3, "nothing trimmed");
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(&mut c).unwrap();
    assert_eq!(exists, 0, "nothing created");
    // A peek counts only the entry inside the window.
    let (_, r) = seeded(
        &mut c,
        "q",
        &[90_000, 80_000, 1000],
        "SLIDEWIN.PEEK",
        &["1", "60000"],
    );
    let frozen = server.clock_frozen_in_script();
    assert_detail(frozen, five(&r), [0, 1, 0, 59_000, 59_000], "peek q");
}

pub(crate) fn peek_agrees_with_check(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let frozen = server.clock_frozen_in_script();
    let mut c = server.conn();
    // In one script: PEEK, then CHECK DETAIL, on the same entries.
    let script = r"
        local p = redis.call('SLIDEWIN.PEEK', KEYS[1], ARGV[1], ARGV[2], 'COST', ARGV[3])
        local c = redis.call('SLIDEWIN.CHECK', KEYS[1], ARGV[1], ARGV[2], 'COST', ARGV[3], 'DETAIL')
        return {p, c}
    ";
    for (limit, cost) in [(3, 1), (3, 2), (4, 2), (3, 4), (6, 1)] {
        let key = format!("agree:{limit}:{cost}");
        let _ = seeded(
            &mut c,
            &key,
            &[9000, 5000, 1000],
            "SLIDEWIN.PEEK",
            &["1", "1"],
        );
        let v: Vec<Value> = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(&key)
            .arg(limit)
            .arg(10_000)
            .arg(cost)
            .query(&mut c)
            .unwrap();
        let (p, k) = (five(&v[0]), five(&v[1]));
        assert_eq!(p[0], k[0], "same decision");
        if k[0] == 0 {
            assert_detail(frozen, k, p, "a denied CHECK answers what PEEK said");
        }
        if k[0] == 1 {
            assert_eq!(p[2] - cost, k[2], "CHECK consumed what PEEK had left");
        }
    }
}

pub(crate) fn peek_on_replica(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = Options::new(flavor)
        .arg("replicaof", &master.replica_address())
        .start();
    let mut r = replica.conn();
    assert!(wait_until(
        std::time::Duration::from_secs(20),
        || info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    ));
    let mut m = master.conn();
    for _ in 0..3 {
        check(&mut m, "rl:1", 3, 60_000);
    }
    wait_caught_up(&master, &replica);
    let before = digest(&mut r);
    let err = slidewin(&mut r, "SLIDEWIN.CHECK", &["rl:1", "3", "60000"]).expect_err("replica");
    assert!(
        error_text(&err).starts_with("READONLY"),
        "{}",
        error_text(&err)
    );
    let p = detail(&mut r, "SLIDEWIN.PEEK", &["rl:1", "3", "60000"]);
    assert_eq!(p[..3], [0, 3, 0]);
    assert!(p[3] > 0 && p[3] <= 60_000);
    assert_eq!(digest(&mut r), before);
}

pub(crate) fn peek_wrongtype(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut c).unwrap();
    let err = slidewin(&mut c, "SLIDEWIN.PEEK", &["s", "3", "1000"]).expect_err("wrongtype");
    assert_eq!(
        error_text(&err),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

/// The events the seed script's commands would fire, and WATCH seeing the
/// key change (and not change on a denial that trimmed nothing).
pub(crate) fn events_and_watch(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut events = KeyEvents::subscribe(&server);
    // An old entry the next check trims, then an allowed and a denied call.
    let now = server_ms(&mut c);
    let _: i64 = redis::cmd("ZADD")
        .arg("ev")
        .arg(now - 120_000)
        .arg("old")
        .query(&mut c)
        .unwrap();
    assert_eq!(check(&mut c, "ev", 1, 60_000), 1);
    assert_eq!(check(&mut c, "ev", 1, 60_000), 0);
    let seen = events.drain(&mut c);
    let names: Vec<&str> = seen
        .iter()
        .filter(|(ch, _)| ch.starts_with("__keyevent@0__:"))
        .map(|(ch, key)| {
            assert_eq!(key, "ev", "{seen:?}");
            ch.rsplit(':').next().unwrap_or("")
        })
        .collect();
    // The seed script's events for the allowed call, then the denial's.
    assert_eq!(
        names,
        [
            "zadd",
            "zremrangebyscore",
            "del",
            "zadd",
            "expire",
            "slidewin.denied"
        ],
        "{seen:?}"
    );
    // Every keyevent message has its keyspace twin.
    let spaces: Vec<&str> = seen
        .iter()
        .filter(|(ch, _)| ch == "__keyspace@0__:ev")
        .map(|(_, event)| event.as_str())
        .collect();
    assert_eq!(spaces, names, "{seen:?}");

    // WATCH: a CHECK that writes aborts the transaction; a denial that
    // trimmed nothing leaves it alone.
    let mut w = server.conn();
    for (writes, expect_abort) in [(true, true), (false, false)] {
        let _: () = redis::cmd("WATCH").arg("ev").query(&mut w).unwrap();
        let limit = if writes { 5 } else { 1 };
        assert_eq!(check(&mut c, "ev", limit, 60_000), i64::from(writes));
        let _: () = redis::cmd("MULTI").query(&mut w).unwrap();
        let _: String = redis::cmd("SET")
            .arg("other")
            .arg("x")
            .query(&mut w)
            .unwrap();
        let exec: Value = redis::cmd("EXEC").query(&mut w).unwrap();
        assert_eq!(
            exec == Value::Nil,
            expect_abort,
            "writes={writes}: {exec:?}"
        );
    }
}
