//! The compact log (`slidewin.log-type compact`) against real servers: the
//! same decisions as the sorted-set log, the data type's paths (replication
//! by effects, RDB, AOF rewrite, DUMP/RESTORE, COPY, RENAME, MOVE), the
//! effect command's checks, hostile RESTORE payloads, and the default mode
//! left exactly as it was.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    decides_as_the_sorted_set_log_does => same_decisions;
    keys_are_of_the_module_type_and_other_commands_get_wrongtype => module_type;
    existing_sorted_sets_stay_sorted_sets => existing_zsets;
    a_replica_with_the_module_holds_the_same_logs => replica_matches;
    rdb_aof_and_dump_carry_the_log => persistence;
    copy_rename_move_and_swapdb_carry_the_log => key_moves;
    apply_checks_every_argument_and_changes_nothing_on_error => apply_checks;
    hostile_restore_payloads_are_refused => hostile_restore;
    the_setting_is_fixed_at_load_and_the_default_mode_is_unchanged => setting;
    memory_is_as_documented_and_frees_off_the_main_thread => memory;
    many_limit_5_keys_take_less_memory_than_as_sorted_sets => small_keys;
    active_defragmentation_moves_logs_and_keeps_them => defrag;
    request_ids_charge_once_and_travel_with_the_log => request_ids;
    charges_take_the_documented_memory => charge_memory;
    a_key_of_few_charges_is_small_and_travels => few_charges;
}

fn cmd(c: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut command = redis::cmd(args[0]);
    for a in &args[1..] {
        command.arg(*a);
    }
    command.query(c)
}

fn text(c: &mut Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Ok(v) => format!("{v:?}"),
        Err(e) => error_text(&e),
    }
}

fn key_type(c: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(c).expect("TYPE")
}

