//! The full command surface on every server of the suite: DETAIL, COST,
//! PEEK, INFO counters, configuration, command metadata and ACLs.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;

use redis::Value;
use support::*;

on_every_server! {
    detail_values_on_seeded_keys => detail_values;
    detail_on_an_empty_key => detail_empty;
    cost_edge_cases => cost_edges;
    options_in_any_order_and_case => options_parsing;
    option_errors_name_the_option => option_errors;
    peek_writes_nothing => peek_writes_nothing;
    peek_agrees_with_check => peek_agrees_with_check;
    peek_on_a_replica_while_check_is_readonly => peek_on_replica;
    peek_on_wrong_type => peek_wrongtype;
    info_counters => info_counters;
    config_from_load_arguments_and_at_runtime => config_load_and_runtime;
    bad_load_arguments_refuse_the_module => bad_load_arguments;
    command_info_gives_arity_flags_and_key_specs => command_info_docs;
    command_docs_describe_every_argument => command_docs;
    acl_categories_where_supported => acl_categories;
    acl_dryrun_and_key_permissions => acl_dryrun;
    resp3_detail_is_the_same_array => resp3_detail;
    keyspace_events_and_watch => events_and_watch;
}

/// Seeds `key` with entries `ages` ms older than the module's own clock,
/// then runs `command key args...` in the same script. Returns the clock
/// reading the entries were aged against and the command's reply.
const SEEDED: &str = r"
redis.call('SLIDEWIN.CHECK', KEYS[2], 100000, 100000)
local now = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('DEL', KEYS[2])
local n = tonumber(ARGV[1])
for i = 1, n do
  redis.call('ZADD', KEYS[1], now - tonumber(ARGV[1 + i]), 'seed-' .. i)
end
local args = {}
for i = n + 3, #ARGV do args[#args + 1] = ARGV[i] end
return {now, redis.call(ARGV[n + 2], KEYS[1], unpack(args))}
";

fn seeded(
    c: &mut Connection,
    key: &str,
    ages: &[i64],
    command: &str,
    args: &[&str],
) -> (i64, Value) {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(SEEDED)
        .arg(2)
        .arg(key)
        .arg(format!("{key}:probe"))
        .arg(ages.len());
    for a in ages {
        cmd.arg(*a);
    }
    cmd.arg(command).arg(args);
    let v: Vec<Value> = cmd.query(c).unwrap_or_else(|e| panic!("EVAL: {e}"));
    let now: i64 = redis::from_redis_value_ref(&v[0]).expect("now");
    (now, v[1].clone())
}

