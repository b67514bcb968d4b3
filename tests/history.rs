//! A history checker: many concurrent clients hammer a few keys; the effects
//! are captured from the replication stream (a replica without the module,
//! writing every replicated command to its AOF) and checked offline. One run
//! uses CHECK with cost 1; another mixes MCHECK (two rules, all or nothing)
//! and CHECK, both with COST 1 to 3 and WITHMEMBERS.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::Rng;
use support::*;

on_every_server! {
    concurrent_clients_never_over_admit => history;
    concurrent_mcheck_and_cost_never_over_admit => history_mcheck_cost;
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
    /// The member WITHMEMBERS reported added (allowed calls only).
    member: Option<Vec<u8>>,
}

/// A master with the module and a replica without it that writes every
/// replicated command to its AOF (no rewrites), once the link is up.
fn master_and_recording_replica(flavor: Flavor) -> (Server, Server) {
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
    (master, replica)
}

/// The ZADDs the replica recorded in its AOF; no SLIDEWIN command may be
/// among what it received.
fn replicated_zadds(replica: &Server) -> Vec<Vec<Vec<u8>>> {
    aof_commands(&replica.dir)
        .into_iter()
        .filter(|cmd| {
            let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
            assert!(
                !name.contains("SLIDEWIN"),
                "the command itself was replicated"
            );
            name == "ZADD"
        })
        .collect()
}

/// Entries in `(now - window, now]` of sorted scores.
fn in_window(s: &[i64], now: i64, window: i64) -> usize {
    let lo = s.partition_point(|&x| x <= now - window);
    let hi = s.partition_point(|&x| x <= now);
    hi.saturating_sub(lo)
}

/// Runs `call` from THREADS clients of `master` until RUN_FOR has passed
/// (or MAX_CALLS_PER_THREAD calls each), then waits until `replica` has every
/// effect; returns every client's calls.
fn hammer<T: Send + 'static>(
    master: &Server,
    replica: &Server,
    call: fn(&mut Connection, &mut rand::rngs::ThreadRng) -> T,
) -> Vec<T> {
    let deadline = Instant::now() + RUN_FOR;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let mut c = master.conn();
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut calls = Vec::new();
                while Instant::now() < deadline && calls.len() < MAX_CALLS_PER_THREAD {
                    calls.push(call(&mut c, &mut rng));
                }
                calls
            })
        })
        .collect();
    let calls = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    wait_caught_up(master, replica);
    calls
}

fn key_name(i: usize) -> String {
    format!("hist:{i}")
}

/// A CHECK with cost 1 on one of the KEYS keys, asking for its member.
fn plain_call(c: &mut Connection, rng: &mut rand::rngs::ThreadRng) -> Call {
    let key = rng.random_range(0..KEYS);
    let sent_ms = wall_ms();
    let reply: Vec<redis::Value> = redis::cmd("SLIDEWIN.CHECK")
        .arg(key_name(key))
        .arg(LIMIT)
        .arg(WINDOW_MS)
        .arg("WITHMEMBERS")
        .query(c)
        .expect("CHECK");
    let received_ms = wall_ms();
    let allowed = reply.first() == Some(&redis::Value::Int(1));
    // The stored member of each token `<id>@<ms>`.
    let members: Vec<Vec<u8>> =
        redis::from_redis_value_ref::<Vec<Vec<u8>>>(reply.last().expect("members"))
            .expect("members")
            .iter()
            .map(|t| support::token_member(t))
            .collect();
    assert_eq!(
        members.len(),
        usize::from(allowed),
        "one member per entry added"
    );
    Call {
        key,
        sent_ms,
        received_ms,
        allowed,
        member: members.into_iter().next(),
    }
}

