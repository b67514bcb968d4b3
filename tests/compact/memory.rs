//! Memory: the sizes docs/compact-log.md prints, a small form left without
//! spare room, logs freed off the main thread, many small keys, active
//! defragmentation.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;

use crate::cmd;
use crate::support::*;

/// The times of `n` entries arriving as a Poisson stream at `per_hour`
/// (seeded), ending now on the server's clock.
fn poisson_times(c: &mut Connection, n: usize, per_hour: f64, seed: u64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mean_gap_ms = 3_600_000.0 / per_hour;
    let gaps: Vec<i64> = (0..n)
        .map(|_| {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            ((-u.ln() * mean_gap_ms) as i64).max(1)
        })
        .collect();
    let mut t = server_ms(c) - gaps.iter().sum::<i64>();
    gaps.iter()
        .map(|gap| {
            t += gap;
            t
        })
        .collect()
}

/// Fills `key` with `n` entries arriving as a Poisson stream at `per_hour`
/// (seeded), through the effect command, ending now.
fn poisson_log(c: &mut Connection, key: &str, n: usize, per_hour: f64, seed: u64) {
    let times = poisson_times(c, n, per_hour, seed);
    let mut pipe = redis::pipe();
    for (i, t) in times.iter().enumerate() {
        pipe.cmd("SLIDEWIN.APPLY")
            .arg(key)
            .arg("ADD")
            .arg(t)
            .arg(i + 1)
            .arg(1)
            .ignore();
    }
    let last = times.last().copied().unwrap_or(0);
    pipe.cmd("PEXPIREAT")
        .arg(key)
        .arg(last + 3_600_000)
        .ignore();
    let _: () = pipe.query(c).unwrap();
}

pub(crate) fn memory_usage(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(c)
        .unwrap()
}

/// The key every row of the memory table is measured under (the length of
/// its name counts in MEMORY USAGE).
pub(crate) const SIZE_KEY: &str = "sms:limit:192.168.1.100";

/// The table of docs/compact-log.md the suite holds the module to: per
/// number of entries, per server, MEMORY USAGE of the compact log and of the
/// same entries as a sorted set, as printed ("120 B / 152 B").
pub(crate) fn documented_sizes(flavor: Flavor) -> Vec<(usize, i64, i64)> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compact-log.md"),
    )
    .expect("read docs/compact-log.md");
    let mut lines = page
        .lines()
        .skip_while(|l| !l.starts_with("| entries | built by | Redis 7.0"));
    let header: Vec<&str> = lines
        .next()
        .expect("the memory table in docs/compact-log.md")
        .split('|')
        .map(str::trim)
        .collect();
    let label = match flavor {
        Flavor::Redis70 => "Redis 7.0",
        Flavor::Redis82 => "Redis 8.2",
        Flavor::Valkey81 => "Valkey 8.1",
        Flavor::Valkey91 => "Valkey 9.1",
        // Not among the servers this suite runs on (on_every_server).
        Flavor::Redis62 => "Redis 6.2",
    };
    let column = header
        .iter()
        .position(|h| *h == label)
        .unwrap_or_else(|| panic!("no {label} column in {header:?}"));
    let number = |t: &str| -> i64 {
        t.trim()
            .trim_end_matches('B')
            .trim()
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("not a size: {t:?}"))
    };
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (compact, sorted) = cells[column]
                .split_once('/')
                .unwrap_or_else(|| panic!("not 'compact / sorted set': {:?}", cells[column]));
            (number(cells[1]) as usize, number(compact), number(sorted))
        })
        .collect()
}

/// Fills `key` as CHECKs do, one entry a call: the entries of a Poisson
/// stream at 10,000 an hour (seeded), each through the effect command a
/// CHECK replicates (its last with the expiry a CHECK sets), ending now.
fn poisson_checks(c: &mut Connection, key: &str, n: usize, seed: u64) -> Vec<i64> {
    let times = poisson_times(c, n, 10_000.0, seed);
    let mut pipe = redis::pipe();
    for (i, t) in times.iter().enumerate() {
        let apply = pipe
            .cmd("SLIDEWIN.APPLY")
            .arg(key)
            .arg("ADD")
            .arg(t)
            .arg(i + 1)
            .arg(1);
        if i + 1 == n {
            apply.arg("PXAT").arg(t + 3_600_000);
        }
        apply.ignore();
    }
    let _: () = pipe.query(c).unwrap();
    times
}