fn five(v: &Value) -> [i64; 5] {
    let v: Vec<i64> = redis::from_redis_value_ref(v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    v.try_into().expect("five fields")
}

/// Checks a DETAIL reply against the expected one. Servers that freeze the
/// module clock for a script must match exactly; on Redis 7.0 the clock may
/// tick between the seeding and the call, which shortens both waits by the
/// same few milliseconds.
fn assert_detail(frozen: bool, got: [i64; 5], expected: [i64; 5], what: &str) {
    if frozen || got == expected {
        assert_eq!(got, expected, "{what}");
        return;
    }
    assert_eq!(got[..3], expected[..3], "{what}: allowed, limit, remaining");
    let delta = expected[4] - got[4];
    assert!((0..50).contains(&delta), "{what}: {got:?} vs {expected:?}");
    if expected[3] > 0 {
        assert_eq!(
            expected[3] - got[3],
            delta,
            "{what}: retry and reset shift together"
        );
    } else {
        assert_eq!(got[3], expected[3], "{what}");
    }
}

fn detail_values(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let frozen = server.clock_frozen_in_script();
    let mut c = server.conn();
    let ages = [9000, 5000, 1000];
    // (key, command, args, expected) with entries 9000, 5000, 1000 ms old.
    let cases: &[(&str, &str, &[&str], [i64; 5])] = &[
        (
            "a",
            "SLIDEWIN.CHECK",
            &["3", "10000", "DETAIL"],
            [0, 3, 0, 1000, 9000],
        ),
        (
            "b",
            "SLIDEWIN.CHECK",
            &["3", "10000", "COST", "2", "DETAIL"],
            [0, 3, 0, 5000, 9000],
        ),
        (
            "c",
            "SLIDEWIN.CHECK",
            &["4", "10000", "COST", "2", "DETAIL"],
            [0, 4, 1, 1000, 9000],
        ),
        (
            "d",
            "SLIDEWIN.CHECK",
            &["3", "10000", "COST", "4", "DETAIL"],
            [0, 3, 0, -1, 9000],
        ),
        (
            "e",
            "SLIDEWIN.CHECK",
            &["5", "10000", "COST", "2", "DETAIL"],
            [1, 5, 0, 0, 10000],
        ),
        ("f", "SLIDEWIN.PEEK", &["3", "10000"], [0, 3, 0, 1000, 9000]),
        (
            "g",
            "SLIDEWIN.PEEK",
            &["3", "10000", "COST", "3"],
            [0, 3, 0, 9000, 9000],
        ),
        (
            "h",
            "SLIDEWIN.PEEK",
            &["6", "10000", "COST", "3"],
            [1, 6, 3, 0, 9000],
        ),
        // A 6 s window: the 9000 ms old entry is outside and not counted.
        ("i", "SLIDEWIN.PEEK", &["2", "6000"], [0, 2, 0, 1000, 5000]),
        (
            "j",
            "SLIDEWIN.CHECK",
            &["2", "6000", "DETAIL"],
            [0, 2, 0, 1000, 5000],
        ),
    ];
    for (key, command, args, expected) in cases {
        let (_, reply) = seeded(&mut c, key, &ages, command, args);
        assert_detail(
            frozen,
            five(&reply),
            *expected,
            &format!("{command} {key} {args:?}"),
        );
    }
    // CHECK trimmed the expired entry of "j"; PEEK left the one of "i".
    assert_eq!(zcard(&mut c, "j"), 2);
    assert_eq!(zcard(&mut c, "i"), 3);
    // The plain reply is the first field.
    let (_, plain) = seeded(&mut c, "k", &ages, "SLIDEWIN.CHECK", &["3", "10000"]);
    assert_eq!(plain, Value::Int(0));
}

fn detail_empty(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    assert_eq!(
        detail(&mut c, "SLIDEWIN.CHECK", &["k", "3", "10000", "DETAIL"]),
        [1, 3, 2, 0, 10000]
    );
    assert_eq!(
        detail(&mut c, "SLIDEWIN.PEEK", &["missing", "3", "10000"]),
        [1, 3, 3, 0, 0]
    );
    let r = detail(&mut c, "SLIDEWIN.CHECK", &["k", "3", "10000", "DETAIL"]);
    assert_eq!(r[..4], [1, 3, 1, 0]);
    assert!((9_000..=10_000).contains(&r[4]));
}

fn cost_edges(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    // COST equal to the limit fills the window at once, one entry per unit.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["full", "4", "60000", "COST", "4", "DETAIL"]
        ),
        [1, 4, 0, 0, 60000]
    );
    let members: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg("full")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    assert_eq!(members.len(), 4);
    let distinct: std::collections::HashSet<&String> = members.iter().map(|(m, _)| m).collect();
    assert_eq!(distinct.len(), 4, "one member per unit");
    assert!(members.iter().all(|(_, s)| *s == members[0].1), "one score");
    // Now even a cost of 1 is denied, and must wait for all four (same score).
    let r = detail(&mut c, "SLIDEWIN.CHECK", &["full", "4", "60000", "DETAIL"]);
    assert_eq!(r[..3], [0, 4, 0]);
    assert!(r[3] >= 1 && r[3] <= 60000 && r[3] == r[4], "{r:?}");
    // A cost above the limit never passes, writes nothing, creates nothing.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["none", "3", "60000", "COST", "4", "DETAIL"]
        ),
        [0, 3, 3, -1, 0]
    );
    let exists: i64 = redis::cmd("EXISTS").arg("none").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    // A cost that fits partly is all-or-nothing.
    assert_eq!(check(&mut c, "part", 5, 60000), 1);
    let r = detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["part", "5", "60000", "COST", "5", "DETAIL"],
    );
    assert_eq!(r[..3], [0, 5, 4]);
    let n: i64 = redis::cmd("ZCARD").arg("part").query(&mut c).unwrap();
    assert_eq!(n, 1);
    // The largest accepted cost is max-limit.
    assert_eq!(
        detail(
            &mut c,
            "SLIDEWIN.CHECK",
            &["big", "100000", "60000", "COST", "100000", "DETAIL"]
        ),
        [1, 100000, 0, 0, 60000]
    );
    let n: i64 = redis::cmd("ZCARD").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 100_000);
}