/// Replaces the two time-dependent fields of five-field replies (retry and
/// reset after) by their sign, so replies of two servers a few ms apart
/// compare.
fn shape(v: Value) -> Value {
    match v {
        Value::Array(items)
            if items.len() >= 5 && items.iter().take(5).all(|i| matches!(i, Value::Int(_))) =>
        {
            Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| match (i, x) {
                        (3 | 4, Value::Int(n)) => Value::Int(n.signum()),
                        (_, x) => shape(x),
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(shape).collect()),
        v => v,
    }
}

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

fn same_decisions(flavor: Flavor) {
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

fn module_type(flavor: Flavor) {
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

fn existing_zsets(flavor: Flavor) {
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

/// Starts a replica of `master` with the module in compact mode.
fn compact_replica(master: &Server, flavor: Flavor) -> Server {
    replica_with(master, compact(flavor))
}

/// Calls on a few keys with tight limits and short and long windows, some
/// given back; returns the keys.
fn load(c: &mut Connection, seed: u64, calls: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<String> = (0..12).map(|i| format!("load:{i}")).collect();
    let windows = [30i64, 600_000];
    let mut outcomes = [0, 0];
    for i in 0..calls {
        let k = rng.random_range(0..keys.len());
        let reply: Vec<Value> = redis::cmd("SLIDEWIN.CHECK")
            .arg(&keys[k])
            .arg(1 + (k % 4))
            .arg(windows[k % 2])
            .arg("COST")
            .arg(rng.random_range(1..3))
            .arg("DETAIL")
            .arg("WITHMEMBERS")
            .query(c)
            .unwrap();
        let allowed = matches!(reply.first(), Some(Value::Int(1)));
        outcomes[usize::from(!allowed)] += 1;
        if allowed && rng.random_bool(0.2) {
            if let Some(Value::Array(ms)) = reply.last() {
                let mut undo = redis::cmd("SLIDEWIN.UNDO");
                undo.arg(&keys[k]);
                for m in ms {
                    if let Value::BulkString(b) = m {
                        undo.arg(b.as_slice());
                    }
                }
                let _: i64 = undo.query(c).unwrap();
            }
        }
        if i % 40 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
    keys
}

/// Lets the short-window keys expire and touches every key, so that the
/// expired ones are deleted (and the deletion propagated) before digests.
fn settle(c: &mut Connection, keys: &[String]) {
    std::thread::sleep(Duration::from_millis(150));
    for k in keys {
        let _: i64 = redis::cmd("EXISTS").arg(k).query(c).unwrap();
    }
}

fn replica_matches(flavor: Flavor) {
    let master = compact(flavor).start();
    let replica = compact_replica(&master, flavor);
    let mut m = master.conn();
    let keys = load(&mut m, 3, 1500);
    // Calls from a script and in MULTI propagate their effects too.
    let _: Vec<i64> = redis::cmd("EVAL")
        .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 2, 600000), redis.call('SLIDEWIN.CHECK', KEYS[1], 2, 600000, 'COST', 2)}")
        .arg(1)
        .arg("scripted")
        .query(&mut m)
        .unwrap();
    settle(&mut m, &keys);
    let mut r = assert_replica_matches(&master, &replica);
    let live: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut m).unwrap();
    assert!(live.len() > 3, "long-window keys remain: {live:?}");
    for k in &live {
        assert_eq!(digest_value(&mut m, k), digest_value(&mut r, k), "{k}");
        assert_eq!(pexpiretime(&mut m, k), pexpiretime(&mut r, k), "{k}");
        assert_eq!(key_type(&mut r, k), "slidewlog", "{k}");
    }
    // The digest sees the log: one more entry changes it.
    let before = digest(&mut m);
    assert_eq!(check(&mut m, "scripted", 100, 600_000), 1);
    assert_ne!(digest(&mut m), before, "DEBUG DIGEST covers compact logs");
    // The replica applied effects, never a deciding command.
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut r)
        .unwrap();
    assert!(stats.contains("cmdstat_slidewin.apply"), "{stats}");
    for decided in ["cmdstat_slidewin.check:", "cmdstat_slidewin.undo:"] {
        assert!(
            !stats.contains(decided),
            "{decided} ran on the replica: {stats}"
        );
    }
    // A full resync gives the same data too, loaded straight from the
    // socket (the type handles IO errors, so diskless load is allowed).
    drop(r);
    let second = replica_with(
        &master,
        compact(flavor).arg("repl-diskless-load", "on-empty-db"),
    );
    assert_replica_matches(&master, &second);
    let log = second.log();
    assert!(
        !log.contains("Skipping diskless-load") && log.contains("Loading DB in memory"),
        "a diskless load: {log}"
    );
}

fn persistence(flavor: Flavor) {
    for preamble in ["no", "yes"] {
        let server = compact(flavor)
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", preamble)
            .start();
        let mut c = server.conn();
        let keys = load(&mut c, 5, 800);
        settle(&mut c, &keys);
        let before = digest(&mut c);
        // What the AOF logged: the effects, never the deciding commands.
        let names: Vec<String> = aof_commands(&server.dir)
            .iter()
            .map(|cmd| String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase())
            .collect();
        assert!(names.iter().any(|n| n == "SLIDEWIN.APPLY"), "{names:?}");
        for decided in ["SLIDEWIN.CHECK", "SLIDEWIN.UNDO"] {
            assert!(!names.iter().any(|n| n == decided), "{decided}: {names:?}");
        }
        // One effect per call: a MULTI holds at most one (the server wraps
        // its own lazy-expiry DEL with the effect of the call that met it).
        let mut in_multi = None;
        for n in &names {
            match n.as_str() {
                "MULTI" => in_multi = Some(0),
                "EXEC" => in_multi = None,
                "SLIDEWIN.APPLY" => {
                    if let Some(count) = in_multi.as_mut() {
                        *count += 1;
                        assert!(*count <= 1, "two effects in one MULTI: {names:?}");
                    }
                }
                _ => {}
            }
        }
        let _: () = redis::cmd("DEBUG")
            .arg("RELOAD")
            .query(&mut c)
            .expect("DEBUG RELOAD");
        assert_eq!(digest(&mut c), before, "DEBUG RELOAD (RDB) keeps the logs");
        let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        assert!(
            wait_until(Duration::from_secs(20), || info_field(
                &mut c,
                "persistence",
                "aof_rewrite_in_progress"
            )
            .as_deref()
                == Some("0")
                && info_field(&mut c, "persistence", "aof_rewrite_scheduled")
                    .as_deref()
                    == Some("0")),
            "rewrite finished"
        );
        let _: () = redis::cmd("DEBUG")
            .arg("LOADAOF")
            .query(&mut c)
            .expect("DEBUG LOADAOF");
        assert_eq!(
            digest(&mut c),
            before,
            "AOF rewrite (preamble {preamble}) keeps the logs"
        );
        if preamble == "no" {
            // The rewritten base file rebuilds each log with one command.
            let base: Vec<Vec<Vec<u8>>> = std::fs::read_dir(server.dir.join("appendonlydir"))
                .expect("appendonlydir")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".base.aof"))
                .flat_map(|f| parse_aof(&std::fs::read(f).expect("read aof")))
                .collect();
            assert!(
                base.iter().any(|cmd| cmd.len() == 4
                    && cmd[0].eq_ignore_ascii_case(b"SLIDEWIN.APPLY")
                    && cmd[2] == b"LOG"),
                "{:?}",
                base.iter()
                    .map(|c| String::from_utf8_lossy(&c[0]).into_owned())
                    .collect::<Vec<_>>()
            );
        }
    }
    // DUMP and RESTORE: the same log, a fresh key.
    let server = compact(flavor).start();
    let mut c = server.conn();
    let keys = load(&mut c, 9, 300);
    settle(&mut c, &keys);
    let live: Vec<String> = redis::cmd("KEYS").arg("load:*").query(&mut c).unwrap();
    let k = &live[0];
    let payload: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
    // The same expiry too: the digest of a value covers whether it expires.
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(pexpiretime(&mut c, k))
        .arg(&payload)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, k), digest_value(&mut c, "restored"));
    assert_eq!(key_type(&mut c, "restored"), "slidewlog");
}

fn key_moves(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    for _ in 0..3 {
        assert_eq!(check(&mut c, "src", 5, 600_000), 1);
    }
    let d = digest_value(&mut c, "src");
    let _: i64 = redis::cmd("COPY")
        .arg("src")
        .arg("copied")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, "copied"), d);
    // The copy is its own log: a check on it leaves the source alone.
    assert_eq!(check(&mut c, "copied", 5, 600_000), 1);
    assert_eq!(digest_value(&mut c, "src"), d);
    assert_ne!(digest_value(&mut c, "copied"), d);
    let _: () = redis::cmd("RENAME")
        .arg("src")
        .arg("renamed")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, "renamed"), d);
    assert_eq!(
        &detail(&mut c, "SLIDEWIN.PEEK", &["renamed", "5", "600000"])[..3],
        [1, 5, 2]
    );
    let _: i64 = redis::cmd("MOVE")
        .arg("renamed")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut c).unwrap();
    assert_eq!(
        digest_value(&mut c, "renamed"),
        d,
        "moved to db 1, swapped back"
    );
    assert_eq!(check(&mut c, "renamed", 4, 600_000), 1);
    assert_eq!(check(&mut c, "renamed", 4, 600_000), 0);
}

