//! slidewin on Redis Cluster (3 masters, 3 replicas, started by
//! scripts/cluster.sh, the script behind `make cluster`), on every server of the suite.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use rand::Rng;
use redis::Value;
use support::*;

on_every_server! {
    every_key_lands_on_its_slot_owner => routing;
    wrong_node_replies_moved_and_writes_nothing => moved;
    ask_during_slot_migration_is_honoured => ask;
    crossslot_transactions_and_scripts_are_refused => crossslot;
    hash_tagged_keys_work_together => hash_tags;
    python_cluster_example_runs => python_cluster_example;
    python_client_falls_back_to_the_function_library_on_every_primary => python_function_fallback;
    failover_keeps_replicated_decisions => failover;
    atomic_slot_migration_under_load => atomic_slot_migration;
    redis_cli_reshard_under_load => reshard;
    redis_cli_reshard_under_load_with_compact_logs => reshard_compact;
    compact_logs_move_by_migrate_and_migrateslots => compact_migration;
}

fn check_on(c: &mut Connection, key: &str) -> redis::RedisResult<i64> {
    redis::cmd("SLIDEWIN.CHECK")
        .arg(key)
        .arg(3)
        .arg(600_000)
        .query(c)
}

fn routing(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut cc = cluster.cluster_conn();
    // 2000 keys, each called 1 to 4 times under a limit of 3.
    const KEYS: usize = 2000;
    let key = |i: usize| format!("sms:limit:10.{}.{}", i / 250, i % 250);
    let calls = |i: usize| 1 + (i % 4) as i64;
    let mut allowed: HashMap<String, i64> = HashMap::new();
    for i in 0..KEYS {
        for _ in 0..calls(i) {
            let r: i64 = redis::cmd("SLIDEWIN.CHECK")
                .arg(key(i))
                .arg(3)
                .arg(600_000)
                .query(&mut cc)
                .expect("cluster CHECK");
            *allowed.entry(key(i)).or_default() += r;
        }
    }
    assert_eq!(allowed.len(), KEYS);
    for i in 0..KEYS {
        assert_eq!(allowed[&key(i)], calls(i).min(3), "{}", key(i));
    }
    let masters = cluster.masters(cluster.base);
    assert_eq!(masters.len(), 3);
    let mut conns: HashMap<u16, Connection> = masters
        .iter()
        .map(|(p, _, _)| (*p, cluster.conn(*p)))
        .collect();
    let mut any = cluster.conn(cluster.base);
    let mut per_master: HashMap<u16, usize> = HashMap::new();
    for (key, n) in &allowed {
        let slot = keyslot(&mut any, key);
        let (owner, _) = cluster.owner(slot);
        *per_master.entry(owner).or_default() += 1;
        for (port, c) in conns.iter_mut() {
            let reply: redis::RedisResult<i64> = redis::cmd("ZCARD").arg(key).query(c);
            if *port == owner {
                assert_eq!(reply.ok(), Some(*n), "{key} on its owner {port}");
            } else {
                // Another master answers MOVED to the owner, never data.
                let err = reply.expect_err("a non-owner must redirect");
                assert_eq!(
                    error_text(&err),
                    format!("MOVED {slot} 127.0.0.1:{owner}"),
                    "{key} asked of {port}"
                );
            }
        }
    }
    // The keys spread over all three masters.
    assert_eq!(per_master.len(), 3, "{per_master:?}");
    assert!(per_master.values().all(|&n| n > KEYS / 6), "{per_master:?}");
}

fn moved(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    let key = "user:7:ip";
    let slot = keyslot(&mut any, key);
    let (owner, _) = cluster.owner(slot);
    let (wrong, _, _) = cluster
        .masters(cluster.base)
        .into_iter()
        .find(|(p, _, _)| *p != owner)
        .expect("another master");
    let mut c = cluster.conn(wrong);
    let err = check_on(&mut c, key).expect_err("MOVED");
    assert_eq!(err.code(), Some("MOVED"), "{err}");
    assert_eq!(error_text(&err), format!("MOVED {slot} 127.0.0.1:{owner}"));
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 0, "nothing written on the wrong node");
    assert_eq!(check_on(&mut cluster.conn(owner), key).unwrap(), 1);
}

/// ZCARD on the importing node of a slot under migration (after ASKING).
fn asking_zcard(c: &mut Connection, key: &str) -> i64 {
    let (_, card): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("ZCARD")
        .arg(key)
        .query(c)
        .unwrap();
    card
}