fn options_parsing(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    for (i, opts) in [
        &["COST", "2", "DETAIL"][..],
        &["DETAIL", "COST", "2"][..],
        &["detail", "cost", "2"][..],
        &["Detail", "CoSt", "2"][..],
    ]
    .iter()
    .enumerate()
    {
        let key = format!("opts:{i}");
        let mut args = vec![key.as_str(), "5", "60000"];
        args.extend_from_slice(opts);
        assert_eq!(
            detail(&mut c, "SLIDEWIN.CHECK", &args),
            [1, 5, 3, 0, 60000],
            "{opts:?}"
        );
    }
    let mut args = vec!["opts:peek", "5", "60000", "cost", "6"];
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args)[..4], [0, 5, 5, -1]);
    args.truncate(3);
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args), [1, 5, 5, 0, 0]);
    // PEEK always replies in detail; DETAIL is accepted and changes nothing.
    args.push("detail");
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &args), [1, 5, 5, 0, 0]);
}

fn option_errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let cases: &[(&str, &[&[u8]], &str)] = &[
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"FOO"],
            "ERR unknown option 'FOO'",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"\xff\r\n"],
            "ERR unknown option '\\xff\\x0d\\x0a'",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST"],
            "ERR COST needs a count",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"0"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"-2"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"1.5"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"100001"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"COST", b"1", b"cost", b"2"],
            "ERR option COST given more than once",
        ),
        (
            "SLIDEWIN.CHECK",
            &[b"k", b"5", b"1000", b"DETAIL", b"DETAIL"],
            "ERR option DETAIL given more than once",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5", b"1000", b"WITHMEMBERS"],
            "ERR PEEK records nothing, so it takes no WITHMEMBERS (CHECK and MCHECK do)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"0", b"1000"],
            "ERR limit must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5", b"0"],
            "ERR window_ms must be an integer between 1 and 31622400000 (slidewin.max-window-ms)",
        ),
        (
            "SLIDEWIN.PEEK",
            &[b"k", b"5"],
            "ERR wrong number of arguments for 'slidewin.peek' command",
        ),
    ];
    let before = digest(&mut c);
    for (command, args, expected) in cases {
        let mut cmd = redis::cmd(command);
        for a in *args {
            cmd.arg(*a);
        }
        let err = cmd.query::<Value>(&mut c).expect_err("must be refused");
        assert_eq!(error_text(&err), *expected, "{command} {args:?}");
    }
    assert_eq!(digest(&mut c), before, "errors change nothing");
}

fn repl_offset(c: &mut Connection) -> String {
    info_field(c, "replication", "master_repl_offset").expect("offset")
}

