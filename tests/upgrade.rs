//! Upgrades: RDB and AOF files written by a release load in this one, with
//! the same entries and the same PEEK replies, on every server of the suite.
//!
//! `tests/fixtures/upgrade/<release>/` holds what that release wrote on
//! Redis 7.0 (the oldest server: every newer one reads its files), made by
//! `write_fixtures` below and committed:
//! - `zset.rdb`, `compact.rdb`: a snapshot of keys in each encoding (the
//!   default sorted sets; the compact log, `slidewin.log-type compact`,
//!   a module data type with its own encoding version);
//! - `zset-aof/`, `compact-aof/`: the same keys as an append-only file
//!   (multi-part: a rewritten base, in the module's rewrite form for compact
//!   logs, then the increment, with the effects a CHECK replicates);
//! - `cluster-node.rdb`: one cluster node's snapshot, both encodings, with
//!   its `nodes.conf` (`cluster-node.nodes.conf`: a single node owning every
//!   slot);
//! - `entries.txt`: every key's members, scores and expiry, as written;
//! - `peeks.txt`: PEEKs the writing release answered on those keys.
//!
//! PEEK replies depend on the time, so the files must not age: every entry
//! is scored in the year 2200 (what a writer's clock far ahead would leave)
//! except those a real CHECK added when the fixture was written, which the
//! recorded PEEKs' 1-second windows had already left behind. Every PEEK is
//! then the same at any later time: decisions and remainders equal, waits
//! equal as absolute times (`retry_after` + now), within a few ms.
//!
//! A new release adds its folder (`cargo test --release --test upgrade --
//! --ignored write_fixtures`) and keeps the old ones: every folder is loaded.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use redis::Value;
use support::*;

on_every_server! {
    rdb_files_of_every_release_load => rdb_files;
    aof_files_of_every_release_load => aof_files;
    a_cluster_nodes_rdb_loads => cluster_rdb;
}

/// 2200-01-01T00:00:00Z in ms: every written entry is scored from here.
const FUTURE_MS: i64 = 7_258_118_400_000;
/// The keys' expiry: 2300-01-01.
const EXPIRE_AT_MS: i64 = 10_413_792_000_000;
/// How far a wait, made absolute, may differ between writing and loading:
/// the PEEK and the TIME read around it.
const SLACK_MS: i64 = 50;

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade")
}

/// Every release folder, oldest first by name.
fn releases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(fixtures_root())
        .expect("tests/fixtures/upgrade")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    assert!(
        !out.is_empty(),
        "no release folder in tests/fixtures/upgrade"
    );
    out
}

/// One recorded PEEK: the arguments and the reply, waits made absolute.
#[derive(Debug, Clone, PartialEq)]
struct Peek {
    fixture: String,
    key: String,
    args: Vec<String>,
    reply: [i64; 5],
    /// The server time the waits (reply[3], reply[4]) are relative to.
    at_ms: i64,
}

/// What a fixture's keys hold: members and scores, and expiry.
type Contents = BTreeMap<String, (Vec<(String, i64)>, i64)>;

fn read_entries(dir: &Path, fixture: &str) -> Contents {
    let text = std::fs::read_to_string(dir.join("entries.txt")).expect("entries.txt");
    let mut out = Contents::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] != fixture {
            continue;
        }
        let e = out.entry(f[1].to_string()).or_default();
        match f[2] {
            "pxat" => e.1 = f[3].parse().unwrap(),
            member => e.0.push((member.to_string(), f[3].parse().unwrap())),
        }
    }
    assert!(!out.is_empty(), "{dir:?}: no entries for {fixture}");
    out
}

fn read_peeks(dir: &Path, fixture: &str) -> Vec<Peek> {
    let text = std::fs::read_to_string(dir.join("peeks.txt")).expect("peeks.txt");
    let peeks: Vec<Peek> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            // fixture key at_ms r0 r1 r2 r3 r4 args...
            let f: Vec<&str> = line.split(' ').collect();
            let n = |i: usize| -> i64 { f[i].parse().unwrap() };
            Peek {
                fixture: f[0].to_string(),
                key: f[1].to_string(),
                at_ms: n(2),
                reply: [n(3), n(4), n(5), n(6), n(7)],
                args: f[8..].iter().map(|s| s.to_string()).collect(),
            }
        })
        .filter(|p| p.fixture == fixture)
        .collect();
    assert!(
        peeks.len() >= 6,
        "{dir:?}: {} peeks for {fixture}",
        peeks.len()
    );
    peeks
}

