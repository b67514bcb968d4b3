//! One run and its measurements, the checks every run passes, and a series
//! of runs with its table.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Connection;

use crate::clients::{client, key_name, slot, Call, Outcome, Router, RouterStats};
use crate::net::Net;
use crate::nodes::{connect, PCluster};
use crate::support::{target_dir, token_member, wait_until, wall_ms, Flavor};
use crate::{
    max_lag, Config, AFTER_PROMOTION, CLIENTS, HEALTHY_DEADLINE, LIMIT, PROMOTION_DEADLINE,
    REJOIN_DEADLINE, TAIL, WARMUP, WINDOW_MS,
};

#[derive(Debug, Clone, Default)]
struct RunResult {
    calls: usize,
    /// `1` replies (before any WAIT).
    ones: usize,
    /// Decisions acted on (see [`Outcome::Granted`]).
    granted: usize,
    denied: usize,
    noreplicas: usize,
    unconfirmed: usize,
    errors: usize,
    /// Granted decisions whose entry no node holds after the heal.
    lost: usize,
    /// Of `lost`: those the cut master gave after the cut (before the heal).
    lost_from_cut_master: usize,
    /// (c) only: unconfirmed `1`s whose entry is gone (not acted on).
    lost_unconfirmed: usize,
    /// Over-admission: the most granted calls certainly in one window
    /// beyond the limit (any key), and the most that may have been.
    over_certain: i64,
    over_possible: i64,
    /// Keys with any certain over-admission.
    keys_over: usize,
    /// Cut to promotion, ms.
    failover_ms: i64,
    /// Calls the cut master answered after the cut, and its `1`s among them.
    victim_replies_after_cut: usize,
    victim_ones_after_cut: usize,
    /// The last `1` the cut master gave after the cut, ms after the cut
    /// (its answer's arrival): how long it went on deciding alone.
    victim_last_one_ms: i64,
    /// NOREPLICAS replies the cut master gave after the cut.
    victim_noreplicas_after_cut: usize,
    stats: RouterStats,
}

/// The most calls of `calls` (server times within [sent, received]) that
/// certainly share one window of `WINDOW_MS` (their server times span less
/// than the window whatever they were: max received - min sent < window),
/// and the most that possibly do (max sent - min received < window).
pub(crate) fn window_counts(calls: &[&Call]) -> (i64, i64) {
    let (mut certain, mut possible) = (0i64, 0i64);
    for a in calls {
        let c = calls
            .iter()
            .filter(|b| b.sent_ms >= a.sent_ms && b.received_ms - a.sent_ms < WINDOW_MS)
            .count() as i64;
        let p = calls
            .iter()
            .filter(|b| b.received_ms >= a.received_ms && b.sent_ms - a.received_ms < WINDOW_MS)
            .count() as i64;
        certain = certain.max(c);
        possible = possible.max(p);
    }
    (certain, possible)
}

