//! A failover under load keeps the decisions the replica had.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use redis::Value;

use crate::support::*;

/// The port of the replica of the master at `master`.
fn replica_of(cluster: &Cluster, master: u16) -> u16 {
    cluster
        .ports()
        .into_iter()
        .find(|&p| {
            let role: Vec<Value> = redis::cmd("ROLE").query(&mut cluster.conn(p)).unwrap();
            redis::from_redis_value_ref::<String>(&role[0]).unwrap() == "slave"
                && redis::from_redis_value_ref::<u16>(&role[2]).ok() == Some(master)
        })
        .expect("the master's replica")
}

/// The failover load's limits: even keys tight (full within the first
/// calls, so denials happen), odd keys with room (still being written when
/// the master dies); the window is longer than the test.
fn fo_limit(key: usize) -> i64 {
    if key.is_multiple_of(2) {
        5
    } else {
        1000
    }
}
const FO_WINDOW_MS: i64 = 600_000;
/// The master is killed once this many calls were admitted.
const FO_KILL_AFTER: i64 = 1500;

/// What the failover load saw: acknowledged 1s per key, the same counts as
/// of the last WAIT that confirmed a replica had everything before it, and
/// the denials.
struct Counts {
    acked: HashMap<String, i64>,
    durable: HashMap<String, i64>,
    denied: i64,
}

/// Checks `keys` in turn on `c`, a WAIT 1 after every second call, until
/// the connection fails (the master is killed); `admitted` counts the 1s.
fn load_with_waits(
    mut c: Connection,
    keys: Vec<String>,
    admitted: std::sync::Arc<std::sync::atomic::AtomicI64>,
) -> std::thread::JoinHandle<Counts> {
    std::thread::spawn(move || {
        let mut counts = Counts {
            acked: HashMap::new(),
            durable: HashMap::new(),
            denied: 0,
        };
        for i in 0..200_000usize {
            let key = &keys[i % keys.len()];
            let Ok(r) = redis::cmd("SLIDEWIN.CHECK")
                .arg(key)
                .arg(fo_limit(i % keys.len()))
                .arg(FO_WINDOW_MS)
                .query::<i64>(&mut c)
            else {
                break;
            };
            *counts.acked.entry(key.clone()).or_default() += r;
            admitted.fetch_add(r, std::sync::atomic::Ordering::Relaxed);
            counts.denied += 1 - r;
            if i % 2 == 1 {
                match redis::cmd("WAIT").arg(1).arg(1000).query::<i64>(&mut c) {
                    Ok(n) if n >= 1 => counts.durable = counts.acked.clone(),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        counts
    })
}

/// Kills a master under a load with tight limits. On the promoted replica:
/// every decision a WAIT confirmed survived; no window holds more than its
/// limit; each window refuses exactly once it is full, so the calls it
/// still admits are exactly the entries lost with the master, and that
/// over-admission is bounded, key by key, by the decisions WAIT did not
/// confirm.
pub(crate) fn failover(flavor: Flavor) {
    let cluster = Cluster::start(flavor, 1500);
    let mut any = cluster.conn(cluster.base);
    let masters = cluster.masters(cluster.base);
    let (victim, victim_id, _) = masters[0].clone();
    // Keys owned by the victim.
    let keys: Vec<String> = (0..5000)
        .map(|i| format!("fo:{i}"))
        .filter(|k| cluster.owner(keyslot(&mut any, k)).0 == victim)
        .take(20)
        .collect();
    assert_eq!(keys.len(), 20);
    let replica = replica_of(&cluster, victim);
    let admitted = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let load = load_with_waits(cluster.conn(victim), keys.clone(), admitted.clone());
    assert!(
        wait_until(Duration::from_secs(30), || {
            admitted.load(std::sync::atomic::Ordering::Relaxed) >= FO_KILL_AFTER
        }),
        "the load admitted {FO_KILL_AFTER} calls"
    );
    // SIGKILL: no shutdown, nothing flushed to the replica.
    let _ = Command::new("kill")
        .arg("-9")
        .arg(cluster.pid(victim).to_string())
        .status();
    let Counts {
        acked,
        durable,
        denied,
    } = load.join().expect("load thread");
    let total_acked: i64 = acked.values().sum();
    let total_durable: i64 = durable.values().sum();
    assert!(total_acked > 0, "the load ran");
    assert!(denied > 0, "the limits were reached: denials happened");
    // Without a WAIT that returned 1 or more, "every confirmed decision
    // survived" below would hold trivially.
    assert!(
        total_durable > 0,
        "some WAIT confirmed a replica had the writes"
    );

    let mut r = cluster.conn(replica);
    let promoted = wait_until(Duration::from_secs(60), || {
        let role: Vec<Value> = redis::cmd("ROLE").query(&mut r).unwrap_or_default();
        role.first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .as_deref()
            == Some("master")
    });
    assert!(promoted, "the replica was promoted");
    assert!(wait_until(Duration::from_secs(30), || {
        redis::cmd("CLUSTER")
            .arg("INFO")
            .query::<String>(&mut r)
            .is_ok_and(|i| i.contains("cluster_state:ok"))
    }));
    let (mut lost, mut full) = (0i64, 0);
    for (i, key) in keys.iter().enumerate() {
        let limit = fo_limit(i);
        let ack = acked.get(key).copied().unwrap_or_default();
        let confirmed = durable.get(key).copied().unwrap_or_default();
        let present: i64 = redis::cmd("ZCARD").arg(key).query(&mut r).unwrap();
        assert!(
            present >= confirmed,
            "{key}: {confirmed} decisions confirmed by WAIT, only {present} survived"
        );
        assert!(
            present <= limit,
            "{key}: {present} entries in one window of limit {limit}"
        );
        assert!(
            present <= ack + 1,
            "{key}: {present} entries, {ack} acknowledged (at most the one call in flight more)"
        );
        // The promoted node goes on from what it holds: it admits exactly
        // the room left, then refuses.
        let mut admitted = 0i64;
        while redis::cmd("SLIDEWIN.CHECK")
            .arg(key)
            .arg(limit)
            .arg(FO_WINDOW_MS)
            .query::<i64>(&mut r)
            .unwrap()
            == 1
        {
            admitted += 1;
            assert!(admitted <= limit, "{key}: admits past its limit");
        }
        assert_eq!(admitted, limit - present, "{key}: the room it had");
        full += usize::from(present == limit);
        // Since it admits exactly the room left, the decisions given for
        // this key over the run exceed the limit by the entries lost (at
        // most the unconfirmed ones, as `present >= confirmed` above says).
        lost += (ack - present).max(0);
    }
    assert!(full > 0, "some window was full when the master died");
    assert!(
        full < keys.len(),
        "some window was still being written when the master died"
    );
    eprintln!(
        "failover ({flavor:?}): {total_acked} acknowledged, {denied} denied, {total_durable} confirmed \
         by WAIT, {lost} lost with the master (not yet replicated), so {lost} admitted over the \
         limit after the failover; {full} of {} windows full at the kill; every WAIT-confirmed \
         decision survived; old master {victim_id}",
        keys.len()
    );
}
