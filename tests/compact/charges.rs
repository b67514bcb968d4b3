//! Request ids on compact logs: charged once, undone and settled by id,
//! carried by replication, reload, AOF and DUMP; what a charge costs in
//! memory; a key of few charges in the small form.

use std::time::Duration;

use redis::Value;

use crate::memory::{memory_usage, SIZE_KEY};
use crate::paths::compact_replica;
use crate::support::*;
use crate::{cmd, key_type, text};

fn int_of(c: &mut Connection, args: &[&str]) -> i64 {
    match cmd(c, args) {
        Ok(Value::Int(n)) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// The entries in `key`'s window (PEEK ... DETAIL's remaining, under a
/// limit of 1,000).
fn entries(c: &mut Connection, key: &str) -> i64 {
    let v: Vec<i64> = redis::cmd("SLIDEWIN.PEEK")
        .arg(key)
        .arg(1_000)
        .arg(600_000)
        .arg("DETAIL")
        .query(c)
        .unwrap();
    1_000 - v[2]
}

/// Request IDs on compact logs (issue 32): a repeated ID charged once,
/// UNDO by ID exact and idempotent, SETTLE down, up past the limit and to
/// zero, a charge's units out of reach of UNDO by member; the charges
/// reach a replica (DEBUG DIGEST covers them), survive DEBUG RELOAD, an
/// AOF rewrite and DUMP/RESTORE.
pub(crate) fn request_ids(flavor: Flavor) {
    let master = compact(flavor).arg("appendonly", "yes").start();
    let replica = compact_replica(&master, flavor);
    let mut c = master.conn();
    let k = "ids";
    let check_id = |c: &mut Connection, cost: &str, id: &str| {
        int_of(
            c,
            &["SLIDEWIN.CHECK", k, "3", "600000", "COST", cost, "ID", id],
        )
    };
    assert_eq!(check_id(&mut c, "2", "r1"), 1);
    assert_eq!(key_type(&mut c, k), "slidewlog");
    assert_eq!(check_id(&mut c, "2", "r1"), 1, "a repeat");
    assert_eq!(check_id(&mut c, "3", "r1"), 1, "a repeat with another COST");
    assert_eq!(entries(&mut c, k), 2, "charged once");
    // Denied: nothing recorded, a retry is judged again.
    assert_eq!(check_id(&mut c, "2", "r2"), 0);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r2", "COST", "1"]),
        -1
    );
    // UNDO by member never takes a charge's unit (ids 1 and 2, tokens too).
    let now = server_ms(&mut c).to_string();
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "1", "2", &format!("1@{now}")]),
        0
    );
    assert_eq!(entries(&mut c, k), 2);
    // UNDO by ID: exact, then nothing.
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r1"]), 2);
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r1"]), 0);
    assert_eq!(
        cmd(&mut c, &["EXISTS", k]).unwrap(),
        Value::Int(0),
        "emptied"
    );
    // SETTLE up past the limit, down, to zero.
    assert_eq!(check_id(&mut c, "1", "r3"), 1);
    assert_eq!(check(&mut c, k, 3, 600_000), 1);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "4"]),
        4
    );
    assert_eq!(entries(&mut c, k), 5);
    assert_eq!(check(&mut c, k, 3, 600_000), 0, "past the limit: wait");
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "1"]),
        1
    );
    assert_eq!(entries(&mut c, k), 2);
    assert_eq!(check(&mut c, k, 3, 600_000), 1);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "2"]),
        2
    );
    // A binary ID of 128 bytes; one of 129 is refused.
    let long = "\u{1}".repeat(128);
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.CHECK", k, "100", "600000", "ID", &long]),
        1
    );
    let too_long = "x".repeat(129);
    assert!(text(
        &mut c,
        &["SLIDEWIN.CHECK", k, "9", "600000", "ID", &too_long]
    )
    .starts_with("ERR ID must be 1 to 128 bytes"),);
    // MCHECK: a charge on each key; a repeat charges nothing anywhere.
    let mcheck = |c: &mut Connection, id: &str| {
        int_of(
            c,
            &[
                "SLIDEWIN.MCHECK",
                "2",
                k,
                "100",
                "600000",
                "ids:b",
                "100",
                "600000",
                "ID",
                id,
            ],
        )
    };
    assert_eq!(mcheck(&mut c, "m1"), 1);
    assert_eq!(mcheck(&mut c, "m1"), 1);
    assert_eq!(entries(&mut c, "ids:b"), 1);
    let before = digest(&mut c);
    let mut r = assert_replica_matches(&master, &replica);
    assert_eq!(digest_value(&mut c, k), digest_value(&mut r, k));
    // The digest sees the charges: the same entries with another charge
    // split digest otherwise.
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before, "DEBUG RELOAD keeps the charges");
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.SETTLE", k, "ID", "r3", "COST", "2"]),
        2
    );
    assert_eq!(check_id(&mut c, "1", "r3"), 1);
    assert_eq!(entries(&mut c, k), 6, "r3 still charged after the reload");
    // DUMP/RESTORE carries them (version 2 payload).
    let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("ids:copy")
        .arg(pexpiretime(&mut c, k))
        .arg(&dump)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, k), digest_value(&mut c, "ids:copy"));
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", "ids:copy", "ID", "r3"]),
        2
    );
    // The AOF rewrite writes them in the LOG payload.
    let before = digest(&mut c);
    let _: Value = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || info_field(
            &mut c,
            "persistence",
            "aof_rewrite_in_progress"
        )
        .as_deref()
            == Some("0")
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")),
        "rewrite finished"
    );
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before, "AOF rewrite keeps the charges");
    assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "r3"]), 2);
    assert_replica_matches(&master, &replica);
    // The digest covers the charges: the same entry, charged or not,
    // digests apart.
    let t = server_ms(&mut c).to_string();
    let _ = cmd(&mut c, &["SLIDEWIN.APPLY", "d1", "ADD", &t, "1", "1"]).unwrap();
    let _ = cmd(
        &mut c,
        &["SLIDEWIN.APPLY", "d2", "CHARGE", "r", &t, "1", "1"],
    )
    .unwrap();
    assert_ne!(digest_value(&mut c, "d1"), digest_value(&mut c, "d2"));
}