fn run_once(cluster: &PCluster, config: Config, run: usize) -> RunResult {
    cluster.wait_healthy();
    let shards = cluster.shards();
    let (victim, replica) = shards[run % shards.len()];
    let others: Vec<usize> = (0..6).filter(|&i| i != victim).collect();
    cluster.config_set_all(
        "min-replicas-to-write",
        if config == Config::MinReplicas {
            "1"
        } else {
            "0"
        },
    );
    cluster.config_set_all("min-replicas-max-lag", &max_lag().to_string());

    let tag = format!("{}{}x{}", config.tag(), run, wall_ms() % 100_000);
    let addrs: Vec<String> = cluster.nodes.iter().map(|n| n.addr.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            client(
                addrs.clone(),
                c + run * CLIENTS,
                tag.clone(),
                config,
                start,
                stop.clone(),
            )
        })
        .collect();
    // Stop the clients on every way out of this function.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());

    thread::sleep(WARMUP);
    let cut_ms = wall_ms();
    cluster.net.cut(victim, &others);
    // The cut holds: the master cannot reach any other node (probed from
    // inside its namespace, in parallel, while the failover is watched).
    let probes: Vec<_> = others
        .iter()
        .map(|&j| {
            let ns = cluster.net.ns(victim);
            let to = cluster.nodes[j].addr.clone();
            thread::spawn(move || (j, Net::reaches_from(&ns, &to)))
        })
        .collect();
    let clients_reach = connect(&cluster.nodes[victim].addr, Duration::from_secs(1)).is_ok();
    let promoted = wait_until(PROMOTION_DEADLINE, || {
        cluster.role(replica).is_some_and(|r| r.master)
    });
    let promoted_ms = wall_ms();
    let still_reaching: Vec<usize> = probes
        .into_iter()
        .map(|p| p.join().expect("probe"))
        .filter(|&(_, reached)| reached)
        .map(|(j, _)| j)
        .collect();
    // Whatever happens next, the link heals before this run can fail.
    let victim_was_master = cluster.role(victim).is_some_and(|r| r.master);
    let victim_saw_failures = cluster.failures_seen_by(victim);
    if !promoted || !still_reaching.is_empty() || !clients_reach {
        cluster.net.heal(victim);
        assert!(
            still_reaching.is_empty(),
            "run {run} {config:?}: the cut master (node {victim}) still reaches nodes \
             {still_reaching:?}"
        );
        assert!(
            clients_reach,
            "run {run} {config:?}: the clients no longer reach the cut master"
        );
        panic!(
            "run {run} {config:?}: the replica (node {replica}) of the cut master (node {victim}) \
             was not promoted within {PROMOTION_DEADLINE:?}"
        );
    }
    if std::env::var_os("SLIDEWIN_PARTITION_LOGS").is_some() {
        eprintln!("--- replica {replica} log:\n{}", cluster.log(replica));
        eprintln!("--- victim {victim} log:\n{}", cluster.log(victim));
    }
    thread::sleep(AFTER_PROMOTION);
    cluster.net.heal(victim);
    let heal_ms = wall_ms();
    let rejoined = wait_until(REJOIN_DEADLINE, || {
        cluster
            .role(victim)
            .is_some_and(|r| !r.master && r.master_of == Some(replica) && r.link_up)
    });
    assert!(
        rejoined,
        "run {run} {config:?}: the old master (node {victim}) did not rejoin as a replica of \
         node {replica} within {REJOIN_DEADLINE:?}: {:?}",
        cluster.role(victim)
    );
    assert!(
        wait_until(HEALTHY_DEADLINE, || cluster.healthy()),
        "run {run} {config:?}: the cluster did not become healthy after the heal"
    );
    thread::sleep(TAIL);
    stop.store(true, Ordering::Relaxed);
    let mut calls: Vec<Call> = Vec::new();
    let mut stats = RouterStats::default();
    for c in clients {
        let (cs, st) = c.join().expect("a client thread");
        calls.extend(cs);
        stats.moved += st.moved;
        stats.ask += st.ask;
        stats.clusterdown += st.clusterdown;
        stats.io_errors += st.io_errors;
        stats.refreshes += st.refreshes;
    }
    cluster.config_set_all("min-replicas-to-write", "0");
    assert!(
        victim_was_master,
        "run {run} {config:?}: the cut master was no longer a master when its replica was \
         promoted (no split brain: was it cut?)"
    );
    assert!(
        !victim_saw_failures.is_empty(),
        "run {run} {config:?}: the cut master saw no other node failing"
    );

    // Where each key lives now, and whether each entry is still there: the
    // member with a score within its call (a member name is given again
    // once its entry is gone, so the name alone is not enough).
    let router = Router::new(addrs.clone(), 0);
    let mut owners: HashMap<usize, Connection> = HashMap::new();
    let mut survives = |call: &Call| -> bool {
        let key = key_name(&tag, call.key);
        let owner = router.slots[slot(&key)].expect("every slot has an owner after the heal");
        let c = owners.entry(owner).or_insert_with(|| cluster.conn(owner));
        let Some(m) = &call.member else { return false };
        // The member inside the token `<id>@<ms>` WITHMEMBERS handed out.
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&key)
            .arg(token_member(m.as_bytes()))
            .query(c)
            .expect("ZSCORE");
        score.is_some_and(|s| {
            let s = s as i64;
            s >= call.sent_ms - 1 && s <= call.received_ms + 1
        })
    };
    let mut r = RunResult {
        calls: calls.len(),
        failover_ms: promoted_ms - cut_ms,
        stats,
        ..Default::default()
    };
    let mut lost_detail = Vec::new();
    for call in &calls {
        match call.outcome {
            Outcome::Granted => r.granted += 1,
            Outcome::Denied => r.denied += 1,
            Outcome::NoReplicas => r.noreplicas += 1,
            Outcome::Unconfirmed => r.unconfirmed += 1,
            Outcome::Error => r.errors += 1,
        }
        if matches!(call.outcome, Outcome::Granted | Outcome::Unconfirmed) {
            r.ones += 1;
        }
        if call.node == Some(victim) && call.sent_ms >= cut_ms && call.received_ms <= heal_ms {
            if call.outcome != Outcome::Error {
                r.victim_replies_after_cut += 1;
            }
            if matches!(call.outcome, Outcome::Granted | Outcome::Unconfirmed) {
                r.victim_ones_after_cut += 1;
                r.victim_last_one_ms = r.victim_last_one_ms.max(call.received_ms - cut_ms);
            }
            if call.outcome == Outcome::NoReplicas {
                r.victim_noreplicas_after_cut += 1;
            }
        }
        if call.outcome == Outcome::Granted && !survives(call) {
            r.lost += 1;
            r.lost_from_cut_master += usize::from(
                call.node == Some(victim) && call.received_ms >= cut_ms && call.sent_ms <= heal_ms,
            );
            if lost_detail.len() < 10 {
                lost_detail.push(call.clone());
            }
        }
        if call.outcome == Outcome::Unconfirmed && !survives(call) {
            r.lost_unconfirmed += 1;
        }
    }
    let mut by_key: HashMap<u64, Vec<&Call>> = HashMap::new();
    for call in calls.iter().filter(|c| c.outcome == Outcome::Granted) {
        by_key.entry(call.key).or_default().push(call);
    }
    for v in by_key.values() {
        let (c, p) = window_counts(v);
        r.over_certain = r.over_certain.max(c - LIMIT);
        r.over_possible = r.over_possible.max(p - LIMIT);
        r.keys_over += usize::from(c > LIMIT);
    }
    r.over_certain = r.over_certain.max(0);
    r.over_possible = r.over_possible.max(0);
    eprintln!(
        "partitions {:?} run {run} {}: node {victim} cut at {cut_ms}, node {replica} promoted \
         after {} ms, healed at +{} ms; {} calls, {} ones, {} granted, {} denied, {} NOREPLICAS, \
         {} unconfirmed, {} errors; the cut master answered {} calls after the cut ({} ones, the last at +{} ms; \
         {} NOREPLICAS); \
         lost {} granted ({} of them given by the cut master during the partition; +{} \
         unconfirmed); over-admission {} certain / {} possible ({} keys); \
         {:?}",
        cluster.flavor,
        config.tag(),
        r.failover_ms,
        heal_ms - cut_ms,
        r.calls,
        r.ones,
        r.granted,
        r.denied,
        r.noreplicas,
        r.unconfirmed,
        r.errors,
        r.victim_replies_after_cut,
        r.victim_ones_after_cut,
        r.victim_last_one_ms,
        r.victim_noreplicas_after_cut,
        r.lost,
        r.lost_from_cut_master,
        r.lost_unconfirmed,
        r.over_certain,
        r.over_possible,
        r.keys_over,
        r.stats
    );
    if config == Config::Wait && r.lost > 0 {
        eprintln!(
            "partitions: BUG: configuration (c) lost {} WAIT-confirmed decisions, e.g. {:?}",
            r.lost, lost_detail
        );
    }
    r
}