/// PEEK, and denials that trim nothing, write nothing: with a replica and
/// the AOF attached, the replication offset, the AOF size, the data and the
/// keyspace events all stay as they were.
fn peek_writes_nothing(flavor: Flavor) {
    let server = Options::new(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        // No replication PINGs while the offset is compared.
        .arg("repl-ping-replica-period", "3600")
        .start();
    let replica = replica_without_module(&server, flavor);
    let mut c = server.conn();
    // A key with two expired entries that a CHECK would trim.
    let (_, _) = seeded(
        &mut c,
        "p",
        &[90_000, 80_000, 1000],
        "SLIDEWIN.PEEK",
        &["5", "60000"],
    );
    // A full key with nothing to trim, for denials.
    assert_eq!(check(&mut c, "full", 2, 600_000), 1);
    assert_eq!(check(&mut c, "full", 2, 600_000), 1);
    wait_caught_up(&server, &replica);
    let mut events = KeyEvents::subscribe(&server);
    assert!(events.drain(&mut c).is_empty());
    let aof_size = |c: &mut Connection| info_field(c, "persistence", "aof_current_size");
    let offset_before = repl_offset(&mut c);
    let before = (digest(&mut c), aof_size(&mut c));
    assert!(before.1.is_some(), "the AOF is on");
    for args in [
        &["p", "5", "60000"][..],
        &["p", "1", "60000"][..],
        &["p", "5", "60000", "COST", "9"][..],
        &["missing", "5", "60000"][..],
        &["missing", "5", "60000", "COST", "2"][..],
    ] {
        slidewin(&mut c, "SLIDEWIN.PEEK", args).expect("PEEK");
    }
    for (command, args) in [
        ("SLIDEWIN.CHECK", &["full", "2", "600000"][..]),
        ("SLIDEWIN.CHECK", &["full", "2", "600000", "DETAIL"][..]),
        ("SLIDEWIN.CHECK", &["full", "3", "600000", "COST", "2"][..]),
        (
            "SLIDEWIN.MCHECK",
            &["2", "full", "9", "600000", "full", "2", "600000"][..],
        ),
    ] {
        let v = slidewin(&mut c, command, args).expect(command);
        let allowed = match v {
            Value::Int(n) => n,
            Value::Array(ref items) => redis::from_redis_value_ref(&items[0]).expect("allowed"),
            ref other => panic!("{other:?}"),
        };
        assert_eq!(allowed, 0, "{command} {args:?} is denied");
    }
    // The marker write of drain() is the first thing propagated after this.
    assert_eq!((digest(&mut c), aof_size(&mut c)), before);
    assert_eq!(repl_offset(&mut c), offset_before, "nothing propagated");
    // The only events: one slidewin.denied per denial (module class `d`,
    // not a write), on both channels; the MCHECK names its key once.
    let seen = events.drain(&mut c);
    assert_eq!(seen.len(), 8, "{seen:?}");
    assert!(
        seen.iter().all(
            |(ch, msg)| (ch == "__keyspace@0__:full" && msg == "slidewin.denied")
                || (ch == "__keyevent@0__:slidewin.denied" && msg == "full")
        ),
        "no keyspace event but the denials: {seen:?}"
    );
    // The check can fail: a write moves the offset and fires an event.
    assert_eq!(check(&mut c, "full", 3, 600_000), 1);
    assert_ne!(repl_offset(&mut c), offset_before);
    assert!(!events.drain(&mut c).is_empty());
    let n: i64 = redis::cmd("ZCARD").arg("p").query(&mut c).unwrap();
    assert_eq!(n, 3, "nothing trimmed");
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(&mut c).unwrap();
    assert_eq!(exists, 0, "nothing created");
    // A peek counts only the entry inside the window.
    let (_, r) = seeded(
        &mut c,
        "q",
        &[90_000, 80_000, 1000],
        "SLIDEWIN.PEEK",
        &["1", "60000"],
    );
    let frozen = server.clock_frozen_in_script();
    assert_detail(frozen, five(&r), [0, 1, 0, 59_000, 59_000], "peek q");
}

fn peek_agrees_with_check(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let frozen = server.clock_frozen_in_script();
    let mut c = server.conn();
    // In one script: PEEK, then CHECK DETAIL, on the same entries.
    let script = r"
        local p = redis.call('SLIDEWIN.PEEK', KEYS[1], ARGV[1], ARGV[2], 'COST', ARGV[3])
        local c = redis.call('SLIDEWIN.CHECK', KEYS[1], ARGV[1], ARGV[2], 'COST', ARGV[3], 'DETAIL')
        return {p, c}
    ";
    for (limit, cost) in [(3, 1), (3, 2), (4, 2), (3, 4), (6, 1)] {
        let key = format!("agree:{limit}:{cost}");
        let _ = seeded(
            &mut c,
            &key,
            &[9000, 5000, 1000],
            "SLIDEWIN.PEEK",
            &["1", "1"],
        );
        let v: Vec<Value> = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(&key)
            .arg(limit)
            .arg(10_000)
            .arg(cost)
            .query(&mut c)
            .unwrap();
        let (p, k) = (five(&v[0]), five(&v[1]));
        assert_eq!(p[0], k[0], "same decision");
        if k[0] == 0 {
            assert_detail(frozen, k, p, "a denied CHECK answers what PEEK said");
        }
        if k[0] == 1 {
            assert_eq!(p[2] - cost, k[2], "CHECK consumed what PEEK had left");
        }
    }
}

fn peek_on_replica(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = Options::new(flavor)
        .arg("replicaof", &master.replica_address())
        .start();
    let mut r = replica.conn();
    assert!(wait_until(
        std::time::Duration::from_secs(20),
        || info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    ));
    let mut m = master.conn();
    for _ in 0..3 {
        check(&mut m, "rl:1", 3, 60_000);
    }
    wait_caught_up(&master, &replica);
    let before = digest(&mut r);
    let err = slidewin(&mut r, "SLIDEWIN.CHECK", &["rl:1", "3", "60000"]).expect_err("replica");
    assert!(
        error_text(&err).starts_with("READONLY"),
        "{}",
        error_text(&err)
    );
    let p = detail(&mut r, "SLIDEWIN.PEEK", &["rl:1", "3", "60000"]);
    assert_eq!(p[..3], [0, 3, 0]);
    assert!(p[3] > 0 && p[3] <= 60_000);
    assert_eq!(digest(&mut r), before);
}

fn peek_wrongtype(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let _: () = redis::cmd("SET").arg("s").arg("v").query(&mut c).unwrap();
    let err = slidewin(&mut c, "SLIDEWIN.PEEK", &["s", "3", "1000"]).expect_err("wrongtype");
    assert_eq!(
        error_text(&err),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

fn stats(c: &mut Connection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("slidewin").query(c).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

fn info_counters(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: String = redis::cmd("INFO").arg("slidewin").query(&mut c).unwrap();
    assert!(info.contains("# slidewin_stats"), "{info}");
    check(&mut c, "i", 4, 60000);
    detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["i", "4", "60000", "COST", "2", "DETAIL"],
    );
    check(&mut c, "j", 4, 60000);
    detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["i", "4", "60000", "COST", "2", "DETAIL"],
    );
    check(&mut c, "i", 1, 60000);
    for _ in 0..4 {
        detail(&mut c, "SLIDEWIN.PEEK", &["i", "4", "60000"]);
    }
    for bad in [&["i", "0", "1"][..], &["i", "1", "1", "X"][..], &["i"][..]] {
        slidewin(&mut c, "SLIDEWIN.CHECK", bad).expect_err("bad");
    }
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    slidewin(&mut c, "SLIDEWIN.PEEK", &["str", "1", "1"]).expect_err("wrongtype");
    let s = stats(&mut c);
    let get = |f: &str| {
        s.get(f)
            .copied()
            .unwrap_or_else(|| panic!("no {f} in {s:?}"))
    };
    assert_eq!(get("slidewin_checks_allowed"), 3);
    assert_eq!(get("slidewin_checks_denied"), 2);
    assert_eq!(get("slidewin_peeks"), 4);
    assert_eq!(get("slidewin_cost_granted"), 4);
    // The arity error is the server's own reply (the module declares its
    // arity), so it is counted in INFO errorstats, not here.
    assert_eq!(get("slidewin_errors"), 3);
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let v: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    v.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {v:?}"))
}

fn config_load_and_runtime(flavor: Flavor) {
    let server = Options::new(flavor)
        .module_args(&["max-limit", "10", "max-window-ms", "5000"])
        .start();
    let mut c = server.conn();
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "10");
    assert_eq!(config_get(&mut c, "slidewin.max-window-ms"), "5000");
    let all: HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slidewin.*")
        .query(&mut c)
        .unwrap();
    assert_eq!(all.len(), 7, "{all:?}");
    assert_eq!(all["slidewin.max-entries-per-call"], "0");
    assert_eq!(all["slidewin.max-charges-per-key"], "5000");
    assert_eq!(all["slidewin.top-capacity"], "128");
    assert_eq!(all["slidewin.log-type"], "zset");
    assert_eq!(all["slidewin.top-period-ms"], "300000");
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "11", "1000"]).expect_err("limit");
    assert_eq!(
        error_text(&err),
        "ERR limit must be an integer between 1 and 10 (slidewin.max-limit)"
    );
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "5", "5001"]).expect_err("window");
    assert_eq!(
        error_text(&err),
        "ERR window_ms must be an integer between 1 and 5000 (slidewin.max-window-ms)"
    );
    let err =
        slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "5", "1000", "COST", "11"]).expect_err("cost");
    assert_eq!(
        error_text(&err),
        "ERR COST count must be an integer between 1 and 10 (slidewin.max-limit)"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slidewin.max-limit")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "1000");
    assert_eq!(check(&mut c, "k", 11, 1000), 1);
    for (name, bad) in [
        ("slidewin.max-limit", "0"),
        ("slidewin.max-limit", "10000001"),
        ("slidewin.max-limit", "abc"),
        ("slidewin.max-window-ms", "-1"),
        ("slidewin.max-window-ms", "3155760000001"),
        ("slidewin.max-entries-per-call", "-1"),
        ("slidewin.max-entries-per-call", "640000001"),
        ("slidewin.max-charges-per-key", "0"),
        ("slidewin.max-charges-per-key", "16777217"),
    ] {
        let was = config_get(&mut c, name);
        let err = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(bad)
            .query::<()>(&mut c)
            .expect_err("refused");
        assert!(
            error_text(&err).starts_with("ERR"),
            "{name} {bad}: {}",
            error_text(&err)
        );
        assert_eq!(config_get(&mut c, name), was, "{name} {bad}: unchanged");
    }
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "1000");
    // And the limits in force are the ones read back.
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "1001", "1000"]).expect_err("limit");
    assert_eq!(
        error_text(&err),
        "ERR limit must be an integer between 1 and 1000 (slidewin.max-limit)"
    );
}