/// A PEEK now, with the server time read just before it.
fn peek_now(c: &mut Connection, key: &str, args: &[String]) -> ([i64; 5], i64) {
    let before = server_ms(c);
    let reply: Vec<i64> = redis::cmd("SLIDEWIN.PEEK")
        .arg(key)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("PEEK {key} {args:?}: {e}"));
    (
        reply
            .try_into()
            .unwrap_or_else(|r| panic!("PEEK {key}: {r:?}")),
        before,
    )
}

/// The keys, their entries, expiries and PEEKs are those recorded.
fn assert_loaded(c: &mut Connection, dir: &Path, fixture: &str) {
    let what = format!("{}/{fixture}", dir.display());
    let contents = read_entries(dir, fixture);
    let dbsize: i64 = redis::cmd("DBSIZE").query(c).unwrap();
    assert_eq!(dbsize as usize, contents.len(), "{what}: keys");
    for (key, (want, pxat)) in &contents {
        let got: Vec<(String, i64)> = entries(c, key.as_bytes())
            .into_iter()
            .map(|(m, s)| (String::from_utf8(m).unwrap(), s as i64))
            .collect();
        assert_eq!(&got, want, "{what}: {key}'s entries");
        let at = expires_at(c, key);
        assert!(
            (at - pxat).abs() <= SLACK_MS,
            "{what}: {key} expires at {at}, written {pxat}"
        );
    }
    for p in read_peeks(dir, fixture) {
        let (reply, now) = peek_now(c, &p.key, &p.args);
        let label = format!("{what}: PEEK {} {:?}", p.key, p.args);
        assert_eq!(
            reply[..3],
            p.reply[..3],
            "{label}: {reply:?} vs {:?}",
            p.reply
        );
        for (i, (&was, &is)) in p.reply.iter().zip(&reply).enumerate().skip(3) {
            if was <= 0 {
                assert_eq!(is, was, "{label}[{i}]");
            } else {
                let drift = (is + now) - (was + p.at_ms);
                assert!(
                    drift.abs() <= SLACK_MS,
                    "{label}[{i}]: {is} at {now} vs {was} at {}",
                    p.at_ms
                );
            }
        }
    }
}

/// The log type a fixture was made with.
fn log_type(fixture: &str) -> LogType {
    if fixture.starts_with("zset") {
        LogType::Zset
    } else {
        LogType::Compact
    }
}

