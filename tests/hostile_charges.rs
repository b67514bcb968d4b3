//! Hostile sequences of calls with request ids on compact keys, on every
//! server of the suite: CHECK with an ID (ids of 1 to 128 bytes, binary,
//! empty and too long; COST 0 to huge), CHECK without, SETTLE (to 0, up,
//! down, huge), UNDO ID and UNDO by member, MCHECK with an ID, and
//! SLIDEWIN.APPLY CHARGE/CUT/ADD from a client at absolute times before and
//! after the keys' entries (a clock gone back). After each call the server
//! answers, every key DUMPs and RESTOREs to the same value; every few
//! calls a DEBUG RELOAD keeps the data and the replica's digest is the
//! master's. The keys move between the small form and chunks (up to 14
//! charges a key).
#![allow(clippy::unwrap_used)]

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    hostile_calls_with_ids_keep_keys_loadable_and_replicas_equal => hostile_charges;
}

/// The request ids: every length class, binary, and two refused ones
/// (empty, 129 bytes).
fn ids() -> Vec<Vec<u8>> {
    let mut ids: Vec<Vec<u8>> = vec![
        b"a".to_vec(),
        b"r1".to_vec(),
        b"request-00000001".to_vec(),
        b"request-000000002".to_vec(),
        vec![0u8; 1],
        vec![0, 0xff, b'@', b'\n', 0x80],
        vec![b'x'; 100],
        vec![b'y'; 127],
        vec![b'z'; 128],
        vec![0xffu8; 128],
    ];
    for i in 0..4 {
        ids.push(format!("short-{i}").into_bytes());
    }
    ids.push(Vec::new());
    ids.push(vec![b'w'; 129]);
    ids
}

fn one_of<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

/// One random call on `key`, as its words.
fn random_call(rng: &mut StdRng, key: &str, ids: &[Vec<u8>], now: i64) -> Vec<Vec<u8>> {
    let id = one_of(rng, ids).clone();
    let cost = one_of(
        rng,
        &["0", "1", "1", "1", "2", "5", "9", "1000000000000", "-1"],
    )
    .as_bytes()
    .to_vec();
    let limit = rng.random_range(1..16).to_string().into_bytes();
    let window = one_of(rng, &["40", "1000", "600000", "600000"])
        .as_bytes()
        .to_vec();
    let k = key.as_bytes().to_vec();
    let w = |s: &str| s.as_bytes().to_vec();
    match rng.random_range(0..12) {
        0..=3 => {
            let mut v = vec![w("SLIDEWIN.CHECK"), k, limit, window, w("ID"), id];
            if rng.random_bool(0.5) {
                v.extend([w("COST"), cost]);
            }
            if rng.random_bool(0.3) {
                v.push(w("DETAIL"));
            }
            v
        }
        4 => vec![w("SLIDEWIN.CHECK"), k, limit, window, w("COST"), cost],
        5 | 6 => {
            let units = one_of(rng, &["0", "1", "2", "3", "7", "1000000000000", "-1"]);
            vec![w("SLIDEWIN.SETTLE"), k, w("ID"), id, w("COST"), w(units)]
        }
        7 => vec![w("SLIDEWIN.UNDO"), k, w("ID"), id],
        8 => {
            let member = rng.random_range(1..40).to_string();
            vec![w("SLIDEWIN.UNDO"), k, w(&member)]
        }
        9 => {
            // A client's effect at an absolute time up to 5 s back or on.
            let at = (now + rng.random_range(-5_000..2_000)).to_string();
            let first = rng.random_range(1..60).to_string();
            let count = rng.random_range(1..4).to_string();
            match rng.random_range(0..3) {
                0 => vec![
                    w("SLIDEWIN.APPLY"),
                    k,
                    w("CHARGE"),
                    id,
                    w(&at),
                    w(&first),
                    w(&count),
                ],
                1 => vec![
                    w("SLIDEWIN.APPLY"),
                    k,
                    w("CUT"),
                    id,
                    w(["0", "1", "2"][rng.random_range(0..3)]),
                ],
                _ => vec![
                    w("SLIDEWIN.APPLY"),
                    k,
                    w("ADD"),
                    w(&at),
                    w(&first),
                    w(&count),
                ],
            }
        }
        10 => vec![
            w("SLIDEWIN.MCHECK"),
            w("2"),
            k,
            limit.clone(),
            window.clone(),
            w("hc:other"),
            limit,
            window,
            w("ID"),
            id,
        ],
        _ => vec![w("SLIDEWIN.PEEK"), k, limit, window],
    }
}

fn run(c: &mut Connection, words: &[Vec<u8>]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(&words[0]).unwrap());
    for a in &words[1..] {
        cmd.arg(a.as_slice());
    }
    cmd.query(c)
}