fn apply_checks(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let now = server_ms(&mut c);
    let at = (now + 600_000).to_string();
    let n = now.to_string();
    assert_eq!(
        text(
            &mut c,
            &["SLIDEWIN.APPLY", "k", "ADD", &n, "1", "3", "PXAT", &at]
        ),
        "ok"
    );
    assert_eq!(
        &detail(&mut c, "SLIDEWIN.PEEK", &["k", "5", "600000"])[..3],
        [1, 5, 2]
    );
    assert_eq!(pexpiretime(&mut c, "k"), now + 600_000);
    let before = digest_value(&mut c, "k");
    let refused: &[(&[&str], &str)] = &[
        (
            &["SLIDEWIN.APPLY", "k"],
            "ERR wrong number of arguments for 'slidewin.apply' command",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "ADD", &n, "2", "1"],
            "ERR ADD members 2 to 2 are already in the log",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "REMOVE", "7"],
            "ERR REMOVE member 7 is not in the log",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "ADD", &n, "9", "0"],
            "ERR ADD count must be an integer between 1 and",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "PXAT", "soon"],
            "ERR PXAT unix_ms must be an integer between 0 and",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "LOG", "junk"],
            "ERR LOG payload is not a compact log",
        ),
        (
            &["SLIDEWIN.APPLY", "k", "ZADD", "1"],
            "ERR unknown option 'ZADD'",
        ),
    ];
    for (args, expected) in refused {
        let got = text(&mut c, args);
        assert!(got.starts_with(expected), "{args:?}: {got}");
        assert_eq!(
            digest_value(&mut c, "k"),
            before,
            "{args:?} changed the log"
        );
    }
    // Removing the last entries deletes the key, as for a sorted set.
    assert_eq!(
        text(
            &mut c,
            &[
                "SLIDEWIN.APPLY",
                "k",
                "REMOVE",
                "1",
                "REMOVE",
                "2",
                "REMOVE",
                "3"
            ]
        ),
        "ok"
    );
    assert!(!exists(&mut c, "k"));
    // A missing key and a refusal: nothing is created.
    assert!(text(&mut c, &["SLIDEWIN.APPLY", "k", "REMOVE", "1"]).starts_with("ERR REMOVE"));
    assert!(!exists(&mut c, "k"));
}

/// Redis's CRC-64 (Jones, reflected), which DUMP payloads end with.
fn crc64(bytes: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Sets a DUMP payload's checksum to match its body.
fn reseal(payload: &mut [u8]) {
    let body = payload.len() - 8;
    let crc = crc64(&payload[..body]);
    payload[body..].copy_from_slice(&crc.to_le_bytes());
}

fn hostile_restore(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    for cost in 1..6 {
        let _: i64 = redis::cmd("SLIDEWIN.CHECK")
            .arg("k")
            .arg(100)
            .arg(600_000)
            .arg("COST")
            .arg(cost)
            .query(&mut c)
            .unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let good: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut c).unwrap();
    let mut check_crc = good.clone();
    reseal(&mut check_crc);
    assert_eq!(check_crc, good, "the test's CRC-64 is the server's");
    // The log's bytes start with the encoding's version, 1, and its expiry
    // flag, 1: past the type byte and the module id, after the opcode and
    // the length.
    let at = (10..good.len() - 10)
        .find(|&i| good[i] == 1 && good[i + 1] == 1)
        .expect("the encoded log in the payload");
    let mut rng = StdRng::seed_from_u64(7);
    let (mut refused, mut restored) = (0, 0);
    for round in 0..200 {
        let mut p = good.clone();
        if round == 0 {
            p[at] = 9; // an unknown, newer encoding version
        } else {
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(at..good.len() - 10);
                p[i] ^= rng.random_range(1..=255u8);
            }
        }
        reseal(&mut p);
        let key = format!("r{round}");
        let r: redis::RedisResult<()> =
            redis::cmd("RESTORE").arg(&key).arg(0).arg(&p).query(&mut c);
        match r {
            Err(e) => {
                refused += 1;
                assert!(
                    error_text(&e).contains("Bad data format"),
                    "{}",
                    error_text(&e)
                );
                assert!(!exists(&mut c, &key), "a refused payload left {key}");
            }
            Ok(()) => {
                restored += 1;
                // Whatever was accepted is a sound log the commands can use.
                let d = detail(&mut c, "SLIDEWIN.PEEK", &[&key, "100", "600000"]);
                assert_eq!(d[1], 100);
                let _ = check(&mut c, &key, 1000, 600_000);
            }
        }
        if round == 0 {
            assert_eq!(refused, 1, "version 9 is refused");
        }
    }
    assert!(
        refused > 100,
        "most mutations are refused: {refused} of 200 ({restored} restored)"
    );
    assert!(
        server.log().contains("cannot be loaded") || server.log().contains("encoding version"),
        "the refusals are logged"
    );
    assert_eq!(
        check(&mut c, "k", 100, 600_000),
        1,
        "the server still serves"
    );
}

