//! The compact log's bounds against real servers, as a careful attacker with
//! write access to one key would try them: a log at the most runs the loader
//! accepts refuses every change that would pass it (`SLIDEWIN.APPLY ... ADD`,
//! an UNDO splitting a run), and whatever was accepted saves, reloads,
//! restores and reaches a replica; payloads whose members interleave (the
//! layout that made member lookups decode every chunk) are refused at the
//! door with the bound they pass.
#![allow(clippy::unwrap_used)]

mod support;

use redis::Value;
use support::*;

on_every_server! {
    a_log_at_the_run_bound_refuses_to_grow_and_loads_again => run_bound;
    interleaved_members_are_refused_past_the_bound_and_served_below_it => interleaved;
}

/// The most runs a log may hold (`src/store/compact/run.rs`).
const MAX_RUNS: u64 = 1 << 24;
/// The most runs out of member order.
const MAX_STRAYS: u64 = 1024;

/// A connection for calls that decode or check logs of millions of runs:
/// a second or two alone, longer on a machine running other suites, so a
/// longer deadline than the suite's 10 s (seen: 10 s exceeded with three
/// other suites running on two cores).
fn heavy_conn(server: &Server) -> Connection {
    let c = server.conn();
    c.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("read timeout");
    c
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The encoding's header: version 1, no expiry, the run count, the first
/// score.
fn header(runs: u64, score: i64) -> Vec<u8> {
    let mut out = vec![1, 0];
    varint(&mut out, runs);
    varint(&mut out, zigzag(score));
    out
}

/// A general record: `gap` ms after the last run, its first member
/// `delta` from the expected one, `count` entries.
fn record(out: &mut Vec<u8>, gap: u64, delta: i64, count: u64) {
    out.push(0xC0);
    varint(out, gap);
    varint(out, zigzag(delta));
    varint(out, count - 1);
}

fn apply(c: &mut Connection, args: &[&[u8]]) -> Result<(), String> {
    let mut command = redis::cmd("SLIDEWIN.APPLY");
    for a in args {
        command.arg(*a);
    }
    command
        .query::<Value>(c)
        .map(|_| ())
        .map_err(|e| error_text(&e))
}

fn peek(c: &mut Connection, key: &str) -> Vec<i64> {
    detail(c, "SLIDEWIN.PEEK", &[key, "100000", "3600000"])[..3].to_vec()
}

/// Every way a value is written and read back again, each checked to keep
/// the key as it was: DEBUG RELOAD (SAVE and load), DUMP and RESTORE, and a
/// replica's full sync.
fn loads_again(server: &Server, flavor: Flavor, key: &str) {
    let mut c = heavy_conn(server);
    let digest = digest_value(&mut c, key);
    let before = peek(&mut c, key);
    let _: () = redis::cmd("DEBUG")
        .arg("RELOAD")
        .query(&mut c)
        .expect("DEBUG RELOAD");
    assert_eq!(digest_value(&mut c, key), digest, "after DEBUG RELOAD");
    let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).expect("DUMP");
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .expect("RESTORE of a DUMP");
    assert_eq!(peek(&mut c, "restored"), before);
    let _: () = redis::cmd("DEL").arg("restored").query(&mut c).unwrap();
    let replica = replica_with(server, compact(flavor));
    let mut r = assert_replica_matches(server, &replica);
    assert_eq!(digest_value(&mut r, key), digest, "on the replica");
}