/// The checks every run must pass: the partition happened and had effect,
/// the load was what it claims, and (c) lost nothing.
fn assert_run(flavor: Flavor, config: Config, run: usize, r: &RunResult) {
    let what = format!("{flavor:?} run {run} {config:?}");
    assert!(
        r.denied > 0,
        "{what}: no denial: the limits were never reached"
    );
    assert!(r.granted > 0, "{what}: nothing granted");
    assert!(
        r.victim_replies_after_cut > 0,
        "{what}: the clients got no answer from the cut master during the partition"
    );
    if config == Config::Wait {
        assert_eq!(r.lost, 0, "{what}: WAIT-confirmed decisions lost");
        assert_eq!(
            r.over_certain, 0,
            "{what}: over-admission with WAIT-confirmed decisions"
        );
    }
}

pub(crate) fn flavor_named(name: &str) -> Flavor {
    match name {
        "redis-7.0" => Flavor::Redis70,
        "redis-8.2" => Flavor::Redis82,
        "valkey-8.1" => Flavor::Valkey81,
        "valkey-9.1" => Flavor::Valkey91,
        other => panic!("unknown server {other}: redis-7.0, redis-8.2, valkey-8.1, valkey-9.1"),
    }
}

#[derive(Default)]
pub(crate) struct Summary {
    runs: usize,
    calls: usize,
    ones: usize,
    granted: usize,
    denied: usize,
    noreplicas: usize,
    unconfirmed: usize,
    errors: usize,
    lost: usize,
    max_lost: usize,
    runs_with_loss: usize,
    lost_unconfirmed: usize,
    max_over_certain: i64,
    max_over_possible: i64,
    failover_ms: Vec<i64>,
}

