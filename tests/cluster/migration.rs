//! Slots moving under load: Valkey's atomic slot migration, compact logs
//! moved by MIGRATE and MIGRATESLOTS, `redis-cli --cluster reshard`.

use std::process::Command;
use std::time::Duration;

use redis::Value;

use crate::check_on;
use crate::load::{
    asm_key, assert_load_on, drive_load, entries_and_expiry, load_key, AsmCall, ASM_KEYS,
    ASM_LIMIT, ASM_WINDOW_MS,
};
use crate::support::*;

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
pub(crate) fn atomic_slot_migration(flavor: Flavor) {
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
pub(crate) fn compact_migration(flavor: Flavor) {
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

pub(crate) fn reshard(flavor: Flavor) {
    reshard_with(Cluster::start(flavor, 5000), "sorted sets");
}

pub(crate) fn reshard_compact(flavor: Flavor) {
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