/// The memory table of docs/compact-log.md, by the server's own MEMORY
/// USAGE: a `limit 5` key after five CHECKs, then logs of 33 (one past the
/// small form) to 10,000 entries built entry by entry, each against the
/// same entries as a sorted set under the same name. Every figure is the
/// one the page prints for this server, and no size is larger compact than
/// as a sorted set.
fn documented_memory(c: &mut Connection, flavor: Flavor) {
    let documented = documented_sizes(flavor);
    let sizes: Vec<usize> = documented.iter().map(|d| d.0).collect();
    assert_eq!(
        sizes,
        [5, 33, 100, 400, 1_000, 10_000],
        "the rows of the table"
    );
    let mut measured = Vec::new();
    for &(n, _, _) in &documented {
        let times = if n == 5 {
            // The SMS shape: five CHECKs in one round trip.
            let mut pipe = redis::pipe();
            for _ in 0..5 {
                pipe.cmd("SLIDEWIN.CHECK").arg(SIZE_KEY).arg(5).arg(60_000);
            }
            let allowed: Vec<i64> = pipe.query(c).unwrap();
            assert_eq!(allowed, [1; 5]);
            let now = server_ms(c);
            vec![now; 5]
        } else {
            poisson_checks(c, SIZE_KEY, n, 42)
        };
        let count: i64 = redis::cmd("SLIDEWIN.PEEK")
            .arg(SIZE_KEY)
            .arg(100_000)
            .arg(3_600_000)
            .query::<Vec<i64>>(c)
            .unwrap()[2];
        assert_eq!(count, 100_000 - n as i64, "{n} entries");
        let compact = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        let mut pipe = redis::pipe();
        for (i, t) in times.iter().enumerate() {
            pipe.cmd("ZADD").arg(SIZE_KEY).arg(t).arg(i + 1).ignore();
        }
        let _: () = pipe.query(c).unwrap();
        let sorted = memory_usage(c, SIZE_KEY);
        let _: i64 = redis::cmd("DEL").arg(SIZE_KEY).query(c).unwrap();
        eprintln!(
            "{flavor:?}: {n} entries: compact {compact} B ({:.2} B/entry), sorted set {sorted} B",
            compact as f64 / n as f64
        );
        measured.push((n, compact, sorted));
    }
    // As printed: the compact log to 1% (the same blocks every time; the
    // C library's allocator, which the server names, may leave up to 24
    // bytes more in a block grown in place), the sorted set to 5% (a
    // skiplist's levels are random).
    let slack = match info_field(c, "memory", "mem_allocator").as_deref() {
        Some(a) if a.starts_with("libc") => 32,
        _ => 0,
    };
    for (m, d) in measured.iter().zip(&documented) {
        let near = |got: i64, printed: i64, percent: i64, slack: i64| {
            (got - printed).abs() * 100 <= printed * percent + slack * 100
        };
        assert!(
            near(m.1, d.1, 1, slack) && near(m.2, d.2, 5, 0),
            "MEMORY USAGE of {} entries on {flavor:?}: compact {} B, sorted set {} B; \
             docs/compact-log.md prints {} B / {} B",
            m.0,
            m.1,
            m.2,
            d.1,
            d.2
        );
    }
    for (n, compact, sorted) in measured {
        assert!(
            compact <= sorted,
            "{n} entries: compact {compact} B, sorted set {sorted} B"
        );
        let per_entry = compact as f64 / n as f64;
        if n >= 400 {
            assert!(per_entry <= 2.5, "{n} entries: {compact} B");
        }
        if n == 10_000 {
            assert!(per_entry <= 2.0, "{n} entries: {compact} B");
            assert!(
                sorted >= 40 * compact,
                "{n} entries: {compact} B, sorted set {sorted} B"
            );
        }
    }
}