fn ask(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    // Two keys in one slot: one exists before the migration starts.
    let (old, new) = ("{mig}:old", "{mig}:new");
    let slot = keyslot(&mut any, old);
    let (source, source_id) = cluster.owner(slot);
    let (target, target_id, _) = cluster
        .masters(cluster.base)
        .into_iter()
        .find(|(p, _, _)| *p != source)
        .expect("target");
    let mut src = cluster.conn(source);
    let mut tgt = cluster.conn(target);
    assert_eq!(check_on(&mut src, old).unwrap(), 1);
    let setslot = |c: &mut Connection, how: &str, id: &str| set_slot(c, slot, how, id);
    setslot(&mut tgt, "IMPORTING", &source_id);
    setslot(&mut src, "MIGRATING", &target_id);
    // A key still on the source is served there.
    assert_eq!(check_on(&mut src, old).unwrap(), 1);
    // A missing key is redirected with ASK, and nothing is written.
    let err = check_on(&mut src, new).expect_err("ASK");
    assert_eq!(error_text(&err), format!("ASK {slot} 127.0.0.1:{target}"));
    let in_slot: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut src)
        .unwrap();
    assert_eq!(in_slot, 1, "only the old key is on the source");
    // Without ASKING the target refuses; with it, it serves the key.
    let err = check_on(&mut tgt, new).expect_err("MOVED without ASKING");
    assert_eq!(err.code(), Some("MOVED"));
    let (_, r): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("SLIDEWIN.CHECK")
        .arg(new)
        .arg(3)
        .arg(600_000)
        .query(&mut tgt)
        .unwrap();
    assert_eq!(r, 1);
    assert_eq!(asking_zcard(&mut tgt, new), 1, "the entry is on the target");
    // A cluster-aware client (redis-cli -c) follows the ASK by itself.
    let out = Command::new(cli())
        .args([
            "-c",
            "-p",
            &source.to_string(),
            "SLIDEWIN.CHECK",
            new,
            "3",
            "600000",
        ])
        .output()
        .expect("redis-cli -c");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    assert_eq!(
        asking_zcard(&mut tgt, new),
        2,
        "the second entry went to the target too"
    );

    // MCHECK with its keys split between the two nodes: neither node holds
    // them all, so each refuses (TRYAGAIN, or ASK where it holds none), and
    // nothing is written on either.
    let digests = |src: &mut Connection, tgt: &mut Connection| (digest(src), digest(tgt));
    let before = digests(&mut src, &mut tgt);
    let mcheck = |c: &mut Connection, asking: bool, keys: [&str; 2]| -> String {
        let mut pipe = redis::pipe();
        if asking {
            pipe.cmd("ASKING").ignore();
        }
        pipe.cmd("SLIDEWIN.MCHECK")
            .arg(2)
            .arg(keys[0])
            .arg(3)
            .arg(600_000)
            .arg(keys[1])
            .arg(5)
            .arg(600_000);
        let err = pipe
            .query::<Vec<i64>>(c)
            .expect_err("a split MCHECK is refused");
        error_text(&err)
    };
    let on_source = mcheck(&mut src, false, [old, new]);
    assert!(on_source.starts_with("TRYAGAIN"), "source: {on_source}");
    let on_target = mcheck(&mut tgt, true, [old, new]);
    assert!(on_target.starts_with("TRYAGAIN"), "target: {on_target}");
    let none_here = mcheck(&mut src, false, [new, "{mig}:other"]);
    assert_eq!(none_here, format!("ASK {slot} 127.0.0.1:{target}"));
    assert_eq!(
        digests(&mut src, &mut tgt),
        before,
        "nothing written on either node"
    );
    assert_eq!(asking_zcard(&mut tgt, new), 2);
    let on_src: i64 = redis::cmd("ZCARD").arg(old).query(&mut src).unwrap();
    assert_eq!(on_src, 2);
}

fn crossslot(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    // Two keys in different slots owned by the same master.
    let first = "cross:0".to_string();
    let (owner, _) = cluster.owner(keyslot(&mut any, &first));
    let second = (1..10_000)
        .map(|i| format!("cross:{i}"))
        .find(|k| {
            let s = keyslot(&mut any, k);
            s != keyslot(&mut any, &first) && cluster.owner(s).0 == owner
        })
        .expect("a second key on the same node");
    let mut c = cluster.conn(owner);
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    for key in [&first, &second] {
        let queued: String = redis::cmd("SLIDEWIN.CHECK")
            .arg(key)
            .arg(3)
            .arg(1000)
            .query(&mut c)
            .unwrap();
        assert_eq!(queued, "QUEUED");
    }
    let err = redis::cmd("EXEC")
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    let err = redis::cmd("EVAL")
        .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 3, 1000), redis.call('SLIDEWIN.CHECK', KEYS[2], 3, 1000)}")
        .arg(2)
        .arg(&first)
        .arg(&second)
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    // MCHECK declares all its keys: two slots are refused before it runs.
    let err = redis::cmd("SLIDEWIN.MCHECK")
        .arg(2)
        .arg(&first)
        .arg(3)
        .arg(1000)
        .arg(&second)
        .arg(3)
        .arg(1000)
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    for key in [&first, &second] {
        let n: i64 = redis::cmd("EXISTS").arg(key).query(&mut c).unwrap();
        assert_eq!(n, 0, "nothing was written to {key}");
    }
}

fn hash_tags(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    let (ip, phone) = ("{user:42}:ip", "{user:42}:phone");
    assert_eq!(keyslot(&mut any, ip), keyslot(&mut any, phone));
    let (owner, _) = cluster.owner(keyslot(&mut any, ip));
    let mut c = cluster.conn(owner);
    let replies: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("SLIDEWIN.CHECK")
        .arg(ip)
        .arg(5)
        .arg(60_000)
        .cmd("SLIDEWIN.CHECK")
        .arg(phone)
        .arg(1)
        .arg(60_000)
        .cmd("SLIDEWIN.CHECK")
        .arg(phone)
        .arg(1)
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(replies, [1, 1, 0]);
    let both: Vec<i64> = redis::cmd("EVAL")
        .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 5, 60000), redis.call('SLIDEWIN.PEEK', KEYS[2], 1, 60000)[1]}")
        .arg(2)
        .arg(ip)
        .arg(phone)
        .query(&mut c)
        .unwrap();
    assert_eq!(both, [1, 0]);
    // One MCHECK over both hash-tagged keys, through a cluster client.
    let mut cc = cluster.cluster_conn();
    let policy = [
        "2",
        "{user:43}:ip",
        "5",
        "60000",
        "{user:43}:phone",
        "1",
        "60000",
    ];
    let mut mcheck = || -> i64 {
        redis::cmd("SLIDEWIN.MCHECK")
            .arg(&policy)
            .query(&mut cc)
            .unwrap()
    };
    assert_eq!(mcheck(), 1);
    let r = mcheck();
    assert_eq!(r, 0, "the phone rule denies; nothing charged");
    let (owner43, _) = cluster.owner(keyslot(&mut any, "{user:43}:ip"));
    let n: i64 = redis::cmd("ZCARD")
        .arg("{user:43}:ip")
        .query(&mut cluster.conn(owner43))
        .unwrap();
    assert_eq!(n, 1);
}

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
fn failover(flavor: Flavor) {
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

/// examples/python/sms_cluster.py (redis-py's RedisCluster) against the cluster.
fn python_cluster_example(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let out = python_example("examples/python/sms_cluster.py", cluster.base);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "user 42, six codes in a minute: [200, 200, 200, 200, 200, 429]",
            "user 43 meanwhile: 200",
            "both keys of user 42 in one slot: True",
            "most denied: [('sms:{user:42}:ip:203.0.113.7', 1, 0)]",
        ]
    );
}