fn rdb_files(flavor: Flavor) {
    for dir in releases() {
        for fixture in ["zset", "compact"] {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::copy(
                dir.join(format!("{fixture}.rdb")),
                tmp.path().join("dump.rdb"),
            )
            .unwrap();
            let server = Options::new(flavor)
                .log_type(log_type(fixture))
                .in_dir(tmp.path())
                .start();
            assert_loaded(&mut server.conn(), &dir, fixture);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn aof_files(flavor: Flavor) {
    for dir in releases() {
        for fixture in ["zset", "compact"] {
            let tmp = tempfile::tempdir().unwrap();
            let aof = dir.join(format!("{fixture}-aof"));
            copy_dir(&aof, &tmp.path().join("appendonlydir"));
            // The increment holds the effects CHECK replicated: the files
            // are read back as a restart reads them.
            let incr = std::fs::read_dir(&aof)
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().ends_with(".incr.aof"))
                .map(|e| std::fs::read(e.path()).unwrap())
                .expect("an increment file");
            let effect: &[u8] = if fixture == "zset" {
                b"ZADD"
            } else {
                b"SLIDEWIN.APPLY"
            };
            assert!(
                incr.windows(effect.len()).any(|w| w == effect),
                "{aof:?}: no {} in the increment",
                String::from_utf8_lossy(effect)
            );
            let server = Options::new(flavor)
                .log_type(log_type(fixture))
                .arg("appendonly", "yes")
                .in_dir(tmp.path())
                .start();
            assert_loaded(&mut server.conn(), &dir, &format!("{fixture}-aof"));
        }
    }
}

fn wait_cluster_ok(c: &mut Connection) {
    assert!(
        wait_until(std::time::Duration::from_secs(10), || {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(c).unwrap();
            info.contains("cluster_state:ok")
        }),
        "the node's cluster state is not ok"
    );
}

fn cluster_rdb(flavor: Flavor) {
    for dir in releases() {
        let tmp = tempfile::tempdir().unwrap();
        // A node restarts with its data and its cluster configuration.
        std::fs::copy(dir.join("cluster-node.rdb"), tmp.path().join("dump.rdb")).unwrap();
        std::fs::copy(
            dir.join("cluster-node.nodes.conf"),
            tmp.path().join("nodes.conf"),
        )
        .unwrap();
        let server = Options::new(flavor)
            .log_type(LogType::Compact)
            .arg("cluster-enabled", "yes")
            .arg("cluster-config-file", "nodes.conf")
            .in_dir(tmp.path())
            .start();
        let mut c = server.conn();
        // It owns every slot again, its keys where they were.
        let contents = read_entries(&dir, "cluster-node");
        for key in contents.keys() {
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query(&mut c)
                .unwrap();
            let n: i64 = redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(slot)
                .query(&mut c)
                .unwrap();
            assert!(n >= 1, "{key}: slot {slot} holds {n} keys");
        }
        wait_cluster_ok(&mut c);
        assert_loaded(&mut c, &dir, "cluster-node");
    }
}

// Writing a release's fixtures (on Redis 7.0, the oldest server).

/// The keys every fixture holds, written with absolute scores: sorted sets
/// by ZADD, compact logs by SLIDEWIN.APPLY (the effect command: the same
/// log a CHECK at that time would have left).
fn write_keys(c: &mut Connection, compact: bool, prefix: &str) {
    // (key, [(score offset, first member, count)])
    let small: Vec<(i64, i64, i64)> = vec![(0, 1, 1), (1_000, 2, 2), (2_500, 4, 1)];
    let chunked: Vec<(i64, i64, i64)> = (0..300).map(|i| (i * 7, i + 1, 1)).collect();
    // A wide member id (ms << 20 | sequence), as when a short one is taken.
    let wide_first = (FUTURE_MS + 5) << 20 | 3;
    let wide: Vec<(i64, i64, i64)> = vec![(5, wide_first, 1), (9, 1, 3)];
    for (name, runs) in [("small", small), ("chunked", chunked), ("wide", wide)] {
        let key = format!("{prefix}{name}");
        for batch in runs.chunks(50) {
            if compact {
                let mut cmd = redis::cmd("SLIDEWIN.APPLY");
                cmd.arg(&key);
                for (off, first, count) in batch {
                    cmd.arg("ADD").arg(FUTURE_MS + off).arg(first).arg(count);
                }
                cmd.arg("PXAT").arg(EXPIRE_AT_MS);
                let _: Value = cmd.query(c).unwrap_or_else(|e| panic!("{key}: {e}"));
            } else {
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(&key);
                for (off, first, count) in batch {
                    for m in 0..*count {
                        cmd.arg(FUTURE_MS + off).arg(first + m);
                    }
                }
                let _: i64 = cmd.query(c).unwrap();
                let _: i64 = redis::cmd("PEXPIREAT")
                    .arg(&key)
                    .arg(EXPIRE_AT_MS)
                    .query(c)
                    .unwrap();
            }
        }
    }
}

/// Real CHECKs (the module's own effects go to the AOF's increment), in
/// a 1-second window: the PEEKs are recorded after they left it.
fn write_checks(c: &mut Connection, prefix: &str) {
    for name in ["small", "wide"] {
        for cost in ["1", "2"] {
            let r: i64 = redis::cmd("SLIDEWIN.CHECK")
                .arg(format!("{prefix}{name}"))
                .arg(100_000)
                .arg(1_000)
                .arg("COST")
                .arg(cost)
                .query(c)
                .unwrap();
            assert_eq!(r, 1);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(1_500));
}

fn record(
    c: &mut Connection,
    fixture: &str,
    prefix: &str,
    entries_out: &mut String,
    peeks_out: &mut String,
) {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(c)
        .unwrap();
    keys.sort();
    assert_eq!(keys.len(), 3, "{fixture}: {keys:?}");
    for key in &keys {
        let all = entries(c, key.as_bytes());
        for (m, s) in &all {
            entries_out.push_str(&format!(
                "{fixture} {key} {} {}\n",
                String::from_utf8_lossy(m),
                *s as i64
            ));
        }
        let pxat: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
        // Far ahead (the CHECKs set it from the newest entry: 2200 + 1 s).
        assert!(pxat > FUTURE_MS, "{key} expires at {pxat}");
        entries_out.push_str(&format!("{fixture} {key} pxat {pxat}\n"));
        let future = all.iter().filter(|(_, s)| *s as i64 >= FUTURE_MS).count() as i64;
        for args in [
            vec![future.to_string(), "1000".into()],
            vec![(future + 1).to_string(), "1000".into()],
            vec![
                (future + 3).to_string(),
                "500".into(),
                "COST".into(),
                "2".into(),
            ],
            vec![
                (future + 1).to_string(),
                "1000".into(),
                "COST".into(),
                "3".into(),
            ],
        ] {
            let (reply, at) = peek_now(c, key, &args);
            peeks_out.push_str(&format!(
                "{fixture} {key} {at} {} {} {} {} {} {}\n",
                reply[0],
                reply[1],
                reply[2],
                reply[3],
                reply[4],
                args.join(" ")
            ));
        }
    }
}

fn wait_rewritten(c: &mut Connection) {
    assert!(wait_until(std::time::Duration::from_secs(20), || {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    }));
}

#[test]
#[ignore = "writes this release's fixtures: cargo test --release --test upgrade -- --ignored write_fixtures"]
fn write_fixtures() {
    let out = fixtures_root().join(env!("CARGO_PKG_VERSION"));
    std::fs::create_dir_all(&out).unwrap();
    let mut entries_txt = String::from(
        "# fixture key member score | fixture key pxat unix_ms (written by tests/upgrade.rs write_fixtures)\n",
    );
    let mut peeks_txt = String::from(
        "# fixture key server_ms allowed limit remaining retry_after_ms reset_after_ms args... (SLIDEWIN.PEEK key args)\n",
    );
    for fixture in ["zset", "compact"] {
        let compact = fixture == "compact";
        // The snapshot.
        let server = Options::new(Flavor::Redis70)
            .log_type(log_type(fixture))
            .start();
        let mut c = server.conn();
        write_keys(&mut c, compact, "");
        write_checks(&mut c, "");
        record(&mut c, fixture, "", &mut entries_txt, &mut peeks_txt);
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        std::fs::copy(
            server.dir.join("dump.rdb"),
            out.join(format!("{fixture}.rdb")),
        )
        .unwrap();
        drop(server);
        // The append-only file: keys written, the file rewritten (the base,
        // in the rewrite form), then the CHECKs (the increment).
        let server = Options::new(Flavor::Redis70)
            .log_type(log_type(fixture))
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no")
            .arg("appendfsync", "always")
            .start();
        let mut c = server.conn();
        write_keys(&mut c, compact, "");
        let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        wait_rewritten(&mut c);
        write_checks(&mut c, "");
        let name = format!("{fixture}-aof");
        record(&mut c, &name, "", &mut entries_txt, &mut peeks_txt);
        let aof_dir = out.join(&name);
        let _ = std::fs::remove_dir_all(&aof_dir);
        copy_dir(&server.dir.join("appendonlydir"), &aof_dir);
    }
    // A cluster node owning every slot, both encodings (hash tags keep each
    // encoding's keys in one slot).
    let server = Options::new(Flavor::Redis70)
        .log_type(LogType::Compact)
        .arg("cluster-enabled", "yes")
        .arg("cluster-config-file", "nodes.conf")
        .start();
    let mut c = server.conn();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut c)
        .unwrap();
    wait_cluster_ok(&mut c);
    write_keys(&mut c, true, "{c}");
    write_keys(&mut c, false, "{z}");
    write_checks(&mut c, "{c}");
    let mut node_entries = String::new();
    let mut node_peeks = String::new();
    record(
        &mut c,
        "cluster-node",
        "{c}",
        &mut node_entries,
        &mut node_peeks,
    );
    record(
        &mut c,
        "cluster-node",
        "{z}",
        &mut node_entries,
        &mut node_peeks,
    );
    entries_txt.push_str(&node_entries);
    peeks_txt.push_str(&node_peeks);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    std::fs::copy(server.dir.join("dump.rdb"), out.join("cluster-node.rdb")).unwrap();
    std::fs::copy(
        server.dir.join("nodes.conf"),
        out.join("cluster-node.nodes.conf"),
    )
    .unwrap();
    std::fs::write(out.join("entries.txt"), entries_txt).unwrap();
    std::fs::write(out.join("peeks.txt"), peeks_txt).unwrap();
}
