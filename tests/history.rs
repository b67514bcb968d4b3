//! A history checker: many concurrent clients hammer a few keys; the effects
//! are captured from the replication stream (a replica without the module,
//! writing every replicated command to its AOF) and checked offline.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::Rng;
use support::*;

on_every_server! {
    concurrent_clients_never_over_admit => history;
}

const THREADS: usize = 16;
const KEYS: usize = 4;
const LIMIT: usize = 5;
const WINDOW_MS: i64 = 100;
const RUN_FOR: Duration = Duration::from_secs(2);
const MAX_CALLS_PER_THREAD: usize = 50_000;

/// One call as the client saw it: its send and receive times bracket the
/// server's `now`.
struct Call {
    key: usize,
    sent_ms: i64,
    received_ms: i64,
    allowed: bool,
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The commands of a RESP-encoded AOF, as byte vectors.
fn parse_aof(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(b: &[u8], at: &mut usize) -> Option<Vec<u8>> {
        let end = b[*at..].windows(2).position(|w| w == b"\r\n")? + *at;
        let l = b[*at..end].to_vec();
        *at = end + 2;
        Some(l)
    }
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let Some(head) = line(bytes, &mut at) else {
            break;
        };
        let Some(n) = head.strip_prefix(b"*") else {
            panic!("unexpected AOF line {:?}", String::from_utf8_lossy(&head));
        };
        let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let len_line = line(bytes, &mut at).expect("bulk length");
            let len: usize = std::str::from_utf8(&len_line[1..])
                .unwrap()
                .parse()
                .unwrap();
            cmd.push(bytes[at..at + len].to_vec());
            at += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// Every incremental AOF file of a server directory, concatenated.
fn replicated_commands(dir: &Path) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| parse_aof(&std::fs::read(f).expect("read aof")))
        .collect()
}

fn history(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = Options::new(flavor)
        .without_module()
        .arg("replicaof", &master.replica_address())
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("auto-aof-rewrite-percentage", "0")
        .start();
    let mut r = replica.conn();
    assert!(wait_until(Duration::from_secs(30), || {
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && info_field(&mut r, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_field(&mut r, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    }));

    let keys: Vec<String> = (0..KEYS).map(|i| format!("hist:{i}")).collect();
    let deadline = Instant::now() + RUN_FOR;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let mut c = master.conn();
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut calls = Vec::new();
                while Instant::now() < deadline && calls.len() < MAX_CALLS_PER_THREAD {
                    let key = rng.random_range(0..KEYS);
                    let sent_ms = wall_ms();
                    let reply: i64 = redis::cmd("SLIDEWIN.CHECK")
                        .arg(&keys[key])
                        .arg(LIMIT)
                        .arg(WINDOW_MS)
                        .query(&mut c)
                        .expect("CHECK");
                    calls.push(Call {
                        key,
                        sent_ms,
                        received_ms: wall_ms(),
                        allowed: reply == 1,
                    });
                }
                calls
            })
        })
        .collect();
    let calls: Vec<Call> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    wait_caught_up(&master, &replica);

    // The effects, read back from the replica's AOF.
    let mut scores: Vec<Vec<i64>> = vec![Vec::new(); KEYS];
    for cmd in replicated_commands(&replica.dir) {
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
        assert!(
            !name.contains("SLIDEWIN"),
            "the command itself was replicated"
        );
        if name != "ZADD" {
            continue;
        }
        let key = keys
            .iter()
            .position(|k| k.as_bytes() == cmd[1].as_slice())
            .expect("a known key");
        for pair in cmd[2..].chunks(2) {
            let score: i64 = std::str::from_utf8(&pair[0]).unwrap().parse().unwrap();
            scores[key].push(score);
        }
    }
    for s in &mut scores {
        s.sort_unstable();
    }

    let allowed_per_key: Vec<usize> = (0..KEYS)
        .map(|k| calls.iter().filter(|c| c.key == k && c.allowed).count())
        .collect();
    let denied = calls.iter().filter(|c| !c.allowed).count();
    assert!(
        denied > 0 && allowed_per_key.iter().sum::<usize>() > 0,
        "both outcomes seen"
    );

    // (a) One replicated entry per allowed reply, per key.
    let replicated: Vec<usize> = scores.iter().map(Vec::len).collect();
    assert_eq!(
        replicated, allowed_per_key,
        "entries replicated vs 1 replies"
    );

    // (b) No window of WINDOW_MS ever holds more than LIMIT entries.
    let in_window = |s: &[i64], now: i64| -> usize {
        let lo = s.partition_point(|&x| x <= now - WINDOW_MS);
        let hi = s.partition_point(|&x| x <= now);
        hi.saturating_sub(lo)
    };
    for (k, s) in scores.iter().enumerate() {
        for &end in s {
            let n = in_window(s, end);
            assert!(
                n <= LIMIT,
                "key {k}: {n} entries in the window ending at {end}"
            );
        }
    }

    // (c) Every 0 was given while the window was full, for some `now`
    // between the client's send and receive times (1 ms of rounding slack).
    let mut unexplained = Vec::new();
    for c in calls.iter().filter(|c| !c.allowed) {
        let full =
            (c.sent_ms - 1..=c.received_ms + 1).any(|now| in_window(&scores[c.key], now) >= LIMIT);
        if !full {
            unexplained.push((c.key, c.sent_ms, c.received_ms));
        }
    }
    assert!(
        unexplained.is_empty(),
        "{} of {denied} denials were given while the window had room, e.g. {:?}",
        unexplained.len(),
        &unexplained[..unexplained.len().min(5)]
    );
    let per_key: HashMap<usize, usize> = allowed_per_key.iter().copied().enumerate().collect();
    eprintln!(
        "history ({flavor:?}): {} calls from {THREADS} clients, {} allowed {per_key:?}, {denied} denied",
        calls.len(),
        allowed_per_key.iter().sum::<usize>()
    );
}