/// The Python client on a cluster whose nodes lack the module: the first
/// call meets "unknown command", the client loads the FUNCTION library on
/// every primary, and CHECK, MCHECK, PEEK and UNDO answer through FCALL on
/// keys of every master, with the same decisions as the module's; the
/// asyncio client (AsyncLimiter over redis.asyncio's RedisCluster) too.
fn python_function_fallback(flavor: Flavor) {
    let cluster = Cluster::start_without_module(flavor);
    let masters = cluster.masters(cluster.base);
    // One key per master, found by its slot.
    let mut c = cluster.conn(cluster.base);
    let mut keys: Vec<String> = Vec::new();
    for (_, _, ranges) in &masters {
        let key = (0..10_000)
            .map(|i| format!("fb:{i}"))
            .find(|k| {
                let slot = keyslot(&mut c, k);
                ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .expect("a key on every master");
        keys.push(key);
    }
    let script = r#"
import sys
import redis.cluster
from slidewin import Limiter, Rule
port, keys = int(sys.argv[1]), sys.argv[2:]
rc = redis.cluster.RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
lim = Limiter(rc)
for key in keys:
    got = [lim.check(key, 2, 60000) for _ in range(3)]
    print(key, [d.allowed for d in got], sorted({d.source for d in got}), got[2].retry_after_ms > 0)
    print("peek", lim.peek(key, 2, 60000).remaining)
    undone = lim.undo(got[0])
    print("undo", undone, lim.peek(key, 2, 60000).remaining)
both = lim.check_all([Rule("{u:1}:ip", 1, 60000), Rule("{u:1}:phone", 1, 60000)])
again = lim.check_all([Rule("{u:1}:ip", 5, 60000), Rule("{u:1}:phone", 1, 60000)])
print("mcheck", both.allowed, again.allowed, both.source)

import asyncio
import redis.asyncio.cluster
from slidewin import AsyncLimiter

async def on_asyncio():
    arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    alim = AsyncLimiter(arc)
    got = [await alim.check("{u:2}:async", 1, 60000) for _ in range(2)]
    print("async", [d.allowed for d in got], got[0].source)
    await arc.aclose()

asyncio.run(on_asyncio())
"#;
    let out = stdout_of(
        Command::new(python())
            .arg("-c")
            .arg(script)
            .arg(cluster.base.to_string())
            .args(&keys),
        "run python3 with the slidewin client (make python-client)",
    );
    let mut expected: Vec<String> = Vec::new();
    for key in &keys {
        expected.push(format!("{key} [True, True, False] ['function'] True"));
        expected.push("peek 0".into());
        expected.push("undo 1 1".into());
    }
    expected.push("mcheck True False function".into());
    expected.push("async [True, False] function".into());
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{out}");
    // The library is on every primary and, replicated, on its replica; the
    // module is on none of them.
    for port in cluster.ports() {
        let mut n = cluster.conn(port);
        let libs: redis::Value = redis::cmd("FUNCTION").arg("LIST").query(&mut n).unwrap();
        assert!(
            format!("{libs:?}").contains("slidewin"),
            "node {port}: {libs:?}"
        );
        let modules: redis::Value = redis::cmd("MODULE").arg("LIST").query(&mut n).unwrap();
        assert!(
            !format!("{modules:?}").contains("slidewin"),
            "node {port}: {modules:?}"
        );
    }
    // Each key holds what the decisions say: one entry left after the undo.
    for key in &keys {
        let (port, _) = cluster.owner(keyslot(&mut c, key));
        let n: i64 = redis::cmd("ZCARD")
            .arg(key)
            .query(&mut cluster.conn(port))
            .unwrap();
        assert_eq!(n, 1, "{key}");
    }
}

/// The server's own answer to "do you have `CLUSTER MIGRATESLOTS`?"
/// (`COMMAND INFO` of the subcommand: nil where it does not exist).
fn has_migrateslots(c: &mut Connection) -> bool {
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("CLUSTER|MIGRATESLOTS")
        .query(c)
        .unwrap();
    !matches!(info.first(), None | Some(Value::Nil))
}

/// One call of the migration load as its client saw it.
struct AsmCall {
    /// Indices into the load's keys.
    keys: Vec<usize>,
    allowed: bool,
    members: Vec<Vec<u8>>,
    sent_ms: i64,
    received_ms: i64,
}

/// What one client of the migration load saw.
#[derive(Default)]
struct AsmClient {
    calls: Vec<AsmCall>,
    moved: usize,
    asked: usize,
    tryagain: usize,
}

/// Room for allowed calls long after the slot moved; a few hot keys take a
/// fifth of the calls, so denials start at once.
const ASM_KEYS: usize = 4096;
const ASM_HOT_KEYS: usize = 16;
const ASM_LIMIT: usize = 8;

/// Allowed and denied calls of the migration load so far, over its clients.
#[derive(Default)]
struct AsmProgress {
    allowed: std::sync::atomic::AtomicUsize,
    denied: std::sync::atomic::AtomicUsize,
    /// Set once the move starts: from then on each client waits
    /// `ASM_PACED` between calls. At full speed 16 clients used up the
    /// keys' whole capacity (4,096 keys x 8) while a slow move ran, and no
    /// call could be allowed after it (seen: 26,312 allowed, 3.7M denied);
    /// paced, the load goes on through the move and leaves room after it.
    paced: std::sync::atomic::AtomicBool,
}

/// The pause between a client's calls once the move started (16 clients:
/// at most 800 calls a second).
const ASM_PACED: Duration = Duration::from_millis(20);

impl AsmProgress {
    fn get(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.allowed.load(Relaxed), self.denied.load(Relaxed))
    }
}
const ASM_WINDOW_MS: i64 = 600_000;

fn asm_key(i: usize) -> String {
    load_key("asm", i)
}

/// Key `i` of a load whose keys share the hash tag `tag` (one slot).
fn load_key(tag: &str, i: usize) -> String {
    format!("{{{tag}}}load:{i}")
}

/// CHECKs and two-rule MCHECKs on `{asm}` keys until `stop`, sent to the
/// node the client believes owns the slot, following MOVED (and ASK, and
/// retrying TRYAGAIN) as a cluster client does; any other error fails.
fn asm_client(
    ports: Vec<u16>,
    mut owner: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    progress: std::sync::Arc<AsmProgress>,
    tag: String,
) -> std::thread::JoinHandle<AsmClient> {
    std::thread::spawn(move || {
        let connect = |port: u16| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            let c = client
                .get_connection_with_timeout(Duration::from_secs(5))
                .unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c
        };
        let mut conns: HashMap<u16, Connection> = ports.iter().map(|&p| (p, connect(p))).collect();
        let mut rng = rand::rng();
        let mut seen = AsmClient::default();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            let pick = |rng: &mut rand::rngs::ThreadRng| {
                if rng.random_bool(0.2) {
                    rng.random_range(0..ASM_HOT_KEYS)
                } else {
                    rng.random_range(0..ASM_KEYS)
                }
            };
            let keys: Vec<usize> = if rng.random_bool(0.3) {
                let a = pick(&mut rng);
                vec![a, (a + 1 + rng.random_range(0..ASM_KEYS - 1)) % ASM_KEYS]
            } else {
                vec![pick(&mut rng)]
            };
            let mut cmd = if keys.len() == 1 {
                let mut cmd = redis::cmd("SLIDEWIN.CHECK");
                cmd.arg(load_key(&tag, keys[0]))
                    .arg(ASM_LIMIT)
                    .arg(ASM_WINDOW_MS);
                cmd
            } else {
                let mut cmd = redis::cmd("SLIDEWIN.MCHECK");
                cmd.arg(2);
                for &k in &keys {
                    cmd.arg(load_key(&tag, k)).arg(ASM_LIMIT).arg(ASM_WINDOW_MS);
                }
                cmd
            };
            cmd.arg("WITHMEMBERS");
            if progress.paced.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(ASM_PACED);
            }
            let mut asking = false;
            // MOVED and ASK are bounded by count (more means a loop);
            // TRYAGAIN by time: it lasts while the slot's keys move, which
            // under load can take seconds (seen: 200 tries 5 ms apart).
            let mut redirects = 0;
            let tryagain_until = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                assert!(redirects < 200, "a call was redirected 200 times");
                assert!(
                    std::time::Instant::now() < tryagain_until,
                    "a call got TRYAGAIN for 30 s"
                );
                let c = conns.get_mut(&owner).expect("a node of the cluster");
                let sent_ms = wall_ms();
                let reply = if asking {
                    redis::pipe()
                        .cmd("ASKING")
                        .ignore()
                        .add_command(cmd.clone())
                        .query::<(Value,)>(c)
                        .map(|(v,)| v)
                } else {
                    cmd.query::<Value>(c)
                };
                let received_ms = wall_ms();
                match reply {
                    Ok(Value::Array(items)) => {
                        let allowed = items.first() == Some(&Value::Int(1));
                        let counter = if allowed {
                            &progress.allowed
                        } else {
                            &progress.denied
                        };
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // The stored member of each token `<id>@<ms>`.
                        let members: Vec<Vec<u8>> = redis::from_redis_value_ref::<Vec<Vec<u8>>>(
                            items.last().expect("members"),
                        )
                        .expect("members")
                        .iter()
                        .map(|t| token_member(t))
                        .collect();
                        seen.calls.push(AsmCall {
                            keys: keys.clone(),
                            allowed,
                            members,
                            sent_ms,
                            received_ms,
                        });
                        break;
                    }
                    Ok(other) => panic!("not a WITHMEMBERS reply: {other:?}"),
                    Err(e) => {
                        let text = error_text(&e);
                        let port = |t: &str| -> u16 {
                            t.rsplit(':')
                                .next()
                                .and_then(|p| p.parse().ok())
                                .unwrap_or_else(|| panic!("a redirection: {t}"))
                        };
                        if text.starts_with("MOVED ") {
                            redirects += 1;
                            seen.moved += 1;
                            owner = port(&text);
                            asking = false;
                        } else if text.starts_with("ASK ") {
                            redirects += 1;
                            seen.asked += 1;
                            owner = port(&text);
                            asking = true;
                        } else if text.starts_with("TRYAGAIN") {
                            seen.tryagain += 1;
                            std::thread::sleep(Duration::from_millis(5));
                        } else {
                            panic!("a client got an error it cannot follow: {text}");
                        }
                    }
                }
            }
        }
        seen
    })
}