fn setting(flavor: Flavor) {
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

/// The times of `n` entries arriving as a Poisson stream at `per_hour`
/// (seeded), ending now on the server's clock.
fn poisson_times(c: &mut Connection, n: usize, per_hour: f64, seed: u64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mean_gap_ms = 3_600_000.0 / per_hour;
    let gaps: Vec<i64> = (0..n)
        .map(|_| {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            ((-u.ln() * mean_gap_ms) as i64).max(1)
        })
        .collect();
    let mut t = server_ms(c) - gaps.iter().sum::<i64>();
    gaps.iter()
        .map(|gap| {
            t += gap;
            t
        })
        .collect()
}

/// Fills `key` with `n` entries arriving as a Poisson stream at `per_hour`
/// (seeded), through the effect command, ending now.
fn poisson_log(c: &mut Connection, key: &str, n: usize, per_hour: f64, seed: u64) {
    let times = poisson_times(c, n, per_hour, seed);
    let mut pipe = redis::pipe();
    for (i, t) in times.iter().enumerate() {
        pipe.cmd("SLIDEWIN.APPLY")
            .arg(key)
            .arg("ADD")
            .arg(t)
            .arg(i + 1)
            .arg(1)
            .ignore();
    }
    let last = times.last().copied().unwrap_or(0);
    pipe.cmd("PEXPIREAT")
        .arg(key)
        .arg(last + 3_600_000)
        .ignore();
    let _: () = pipe.query(c).unwrap();
}

fn memory_usage(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(c)
        .unwrap()
}

/// The key every row of the memory table is measured under (the length of
/// its name counts in MEMORY USAGE).
const SIZE_KEY: &str = "sms:limit:192.168.1.100";

/// The table of docs/compact-log.md the suite holds the module to: per
/// number of entries, per server, MEMORY USAGE of the compact log and of the
/// same entries as a sorted set, as printed ("120 B / 152 B").
fn documented_sizes(flavor: Flavor) -> Vec<(usize, i64, i64)> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compact-log.md"),
    )
    .expect("read docs/compact-log.md");
    let mut lines = page
        .lines()
        .skip_while(|l| !l.starts_with("| entries | built by | Redis 7.0"));
    let header: Vec<&str> = lines
        .next()
        .expect("the memory table in docs/compact-log.md")
        .split('|')
        .map(str::trim)
        .collect();
    let label = match flavor {
        Flavor::Redis70 => "Redis 7.0",
        Flavor::Redis82 => "Redis 8.2",
        Flavor::Valkey81 => "Valkey 8.1",
        Flavor::Valkey91 => "Valkey 9.1",
        // Not among the servers this suite runs on (on_every_server).
        Flavor::Redis62 => "Redis 6.2",
    };
    let column = header
        .iter()
        .position(|h| *h == label)
        .unwrap_or_else(|| panic!("no {label} column in {header:?}"));
    let number = |t: &str| -> i64 {
        t.trim()
            .trim_end_matches('B')
            .trim()
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("not a size: {t:?}"))
    };
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (compact, sorted) = cells[column]
                .split_once('/')
                .unwrap_or_else(|| panic!("not 'compact / sorted set': {:?}", cells[column]));
            (number(cells[1]) as usize, number(compact), number(sorted))
        })
        .collect()
}