fn bad_load_arguments(flavor: Flavor) {
    for (args, expected) in [
        (&["max-limt", "5"][..], "unknown module argument 'max-limt'"),
        (
            &["max-limit", "0"][..],
            "max-limit must be an integer between 1 and 10000000",
        ),
        (
            &["max-window-ms"][..],
            "module argument max-window-ms needs a value",
        ),
        // Logged as text: with the message as the log's format string, the
        // conversions read arguments that are not there and crash the server.
        (
            &["max-limit", "%s%s%s%s%s%s%s%s%n"][..],
            "got '%s%s%s%s%s%s%s%s%n'",
        ),
    ] {
        let log = Options::new(flavor)
            .module_args(args)
            .start_expecting_failure();
        assert!(log.contains(expected), "{args:?}: log was\n{log}");
    }
}

/// A flat RESP2 map (`[k1, v1, k2, v2, ...]`) or a RESP3 map as pairs.
fn as_map(v: &Value) -> HashMap<String, Value> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| match kv {
                [k, v] => Some((redis::from_redis_value_ref::<String>(k).ok()?, v.clone())),
                _ => None,
            })
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((redis::from_redis_value_ref::<String>(k).ok()?, v.clone())))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    redis::from_redis_value_ref(v).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

fn command_info_docs(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .query(&mut c)
        .unwrap();
    let expect = [
        (
            "slidewin.check",
            &["write", "denyoom"][..],
            &["readonly", "fast"][..],
            &["RW", "access", "update"][..],
        ),
        (
            // Not fast: it steps over expired entries (O(M) in them).
            "slidewin.peek",
            &["readonly"][..],
            &["write", "denyoom", "fast"][..],
            &["RO", "access"][..],
        ),
    ];
    for (entry, (name, has, lacks, key_flags)) in info.iter().zip(expect) {
        let Value::Array(e) = entry else {
            panic!("{entry:?}")
        };
        assert_eq!(redis::from_redis_value_ref::<String>(&e[0]).unwrap(), name);
        assert_eq!(redis::from_redis_value_ref::<i64>(&e[1]).unwrap(), -4);
        let flags = strings(&e[2]);
        for f in has {
            assert!(flags.contains(&f.to_string()), "{name}: {flags:?}");
        }
        for f in lacks {
            assert!(!flags.contains(&f.to_string()), "{name}: {flags:?}");
        }
        let Value::Array(specs) = &e[8] else {
            panic!("key specs {:?}", e[8])
        };
        assert_eq!(specs.len(), 1);
        let spec = as_map(&specs[0]);
        assert_eq!(
            strings(&spec["flags"]),
            key_flags.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        );
    }
}