/// The slot's migration as the source reports it (`CLUSTER
/// GETSLOTMIGRATIONS`): the state of the newest job.
/// `CLUSTER MIGRATESLOTS SLOTSRANGE slot slot NODE id` from the owner `c`,
/// waited for until its job reports success.
fn migrate_slot(c: &mut Connection, slot: u16, id: &str) {
    let ok: String = redis::cmd("CLUSTER")
        .arg("MIGRATESLOTS")
        .arg("SLOTSRANGE")
        .arg(slot)
        .arg(slot)
        .arg("NODE")
        .arg(id)
        .query(c)
        .unwrap_or_else(|e| panic!("MIGRATESLOTS refused: {e}"));
    assert_eq!(ok, "OK");
    let done = wait_until(Duration::from_secs(60), || {
        migration_state(c).as_deref() == Some("success")
    });
    assert!(
        done,
        "the migration did not succeed: {:?}",
        migration_state(c)
    );
}

fn migration_state(c: &mut Connection) -> Option<String> {
    let jobs: Vec<Value> = redis::cmd("CLUSTER")
        .arg("GETSLOTMIGRATIONS")
        .query(c)
        .ok()?;
    let fields: Vec<String> = jobs
        .last()
        .map(|job| redis::from_redis_value_ref::<Vec<Value>>(job).unwrap_or_default())?
        .iter()
        .map(|v| redis::from_redis_value_ref::<String>(v).unwrap_or_default())
        .collect();
    let at = fields.iter().position(|f| f == "state")?;
    fields.get(at + 1).cloned()
}

