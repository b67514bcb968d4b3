//! The data type's paths: a replica by effects, RDB and AOF rewrite,
//! COPY, RENAME, MOVE and SWAPDB; the effect command's checks and hostile
//! RESTORE payloads refused.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;

use crate::support::*;
use crate::{key_type, text};

/// Starts a replica of `master` with the module in compact mode.
pub(crate) fn compact_replica(master: &Server, flavor: Flavor) -> Server {
    replica_with(master, compact(flavor))
}

/// Calls on a few keys with tight limits and short and long windows, some
/// given back; returns the keys.
pub(crate) fn load(c: &mut Connection, seed: u64, calls: usize) -> Vec<String> {
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

pub(crate) fn replica_matches(flavor: Flavor) {
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

pub(crate) fn persistence(flavor: Flavor) {
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

pub(crate) fn key_moves(flavor: Flavor) {
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

pub(crate) fn apply_checks(flavor: Flavor) {
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

pub(crate) fn hostile_restore(flavor: Flavor) {
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