fn command_docs(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .arg("slidewin.top")
        .query(&mut c)
        .unwrap();
    let docs = as_map(&docs);
    for (name, args) in [
        (
            "slidewin.check",
            &[
                ("key", "key", None),
                ("limit", "integer", None),
                ("window_ms", "integer", None),
                ("count", "integer", Some("COST")),
                ("request-id", "string", Some("ID")),
                ("detail", "pure-token", Some("DETAIL")),
                ("withmembers", "pure-token", Some("WITHMEMBERS")),
                ("witholdest", "pure-token", Some("WITHOLDEST")),
                ("shadow", "pure-token", Some("SHADOW")),
            ][..],
        ),
        (
            "slidewin.peek",
            &[
                ("key", "key", None),
                ("limit", "integer", None),
                ("window_ms", "integer", None),
                ("count", "integer", Some("COST")),
                ("detail", "pure-token", Some("DETAIL")),
                ("witholdest", "pure-token", Some("WITHOLDEST")),
            ][..],
        ),
        (
            "slidewin.top",
            &[
                ("count", "integer", None),
                ("outcome", "oneof", None),
                ("reset", "pure-token", Some("RESET")),
            ][..],
        ),
    ] {
        let doc = as_map(&docs[name]);
        assert!(
            redis::from_redis_value_ref::<String>(&doc["summary"])
                .unwrap()
                .len()
                > 20
        );
        assert_eq!(
            redis::from_redis_value_ref::<String>(&doc["since"]).unwrap(),
            "0.1.0"
        );
        assert!(redis::from_redis_value_ref::<String>(&doc["complexity"])
            .unwrap()
            .starts_with("O("));
        assert_eq!(
            redis::from_redis_value_ref::<String>(&doc["module"]).unwrap(),
            "slidewin"
        );
        let Value::Array(got) = &doc["arguments"] else {
            panic!("arguments")
        };
        assert_eq!(got.len(), args.len(), "{name}");
        for (arg, (arg_name, arg_type, token)) in got.iter().zip(args) {
            let a = as_map(arg);
            assert_eq!(
                redis::from_redis_value_ref::<String>(&a["name"]).unwrap(),
                *arg_name
            );
            assert_eq!(
                redis::from_redis_value_ref::<String>(&a["type"]).unwrap(),
                *arg_type
            );
            match token {
                Some(t) => {
                    assert_eq!(
                        redis::from_redis_value_ref::<String>(&a["token"]).unwrap(),
                        *t
                    );
                    assert_eq!(strings(&a["flags"]), vec!["optional".to_string()]);
                }
                None => assert!(!a.contains_key("token")),
            }
        }
    }
}