/// README's compact column gives, per size, the smallest and largest of
/// the four servers' figures in docs/compact-log.md's table (which the
/// servers' tests assert), so neither page drifts from the other.
#[test]
fn the_readme_prints_the_documented_memory() {
    let per_server: Vec<Vec<(usize, i64, i64)>> = [
        Flavor::Redis70,
        Flavor::Redis82,
        Flavor::Valkey81,
        Flavor::Valkey91,
    ]
    .into_iter()
    .map(documented_sizes)
    .collect();
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("read README.md");
    let thousands = |v: i64| -> String {
        let digits = v.to_string();
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    let mut rows = 0;
    for line in readme
        .lines()
        .skip_while(|l| !l.starts_with("| entries in a key (its limit)"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let n: usize = cells[1].replace(',', "").parse().expect("entries");
        let sizes: Vec<i64> = per_server
            .iter()
            .map(|rows| {
                rows.iter()
                    .find(|r| r.0 == n)
                    .unwrap_or_else(|| panic!("no {n}-entry row in docs/compact-log.md"))
                    .1
            })
            .collect();
        let (lo, hi) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
        let want = format!("{}-{} B", thousands(lo), thousands(hi));
        assert!(
            cells[3].starts_with(&want),
            "README's {n}-entry compact figure {:?}: docs/compact-log.md gives {want}",
            cells[3]
        );
        rows += 1;
    }
    assert_eq!(rows, 4, "README's table of sizes");
}

/// Fills `key` as CHECKs do, one entry a call: the entries of a Poisson
/// stream at 10,000 an hour (seeded), each through the effect command a
/// CHECK replicates (its last with the expiry a CHECK sets), ending now.
fn poisson_checks(c: &mut Connection, key: &str, n: usize, seed: u64) -> Vec<i64> {
    let times = poisson_times(c, n, 10_000.0, seed);
    let mut pipe = redis::pipe();
    for (i, t) in times.iter().enumerate() {
        let apply = pipe
            .cmd("SLIDEWIN.APPLY")
            .arg(key)
            .arg("ADD")
            .arg(t)
            .arg(i + 1)
            .arg(1);
        if i + 1 == n {
            apply.arg("PXAT").arg(t + 3_600_000);
        }
        apply.ignore();
    }
    let _: () = pipe.query(c).unwrap();
    times
}

/// The memory table of docs/compact-log.md, by the server's own MEMORY
/// USAGE: a `limit 5` key after five CHECKs, then logs of 33 (one past the
/// small form) to 10,000 entries built entry by entry, each against the
/// same entries as a sorted set under the same name. Every figure is the
/// one the page prints for this server, and no size is larger compact than
/// as a sorted set.
fn documented_memory(c: &mut Connection, flavor: Flavor) {
    let documented = documented_sizes(flavor);
    let sizes: Vec<usize> = documented.iter().map(|d| d.0).collect();
    assert_eq!(
        sizes,
        [5, 33, 100, 400, 1_000, 10_000],
        "the rows of the table"
    );
    let mut measured = Vec::new();
    for &(n, _, _) in &documented {
        let times = if n == 5 {
            // The SMS shape: five CHECKs in one round trip.
            let mut pipe = redis::pipe();
            for _ in 0..5 {
                pipe.cmd("SLIDEWIN.CHECK").arg(SIZE_KEY).arg(5).arg(60_000);
            }
            let allowed: Vec<i64> = pipe.query(c).unwrap();
            assert_eq!(allowed, [1; 5]);
            let now = server_ms(c);
            vec![now; 5]
        } else {
            poisson_checks(c, SIZE_KEY, n, 42)
        };
        let count: i64 = redis::cmd("SLIDEWIN.PEEK")
            .arg(SIZE_KEY)
            .arg(100_000)
            .arg(3_600_000)
            .query::<Vec<i64>>(c)
            .unwrap()[2];
        assert_eq!(count, 100_000 - n as i64, "{n} entries");
        let compact = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        let mut pipe = redis::pipe();
        for (i, t) in times.iter().enumerate() {
            pipe.cmd("ZADD").arg(SIZE_KEY).arg(t).arg(i + 1).ignore();
        }
        let _: () = pipe.query(c).unwrap();
        let sorted = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        eprintln!(
            "{flavor:?}: {n} entries: compact {compact} B ({:.2} B/entry), sorted set {sorted} B",
            compact as f64 / n as f64
        );
        measured.push((n, compact, sorted));
    }
    // As printed: the compact log to 1% (the same blocks every time; the
    // C library's allocator, which the server names, may leave up to 24
    // bytes more in a block grown in place), the sorted set to 5% (a
    // skiplist's levels are random).
    let slack = match info_field(c, "memory", "mem_allocator").as_deref() {
        Some(a) if a.starts_with("libc") => 32,
        _ => 0,
    };
    for (m, d) in measured.iter().zip(&documented) {
        let near = |got: i64, printed: i64, percent: i64, slack: i64| {
            (got - printed).abs() * 100 <= printed * percent + slack * 100
        };
        assert!(
            near(m.1, d.1, 1, slack) && near(m.2, d.2, 5, 0),
            "MEMORY USAGE of {} entries on {flavor:?}: compact {} B, sorted set {} B; \
             docs/compact-log.md prints {} B / {} B",
            m.0,
            m.1,
            m.2,
            d.1,
            d.2
        );
    }
    for (n, compact, sorted) in measured {
        assert!(
            compact <= sorted,
            "{n} entries: compact {compact} B, sorted set {sorted} B"
        );
        let per_entry = compact as f64 / n as f64;
        if n >= 400 {
            assert!(per_entry <= 2.5, "{n} entries: {compact} B");
        }
        if n == 10_000 {
            assert!(per_entry <= 2.0, "{n} entries: {compact} B");
            assert!(
                sorted >= 40 * compact,
                "{n} entries: {compact} B, sorted set {sorted} B"
            );
        }
    }
}

/// A log that leaves the small form in a CHECK keeps no room sized for
/// another log: 40 CHECKs (one entry a millisecond or more apart, so 40
/// runs: one past the small form's 32) take at most a growth step more
/// than the same log restored from its DUMP (which holds it exactly).
fn leaving_the_small_form(c: &mut Connection) {
    for _ in 0..40 {
        assert_eq!(check(c, "grown", 1000, 3_600_000), 1);
        std::thread::sleep(Duration::from_millis(2));
    }
    let dump: Vec<u8> = redis::cmd("DUMP").arg("grown").query(c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(c)
        .unwrap();
    let (grown, restored) = (memory_usage(c, "grown"), memory_usage(c, "restored"));
    assert!(
        grown <= restored + 64,
        "40 CHECKs: {grown} B, the same log restored {restored} B"
    );
}

/// Issue "compact log"'s memory targets, by the server's own MEMORY USAGE
/// (what the allocator gave): the table the docs print, a call's cost one
/// record. Then the largest logs are freed by UNLINK and FLUSHALL ASYNC,
/// which free them off the main thread.
fn memory(flavor: Flavor) {
    let server = compact(flavor).arg("lazyfree-lazy-user-del", "no").start();
    let mut c = server.conn();
    documented_memory(&mut c, flavor);
    leaving_the_small_form(&mut c);
    // A call's cost is one run: COST 10000 adds a few bytes, not 10000 entries' worth.
    assert_eq!(check(&mut c, "one", 5, 60_000), 1);
    let small = memory_usage(&mut c, "one");
    let _: i64 = redis::cmd("SLIDEWIN.CHECK")
        .arg("one")
        .arg(100_000)
        .arg(60_000)
        .arg("COST")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let big = memory_usage(&mut c, "one");
    assert!(big - small < 64, "COST 10000: {small} B then {big} B");
    // Large logs freed off the main thread, then the server still serves.
    for i in 0..4 {
        poisson_log(&mut c, &format!("free:{i}"), 20_000, 40_000.0, i);
    }
    let n: i64 = redis::cmd("UNLINK")
        .arg("free:0")
        .arg("free:1")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        info_field(&mut c, "memory", "lazyfree_pending_objects").as_deref() == Some("0")
    }));
    let freed: i64 = info_field(&mut c, "memory", "lazyfreed_objects")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(freed >= 2, "lazily freed objects: {freed}");
    assert_eq!(check(&mut c, "after", 1, 60_000), 1);
}

/// `used_memory` a key, over 20,000 keys after five CHECKs each (the SMS
/// shape, in a 10-minute window: none expires while the others are made), compact against sorted sets and a fixed-window counter (`INCR` +
/// `EXPIRE`, what the module replaces at its simplest): a compact key takes
/// less than a sorted-set key. (`bench/small_keys.py` measures the same over
/// 100,000 keys for docs/compact-log.md.)
fn small_keys(flavor: Flavor) {
    const KEYS: usize = 20_000;
    let grow = |server: &Server, counter: bool| -> f64 {
        let mut c = server.conn();
        let used = |c: &mut Connection| -> i64 {
            info_field(c, "memory", "used_memory")
                .and_then(|v| v.parse().ok())
                .expect("used_memory")
        };
        let before = used(&mut c);
        for batch in 0..KEYS / 1000 {
            let mut pipe = redis::pipe();
            for i in batch * 1000..(batch + 1) * 1000 {
                let key = format!("sms:limit:192.168.{}.{}", i / 256, i % 256);
                for _ in 0..5 {
                    if counter {
                        pipe.cmd("INCR").arg(&key).ignore();
                    } else {
                        pipe.cmd("SLIDEWIN.CHECK")
                            .arg(&key)
                            .arg(5)
                            .arg(60_000)
                            .ignore();
                    }
                }
                if counter {
                    pipe.cmd("EXPIRE").arg(&key).arg(600).ignore();
                }
            }
            let _: () = pipe.query(&mut c).unwrap();
        }
        let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(keys, KEYS as i64);
        (used(&mut c) - before) as f64 / KEYS as f64
    };
    let compact_server = compact(flavor).start();
    let compact_key = grow(&compact_server, false);
    drop(compact_server);
    let zset_server = Options::new(flavor).start();
    let sorted_key = grow(&zset_server, false);
    let _: () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query(&mut zset_server.conn())
        .unwrap();
    let counter_key = grow(&zset_server, true);
    eprintln!(
        "{flavor:?}: used_memory a limit-5 key: compact {compact_key:.0} B, sorted set \
         {sorted_key:.0} B, fixed-window counter {counter_key:.0} B ({:.2}x)",
        compact_key / counter_key
    );
    assert!(
        compact_key < sorted_key,
        "compact {compact_key:.0} B a key, sorted set {sorted_key:.0} B"
    );
}