/// A log that leaves the small form in a CHECK keeps no room sized for
/// another log: 40 CHECKs (one entry a millisecond or more apart, so 40
/// runs: one past the small form's 32) take at most a growth step more
/// than the same log restored from its DUMP (which holds it exactly).
fn leaving_the_small_form(c: &mut Connection) {
    for _ in 0..40 {
        assert_eq!(check(c, "grown", 1000, 3_600_000), 1);
        std::thread::sleep(Duration::from_millis(2));
    }
    let dump: Vec<u8> = redis::cmd("DUMP").arg("grown").query(c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(c)
        .unwrap();
    let (grown, restored) = (memory_usage(c, "grown"), memory_usage(c, "restored"));
    assert!(
        grown <= restored + 64,
        "40 CHECKs: {grown} B, the same log restored {restored} B"
    );
}

/// Issue "compact log"'s memory targets, by the server's own MEMORY USAGE
/// (what the allocator gave): the table the docs print, a call's cost one
/// record. Then the largest logs are freed by UNLINK and FLUSHALL ASYNC,
/// which free them off the main thread.
pub(crate) fn memory(flavor: Flavor) {
    let server = compact(flavor).arg("lazyfree-lazy-user-del", "no").start();
    let mut c = server.conn();
    documented_memory(&mut c, flavor);
    leaving_the_small_form(&mut c);
    // A call's cost is one run: COST 10000 adds a few bytes, not 10000 entries' worth.
    assert_eq!(check(&mut c, "one", 5, 60_000), 1);
    let small = memory_usage(&mut c, "one");
    let _: i64 = redis::cmd("SLIDEWIN.CHECK")
        .arg("one")
        .arg(100_000)
        .arg(60_000)
        .arg("COST")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let big = memory_usage(&mut c, "one");
    assert!(big - small < 64, "COST 10000: {small} B then {big} B");
    // Large logs freed off the main thread, then the server still serves.
    for i in 0..4 {
        poisson_log(&mut c, &format!("free:{i}"), 20_000, 40_000.0, i);
    }
    let n: i64 = redis::cmd("UNLINK")
        .arg("free:0")
        .arg("free:1")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        info_field(&mut c, "memory", "lazyfree_pending_objects").as_deref() == Some("0")
    }));
    let freed: i64 = info_field(&mut c, "memory", "lazyfreed_objects")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(freed >= 2, "lazily freed objects: {freed}");
    assert_eq!(check(&mut c, "after", 1, 60_000), 1);
}