fn acl_categories(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .query(&mut c)
        .unwrap();
    let cats: Vec<Vec<String>> = info
        .iter()
        .map(|e| match e {
            Value::Array(e) => strings(&e[6]),
            other => panic!("{other:?}"),
        })
        .collect();
    // The expectation follows the server binary (does it export the API?),
    // not the module's own report of what it detected.
    let categories = server.exports_api("SetCommandACLCategories");
    assert_eq!(
        server.acl_categories(),
        categories,
        "the module's detection of RedisModule_SetCommandACLCategories"
    );
    let in_write: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .arg("write")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        in_write.contains(&"slidewin.check".to_string()),
        categories,
        "ACL CAT write lists slidewin.check exactly where categories exist"
    );
    if categories {
        assert_eq!(cats[0], ["@write", "@sortedset", "@slow"]);
        assert_eq!(cats[1], ["@read", "@sortedset", "@slow"]);
        let in_cat = |c: &mut Connection, cat: &str| -> Vec<String> {
            redis::cmd("ACL").arg("CAT").arg(cat).query(c).unwrap()
        };
        assert!(in_cat(&mut c, "write").contains(&"slidewin.check".to_string()));
        assert!(!in_cat(&mut c, "write").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "read").contains(&"slidewin.peek".to_string()));
        // PEEK is not O(1): it steps over expired entries.
        assert!(!in_cat(&mut c, "fast").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "slow").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "slow").contains(&"slidewin.check".to_string()));
        assert!(in_cat(&mut c, "sortedset").contains(&"slidewin.check".to_string()));
        // A user granted @read only may peek but not check.
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "reader", "on", "nopass", "~*", "+@read"])
            .query(&mut c)
            .unwrap();
        let dry = |c: &mut Connection, cmd: &str| -> String {
            redis::cmd("ACL")
                .arg(&["DRYRUN", "reader", cmd, "k", "1", "1000"])
                .query(c)
                .unwrap()
        };
        assert_eq!(dry(&mut c, "slidewin.peek"), "OK");
        assert!(dry(&mut c, "slidewin.check").contains("no permissions to run"));
    } else {
        // A server without RedisModule_SetCommandACLCategories (Redis 7.0)
        // has no per-command categories for modules: none are shown, and the
        // module still loads and works.
        assert!(cats.iter().all(|c| c.is_empty()), "{cats:?}");
        assert_eq!(check(&mut c, "k", 1, 1000), 1);
    }
}

fn acl_dryrun(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    for rule in [
        &["SETUSER", "rw", "on", ">pw", "~rl:*", "+@all"][..],
        &["SETUSER", "ro", "on", ">pw", "%R~rl:*", "+@all"][..],
        &["SETUSER", "other", "on", ">pw", "~other:*", "+@all"][..],
    ] {
        let _: () = redis::cmd("ACL").arg(rule).query(&mut c).unwrap();
    }
    let dry = |c: &mut Connection, user: &str, cmd: &str, key: &str| -> String {
        redis::cmd("ACL")
            .arg(&["DRYRUN", user, cmd, key, "5", "1000"])
            .query(c)
            .unwrap()
    };
    let cases = [
        ("rw", "slidewin.check", "rl:1", None),
        ("rw", "slidewin.peek", "rl:1", None),
        ("rw", "slidewin.check", "other:1", Some("other:1")),
        ("ro", "slidewin.peek", "rl:1", None),
        ("ro", "slidewin.check", "rl:1", Some("rl:1")),
        ("other", "slidewin.check", "rl:1", Some("rl:1")),
        ("other", "slidewin.peek", "rl:1", Some("rl:1")),
        ("other", "slidewin.check", "other:1", None),
    ];
    for (user, cmd, key, denied_key) in cases {
        let got = dry(&mut c, user, cmd, key);
        match denied_key {
            None => assert_eq!(got, "OK", "{user} {cmd} {key}"),
            Some(k) => assert!(
                got.contains(&format!("no permissions to access the '{k}' key")),
                "{user} {cmd} {key}: {got}"
            ),
        }
    }
    // And for real: the read-only user peeks, and is refused a check.
    let mut ro = server.conn();
    let _: () = redis::cmd("AUTH")
        .arg("ro")
        .arg("pw")
        .query(&mut ro)
        .unwrap();
    assert_eq!(
        detail(&mut ro, "SLIDEWIN.PEEK", &["rl:1", "5", "1000"])[0],
        1
    );
    let err = slidewin(&mut ro, "SLIDEWIN.CHECK", &["rl:1", "5", "1000"]).expect_err("noperm");
    assert!(
        error_text(&err).starts_with("NOPERM"),
        "{}",
        error_text(&err)
    );
}