/// The table "Request IDs" of docs/compact-log.md: per row, per server,
/// MEMORY USAGE of the key built by the effects CHECKs with and without
/// ID replicate, as printed ("696 B").
fn documented_charge_sizes(flavor: Flavor) -> Vec<(String, i64)> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compact-log.md"),
    )
    .expect("read docs/compact-log.md");
    let mut lines = page
        .lines()
        .skip_while(|l| !l.starts_with("| the key holds | Redis 7.0"));
    let header: Vec<&str> = lines
        .next()
        .expect("the request ids memory table in docs/compact-log.md")
        .split('|')
        .map(str::trim)
        .collect();
    let label = match flavor {
        Flavor::Redis70 => "Redis 7.0",
        Flavor::Redis82 => "Redis 8.2",
        Flavor::Valkey81 => "Valkey 8.1",
        Flavor::Valkey91 => "Valkey 9.1",
        Flavor::Redis62 => "Redis 6.2",
    };
    let column = header.iter().position(|h| *h == label).expect("a column");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let size = cells[column]
                .trim_end_matches('B')
                .trim()
                .replace(',', "")
                .parse()
                .unwrap_or_else(|_| panic!("not a size: {:?}", cells[column]));
            (cells[1].to_string(), size)
        })
        .collect()
}

/// What a charge made with an ID costs in memory, by the server's own
/// MEMORY USAGE, against the same entries without IDs; the keys built by
/// the effects the calls replicate (five calls of COST 1 in one
/// millisecond, one call of COST 1000), request ids of 16 bytes.
pub(crate) fn charge_memory(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let now = server_ms(&mut c) + 5_000;
    let (t, pxat) = (now.to_string(), (now + 60_000).to_string());
    let id = |i: usize| format!("req-{i:012}");
    let measure = |c: &mut Connection, effects: Vec<Vec<String>>| -> i64 {
        for e in effects {
            let mut apply = redis::cmd("SLIDEWIN.APPLY");
            apply.arg(SIZE_KEY);
            for w in e {
                apply.arg(w);
            }
            let _: () = apply.query(c).unwrap();
        }
        let size = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        size
    };
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let five_plain: Vec<Vec<String>> = (1..=5)
        .map(|i| words(&["ADD", &t, &i.to_string(), "1", "PXAT", &pxat]))
        .collect();
    let five_ids: Vec<Vec<String>> = (1..=5)
        .map(|i| words(&["CHARGE", &id(i), &t, &i.to_string(), "1", "PXAT", &pxat]))
        .collect();
    let measured = vec![
        (
            "5 entries, five calls without ID".to_string(),
            measure(&mut c, five_plain),
        ),
        (
            "5 entries, five calls with an ID each".to_string(),
            measure(&mut c, five_ids),
        ),
        (
            "1,000 entries, one call without ID".to_string(),
            measure(
                &mut c,
                vec![words(&["ADD", &t, "1", "1000", "PXAT", &pxat])],
            ),
        ),
        (
            "1,000 entries, one call with an ID".to_string(),
            measure(
                &mut c,
                vec![words(&["CHARGE", &id(0), &t, "1", "1000", "PXAT", &pxat])],
            ),
        ),
        (
            "1,000 entries, a call with an ID each, one a millisecond".to_string(),
            measure(
                &mut c,
                (1..=1000)
                    .map(|i| {
                        let at = (now + i as i64).to_string();
                        words(&["CHARGE", &id(i), &at, &i.to_string(), "1", "PXAT", &pxat])
                    })
                    .collect(),
            ),
        ),
    ];
    assert_eq!(
        measured,
        documented_charge_sizes(flavor),
        "MEMORY USAGE on {flavor:?} against docs/compact-log.md (Request IDs)"
    );
}