fn run_bound(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = heavy_conn(&server);
    let now = server_ms(&mut c);
    // 2^24 runs of one entry each, members 1, 2, 3... (one byte a run).
    let mut payload = header(MAX_RUNS, now);
    payload.resize(payload.len() + MAX_RUNS as usize, 0);
    apply(&mut c, &[b"k", b"LOG", &payload]).expect("a log of 2^24 runs is accepted");
    let digest = digest_value(&mut c, "k");
    // One run more: refused, nothing changed.
    let (next_score, next_member) = ((now + 1).to_string(), (MAX_RUNS + 1).to_string());
    let e = apply(
        &mut c,
        &[
            b"k",
            b"ADD",
            next_score.as_bytes(),
            next_member.as_bytes(),
            b"1",
        ],
    )
    .expect_err("ADD past the run bound");
    assert_eq!(
        e,
        format!("ERR the log would hold more than {MAX_RUNS} runs")
    );
    assert_eq!(
        digest_value(&mut c, "k"),
        digest,
        "a refused ADD changed the log"
    );
    // An entry continuing the last run is no new run: accepted.
    let last_score = now.to_string();
    apply(
        &mut c,
        &[
            b"k",
            b"ADD",
            last_score.as_bytes(),
            next_member.as_bytes(),
            b"1",
        ],
    )
    .expect("an entry extending the last run");
    loads_again(&server, flavor, "k");

    // The same bound reached by UNDO: one 3-entry run in the middle of
    // 2^24 - 1 others; giving back its middle member would split it.
    let mut payload = header(MAX_RUNS, now);
    let half = (MAX_RUNS / 2) as usize;
    payload.resize(payload.len() + half, 0);
    record(&mut payload, 0, 0, 3);
    payload.resize(payload.len() + MAX_RUNS as usize - half - 1, 0);
    apply(&mut c, &[b"u", b"LOG", &payload]).expect("a log of 2^24 runs");
    let digest = digest_value(&mut c, "u");
    let middle = (half as u64 + 2).to_string();
    let e = redis::cmd("SLIDEWIN.UNDO")
        .arg("u")
        .arg(&middle)
        .query::<i64>(&mut c)
        .map_err(|e| error_text(&e))
        .expect_err("an UNDO splitting a run past the bound");
    assert_eq!(
        e,
        format!("ERR the log would hold more than {MAX_RUNS} runs")
    );
    assert_eq!(
        digest_value(&mut c, "u"),
        digest,
        "a refused UNDO changed the log"
    );
    let e = apply(&mut c, &[b"u", b"REMOVE", middle.as_bytes()]).expect_err("REMOVE too");
    assert_eq!(
        e,
        format!("ERR the log would hold more than {MAX_RUNS} runs")
    );
    // Its first member is no split: given back.
    let first = (half as u64 + 1).to_string();
    let n: i64 = redis::cmd("SLIDEWIN.UNDO")
        .arg("u")
        .arg(&first)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let _: () = redis::cmd("DEL").arg("k").query(&mut c).unwrap();
    loads_again(&server, flavor, "u");

    // A payload of one run more is refused by the loader, naming the bound.
    let mut payload = header(MAX_RUNS + 1, now);
    payload.resize(payload.len() + MAX_RUNS as usize + 1, 0);
    let e = apply(&mut c, &[b"big", b"LOG", &payload]).expect_err("2^24 + 1 runs");
    assert_eq!(
        e,
        format!(
            "ERR LOG payload is not a compact log: the log would hold more than {MAX_RUNS} runs"
        )
    );
    assert!(!exists(&mut c, "big"));
}

/// Runs alternating between low members counting up and high members
/// counting down, one ms apart: every high run but the last has a later
/// run starting below it.
fn interleaved_payload(pairs: u64, now: i64) -> Vec<u8> {
    let mut out = header(2 * pairs, now);
    let high = |i: u64| 1_000_000_000i64 - i as i64;
    // Member 1 (the expected first) at `now`, then its high partner.
    out.push(0);
    let mut expected = 2i64;
    for i in 0..pairs {
        if i > 0 {
            // The low run i+1, after high(i - 1).
            let low = i as i64 + 1;
            record(&mut out, 1, low - expected, 1);
            expected = low + 1;
        }
        let h = high(i);
        record(&mut out, 1, h - expected, 1);
        expected = h + 1;
    }
    out
}

fn interleaved(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = heavy_conn(&server);
    let now = server_ms(&mut c) - 1000;
    // The layout that made lookups cost O(all runs): 49,999 alternating
    // runs. All but one of the high runs are out of member order.
    let payload = interleaved_payload(25_000, now);
    let e = apply(&mut c, &[b"il", b"LOG", &payload]).expect_err("25,000 runs out of order");
    assert_eq!(
        e,
        format!(
            "ERR LOG payload is not a compact log: the log would hold more than {MAX_STRAYS} runs out of member order"
        )
    );
    // At the bound: accepted, and served.
    let payload = interleaved_payload(MAX_STRAYS + 1, now);
    apply(&mut c, &[b"il", b"LOG", &payload]).expect("1,024 runs out of order");
    let r = redis::cmd("SLIDEWIN.CHECK")
        .arg("il")
        .arg(100_000)
        .arg(120_000)
        .arg("COST")
        .arg(5000)
        .query::<i64>(&mut c)
        .unwrap();
    assert_eq!(r, 1);
    let n: i64 = redis::cmd("SLIDEWIN.UNDO")
        .arg("il")
        .arg(1_000_000_000 - 3)
        .arg(7)
        .arg(123_456_789)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2, "two of the three members were there");
    loads_again(&server, flavor, "il");
}