fn history(flavor: Flavor) {
    let (master, replica) = master_and_recording_replica(flavor);

    let keys: Vec<String> = (0..KEYS).map(key_name).collect();
    let calls = hammer(&master, &replica, plain_call);

    // The effects, read back from the replica's AOF: every score, and the
    // scores each member was added at.
    let mut scores: Vec<Vec<i64>> = vec![Vec::new(); KEYS];
    let mut at: Vec<HashMap<Vec<u8>, Vec<i64>>> = vec![HashMap::new(); KEYS];
    for cmd in replicated_zadds(&replica) {
        let key = keys
            .iter()
            .position(|k| k.as_bytes() == cmd[1].as_slice())
            .expect("a known key");
        for pair in cmd[2..].chunks(2) {
            let score: i64 = std::str::from_utf8(&pair[0]).unwrap().parse().unwrap();
            scores[key].push(score);
            at[key].entry(pair[1].clone()).or_default().push(score);
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
    let in_window = |s: &[i64], now: i64| in_window(s, now, WINDOW_MS);
    for (k, s) in scores.iter().enumerate() {
        for &end in s {
            let n = in_window(s, end);
            assert!(
                n <= LIMIT,
                "key {k}: {n} entries in the window ending at {end}"
            );
        }
    }

    // (b') Every 1 was recorded at the server's time of the call: its
    // member was added at a score between the client's send and receive
    // times (1 ms of rounding slack), so a lagging or leaping clock that
    // admits by the wrong time fails here even if (b) holds.
    let mut untimely = Vec::new();
    for c in calls.iter().filter(|c| c.allowed) {
        let member = c.member.as_ref().expect("an allowed call's member");
        let scores = at[c.key].get(member).map_or(&[][..], Vec::as_slice);
        if !scores
            .iter()
            .any(|s| (c.sent_ms - 1..=c.received_ms + 1).contains(s))
        {
            untimely.push((c.key, c.sent_ms, c.received_ms, scores.to_vec()));
        }
    }
    assert!(
        untimely.is_empty(),
        "{} allowed calls were not recorded at their own time, e.g. {:?}",
        untimely.len(),
        &untimely[..untimely.len().min(5)]
    );

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

/// The keys of the mixed run and the one rule each is always judged by:
/// (key, limit, window_ms). MCHECK pairs an `ip` key with a `user` key;
/// CHECK uses `solo`.
const RULES: &[(&str, usize, i64)] = &[
    ("{h}ip:0", 6, 100),
    ("{h}ip:1", 6, 100),
    ("{h}user:0", 3, 60),
    ("{h}user:1", 3, 60),
    ("{h}solo", 4, 80),
];

/// One call of the mixed run: the rules it named (indices into RULES), its
/// cost, and the members WITHMEMBERS reported.
struct MixedCall {
    rules: Vec<usize>,
    cost: usize,
    sent_ms: i64,
    received_ms: i64,
    allowed: bool,
    members: Vec<Vec<u8>>,
}

fn mixed_call(c: &mut Connection, rng: &mut rand::rngs::ThreadRng) -> MixedCall {
    let (rules, cost) = if rng.random_bool(0.6) {
        (
            vec![rng.random_range(0..2), 2 + rng.random_range(0..2)],
            rng.random_range(1..=2),
        )
    } else {
        (vec![4], rng.random_range(1..=3))
    };
    let mut cmd = if rules.len() > 1 {
        let mut cmd = redis::cmd("SLIDEWIN.MCHECK");
        cmd.arg(rules.len());
        cmd
    } else {
        redis::cmd("SLIDEWIN.CHECK")
    };
    for &r in &rules {
        let (key, limit, window) = RULES[r];
        cmd.arg(key).arg(limit).arg(window);
    }
    cmd.arg("COST").arg(cost).arg("WITHMEMBERS");
    let sent_ms = wall_ms();
    let reply: Vec<redis::Value> = cmd.query(c).expect("call");
    let received_ms = wall_ms();
    let allowed = reply.first() == Some(&redis::Value::Int(1));
    // The stored member of each token `<id>@<ms>`.
    let members: Vec<Vec<u8>> =
        redis::from_redis_value_ref::<Vec<Vec<u8>>>(reply.last().expect("members"))
            .expect("members")
            .iter()
            .map(|t| support::token_member(t))
            .collect();
    MixedCall {
        rules,
        cost,
        sent_ms,
        received_ms,
        allowed,
        members,
    }
}

fn history_mcheck_cost(flavor: Flavor) {
    let (master, replica) = master_and_recording_replica(flavor);
    let calls = hammer(&master, &replica, mixed_call);

    // The effects: the scores each member was added at, per key, from the
    // replica's AOF. Members are short ids unique among a key's live
    // entries: one is given again only once its entry has left the window
    // (this run never UNDOes), never while it still counts.
    let mut entries: Vec<HashMap<Vec<u8>, Vec<i64>>> = vec![HashMap::new(); RULES.len()];
    let mut zadds = 0;
    let mut reused = 0;
    for cmd in replicated_zadds(&replica) {
        zadds += 1;
        let key = RULES
            .iter()
            .position(|(k, _, _)| k.as_bytes() == cmd[1].as_slice())
            .expect("a known key");
        let window = RULES[key].2;
        for pair in cmd[2..].chunks(2) {
            let score: i64 = std::str::from_utf8(&pair[0]).unwrap().parse().unwrap();
            let given = entries[key].entry(pair[1].clone()).or_default();
            if let Some(&last) = given.last() {
                assert!(
                    last <= score - window,
                    "{}: member {:?} given at {score} while its entry of {last} still counts",
                    RULES[key].0,
                    String::from_utf8_lossy(&pair[1])
                );
                reused += 1;
            }
            given.push(score);
        }
    }
    let scores: Vec<Vec<i64>> = entries
        .iter()
        .map(|e| {
            let mut s: Vec<i64> = e.values().flatten().copied().collect();
            s.sort_unstable();
            s
        })
        .collect();

    let allowed: Vec<&MixedCall> = calls.iter().filter(|c| c.allowed).collect();
    let denied: Vec<&MixedCall> = calls.iter().filter(|c| !c.allowed).collect();
    let mchecks = calls.iter().filter(|c| c.rules.len() > 1).count();
    assert!(
        !allowed.is_empty() && !denied.is_empty() && mchecks > 0 && mchecks < calls.len(),
        "both outcomes and both commands seen"
    );
    assert!(allowed.iter().any(|c| c.cost > 1), "some COST > 1 allowed");

    // (a) Each allowed call added exactly `cost` members to every key it
    // named, the same members with the same score everywhere; a denied call
    // reported none. Nothing else was added.
    let mut expected = vec![0usize; RULES.len()];
    for c in &calls {
        if !c.allowed {
            assert!(c.members.is_empty(), "a denial reported members");
            continue;
        }
        assert_eq!(c.members.len(), c.cost, "members of an allowed call");
        for m in &c.members {
            // Some score, within the call's time, at which m was added to
            // every key the call named.
            let at: Vec<&[i64]> = c
                .rules
                .iter()
                .map(|&r| entries[r].get(m).map_or(&[][..], Vec::as_slice))
                .collect();
            let shared = at[0].iter().any(|s| {
                (c.sent_ms - 1..=c.received_ms + 1).contains(s)
                    && at.iter().all(|scores| scores.contains(s))
            });
            assert!(shared, "{m:?} in every key at one score: {at:?}");
        }
        for &r in &c.rules {
            expected[r] += c.cost;
        }
    }
    let replicated: Vec<usize> = scores.iter().map(Vec::len).collect();
    assert_eq!(
        replicated, expected,
        "entries replicated vs the cost of the allowed calls"
    );

    // (b) No key ever holds more than its limit within its window.
    for (r, s) in scores.iter().enumerate() {
        let (key, limit, window) = RULES[r];
        for &end in s {
            let n = in_window(s, end, window);
            assert!(
                n <= limit,
                "{key}: {n} entries in the window ending at {end}"
            );
        }
    }

    // (c) Every denial had a rule without room for its cost, for some `now`
    // between the client's send and receive times (1 ms of rounding slack).
    let unexplained: Vec<(Vec<usize>, usize, i64)> = denied
        .iter()
        .filter(|c| {
            !(c.sent_ms - 1..=c.received_ms + 1).any(|now| {
                c.rules.iter().any(|&r| {
                    let (_, limit, window) = RULES[r];
                    in_window(&scores[r], now, window) + c.cost > limit
                })
            })
        })
        .map(|c| (c.rules.clone(), c.cost, c.sent_ms))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{} of {} denials were given while every rule had room, e.g. {:?}",
        unexplained.len(),
        denied.len(),
        &unexplained[..unexplained.len().min(5)]
    );
    eprintln!(
        "history mixed ({flavor:?}): {} calls ({mchecks} MCHECK) from {THREADS} clients, {} allowed, \
         {} denied, {zadds} ZADDs, entries per key {replicated:?}, {reused} members given again after expiry",
        calls.len(),
        allowed.len(),
        denied.len()
    );
}