/// DUMP `key` and RESTORE it under another name with its expiry: the same
/// value digest (a key that expired meanwhile is skipped).
fn dump_restores(c: &mut Connection, key: &str, step: &str) {
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query(c).unwrap();
    let Some(dump) = dump else {
        return;
    };
    let before = digest_value(c, key);
    let copy = format!("{key}:copy");
    let mut restore = redis::cmd("RESTORE");
    restore.arg(&copy).arg(at.max(0)).arg(dump).arg("REPLACE");
    if at > 0 {
        restore.arg("ABSTTL");
    }
    let _: () = restore
        .query(c)
        .unwrap_or_else(|e| panic!("RESTORE after {step}: {e}"));
    if exists(c, &copy) && exists(c, key) {
        assert_eq!(digest_value(c, &copy), before, "DUMP/RESTORE after {step}");
    }
    let _: i64 = redis::cmd("DEL").arg(&copy).query(c).unwrap();
}

fn hostile_charges(flavor: Flavor) {
    let master = compact(flavor).start();
    let replica = replica_with(&master, compact(flavor));
    let mut c = master.conn();
    let ids = ids();
    let keys = ["hc:0", "hc:1", "hc:2"];
    // HC_SEED and HC_STEPS: another sequence, a longer one (by hand).
    let seed = std::env::var("HC_SEED").ok().and_then(|s| s.parse().ok());
    let steps: usize = std::env::var("HC_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_500);
    let mut rng = StdRng::seed_from_u64(seed.unwrap_or(0x5eed_c4a7));
    let (mut ok, mut refused, mut reloads) = (0, 0, 0);
    for step in 0..steps {
        let key = *one_of(&mut rng, &keys);
        let now = server_ms(&mut c);
        let words = random_call(&mut rng, key, &ids, now);
        let shown = format!(
            "step {step}: {:?}",
            words
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect::<Vec<_>>()
        );
        let reply = run(&mut c, &words);
        if let Ok(path) = std::env::var("HC_LOG") {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            let hex: Vec<String> = words
                .iter()
                .map(|w| w.iter().map(|b| format!("{b:02x}")).collect())
                .collect();
            writeln!(f, "{now} {} -> {:?}", hex.join(" "), reply).unwrap();
        }
        match reply {
            Ok(_) => ok += 1,
            Err(e) => {
                let text = error_text(&e);
                assert!(
                    text.starts_with("ERR ") || text.starts_with("WRONGTYPE"),
                    "{shown}: {text}"
                );
                refused += 1;
            }
        }
        let pong: String = redis::cmd("PING").query(&mut c).unwrap();
        assert_eq!(pong, "PONG", "{shown}");
        for k in keys.iter().chain(["hc:other"].iter()) {
            dump_restores(&mut c, k, &shown);
        }
        if step % 50 == 49 || std::env::var("HC_EVERY").is_ok() {
            // The keys not about to expire: the same after a DEBUG RELOAD,
            // and on the replica.
            let lasting = |c: &mut Connection| -> Vec<(String, String)> {
                let now = server_ms(c);
                let mut out = Vec::new();
                for k in keys.iter().chain(["hc:other"].iter()) {
                    let at: i64 = redis::cmd("PEXPIRETIME").arg(*k).query(c).unwrap();
                    if at < 0 || at > now + 1_000 {
                        out.push((k.to_string(), digest_value(c, k)));
                    }
                }
                out
            };
            let before = lasting(&mut c);
            // DEBUG RELOAD drops a key that expired before it without a
            // DEL to the replica (the server's rule for an RDB load),
            // whose copy then differs: reloaded only while every key
            // lasts (a key is then deleted by a DEL the replica gets).
            if before.len() == keys.len() + 1 {
                let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
                reloads += 1;
            }
            for (k, d) in &before {
                assert_eq!(
                    &digest_value(&mut c, k),
                    d,
                    "DEBUG RELOAD of {k} at {shown}"
                );
            }
            wait_caught_up(&master, &replica);
            let mut r = replica.conn();
            for (k, d) in &before {
                if &digest_value(&mut r, k) != d {
                    let dm: Option<Vec<u8>> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
                    let dr: Option<Vec<u8>> = redis::cmd("DUMP").arg(k).query(&mut r).unwrap();
                    let em: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut c).unwrap();
                    let er: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut r).unwrap();
                    panic!("replica's {k} at {shown}: master {em} {dm:02x?}, replica {er} {dr:02x?}\nreplica log: {}", replica.log());
                }
            }
        }
    }
    assert!(
        ok > 300 && refused > 50 && reloads > 3,
        "ok {ok}, refused {refused}, reloads {reloads}"
    );
}