fn resp3_detail(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", server.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    // The connection really speaks RESP3: the server says so, and a score
    // comes back as a RESP3 double.
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(info.split_whitespace().any(|f| f == "resp=3"), "{info}");
    let _: i64 = redis::cmd("ZADD")
        .arg("d")
        .arg(1.5)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let score: Value = redis::cmd("ZSCORE")
        .arg("d")
        .arg("m")
        .query(&mut c)
        .unwrap();
    assert_eq!(score, Value::Double(1.5));
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(&["r3", "3", "10000", "DETAIL"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Int(1),
            Value::Int(3),
            Value::Int(2),
            Value::Int(0),
            Value::Int(10000)
        ])
    );
    let v: Value = redis::cmd("SLIDEWIN.PEEK")
        .arg(&["r3", "3", "10000"])
        .query(&mut c)
        .unwrap();
    assert!(
        matches!(&v, Value::Array(items) if items.len() == 5),
        "{v:?}"
    );
}

/// The events the seed script's commands would fire, and WATCH seeing the
/// key change (and not change on a denial that trimmed nothing).
fn events_and_watch(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut events = KeyEvents::subscribe(&server);
    // An old entry the next check trims, then an allowed and a denied call.
    let now = server_ms(&mut c);
    let _: i64 = redis::cmd("ZADD")
        .arg("ev")
        .arg(now - 120_000)
        .arg("old")
        .query(&mut c)
        .unwrap();
    assert_eq!(check(&mut c, "ev", 1, 60_000), 1);
    assert_eq!(check(&mut c, "ev", 1, 60_000), 0);
    let seen = events.drain(&mut c);
    let names: Vec<&str> = seen
        .iter()
        .filter(|(ch, _)| ch.starts_with("__keyevent@0__:"))
        .map(|(ch, key)| {
            assert_eq!(key, "ev", "{seen:?}");
            ch.rsplit(':').next().unwrap_or("")
        })
        .collect();
    // The seed script's events for the allowed call, then the denial's.
    assert_eq!(
        names,
        [
            "zadd",
            "zremrangebyscore",
            "del",
            "zadd",
            "expire",
            "slidewin.denied"
        ],
        "{seen:?}"
    );
    // Every keyevent message has its keyspace twin.
    let spaces: Vec<&str> = seen
        .iter()
        .filter(|(ch, _)| ch == "__keyspace@0__:ev")
        .map(|(_, event)| event.as_str())
        .collect();
    assert_eq!(spaces, names, "{seen:?}");

    // WATCH: a CHECK that writes aborts the transaction; a denial that
    // trimmed nothing leaves it alone.
    let mut w = server.conn();
    for (writes, expect_abort) in [(true, true), (false, false)] {
        let _: () = redis::cmd("WATCH").arg("ev").query(&mut w).unwrap();
        let limit = if writes { 5 } else { 1 };
        assert_eq!(check(&mut c, "ev", limit, 60_000), i64::from(writes));
        let _: () = redis::cmd("MULTI").query(&mut w).unwrap();
        let _: String = redis::cmd("SET")
            .arg("other")
            .arg("x")
            .query(&mut w)
            .unwrap();
        let exec: Value = redis::cmd("EXEC").query(&mut w).unwrap();
        assert_eq!(
            exec == Value::Nil,
            expect_abort,
            "writes={writes}: {exec:?}"
        );
    }
}