/// `used_memory` a key, over 20,000 keys after five CHECKs each (the SMS
/// shape, in a 10-minute window: none expires while the others are made),
/// compact against sorted sets and a fixed-window counter (`INCR` +
/// `EXPIRE`, what the module replaces at its simplest): a compact key takes
/// less than a sorted-set key, whether its five calls came in one burst or
/// a second apart (five rounds over the keys), and a key of calls a second
/// apart takes the MEMORY USAGE docs/compact-log.md prints for a burst (the
/// small form holds both in the value itself). (`bench/small_keys.py`
/// measures the same over 100,000 keys, and 20 s apart, for the docs.)
pub(crate) fn small_keys(flavor: Flavor) {
    const KEYS: usize = 20_000;
    const APART: Duration = Duration::from_millis(1_000);
    // The first under the name the memory table is measured under (its
    // length counts in MEMORY USAGE, by 8 bytes on some servers).
    let key = |i: usize| match i {
        0 => SIZE_KEY.to_string(),
        _ => format!("sms:limit:10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
    };
    // One round: `calls` CHECKs (or INCRs, then the EXPIRE) on every key.
    let round = |c: &mut Connection, counter: bool, calls: usize| {
        for batch in 0..KEYS / 1000 {
            let mut pipe = redis::pipe();
            for i in batch * 1000..(batch + 1) * 1000 {
                for _ in 0..calls {
                    if counter {
                        pipe.cmd("INCR").arg(key(i)).ignore();
                    } else {
                        pipe.cmd("SLIDEWIN.CHECK")
                            .arg(key(i))
                            .arg(5)
                            .arg(600_000)
                            .ignore();
                    }
                }
                if counter {
                    pipe.cmd("EXPIRE").arg(key(i)).arg(600).ignore();
                }
            }
            let _: () = pipe.query(c).unwrap();
        }
    };
    let used = |c: &mut Connection| -> i64 {
        info_field(c, "memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .expect("used_memory")
    };
    // used_memory grown a key, and MEMORY USAGE of one, then FLUSHALL.
    let grow = |server: &Server, counter: bool, spread: bool| -> (f64, i64) {
        let mut c = server.conn();
        let before = used(&mut c);
        if spread {
            for r in 0..5 {
                let started = std::time::Instant::now();
                round(&mut c, counter, 1);
                if r < 4 {
                    std::thread::sleep(APART.saturating_sub(started.elapsed()));
                }
            }
        } else {
            round(&mut c, counter, 5);
        }
        let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(keys, KEYS as i64);
        let grown = (used(&mut c) - before) as f64 / KEYS as f64;
        let one = memory_usage(&mut c, &key(0));
        let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut c).unwrap();
        (grown, one)
    };
    let compact_server = compact(flavor).start();
    let compact_key = grow(&compact_server, false, false);
    let compact_spread = grow(&compact_server, false, true);
    drop(compact_server);
    let zset_server = Options::new(flavor).start();
    let sorted_key = grow(&zset_server, false, false);
    let sorted_spread = grow(&zset_server, false, true);
    let counter_key = grow(&zset_server, true, false);
    eprintln!(
        "{flavor:?}: used_memory a limit-5 key: compact {:.0} B, 1 s apart {:.0} B; sorted set \
         {:.0} B, 1 s apart {:.0} B; fixed-window counter {:.0} B ({:.2}x, {:.2}x)",
        compact_key.0,
        compact_spread.0,
        sorted_key.0,
        sorted_spread.0,
        counter_key.0,
        compact_key.0 / counter_key.0,
        compact_spread.0 / counter_key.0
    );
    assert!(
        compact_key.0 < sorted_key.0,
        "compact {:.0} B a key, sorted set {:.0} B",
        compact_key.0,
        sorted_key.0
    );
    assert!(
        compact_spread.0 < sorted_spread.0,
        "calls 1 s apart: compact {:.0} B a key, sorted set {:.0} B",
        compact_spread.0,
        sorted_spread.0
    );
    // The first row of the memory table: five CHECKs (a burst).
    let printed = documented_sizes(flavor)[0].1;
    assert_eq!(
        (compact_key.1, compact_spread.1),
        (printed, printed),
        "MEMORY USAGE of a key of five CHECKs in one burst and 1 s apart"
    );
}

/// Active defragmentation (where the server can run it: it needs its own
/// jemalloc, and says so when asked) moves compact logs' blocks through the
/// type's defrag callback; every log keeps its entries, expiry and
/// decisions. The heap is fragmented on purpose: many small and large
/// logs, every other one deleted.
pub(crate) fn defrag(flavor: Flavor) {
    let server = compact(flavor).start();
    let mut c = server.conn();
    let keys: Vec<String> = (0..12000).map(|i| format!("df:{i}")).collect();
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        // Most small (a run or a few), some chunked (over 32 runs).
        let calls = if i % 50 == 0 { 60 } else { 1 + i % 4 };
        for _ in 0..calls {
            pipe.cmd("SLIDEWIN.CHECK")
                .arg(k)
                .arg(1000)
                .arg(3_600_000)
                .ignore();
        }
        if i % 500 == 499 {
            pipe.query::<()>(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
    // (redis-rs refuses an empty pipeline: the loop may have sent it all)
    if !pipe.is_empty() {
        pipe.query::<()>(&mut c).unwrap();
    }
    // Half of them deleted, at random: pages of the allocator left unevenly
    // full, which is what it moves blocks out of (an every-other pattern
    // leaves every page as full as the next, and little to move).
    let mut rng = StdRng::seed_from_u64(7);
    let (gone, kept): (Vec<&String>, Vec<&String>) =
        keys.iter().partition(|_| rng.random_bool(0.5));
    let mut del = redis::cmd("DEL");
    for k in &gone {
        del.arg(k);
    }
    let _: i64 = del.query(&mut c).unwrap();
    let state = |c: &mut Connection, k: &str| {
        (
            digest_value(c, k),
            pexpiretime(c, k),
            detail(c, "SLIDEWIN.PEEK", &[k, "1000", "3600000"])[2],
        )
    };
    let before: Vec<_> = kept.iter().map(|k| state(&mut c, k)).collect();
    let on = redis::cmd("CONFIG")
        .arg(&["SET", "activedefrag", "yes"])
        .query::<()>(&mut c);
    if let Err(e) = on {
        // The server's answer, not a guess by name or version.
        assert!(
            error_text(&e).contains("Active defragmentation cannot be enabled"),
            "{e}"
        );
        assert_eq!(
            info_field(&mut c, "slidewin", "slidewin_compact_defrag_moved").as_deref(),
            Some("0")
        );
        eprintln!(
            "defrag ({flavor:?}): the server cannot run active defragmentation: {}",
            error_text(&e)
        );
        return;
    }
    for (name, value) in [
        ("active-defrag-ignore-bytes", "1"),
        ("active-defrag-threshold-lower", "0"),
        ("active-defrag-cycle-min", "50"),
        ("active-defrag-cycle-max", "90"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", name, value])
            .query(&mut c)
            .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
    }
    let moved = || -> u64 {
        let mut c = server.conn();
        info_field(&mut c, "slidewin", "slidewin_compact_defrag_moved")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        wait_until(Duration::from_secs(60), || moved() > 100),
        "active defragmentation moved {} blocks of compact logs",
        moved()
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "activedefrag", "no"])
        .query(&mut c)
        .unwrap();
    let after: Vec<_> = kept.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(after, before, "every log as it was");
    // They go on deciding, growing and freeing.
    for k in kept.iter().take(200) {
        assert_eq!(
            cmd(&mut c, &["SLIDEWIN.CHECK", k, "1000", "3600000"]).unwrap(),
            Value::Int(1)
        );
    }
    let usage: i64 = redis::cmd("MEMORY")
        .arg(&["USAGE", kept[0].as_str()])
        .query(&mut c)
        .unwrap();
    assert!(usage > 0);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    eprintln!(
        "defrag ({flavor:?}): {} blocks of compact logs moved, {} logs intact",
        moved(),
        kept.len()
    );
}