/// A log's entries (member, score) and expiry, sorted set or compact log
/// (support's `entries` reads a compact log from its DUMP payload).
fn entries_and_expiry(c: &mut Connection, key: &str) -> (Vec<(String, i64)>, i64) {
    let entries: Vec<(String, i64)> = entries(c, key.as_bytes())
        .into_iter()
        .map(|(m, s)| (String::from_utf8_lossy(&m).into_owned(), s as i64))
        .collect();
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    (entries, at)
}

/// Whether every master has CLUSTER MIGRATESLOTS, checked against what
/// the module declared on each (INFO slidewin) and the server's own view of
/// the module's options (INFO modules).
fn migrateslots_declared(cluster: &Cluster) -> bool {
    let masters = cluster.masters(cluster.base);
    let mut any = cluster.conn(cluster.base);
    let supported = has_migrateslots(&mut any);
    for (port, _, _) in &masters {
        let mut c = cluster.conn(*port);
        let declared = info_field(&mut c, "slidewin", "slidewin_atomic_slot_migration");
        assert_eq!(
            declared.as_deref(),
            Some(if supported { "1" } else { "0" }),
            "node {port}: the server {} CLUSTER MIGRATESLOTS",
            if supported { "has" } else { "lacks" }
        );
        let modules: String = redis::cmd("INFO").arg("modules").query(&mut c).unwrap();
        let ours = modules
            .lines()
            .find(|l| l.contains("name=slidewin"))
            .expect("slidewin in INFO modules")
            .to_string();
        assert_eq!(
            ours.contains("handle-atomic-slot-migration"),
            supported,
            "{ours}"
        );
    }
    supported
}