/// Active defragmentation (where the server can run it: it needs its own
/// jemalloc, and says so when asked) moves compact logs' blocks through the
/// type's defrag callback; every log keeps its entries, expiry and
/// decisions. The heap is fragmented on purpose: many small and large
/// logs, every other one deleted.
fn defrag(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let keys: Vec<String> = (0..12000).map(|i| format!("df:{i}")).collect();
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        // Most small (a run or a few), some chunked (over 32 runs).
        let calls = if i % 50 == 0 { 60 } else { 1 + i % 4 };
        for _ in 0..calls {
            pipe.cmd("SLIDEWIN.CHECK")
                .arg(k)
                .arg(1000)
                .arg(3_600_000)
                .ignore();
        }
        if i % 500 == 499 {
            pipe.query::<()>(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
    // (redis-rs refuses an empty pipeline: the loop may have sent it all)
    if !pipe.is_empty() {
        pipe.query::<()>(&mut c).unwrap();
    }
    // Half of them deleted, at random: pages of the allocator left unevenly
    // full, which is what it moves blocks out of (an every-other pattern
    // leaves every page as full as the next, and little to move).
    let mut rng = StdRng::seed_from_u64(7);
    let (gone, kept): (Vec<&String>, Vec<&String>) =
        keys.iter().partition(|_| rng.random_bool(0.5));
    let mut del = redis::cmd("DEL");
    for k in &gone {
        del.arg(k);
    }
    let _: i64 = del.query(&mut c).unwrap();
    let state = |c: &mut Connection, k: &str| {
        (
            digest_value(c, k),
            pexpiretime(c, k),
            detail(c, "SLIDEWIN.PEEK", &[k, "1000", "3600000"])[2],
        )
    };
    let before: Vec<_> = kept.iter().map(|k| state(&mut c, k)).collect();
    let on = redis::cmd("CONFIG")
        .arg(&["SET", "activedefrag", "yes"])
        .query::<()>(&mut c);
    if let Err(e) = on {
        // The server's answer, not a guess by name or version.
        assert!(
            error_text(&e).contains("Active defragmentation cannot be enabled"),
            "{e}"
        );
        assert_eq!(
            info_field(&mut c, "slidewin", "slidewin_compact_defrag_moved").as_deref(),
            Some("0")
        );
        eprintln!(
            "defrag ({flavor:?}): the server cannot run active defragmentation: {}",
            error_text(&e)
        );
        return;
    }
    for (name, value) in [
        ("active-defrag-ignore-bytes", "1"),
        ("active-defrag-threshold-lower", "0"),
        ("active-defrag-cycle-min", "50"),
        ("active-defrag-cycle-max", "90"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", name, value])
            .query(&mut c)
            .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
    }
    let moved = || -> u64 {
        let mut c = server.conn();
        info_field(&mut c, "slidewin", "slidewin_compact_defrag_moved")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(60), || moved() > 100),
        "active defragmentation moved {} blocks of compact logs",
        moved()
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "activedefrag", "no"])
        .query(&mut c)
        .unwrap();
    let after: Vec<_> = kept.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(after, before, "every log as it was");
    // They go on deciding, growing and freeing.
    for k in kept.iter().take(200) {
        assert_eq!(
            cmd(&mut c, &["SLIDEWIN.CHECK", k, "1000", "3600000"]).unwrap(),
            Value::Int(1)
        );
    }
    let usage: i64 = redis::cmd("MEMORY")
        .arg(&["USAGE", kept[0].as_str()])
        .query(&mut c)
        .unwrap();
    assert!(usage > 0);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    eprintln!(
        "defrag ({flavor:?}): {} blocks of compact logs moved, {} logs intact",
        moved(),
        kept.len()
    );
}

fn int_of(c: &mut Connection, args: &[&str]) -> i64 {
    match cmd(c, args) {
        Ok(Value::Int(n)) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// The entries in `key`'s window (PEEK ... DETAIL's remaining, under a
/// limit of 1,000).
fn entries(c: &mut Connection, key: &str) -> i64 {
    let v: Vec<i64> = redis::cmd("SLIDEWIN.PEEK")
        .arg(key)
        .arg(1_000)
        .arg(600_000)
        .arg("DETAIL")
        .query(c)
        .unwrap();
    1_000 - v[2]
}

/// Request IDs on compact logs (issue 32): a repeated ID charged once,
/// UNDO by ID exact and idempotent, SETTLE down, up past the limit and to
/// zero, a charge's units out of reach of UNDO by member; the charges
/// reach a replica (DEBUG DIGEST covers them), survive DEBUG RELOAD, an
/// AOF rewrite and DUMP/RESTORE.
fn request_ids(flavor: Flavor) {
    let master = compact(flavor).arg("appendonly", "yes").start();
    let replica = compact_replica(&master, flavor);
    let mut c = master.conn();
    let k = "ids";
    let check_id = |c: &mut Connection, cost: &str, id: &str| {
        int_of(
            c,
            &["SLIDEWIN.CHECK", k, "3", "600000", "COST", cost, "ID", id],
        )
    };
    assert_eq!(check_id(&mut c, "2", "r1"), 1);
    assert_eq!(key_type(&mut c, k), "slidewlog");
    assert_eq!(check_id(&mut c, "2", "r1"), 1, "a repeat");
    assert_eq!(check_id(&mut c, "3", "r1"), 1, "a repeat with another COST");
    assert_eq!(entries(&mut c, k), 2, "charged once");
    // Denied: nothing recorded, a retry is judged again.
    assert_eq!(check_id(&mut c, "2", "r2"), 0);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r2", "COST", "1"]),
        -1
    );
    // UNDO by member never takes a charge's unit (ids 1 and 2, tokens too).
    let now = server_ms(&mut c).to_string();
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "1", "2", &format!("1@{now}")]),
        0
    );
    assert_eq!(entries(&mut c, k), 2);
    // UNDO by ID: exact, then nothing.
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r1"]), 2);
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r1"]), 0);
    assert_eq!(
        cmd(&mut c, &["EXISTS", k]).unwrap(),
        Value::Int(0),
        "emptied"
    );
    // SETTLE up past the limit, down, to zero.
    assert_eq!(check_id(&mut c, "1", "r3"), 1);
    assert_eq!(check(&mut c, k, 3, 600_000), 1);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "4"]),
        4
    );
    assert_eq!(entries(&mut c, k), 5);
    assert_eq!(check(&mut c, k, 3, 600_000), 0, "past the limit: wait");
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "1"]),
        1
    );
    assert_eq!(entries(&mut c, k), 2);
    assert_eq!(check(&mut c, k, 3, 600_000), 1);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "2"]),
        2
    );
    // A binary ID of 128 bytes; one of 129 is refused.
    let long = "\u{1}".repeat(128);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.CHECK", k, "100", "600000", "ID", &long]),
        1
    );
    let too_long = "x".repeat(129);
    assert!(text(
        &mut c,
        &["SLIDEWIN.CHECK", k, "9", "600000", "ID", &too_long]
    )
    .starts_with("ERR ID must be 1 to 128 bytes"),);
    // MCHECK: a charge on each key; a repeat charges nothing anywhere.
    let mcheck = |c: &mut Connection, id: &str| {
        int_of(
            c,
            &[
                "SLIDEWIN.MCHECK",
                "2",
                k,
                "100",
                "600000",
                "ids:b",
                "100",
                "600000",
                "ID",
                id,
            ],
        )
    };
    assert_eq!(mcheck(&mut c, "m1"), 1);
    assert_eq!(mcheck(&mut c, "m1"), 1);
    assert_eq!(entries(&mut c, "ids:b"), 1);
    let before = digest(&mut c);
    let mut r = assert_replica_matches(&master, &replica);
    assert_eq!(digest_value(&mut c, k), digest_value(&mut r, k));
    // The digest sees the charges: the same entries with another charge
    // split digest otherwise.
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before, "DEBUG RELOAD keeps the charges");
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "2"]),
        2
    );
    assert_eq!(check_id(&mut c, "1", "r3"), 1);
    assert_eq!(entries(&mut c, k), 6, "r3 still charged after the reload");
    // DUMP/RESTORE carries them (version 2 payload).
    let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("ids:copy")
        .arg(pexpiretime(&mut c, k))
        .arg(&dump)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, k), digest_value(&mut c, "ids:copy"));
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", "ids:copy", "ID", "r3"]),
        2
    );
    // The AOF rewrite writes them in the LOG payload.
    let before = digest(&mut c);
    let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || info_field(
            &mut c,
            "persistence",
            "aof_rewrite_in_progress"
        )
        .as_deref()
            == Some("0")
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")),
        "rewrite finished"
    );
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before, "AOF rewrite keeps the charges");
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r3"]), 2);
    assert_replica_matches(&master, &replica);
    // The digest covers the charges: the same entry, charged or not,
    // digests apart.
    let t = server_ms(&mut c).to_string();
    let _ = cmd(&mut c, &["SLIDEWIN.APPLY", "d1", "ADD", &t, "1", "1"]).unwrap();
    let _ = cmd(
        &mut c,
        &["SLIDEWIN.APPLY", "d2", "CHARGE", "r", &t, "1", "1"],
    )
    .unwrap();
    assert_ne!(digest_value(&mut c, "d1"), digest_value(&mut c, "d2"));
}

