//! Partitions on real hosts: a 3-master Redis Cluster with one replica each,
//! every node in its own network namespace with its own address, the
//! clients in the root namespace reaching them over a bridge. One master is
//! cut off from every other node (iptables DROP inside its namespace, both
//! directions; the clients' address stays allowed) until the cluster fails
//! it over, then the link heals and the old master rejoins as a replica.
//! Measured per run: the acknowledged decisions no node holds afterwards,
//! and the over-admission in the clients' own log of granted calls, for
//! (a) plain asynchronous replication, (b) `min-replicas-to-write 1`,
//! (c) callers that act on a `1` only once `WAIT 1 200` confirms it.
//!
//! Needs root (network namespaces, veth, iptables). `make test` runs
//! [`short`] (2 runs of each configuration on Redis 7.0); `make
//! test-partitions` runs [`full`] (`SLIDEWIN_PARTITION_RUNS`, default 20,
//! on each of `SLIDEWIN_PARTITION_SERVERS`) and writes the tables to
//! `target/partitions/`. docs/operating.md ("Failover: what a decision is
//! worth") explains the numbers.
//!
//! Cleanup: everything the test makes is named `swp<pid>x<n>...`. A Drop
//! guard removes the namespaces (and with them the veths, the bridge and the
//! iptables rules, which live only inside them) and stops the servers; a
//! watchdog process in its own process group does the same if the test
//! process dies without unwinding (Ctrl-C, SIGKILL); and every start sweeps
//! what a dead test process left.
//!
//! One test program (`cargo test --test partitions`), by subject: [`net`]
//! (the namespaces, the cut and the heal), [`nodes`] (the cluster on them),
//! [`clients`] (the cluster client and the load) and [`runs`] (a run, its
//! measurements, a series and its table); the scenario's constants and the
//! tests are here.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod clients;
mod net;
mod nodes;
mod runs;

use std::time::Duration;

use clients::{crc16, slot, Call, Outcome};
use net::owner_pid;
use runs::{flavor_named, series, window_counts};
use support::Flavor;

// ---------------------------------------------------------------------------
// The load and the scenario's constants.

/// Limit and window of every key: 5 per 60 s. The window is longer than a
/// run (about 10-15 s), so no entry an allowed call made may legitimately
/// have left its key when the run is checked: a missing entry is a lost one.
const LIMIT: i64 = 5;
const WINDOW_MS: i64 = 60_000;
/// Keys come into use at a steady rate and each is called for about 30 s
/// (the newest `ACTIVE_KEYS`: longer than a run, so a key whose entries
/// were lost is called again after the failover), much faster than its
/// limit allows: every key fills up within its first seconds, then is
/// denied, so decisions (grants on new keys, denials on full ones) go on at
/// every moment of the run.
const ACTIVE_KEYS: u64 = 600;
const KEYS_PER_SECOND: u64 = 20;
const CLIENTS: usize = 6;
/// Each client's pause between calls (about 250-300 calls/s each).
const PACE: Duration = Duration::from_millis(3);
const MAX_CALLS_PER_CLIENT: usize = 40_000;
/// A call (with its redirects and retries) gives up after this.
const CALL_DEADLINE: Duration = Duration::from_secs(2);
/// The confirmation of configuration (c).
const WAIT_MS: i64 = 200;
const NODE_TIMEOUT_MS: u32 = 1500;
const WARMUP: Duration = Duration::from_millis(2500);
/// How long the split brain lasts past the promotion before the heal.
const AFTER_PROMOTION: Duration = Duration::from_millis(1000);
const TAIL: Duration = Duration::from_millis(2000);
const PROMOTION_DEADLINE: Duration = Duration::from_secs(30);
const REJOIN_DEADLINE: Duration = Duration::from_secs(45);
const HEALTHY_DEADLINE: Duration = Duration::from_secs(60);

/// Configuration (b)'s `min-replicas-max-lag` in seconds:
/// `SLIDEWIN_PARTITION_MAX_LAG`, 2 unless set (a series with another value
/// writes `target/partitions/lag<n>-<server>.*`).
fn max_lag() -> u32 {
    std::env::var("SLIDEWIN_PARTITION_MAX_LAG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    /// Plain asynchronous replication.
    Async,
    /// `min-replicas-to-write 1`, `min-replicas-max-lag 2`.
    MinReplicas,
    /// A `1` counts only once `WAIT 1 200` returns >= 1; else it is undone.
    Wait,
}

impl Config {
    const ALL: [Config; 3] = [Config::Async, Config::MinReplicas, Config::Wait];
    fn name(self) -> &'static str {
        match self {
            Config::Async => "(a) asynchronous replication",
            Config::MinReplicas => "(b) min-replicas-to-write 1, min-replicas-max-lag (2)",
            Config::Wait => "(c) act on a 1 only after WAIT 1 200 >= 1",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Config::Async => "a",
            Config::MinReplicas => "b",
            Config::Wait => "c",
        }
    }
}

/// `make test`: two runs of each configuration on Redis 7.0.
#[test]
fn short() {
    series(Flavor::Redis70, 2, "short-");
}

/// `make test-partitions`: SLIDEWIN_PARTITION_RUNS (20) runs of each
/// configuration on each of SLIDEWIN_PARTITION_SERVERS (the four).
#[test]
#[ignore]
fn full() {
    let runs: usize = std::env::var("SLIDEWIN_PARTITION_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let servers = std::env::var("SLIDEWIN_PARTITION_SERVERS")
        .unwrap_or_else(|_| "redis-7.0 redis-8.2 valkey-8.1 valkey-9.1".into());
    for name in servers.split_whitespace() {
        let label = match max_lag() {
            2 => String::new(),
            n => format!("lag{n}-"),
        };
        series(flavor_named(name), runs, &label);
    }
}

#[test]
fn window_counts_bound_the_truth() {
    let call = |sent_ms, received_ms| Call {
        key: 0,
        sent_ms,
        received_ms,
        node: None,
        outcome: Outcome::Granted,
        member: None,
    };
    // Three calls within 1 s: certainly in one window.
    let v = [call(0, 10), call(500, 510), call(990, 1000)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (3, 3));
    // The last one answered a window after the first was sent: maybe.
    let v = [call(0, 10), call(WINDOW_MS - 5, WINDOW_MS + 5)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (1, 2));
    // Sent a window after the first was answered: never together.
    let v = [call(0, 10), call(WINDOW_MS + 10, WINDOW_MS + 20)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (1, 1));
}

#[test]
fn names_are_recognised() {
    assert_eq!(owner_pid("swp123x0"), Some(123));
    assert_eq!(owner_pid("swp123x0hub"), Some(123));
    assert_eq!(owner_pid("swp123x12n5"), Some(123));
    assert_eq!(owner_pid("swp123x"), None);
    assert_eq!(owner_pid("swpt"), None);
    assert_eq!(owner_pid("swp123x0n"), None);
    assert_eq!(owner_pid("swp12ax0"), None);
    assert_eq!(owner_pid("docker0"), None);
    assert_eq!(slot("foo"), 12182);
    assert_eq!(crc16(b"123456789"), 0x31C3);
}