/// Valkey's atomic slot migration (`CLUSTER MIGRATESLOTS`) of a slot holding
/// limiter keys while 8 clients keep calling CHECK and MCHECK on it with
/// tight limits. On a server without it, the module must not declare it.
fn atomic_slot_migration(flavor: Flavor) {
    // What the server says, tied to what the module declared, asked of the
    // shared cluster: a server without MIGRATESLOTS needs no cluster of
    // its own.
    if !migrateslots_declared(&shared_cluster(flavor)) {
        eprintln!("atomic slot migration ({flavor:?}): the server has no CLUSTER MIGRATESLOTS; not declared");
        return;
    }
    let cluster = Cluster::start(flavor, 5000);
    assert!(
        migrateslots_declared(&cluster),
        "declared on a fresh cluster too"
    );
    let masters = cluster.masters(cluster.base);
    let mut any = cluster.conn(cluster.base);
    let slot = keyslot(&mut any, &asm_key(0));
    let (source, _) = cluster.owner(slot);
    let (target, target_id, _) = masters
        .iter()
        .find(|(p, _, _)| *p != source)
        .cloned()
        .expect("a target");
    let mut src = cluster.conn(source);
    // Keys the load never touches, with entries and expiries to carry over.
    let still: Vec<String> = (0..10).map(|i| format!("{{asm}}still:{i}")).collect();
    for (i, key) in still.iter().enumerate() {
        let _: Value = redis::cmd("SLIDEWIN.CHECK")
            .arg(key)
            .arg(10)
            .arg(60_000 + i as i64)
            .arg("COST")
            .arg(1 + i % 3)
            .query(&mut src)
            .unwrap();
    }
    let before: Vec<_> = still
        .iter()
        .map(|k| entries_and_expiry(&mut src, k))
        .collect();

    let (seen, migrate_ms, migrated_ms) =
        drive_load(&cluster, source, "asm", 8, "migration", || {
            migrate_slot(&mut src, slot, &target_id)
        });

    assert_eq!(cluster.owner(slot).0, target, "the target owns the slot");
    let mut tgt = cluster.conn(target);
    assert!(
        wait_until(Duration::from_secs(10), || {
            redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(slot)
                .query::<i64>(&mut src)
                .is_ok_and(|n| n == 0)
        }),
        "the source still holds keys of the slot"
    );
    // Keys the load never touched: the same entries and expiry.
    for (key, was) in still.iter().zip(&before) {
        assert_eq!(
            &entries_and_expiry(&mut tgt, key),
            was,
            "{key} on the target"
        );
    }

    // The load: every member an allowed call got is on the target at a
    // score within the call's time; nothing else is; no key holds more
    // than its limit; each expiry is the newest entry plus the window.
    let calls: Vec<&AsmCall> = seen.iter().flat_map(|s| &s.calls).collect();
    let moved: usize = seen.iter().map(|s| s.moved).sum();
    let tryagain: usize = seen.iter().map(|s| s.tryagain).sum();
    let allowed = calls.iter().filter(|c| c.allowed).count();
    let denied = calls.len() - allowed;
    assert!(
        allowed > 0 && denied > 0,
        "{allowed} allowed, {denied} denied"
    );
    for (i, s) in seen.iter().enumerate() {
        assert!(s.moved >= 1, "client {i} was never redirected");
    }
    // Writes on both sides of the move: before it on the source, after it
    // on the target.
    let allowed_before = calls
        .iter()
        .filter(|c| c.allowed && c.received_ms < migrate_ms)
        .count();
    let allowed_after = calls
        .iter()
        .filter(|c| c.allowed && c.sent_ms > migrated_ms)
        .count();
    assert!(
        allowed_before > 0 && allowed_after > 0,
        "allowed calls before the migration {allowed_before}, after it {allowed_after}"
    );
    let (given, entries_total) = assert_load_on(&mut tgt, &calls, "asm", 0);
    // Checks keep working on the new owner: a full key refuses, publishes
    // slidewin.denied and is listed by TOP there.
    let full = (0..ASM_KEYS)
        .find(|&k| given[k].len() == ASM_LIMIT)
        .map(asm_key)
        .expect("a key filled to its limit");
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Ed"])
        .query(&mut tgt)
        .unwrap();
    let mut sub = cluster.conn(target);
    sub.send_packed_command(
        &redis::cmd("SUBSCRIBE")
            .arg("__keyevent@0__:slidewin.denied")
            .get_packed_command(),
    )
    .unwrap();
    let _confirmed = sub.recv_response().expect("SUBSCRIBE confirmed");
    let _: () = redis::cmd("SLIDEWIN.TOP")
        .arg("RESET")
        .query::<Value>(&mut tgt)
        .map(|_| ())
        .unwrap();
    let refused: i64 = redis::cmd("SLIDEWIN.CHECK")
        .arg(&full)
        .arg(ASM_LIMIT)
        .arg(ASM_WINDOW_MS)
        .query(&mut tgt)
        .unwrap();
    assert_eq!(refused, 0, "{full} is full on the target");
    let event = sub.recv_response().expect("a slidewin.denied event");
    assert_eq!(
        event,
        Value::Array(vec![
            Value::BulkString(b"message".to_vec()),
            Value::BulkString(b"__keyevent@0__:slidewin.denied".to_vec()),
            Value::BulkString(full.clone().into_bytes()),
        ])
    );
    let top: Vec<(String, i64, i64)> = redis::cmd("SLIDEWIN.TOP")
        .arg("DENIED")
        .query(&mut tgt)
        .unwrap();
    assert_eq!(top, [(full.clone(), 1, 0)], "TOP on the new owner");
    eprintln!(
        "atomic slot migration ({flavor:?}): slot {slot} {source} -> {target} under load: \
         {} calls ({allowed} allowed, {denied} denied; {allowed_before} allowed before, {} during and \
         {allowed_after} after the {} ms migration), {moved} MOVED and {tryagain} TRYAGAIN followed, \
         {entries_total} entries on the target, each checked against its call, \
         {} untouched keys identical",
        calls.len(),
        allowed - allowed_before - allowed_after,
        migrated_ms - migrate_ms,
        still.len()
    );
}

/// What a compact log is, as the node holding it sees it: its digest, its
/// expiry and what a PEEK says (but the reset time, which runs with the
/// clock).
fn compact_state(c: &mut Connection, key: &str) -> (String, i64, [i64; 4]) {
    let t: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    assert_eq!(t, "slidewlog", "{key}");
    let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    let d = detail(c, "SLIDEWIN.PEEK", &[key, "5", "600000"]);
    (digest_value(c, key), expiry, [d[0], d[1], d[2], d[3]])
}

/// The same logs on the new owner (`a`) as on the old (`b`): equal digests
/// and PEEKs; each expiry the same or up to `late_ms` later, never earlier
/// (MIGRATE and slot migration carry a relative TTL, taken on the source
/// and added to the target's clock when it loads the key: later by the time
/// the move took; for sorted sets too).
fn assert_same_logs(
    a: &[(String, i64, [i64; 4])],
    b: &[(String, i64, [i64; 4])],
    how: &str,
    late_ms: i64,
) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!((&x.0, x.2), (&y.0, y.2), "{how}");
        assert!(
            (0..=late_ms).contains(&(x.1 - y.1)),
            "{how}: expiry {} vs {} (up to {late_ms} ms later allowed)",
            x.1,
            y.1
        );
    }
}