/// The table "Request IDs" of docs/compact-log.md: per row, per server,
/// MEMORY USAGE of the key built by the effects CHECKs with and without
/// ID replicate, as printed ("696 B").
fn documented_charge_sizes(flavor: Flavor) -> Vec<(String, i64)> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compact-log.md"),
    )
    .expect("read docs/compact-log.md");
    let mut lines = page
        .lines()
        .skip_while(|l| !l.starts_with("| the key holds | Redis 7.0"));
    let header: Vec<&str> = lines
        .next()
        .expect("the request ids memory table in docs/compact-log.md")
        .split('|')
        .map(str::trim)
        .collect();
    let label = match flavor {
        Flavor::Redis70 => "Redis 7.0",
        Flavor::Redis82 => "Redis 8.2",
        Flavor::Valkey81 => "Valkey 8.1",
        Flavor::Valkey91 => "Valkey 9.1",
        Flavor::Redis62 => "Redis 6.2",
    };
    let column = header.iter().position(|h| *h == label).expect("a column");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let size = cells[column]
                .trim_end_matches('B')
                .trim()
                .replace(',', "")
                .parse()
                .unwrap_or_else(|_| panic!("not a size: {:?}", cells[column]));
            (cells[1].to_string(), size)
        })
        .collect()
}

