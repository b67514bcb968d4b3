//! What ids cost on sorted-set keys: the memory figures
//! docs/performance.md prints, short members after a charge, and a crafted
//! charge layout costing only its entries.

use redis::Value;

use crate::support::*;
use crate::{call, int};

/// The row of docs/performance.md's request-id memory table for `server`:
/// `| server | a | b | c | d |`, numbers without separators.
fn documented_memory(server: &str) -> Vec<f64> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/performance.md"))
        .expect("docs/performance.md");
    let section = page
        .split("\n## ")
        .find(|s| s.starts_with("Request IDs"))
        .expect("a 'Request IDs' section");
    let row = section
        .lines()
        .find(|l| l.starts_with(&format!("| {server} ")))
        .unwrap_or_else(|| panic!("no row for {server}"));
    row.split('|')
        .skip(2)
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().replace(',', "").parse().expect("a number"))
        .collect()
}

/// MEMORY USAGE of sorted-set keys made with and without 16-byte ids: five
/// calls of COST 1 (five charges with ids), and one call of COST 100 (bytes
/// per entry), against the figures docs/performance.md prints.
pub(crate) fn memory_figures(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let usage = |c: &mut Connection, key: &str| -> i64 {
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(c)
            .unwrap()
    };
    let id = |i: usize| format!("{i:016x}");
    for i in 0..5 {
        call(&mut c, "SLIDEWIN.CHECK", &["five:plain", "5", "60000"]);
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &["five:ids", "5", "60000", "ID", &id(i)],
        );
    }
    call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["cost:plain", "1000", "60000", "COST", "100"],
    );
    call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["cost:ids", "1000", "60000", "COST", "100", "ID", &id(9)],
    );
    let got = [
        usage(&mut c, "five:plain") as f64,
        usage(&mut c, "five:ids") as f64,
        (usage(&mut c, "cost:plain") as f64 / 100.0 * 10.0).round() / 10.0,
        (usage(&mut c, "cost:ids") as f64 / 100.0 * 10.0).round() / 10.0,
    ];
    assert_eq!(
        got.to_vec(),
        documented_memory(flavor.name()),
        "{}: measured {got:?}",
        flavor.name()
    );
}

/// A call without an ID after one with an ID (whose entries are not
/// integers) still gets a short member, not a 19-digit wide one.
pub(crate) fn short_after_charges(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let members = |c: &mut Connection| -> Vec<String> {
        let v = call(
            c,
            "SLIDEWIN.CHECK",
            &["mix", "100", "60000", "COST", "2", "WITHMEMBERS"],
        );
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        redis::from_redis_value_ref(items.last().unwrap()).unwrap()
    };
    assert_eq!(
        members(&mut c)
            .iter()
            .map(|t| t.split('@').next().unwrap().to_string())
            .collect::<Vec<_>>(),
        ["1", "2"]
    );
    for round in 0..3 {
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[
                "mix",
                "100",
                "60000",
                "COST",
                "3",
                "ID",
                &format!("r{round}"),
            ],
        );
        for t in members(&mut c) {
            let id: i64 = t.split('@').next().unwrap().parse().unwrap();
            assert!(id < 100, "round {round}: a short member, got {t}");
        }
    }
}

/// The key's absolute expiry in ms, exact (`PEXPIRETIME`, Redis 7.0+; the
/// support's TIME + PTTL may be 1 ms off).
/// Another writer lays out a "charge" with units 1, 2, 4 ... 2^40 in a
/// sorted set: UNDO and SETTLE by its ID cost what the key holds (41
/// entries), not 2^40 steps, and remove only those entries.
pub(crate) fn crafted_units(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut zadd = redis::cmd("ZADD");
    zadd.arg("crafted");
    for p in 0..=40u32 {
        zadd.arg(1).arg(format!("#{}:r", 1u64 << p));
    }
    let _: i64 = zadd.query(&mut c).unwrap();
    assert_eq!(
        int(&call(
            &mut c,
            "SLIDEWIN.SETTLE",
            &["crafted", "ID", "r", "COST", "40"]
        )),
        40
    );
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["crafted", "ID", "r"])),
        14,
        "#1, #2, #4 ... #32 and the #33..#40 SETTLE added, nothing beyond"
    );
    assert_eq!(zcard(&mut c, "crafted"), 35);
}