/// Compact logs in a slot moved by `MIGRATE` (SETSLOT IMPORTING/MIGRATING,
/// the keys, SETSLOT NODE) and back by `CLUSTER MIGRATESLOTS` where the
/// server has it: the same digest, expiry and decisions on the new owner.
fn compact_migration(flavor: Flavor) {
    let cluster = Cluster::start_compact(flavor);
    let keys: Vec<String> = (0..8).map(|i| format!("{{cm}}k:{i}")).collect();
    let mut any = cluster.conn(cluster.base);
    let slot = keyslot(&mut any, &keys[0]);
    let (source, source_id) = cluster.owner(slot);
    let (target, target_id, _) = cluster
        .masters(cluster.base)
        .into_iter()
        .find(|(p, _, _)| *p != source)
        .expect("target");
    let mut src = cluster.conn(source);
    let mut tgt = cluster.conn(target);
    for (i, k) in keys.iter().enumerate() {
        for _ in 0..=(i % 4) {
            let _: i64 = redis::cmd("SLIDEWIN.CHECK")
                .arg(k)
                .arg(5)
                .arg(600_000)
                .arg("COST")
                .arg(1 + i % 2)
                .query(&mut src)
                .unwrap();
        }
    }
    let before: Vec<_> = keys.iter().map(|k| compact_state(&mut src, k)).collect();
    let setslot = |c: &mut Connection, how: &str, id: &str| set_slot(c, slot, how, id);
    setslot(&mut tgt, "IMPORTING", &source_id);
    setslot(&mut src, "MIGRATING", &target_id);
    let mut migrate = redis::cmd("MIGRATE");
    migrate
        .arg("127.0.0.1")
        .arg(target)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS");
    for k in &keys {
        migrate.arg(k);
    }
    let started = std::time::Instant::now();
    let ok: String = migrate.query(&mut src).unwrap();
    let took_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    assert_eq!(ok, "OK");
    setslot(&mut tgt, "NODE", &target_id);
    setslot(&mut src, "NODE", &target_id);
    let after: Vec<_> = keys.iter().map(|k| compact_state(&mut tgt, k)).collect();
    assert_same_logs(&after, &before, "MIGRATE carried every log", took_ms + 1);
    // The logs go on deciding on their new owner.
    assert_eq!(check_on(&mut tgt, &keys[0]).unwrap(), 1);
    assert_eq!(
        detail(&mut tgt, "SLIDEWIN.PEEK", &[&keys[0], "5", "600000"])[2],
        before[0].2[2] - 1
    );
    if !has_migrateslots(&mut tgt) {
        eprintln!(
            "compact logs ({flavor:?}): no CLUSTER MIGRATESLOTS on this server; MIGRATE only"
        );
        return;
    }
    let moved_once: Vec<_> = keys.iter().map(|k| compact_state(&mut tgt, k)).collect();
    let started = std::time::Instant::now();
    migrate_slot(&mut tgt, slot, &source_id);
    let took_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    assert!(
        wait_until(Duration::from_secs(10), || cluster.owner(slot).0 == source),
        "the slot is back on its first owner"
    );
    let back: Vec<_> = keys.iter().map(|k| compact_state(&mut src, k)).collect();
    assert_same_logs(
        &back,
        &moved_once,
        "MIGRATESLOTS carried every log",
        took_ms + 1,
    );
}