/// What a charge made with an ID costs in memory, by the server's own
/// MEMORY USAGE, against the same entries without IDs; the keys built by
/// the effects the calls replicate (five calls of COST 1 in one
/// millisecond, one call of COST 1000), request ids of 16 bytes.
fn charge_memory(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let now = server_ms(&mut c) + 5_000;
    let (t, pxat) = (now.to_string(), (now + 60_000).to_string());
    let id = |i: usize| format!("req-{i:012}");
    let measure = |c: &mut Connection, effects: Vec<Vec<String>>| -> i64 {
        for e in effects {
            let mut apply = redis::cmd("SLIDEWIN.APPLY");
            apply.arg(SIZE_KEY);
            for w in e {
                apply.arg(w);
            }
            let _: () = apply.query(c).unwrap();
        }
        let size = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        size
    };
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let five_plain: Vec<Vec<String>> = (1..=5)
        .map(|i| words(&["ADD", &t, &i.to_string(), "1", "PXAT", &pxat]))
        .collect();
    let five_ids: Vec<Vec<String>> = (1..=5)
        .map(|i| words(&["CHARGE", &id(i), &t, &i.to_string(), "1", "PXAT", &pxat]))
        .collect();
    let measured = vec![
        (
            "5 entries, five calls without ID".to_string(),
            measure(&mut c, five_plain),
        ),
        (
            "5 entries, five calls with an ID each".to_string(),
            measure(&mut c, five_ids),
        ),
        (
            "1,000 entries, one call without ID".to_string(),
            measure(
                &mut c,
                vec![words(&["ADD", &t, "1", "1000", "PXAT", &pxat])],
            ),
        ),
        (
            "1,000 entries, one call with an ID".to_string(),
            measure(
                &mut c,
                vec![words(&["CHARGE", &id(0), &t, "1", "1000", "PXAT", &pxat])],
            ),
        ),
        (
            "1,000 entries, a call with an ID each, one a millisecond".to_string(),
            measure(
                &mut c,
                (1..=1000)
                    .map(|i| {
                        let at = (now + i as i64).to_string();
                        words(&["CHARGE", &id(i), &at, &i.to_string(), "1", "PXAT", &pxat])
                    })
                    .collect(),
            ),
        ),
    ];
    assert_eq!(
        measured,
        documented_charge_sizes(flavor),
        "MEMORY USAGE on {flavor:?} against docs/compact-log.md (Request IDs)"
    );
}

/// A key of up to 8 charges is held in the small form (one block): it
/// reloads, restores and reaches the replica as one in chunks does, SETTLE
/// and UNDO ID work on it, it grows into chunks past 8 charges and comes
/// back to the small form below, and its charges leave with their entries.
fn few_charges(flavor: Flavor) {
    let master = compact(flavor).arg("appendonly", "yes").start();
    let replica = compact_replica(&master, flavor);
    let mut c = master.conn();
    let k = "few";
    let same = |master: &Server, replica: &Server, step: &str| {
        wait_caught_up(master, replica);
        assert_eq!(
            digest(&mut master.conn()),
            digest(&mut replica.conn()),
            "the replica has the same data, {step}"
        );
    };
    let check =
        |c: &mut Connection, id: &str| int_of(c, &["SLIDEWIN.CHECK", k, "20", "600000", "ID", id]);
    for i in 0..5 {
        assert_eq!(check(&mut c, &format!("request-{i:08}")), 1);
    }
    let small = memory_usage(&mut c, k);
    assert!(small < 256, "five charges in one block: {small} B");
    same(&master, &replica, "five charges");
    // DEBUG RELOAD and DUMP/RESTORE keep it, charges and all.
    let before = digest_value(&mut c, k);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest_value(&mut c, k), before, "DEBUG RELOAD");
    // (Loaded, its block is its length; a command's is rounded up to 16.)
    let reloaded = memory_usage(&mut c, k);
    assert!(
        reloaded <= small,
        "reloaded in the small form: {reloaded} B, was {small} B"
    );
    // Restored with the same expiry: the digest covers it.
    let at: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut c).unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("few:copy")
        .arg(at)
        .arg(dump)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, "few:copy"), before, "DUMP/RESTORE");
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.UNDO", "few:copy", "ID", "request-00000003"]
        ),
        1
    );
    // SETTLE raise and lower, UNDO ID, a repeat.
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "3"]
        ),
        3
    );
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "1"]
        ),
        1
    );
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "request-00000001"]),
        1
    );
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "request-00000001"]),
        0
    );
    assert_eq!(check(&mut c, "request-00000002"), 1, "a repeat");
    same(&master, &replica, "SETTLE and UNDO ID");
    let four = memory_usage(&mut c, k);
    // Past 8 charges: chunks, and a table; back to 8 and below: small.
    for i in 10..16 {
        assert_eq!(check(&mut c, &format!("request-{i:08}")), 1);
    }
    let ten = memory_usage(&mut c, k);
    assert!(
        ten > four + 200,
        "10 charges in chunks: {ten} B, 4 small: {four} B"
    );
    same(&master, &replica, "ten charges");
    let before = digest_value(&mut c, k);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest_value(&mut c, k), before, "DEBUG RELOAD in chunks");
    for i in 10..16 {
        let id = format!("request-{i:08}");
        assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", &id]), 1);
    }
    let back = memory_usage(&mut c, k);
    assert!(
        back <= four + 16,
        "back to 4 charges: {back} B, was {four} B"
    );
    same(&master, &replica, "back to four");
    // Its charges leave with their entries: a window of 1 ms trims them.
    let _ = cmd(&mut c, &["SLIDEWIN.CHECK", k, "20", "1"]).unwrap();
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "2"]
        ),
        -1,
        "the charge left with its entries"
    );
    same(&master, &replica, "the charges left the window");
}