/// A key of up to 8 charges is held in the small form (one block): it
/// reloads, restores and reaches the replica as one in chunks does, SETTLE
/// and UNDO ID work on it, it grows into chunks past 8 charges and comes
/// back to the small form below, and its charges leave with their entries.
pub(crate) fn few_charges(flavor: Flavor) {
    let master = compact(flavor).arg("appendonly", "yes").start();
    let replica = compact_replica(&master, flavor);
    let mut c = master.conn();
    let k = "few";
    let same = |master: &Server, replica: &Server, step: &str| {
        wait_caught_up(master, replica);
        assert_eq!(
            digest(&mut master.conn()),
            digest(&mut replica.conn()),
            "the replica has the same data, {step}"
        );
    };
    let check =
        |c: &mut Connection, id: &str| int_of(c, &["SLIDEWIN.CHECK", k, "20", "600000", "ID", id]);
    for i in 0..5 {
        assert_eq!(check(&mut c, &format!("request-{i:08}")), 1);
    }
    let small = memory_usage(&mut c, k);
    assert!(small < 256, "five charges in one block: {small} B");
    same(&master, &replica, "five charges");
    // DEBUG RELOAD and DUMP/RESTORE keep it, charges and all.
    let before = digest_value(&mut c, k);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest_value(&mut c, k), before, "DEBUG RELOAD");
    // (Loaded, its block is its length; a command's is rounded up to 16.)
    let reloaded = memory_usage(&mut c, k);
    assert!(
        reloaded <= small,
        "reloaded in the small form: {reloaded} B, was {small} B"
    );
    // Restored with the same expiry: the digest covers it.
    let at: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut c).unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("few:copy")
        .arg(at)
        .arg(dump)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(digest_value(&mut c, "few:copy"), before, "DUMP/RESTORE");
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.UNDO", "few:copy", "ID", "request-00000003"]
        ),
        1
    );
    // SETTLE raise and lower, UNDO ID, a repeat.
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "3"]
        ),
        3
    );
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "1"]
        ),
        1
    );
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "request-00000001"]),
        1
    );
    assert_eq!(
        int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", "request-00000001"]),
        0
    );
    assert_eq!(check(&mut c, "request-00000002"), 1, "a repeat");
    same(&master, &replica, "SETTLE and UNDO ID");
    let four = memory_usage(&mut c, k);
    // Past 8 charges: chunks, and a table; back to 8 and below: small.
    for i in 10..16 {
        assert_eq!(check(&mut c, &format!("request-{i:08}")), 1);
    }
    let ten = memory_usage(&mut c, k);
    assert!(
        ten > four + 200,
        "10 charges in chunks: {ten} B, 4 small: {four} B"
    );
    same(&master, &replica, "ten charges");
    let before = digest_value(&mut c, k);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest_value(&mut c, k), before, "DEBUG RELOAD in chunks");
    for i in 10..16 {
        let id = format!("request-{i:08}");
        assert_eq!(int_of(&mut c, &["SLIDEWIN.UNDO", k, "ID", &id]), 1);
    }
    let back = memory_usage(&mut c, k);
    assert!(
        back <= four + 16,
        "back to 4 charges: {back} B, was {four} B"
    );
    same(&master, &replica, "back to four");
    // Its charges leave with their entries: a window of 1 ms trims them.
    let _ = cmd(&mut c, &["SLIDEWIN.CHECK", k, "20", "1"]).unwrap();
    assert_eq!(
        int_of(
            &mut c,
            &["SLIDEWIN.SETTLE", k, "ID", "request-00000000", "COST", "2"]
        ),
        -1,
        "the charge left with its entries"
    );
    same(&master, &replica, "the charges left the window");
}