/// The slot of `key` (CRC16-XMODEM of the hash tag, or of the whole key),
/// as the cluster computes it.
fn slot_of(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match key.find('{') {
        Some(open) => match key[open + 1..].find('}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    let mut crc: u16 = 0;
    for &b in hashed {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

fn reshard(flavor: Flavor) {
    reshard_with(Cluster::start(flavor, 5000), "sorted sets");
}

fn reshard_compact(flavor: Flavor) {
    reshard_with(Cluster::start_compact(flavor), "compact logs");
}

/// `redis-cli --cluster reshard` (MIGRATE in batches, ASK and TRYAGAIN on
/// the way) of a slot holding limiter keys while 16 clients keep calling
/// CHECK and two-rule MCHECK on it with tight limits, following every
/// redirection as a cluster client does. Afterwards the new owner holds
/// exactly the entries the allowed calls were given, each scored within
/// its call, no key over its limit, each expiry the newest entry plus the
/// window: nothing lost, nothing admitted twice.
fn reshard_with(cluster: Cluster, what: &str) {
    let flavor = cluster.flavor;
    let masters = cluster.masters(cluster.base);
    // redis-cli moves the lowest slots of the source first: the load's
    // tag is one whose slot is its owner's lowest.
    let (source, source_id, ranges) = masters
        .iter()
        .min_by_key(|(_, _, r)| r.iter().map(|(a, _)| *a).min().unwrap_or(u16::MAX))
        .cloned()
        .expect("a master");
    let slot = ranges.iter().map(|(a, _)| *a).min().expect("a slot");
    let tag = (0..1_000_000)
        .map(|i| format!("rs{i}"))
        .find(|t| slot_of(&format!("{{{t}}}")) == slot)
        .expect("a tag for the slot");
    let mut any = cluster.conn(cluster.base);
    assert_eq!(
        keyslot(&mut any, &load_key(&tag, 0)),
        slot,
        "CRC16 as the server's"
    );
    let (target, target_id, _) = masters
        .iter()
        .find(|(p, _, _)| *p != source)
        .cloned()
        .expect("a target");
    let mut reshard = None;
    let (seen, started_ms, done_ms) = drive_load(&cluster, source, &tag, 16, "reshard", || {
        reshard = Some(
            Command::new(cli())
                .args(["--cluster", "reshard", &format!("127.0.0.1:{source}")])
                .args(["--cluster-from", &source_id, "--cluster-to", &target_id])
                .args(["--cluster-slots", "1", "--cluster-yes"])
                .output()
                .expect("run redis-cli --cluster reshard"),
        )
    });
    let out = reshard.expect("the reshard ran");
    assert!(
        out.status.success(),
        "reshard failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(cluster.owner(slot).0, target, "the target owns the slot");
    let mut src = cluster.conn(source);
    let left: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut src)
        .unwrap();
    assert_eq!(left, 0, "the source still holds keys of the slot");

    let calls: Vec<&AsmCall> = seen.iter().flat_map(|s| &s.calls).collect();
    let moved: usize = seen.iter().map(|s| s.moved).sum();
    let asked: usize = seen.iter().map(|s| s.asked).sum();
    let tryagain: usize = seen.iter().map(|s| s.tryagain).sum();
    let allowed = calls.iter().filter(|c| c.allowed).count();
    let denied = calls.len() - allowed;
    let allowed_before = calls
        .iter()
        .filter(|c| c.allowed && c.received_ms < started_ms)
        .count();
    let allowed_after = calls
        .iter()
        .filter(|c| c.allowed && c.sent_ms > done_ms)
        .count();
    assert!(
        allowed_before > 0 && allowed_after > 0 && denied > 0,
        "allowed before {allowed_before}, after {allowed_after}; {denied} denied"
    );
    for (i, s) in seen.iter().enumerate() {
        assert!(
            s.moved + s.asked >= 1,
            "client {i} was never redirected to the new owner"
        );
    }
    let mut tgt = cluster.conn(target);
    // MIGRATE carries a relative TTL (taken on the source, added to the
    // target's clock when it restores): a moved key may expire later than
    // its newest entry plus the window by the time the move took, never
    // earlier (that would drop entries that count).
    let (_, entries_total) = assert_load_on(&mut tgt, &calls, &tag, done_ms - started_ms + 5);
    eprintln!(
        "redis-cli reshard ({flavor:?}, {what}): slot {slot} {source} -> {target} under 16 clients: \
         {} calls ({allowed} allowed, {denied} denied; {allowed_before} allowed before, {allowed_after} \
         after the {} ms reshard), {moved} MOVED, {asked} ASK and {tryagain} TRYAGAIN followed, \
         {entries_total} entries on the target, each checked against its call",
        calls.len(),
        done_ms - started_ms,
    );
}

/// The members allowed calls were given in one key, each with its call's
/// send and receive times (ms).
type GivenMembers = HashMap<Vec<u8>, (i64, i64)>;

/// What a load left on the node `tgt` that now owns its slot, checked
/// against what its clients were told: every member an allowed call got is
/// there, at a score within the call's time, and nothing else; no key holds
/// more than its limit; each expiry is the newest entry plus the window, or
/// up to `late_ms` later (never earlier). Returns the members given per key
/// and the entries checked.
fn assert_load_on(
    tgt: &mut Connection,
    calls: &[&AsmCall],
    tag: &str,
    late_ms: i64,
) -> (Vec<GivenMembers>, usize) {
    let mut given: Vec<GivenMembers> = vec![HashMap::new(); ASM_KEYS];
    for c in calls.iter().filter(|c| c.allowed) {
        assert_eq!(c.members.len(), 1, "cost 1");
        for &k in &c.keys {
            let earlier = given[k].insert(c.members[0].clone(), (c.sent_ms, c.received_ms));
            assert!(
                earlier.is_none(),
                "{}: a member given twice",
                load_key(tag, k)
            );
        }
    }
    let mut entries_total = 0;
    for (k, members) in given.iter().enumerate() {
        let key = load_key(tag, k);
        let (entries, expiry) = entries_and_expiry(tgt, &key);
        assert!(
            entries.len() <= ASM_LIMIT,
            "{key}: {} entries",
            entries.len()
        );
        assert_eq!(
            entries.len(),
            members.len(),
            "{key}: entries vs allowed calls"
        );
        for (member, score) in &entries {
            let (sent, received) = members
                .get(member.as_bytes())
                .unwrap_or_else(|| panic!("{key}: {member} was never given"));
            assert!(
                (sent - 1..=received + 1).contains(score),
                "{key}: {member} scored {score}, the call ran {sent}..{received}"
            );
        }
        if let Some(newest) = entries.iter().map(|e| e.1).max() {
            let late = expiry - (newest + ASM_WINDOW_MS);
            assert!(
                (0..=late_ms).contains(&late),
                "{key}: expiry {expiry}, newest {newest}: {late} ms late"
            );
        }
        entries_total += entries.len();
    }
    (given, entries_total)
}

/// Runs `clients` load clients on the keys tagged `tag` (first sent to
/// `source`) and `move_slot` in the middle of their load, driven by counts,
/// not by time: the move starts once 1,000 calls were allowed and 200
/// denied, the load ends once 500 more were allowed after it, however fast
/// the machine is. Returns what each client saw and the wall-clock ms just
/// before and after the move.
fn drive_load(
    cluster: &Cluster,
    source: u16,
    tag: &str,
    clients: usize,
    what: &str,
    move_slot: impl FnOnce(),
) -> (Vec<AsmClient>, i64, i64) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = std::sync::Arc::new(AsmProgress::default());
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            asm_client(
                cluster.ports(),
                source,
                stop.clone(),
                progress.clone(),
                tag.to_string(),
            )
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(60), || {
            let (allowed, denied) = progress.get();
            allowed >= 1000 && denied >= 200
        }),
        "the load before the {what}: {:?}",
        progress.get()
    );
    progress
        .paced
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let started_ms = wall_ms();
    move_slot();
    let done_ms = wall_ms();
    let allowed_at_move = progress.get().0;
    assert!(
        wait_until(Duration::from_secs(60), || progress.get().0
            >= allowed_at_move + 500),
        "the load after the {what}: {:?}",
        progress.get()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = handles
        .into_iter()
        .map(|c| c.join().expect("a load client"))
        .collect();
    (seen, started_ms, done_ms)
}
