//! A replica that loads its master's data set in the background
//! (`repl-diskless-load swapdb`) while it keeps serving the old one, with
//! the module loaded in either log type: the module declares that it copes
//! (`REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD`), so the server really
//! loads asynchronously (`INFO persistence` shows `async_loading:1`), the
//! old logs answer PEEK and CHECK during the load, an aborted load leaves
//! them exactly as they were, and a completed one leaves the replica with
//! the master's logs (same digests), its INFO counters and its TOP
//! summary moved only by the calls made on it.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::*;

on_every_server! {
    a_replica_serves_its_old_logs_while_it_loads => async_load(Zset, Compact);
}

/// Keys the master holds when the background load starts: with the delay
/// below, the master takes about `KEYS * DELAY_US` to send them.
const KEYS: usize = 2000;
/// The master's `rdb-key-save-delay` (microseconds per key) for the load
/// that is aborted: about 4 s in all.
const DELAY_US: &str = "2000";
const WINDOW: i64 = 3_600_000;

fn info_number(c: &mut Connection, section: &str, field: &str) -> u64 {
    info_field(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no number {field}"))
}

fn async_loading(c: &mut Connection) -> bool {
    info_field(c, "persistence", "async_loading").as_deref() == Some("1")
}

/// A log's entries (member, score), whichever type holds it.
fn log_of(c: &mut Connection, key: &str) -> Vec<(Vec<u8>, f64)> {
    entries(c, key.as_bytes())
}

/// Whether `SLIDEWIN.PEEK key limit` would allow a call now.
fn peek_allows(c: &mut Connection, key: &str, limit: i64) -> bool {
    detail(
        c,
        "SLIDEWIN.PEEK",
        &[key, &limit.to_string(), &WINDOW.to_string()],
    )[0] == 1
}

/// Logs on the master: `KEYS` keys of three entries each, and with compact
/// logs one large log (10,000 runs, tens of kilobytes encoded) whose load
/// spans many of the replica's event-processing points, so that commands
/// run on the old data set while the loader is inside its read.
fn fill(m: &mut Connection, log_type: LogType, prefix: &str) {
    let mut pipe = redis::pipe();
    for i in 0..KEYS {
        for _ in 0..3 {
            pipe.cmd("SLIDEWIN.CHECK")
                .arg(format!("{prefix}:{i}"))
                .arg(10)
                .arg(WINDOW)
                .ignore();
        }
    }
    let _: () = pipe.query(m).expect("CHECKs on the master");
    if log_type == LogType::Compact {
        let now = server_ms(m);
        for batch in 0..20i64 {
            let mut apply = redis::cmd("SLIDEWIN.APPLY");
            apply.arg(format!("{prefix}:big"));
            for j in 0..500i64 {
                let run = batch * 500 + j;
                apply
                    .arg("ADD")
                    .arg(now - 1_000_000 + run * 37 + run % 5)
                    .arg(run * 3 + 1)
                    .arg(1 + run % 2);
            }
            let _: () = apply.query(m).expect("APPLY ADD on the master");
        }
        let size: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(format!("{prefix}:big"))
            .query(m)
            .expect("MEMORY USAGE");
        assert!(size > 8192, "the large log takes {size} B");
    }
}

fn async_load(flavor: Flavor, log_type: LogType) {
    let master = Options::new(flavor)
        .log_type(log_type)
        .arg("repl-diskless-sync", "yes")
        .arg("repl-diskless-sync-delay", "0")
        .start();
    let mut m = master.conn();
    // Ask the server whether it loads in the background at all (the field
    // exists where it does); the module declares that it copes exactly there.
    let server_has_it = info_field(&mut m, "persistence", "async_loading").is_some();
    let declared = info_field(&mut m, "slidewin", "slidewin_repl_async_load");
    assert_eq!(
        declared.as_deref(),
        Some(if server_has_it { "1" } else { "0" }),
        "INFO slidewin_repl_async_load against the server's async loading"
    );
    // The server's own list of the module's options (other modules, built
    // into some servers, have lines of their own).
    let modules: String = redis::cmd("INFO").arg("modules").query(&mut m).unwrap();
    let ours = modules
        .lines()
        .find(|l| l.starts_with("module:name=slidewin,"))
        .unwrap_or_else(|| panic!("INFO modules lists slidewin: {modules}"));
    assert_eq!(
        ours.contains("handle-repl-async-load"),
        server_has_it,
        "the server lists the option it knows: {ours}"
    );
    if !server_has_it {
        return;
    }

    let replica = replica_with(
        &master,
        Options::new(flavor)
            .log_type(log_type)
            .arg("repl-diskless-load", "swapdb")
            .arg("replica-read-only", "no")
            // Serve clients every KB read while loading (the least allowed):
            // commands then run in the middle of a large log's read.
            .arg("loading-process-events-interval-bytes", "1024"),
    );
    let mut r = replica.conn();
    fill(&mut m, log_type, "k");
    let first = assert_replica_matches(&master, &replica);
    drop(first);
    if log_type == LogType::Compact {
        let kind: String = redis::cmd("TYPE").arg("k:big").query(&mut r).unwrap();
        assert_eq!(kind, "slidewlog");
    }

    // The master moves on (the replica follows): more entries on the old
    // keys, new keys.
    fill(&mut m, log_type, "n");
    for i in 0..50 {
        assert_eq!(check(&mut m, &format!("k:{i}"), 10, WINDOW), 1);
    }
    wait_caught_up(&master, &replica);
    // The replica's own data set (a writable replica): a log only it has.
    let mut replica_checks = 0u64;
    for _ in 0..3 {
        assert_eq!(check(&mut r, "replica:only", 10, WINDOW), 1);
        replica_checks += 1;
    }
    let old_only = log_of(&mut r, "replica:only");
    let old_k7 = log_of(&mut r, "k:7");
    assert_eq!((old_only.len(), old_k7.len()), (3, 4));
    let old_digest = digest(&mut r);

    // A slow RDB transfer, then a full resync with the same replication
    // history: the link is cut and the backlog no longer covers the
    // replica's offset (the server's own test does the same).
    config_set(&mut m, "rdb-key-save-delay", DELAY_US);
    let mut tx = redis::pipe();
    tx.atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .ignore()
        .cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("16384")
        .ignore()
        .cmd("SLIDEWIN.CHECK")
        .arg("k:7")
        .arg(10)
        .arg(WINDOW)
        .ignore();
    for i in 0..10 {
        tx.cmd("SET")
            .arg(format!("filler:{i}"))
            .arg("A".repeat(16384))
            .ignore();
    }
    let _: () = tx.query(&mut m).expect("cut the link and fill the backlog");

    assert!(
        wait_until(Duration::from_secs(20), || async_loading(&mut r)),
        "the replica never loaded in the background; its log:\n{}",
        replica.log()
    );
    // During the load: not LOADING, the old logs served as they were.
    assert_eq!(
        info_field(&mut r, "persistence", "loading").as_deref(),
        Some("0")
    );
    assert_eq!(log_of(&mut r, "replica:only"), old_only);
    assert_eq!(log_of(&mut r, "k:7"), old_k7);
    assert!(!peek_allows(&mut r, "replica:only", 3) && peek_allows(&mut r, "replica:only", 4));
    assert_eq!(digest(&mut r), old_digest, "the old data set, whole");
    // Decisions on the old data set while the loader runs.
    for i in 0..20 {
        assert_eq!(check(&mut r, "replica:during", 100, WINDOW), 1, "call {i}");
        replica_checks += 1;
    }
    assert_eq!(check(&mut r, "replica:only", 3, WINDOW), 0, "denied");
    replica_checks += 1;
    let during_digest = digest(&mut r);
    assert!(
        async_loading(&mut r),
        "the calls above ran during the load (it ended too soon)"
    );

    // Abort the load: the old data set stays, exactly.
    config_set(&mut m, "repl-diskless-sync-delay", "2");
    config_set(&mut m, "rdb-key-save-delay", "0");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut m)
        .expect("CLIENT KILL");
    assert!(
        wait_until(Duration::from_secs(20), || !async_loading(&mut r)),
        "the aborted load never ended"
    );
    assert_eq!(
        digest(&mut r),
        during_digest,
        "the old data set after the abort"
    );
    assert_eq!(log_of(&mut r, "replica:only"), old_only);

    // The next full sync completes: the master's logs, nothing else.
    assert!(
        wait_until(Duration::from_secs(30), || {
            info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
                && !async_loading(&mut r)
        }),
        "the second sync never completed; log:\n{}",
        replica.log()
    );
    let mut r = assert_replica_matches(&master, &replica);
    assert!(!exists(&mut r, "replica:only"));
    assert!(!exists(&mut r, "replica:during"));
    assert_eq!(log_of(&mut r, "k:7"), log_of(&mut m, "k:7"));
    assert_eq!(
        log_of(&mut r, "k:7").len(),
        5,
        "the entry added as the link was cut"
    );
    if log_type == LogType::Compact {
        for k in ["k:big", "n:big", "k:7", "n:7"] {
            assert_eq!(digest_value(&mut m, k), digest_value(&mut r, k), "{k}");
        }
    }
    let log = replica.log();
    assert!(
        !log.contains("Skipping diskless-load"),
        "the replica loaded from the socket: {log}"
    );
    // The loader moved no counter and fed no TOP entry: the replica's
    // counts are its own calls' (TOP is node-local decisions).
    let allowed = info_number(&mut r, "slidewin", "slidewin_checks_allowed");
    let denied = info_number(&mut r, "slidewin", "slidewin_checks_denied");
    assert_eq!((allowed, denied), (replica_checks - 1, 1));
    assert_eq!(info_number(&mut r, "slidewin", "slidewin_errors"), 0);
    assert_eq!(
        top(&mut r, "ALLOWED"),
        vec![
            ("replica:during".to_string(), 20),
            ("replica:only".to_string(), 3)
        ]
    );
    assert_eq!(top(&mut r, "DENIED"), vec![("replica:only".to_string(), 1)]);
}

/// `SLIDEWIN.TOP 10 <outcome>` as (key, count) pairs, checked exact.
fn top(c: &mut Connection, outcome: &str) -> Vec<(String, i64)> {
    let entries: Vec<(String, i64, i64)> = redis::cmd("SLIDEWIN.TOP")
        .arg(10)
        .arg(outcome)
        .query(c)
        .expect("SLIDEWIN.TOP");
    entries
        .into_iter()
        .map(|(key, count, bound)| {
            assert_eq!(bound, 0, "{key}: exact below the capacity");
            (key, count)
        })
        .collect()
}