impl Summary {
    fn add(&mut self, r: &RunResult) {
        self.runs += 1;
        self.calls += r.calls;
        self.ones += r.ones;
        self.granted += r.granted;
        self.denied += r.denied;
        self.noreplicas += r.noreplicas;
        self.unconfirmed += r.unconfirmed;
        self.errors += r.errors;
        self.lost += r.lost;
        self.max_lost = self.max_lost.max(r.lost);
        self.runs_with_loss += usize::from(r.lost > 0);
        self.lost_unconfirmed += r.lost_unconfirmed;
        self.max_over_certain = self.max_over_certain.max(r.over_certain);
        self.max_over_possible = self.max_over_possible.max(r.over_possible);
        self.failover_ms.push(r.failover_ms);
    }
}

fn table(flavor: Flavor, summaries: &[(Config, Summary)]) -> String {
    let mut s = format!(
        "### {}\n\n| configuration | runs | calls | `1` replies | granted (acted on) | denied | \
         NOREPLICAS | WAIT unconfirmed | no answer | lost granted: total | max per run | runs with \
         a loss | max over-admission (certain / possible) | failover ms (median, max) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        flavor.name()
    );
    for (config, m) in summaries {
        let mut f = m.failover_ms.clone();
        f.sort_unstable();
        let median = f.get(f.len() / 2).copied().unwrap_or(0);
        let max = f.last().copied().unwrap_or(0);
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {median}, {max} |\n",
            config.name(),
            m.runs,
            m.calls,
            m.ones,
            m.granted,
            m.denied,
            m.noreplicas,
            if *config == Config::Wait {
                format!(
                    "{} ({} without their entry afterwards: undone or lost)",
                    m.unconfirmed, m.lost_unconfirmed
                )
            } else {
                "-".into()
            },
            m.errors,
            m.lost,
            m.max_lost,
            m.runs_with_loss,
            m.max_over_certain,
            m.max_over_possible,
        );
    }
    s
}

/// `runs` runs of each configuration on one cluster of `flavor`, the
/// configurations taking turns (a, b, c, a, b, c, ...); every run checked.
/// Writes `target/partitions/<label><server>.md` (the table) and
/// `.runs.txt` (every run).
pub(crate) fn series(flavor: Flavor, runs: usize, label: &str) -> Vec<(Config, Summary)> {
    let cluster = PCluster::start(flavor);
    let mut sums: Vec<(Config, Summary)> = Config::ALL
        .iter()
        .map(|&c| (c, Summary::default()))
        .collect();
    let out_dir = target_dir().join("partitions");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(out_dir.join(format!("{label}{}.runs.txt", flavor.name())))
        .unwrap();
    let mut failures = Vec::new();
    for run in 0..runs {
        for (ci, &config) in Config::ALL.iter().enumerate() {
            let n = run * Config::ALL.len() + ci;
            let r = run_once(&cluster, config, n);
            let _ = writeln!(log, "{} {} run {n}: {r:?}", wall_ms(), config.tag());
            if let Err(e) = std::panic::catch_unwind(|| assert_run(flavor, config, n, &r)) {
                failures.push(
                    e.downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_else(|| "a run check failed".into()),
                );
            }
            sums[ci].1.add(&r);
        }
    }
    let t = table(flavor, &sums);
    eprintln!("{t}");
    std::fs::write(out_dir.join(format!("{label}{}.md", flavor.name())), &t).unwrap();
    assert!(failures.is_empty(), "run checks failed: {failures:#?}");
    // The measurements can see what they measure: without a confirmation
    // a partition loses decisions and over-admits (every run of every
    // server did), so "(c) lost nothing" is not the loss check being blind.
    let a = &sums[0].1;
    assert!(
        a.lost > 0,
        "{flavor:?}: no decision lost in {runs} runs of configuration (a): is the loss check blind?"
    );
    assert!(
        a.max_over_certain > 0,
        "{flavor:?}: no over-admission in {runs} runs of configuration (a): is the check blind?"
    );
    sums
}
