//! SLIDEWIN.TOP and the `slidewin.denied` keyspace event, on every server
//! of the suite: exact counts below the capacity, the heavy-hitters
//! guarantee and its error bound on a Zipf load of thousands of keys, the
//! period's rotation, RESET, the configuration at load and at runtime, ACL,
//! argument errors, events, and no trace in replication, RDB or AOF.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    top_counts_are_exact_below_the_capacity => exact_counts;
    top_lists_heavy_hitters_of_a_zipf_load_within_their_error => zipf_heavy_hitters;
    top_forgets_a_wave_after_the_period => rotation;
    top_reset_reads_then_clears => reset;
    top_follows_its_configuration_at_load_and_at_runtime => configuration;
    top_needs_admin_rights => acl;
    top_refuses_bad_arguments_and_changes_nothing => bad_arguments;
    a_denial_fires_one_event_and_an_allowed_call_none => denial_events;
    top_leaves_no_trace_in_replication_rdb_or_aof => no_trace;
    top_is_described_by_command_info => command_info;
}

/// The fields of `COMMAND INFO slidewin.top`.
fn top_command_info(c: &mut Connection) -> Vec<Value> {
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg(&["INFO", "slidewin.top"])
        .query(c)
        .unwrap();
    match info.into_iter().next() {
        Some(Value::Array(e)) => e,
        other => panic!("{other:?}"),
    }
}

fn command_info(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let e = top_command_info(&mut c);
    assert_eq!(
        redis::from_redis_value_ref::<String>(&e[0]).unwrap(),
        "slidewin.top"
    );
    assert_eq!(redis::from_redis_value_ref::<i64>(&e[1]).unwrap(), -1);
    let flags: Vec<String> = redis::from_redis_value_ref(&e[2]).unwrap();
    assert!(flags.contains(&"admin".to_string()), "{flags:?}");
    assert!(!flags.contains(&"write".to_string()), "{flags:?}");
    // No keys: nothing for cluster routing or ACL key patterns to match.
    assert_eq!(
        redis::from_redis_value_ref::<(i64, i64, i64)>(&Value::Array(e[3..6].to_vec())).unwrap(),
        (0, 0, 0)
    );
    let Value::Array(specs) = &e[8] else {
        panic!("{:?}", e[8])
    };
    assert!(specs.is_empty(), "{specs:?}");
    let err = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "slidewin.top", "10", "DENIED"])
        .query::<Value>(&mut c)
        .expect_err("a keyless command has no keys to get");
    assert_eq!(error_text(&err), "ERR The command has no key arguments");
}

/// `SLIDEWIN.TOP args...` as (key, count, error_bound) triples.
fn top(c: &mut Connection, args: &[&str]) -> Vec<(String, i64, i64)> {
    let v: Value = redis::cmd("SLIDEWIN.TOP")
        .arg(args)
        .query(c)
        .expect("SLIDEWIN.TOP");
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    items
        .iter()
        .map(|item| redis::from_redis_value_ref::<(String, i64, i64)>(item).expect("a triple"))
        .collect()
}

fn top_err(c: &mut Connection, args: &[&str]) -> String {
    let err = redis::cmd("SLIDEWIN.TOP")
        .arg(args)
        .query::<Value>(c)
        .expect_err("must be refused");
    error_text(&err)
}

/// Runs `calls` CHECKs of (key, limit) in pipelines; returns the denials per key.
fn run_checks(c: &mut Connection, calls: &[(String, i64)]) -> HashMap<String, i64> {
    let mut denied: HashMap<String, i64> = HashMap::new();
    for chunk in calls.chunks(500) {
        let mut pipe = redis::pipe();
        for (key, limit) in chunk {
            pipe.cmd("SLIDEWIN.CHECK").arg(key).arg(*limit).arg(600_000);
        }
        let replies: Vec<i64> = pipe.query(c).expect("pipeline");
        for ((key, _), r) in chunk.iter().zip(replies) {
            if r == 0 {
                *denied.entry(key.clone()).or_default() += 1;
            }
        }
    }
    denied
}

fn exact_counts(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    // Key i gets 1 allowed call and i denied ones (limit 1).
    let calls: Vec<(String, i64)> = (1..=6)
        .flat_map(|i| std::iter::repeat_n((format!("sms:limit:10.0.0.{i}"), 1), i + 1))
        .collect();
    let denied = run_checks(&mut c, &calls);
    assert_eq!(denied.values().sum::<i64>(), 21);
    let expected: Vec<(String, i64, i64)> = (4..=6)
        .rev()
        .map(|i| (format!("sms:limit:10.0.0.{i}"), i, 0))
        .collect();
    assert_eq!(top(&mut c, &["3"]), expected);
    assert_eq!(
        top(&mut c, &["3", "DENIED"]),
        expected,
        "DENIED is the default"
    );
    assert_eq!(
        top(&mut c, &[]).len(),
        6,
        "10 unless given, as many as there are"
    );
    // Each key was allowed once.
    let allowed = top(&mut c, &["10", "ALLOWED"]);
    assert_eq!(allowed.len(), 6);
    assert!(
        allowed.iter().all(|(_, n, e)| *n == 1 && *e == 0),
        "{allowed:?}"
    );
    // MCHECK: a denial is charged to the key whose rule had no room.
    let v: i64 = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&["2", "{p}ip", "100", "60000", "{p}phone", "1", "60000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 1);
    let v: i64 = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&["2", "{p}ip", "100", "60000", "{p}phone", "1", "60000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 0);
    let denied: Vec<String> = top(&mut c, &["100"]).into_iter().map(|t| t.0).collect();
    assert!(denied.contains(&"{p}phone".to_string()));
    assert!(!denied.contains(&"{p}ip".to_string()), "{denied:?}");
    // PEEK decides nothing: it is not counted.
    let _: Value = redis::cmd("SLIDEWIN.PEEK")
        .arg(&["peeked", "1", "1000"])
        .query(&mut c)
        .unwrap();
    assert!(!top(&mut c, &["100", "ALLOWED"])
        .iter()
        .any(|t| t.0 == "peeked"));
}

fn zipf_heavy_hitters(flavor: Flavor) {
    const CAPACITY: usize = 32;
    let server = Options::new(flavor)
        .module_args(&["top-capacity", &CAPACITY.to_string()])
        .start();
    let mut c = server.conn();
    // 3000 keys, 30000 calls, Zipf (s = 1.2): a few keys take most calls.
    let n_keys = 3_000;
    let cumulative: Vec<f64> = (1..=n_keys)
        .scan(0.0, |acc, k| {
            *acc += 1.0 / f64::from(k).powf(1.2);
            Some(*acc)
        })
        .collect();
    let total = cumulative[cumulative.len() - 1];
    let mut rng = StdRng::seed_from_u64(42);
    let calls: Vec<(String, i64)> = (0..30_000)
        .map(|_| {
            let x = rng.random::<f64>() * total;
            let k = cumulative
                .partition_point(|&c| c < x)
                .min(n_keys as usize - 1);
            (format!("api:{k}"), 1)
        })
        .collect();
    let truth = run_checks(&mut c, &calls);
    let n: i64 = truth.values().sum();
    assert!(truth.len() > CAPACITY * 10, "{} keys denied", truth.len());
    let listed = top(&mut c, &[&CAPACITY.to_string()]);
    assert_eq!(listed.len(), CAPACITY);
    let listed: HashMap<String, (i64, i64)> =
        listed.into_iter().map(|(k, n, e)| (k, (n, e))).collect();
    let threshold = n / CAPACITY as i64;
    let heavy: Vec<&String> = truth
        .iter()
        .filter(|(_, &d)| d > threshold)
        .map(|(k, _)| k)
        .collect();
    assert!(heavy.len() >= 3, "the load has heavy hitters");
    for k in &heavy {
        assert!(
            listed.contains_key(*k),
            "{k} ({} denials > N/capacity = {threshold}) is listed",
            truth[*k]
        );
    }
    for (k, (count, error)) in &listed {
        let t = truth.get(k).copied().unwrap_or(0);
        assert!(
            count - error <= t && t <= *count,
            "{k}: true {t}, listed {count} - {error}"
        );
        assert!(
            *error <= threshold,
            "{k}: error {error} above N/capacity {threshold}"
        );
    }
    eprintln!(
        "zipf ({flavor:?}): {n} denials over {} keys, capacity {CAPACITY}, {} keys above N/capacity = {threshold}, all listed",
        truth.len(),
        heavy.len()
    );
}

/// The server's TIME in microseconds.
fn time_us(v: &Value) -> i64 {
    let (s, us): (i64, i64) = redis::from_redis_value_ref(v).expect("TIME");
    s * 1_000_000 + us
}

/// Runs `cmd` in a transaction between two TIME reads: its reply and the
/// server-time bounds (µs) of the moment it ran.
fn timed(c: &mut Connection, cmd: &redis::Cmd) -> (Value, i64, i64) {
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("TIME")
        .add_command(cmd.clone())
        .cmd("TIME")
        .query(c)
        .expect("MULTI TIME cmd TIME");
    (
        replies[1].clone(),
        time_us(&replies[0]),
        time_us(&replies[2]),
    )
}

fn rotation(flavor: Flavor) {
    // Four epochs of 100 ms: a wave stays listed between 300 ms (3/4 of the
    // period) and 400 ms after it. Judged on the server's own clock, read
    // around each call, so a slow machine delays the polls but cannot make
    // the test pass or fail.
    const PERIOD_US: i64 = 400_000;
    let server = Options::new(flavor)
        .module_args(&["top-period-ms", "400"])
        .start();
    let mut c = server.conn();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("SLIDEWIN.CHECK")
        .arg(&["wave", "1", "600000"])
        .cmd("SLIDEWIN.CHECK")
        .arg(&["wave", "1", "600000"])
        .cmd("SLIDEWIN.CHECK")
        .arg(&["wave", "1", "600000"])
        .cmd("TIME")
        .cmd("SLIDEWIN.TOP")
        .query(&mut c)
        .expect("the wave");
    let (wave_from, wave_to) = (time_us(&replies[0]), time_us(&replies[4]));
    // Listed at once (in the same transaction, so no stall can intervene).
    let listed: Vec<(String, i64, i64)> = redis::from_redis_value_ref(&replies[5]).expect("TOP");
    assert_eq!(listed, [("wave".to_string(), 2, 0)]);
    let mut query = redis::cmd("SLIDEWIN.TOP");
    query.arg("DENIED");
    let (mut last_listed, mut first_empty) = (None, None);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while first_empty.is_none() && std::time::Instant::now() < deadline {
        let (reply, before, after) = timed(&mut c, &query);
        let listed = matches!(&reply, Value::Array(items) if !items.is_empty());
        if listed {
            last_listed = Some(before);
        } else {
            first_empty = Some(after);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let first_empty = first_empty.expect("the wave is still listed 10 s after it");
    let last_listed = last_listed.expect("the wave was listed at first");
    // Listed at a moment no later than `last_listed`: before the period ran
    // out for the newest record. Gone at a moment no earlier than
    // `first_empty`: at least 3/4 of the period after the oldest one.
    assert!(
        last_listed < wave_to + PERIOD_US + 1_000,
        "still listed {} ms after the wave (period 400 ms)",
        (last_listed - wave_to) / 1000
    );
    assert!(
        first_empty >= wave_from + PERIOD_US * 3 / 4 - 1_000,
        "forgotten {} ms after the wave, before 3/4 of the period",
        (first_empty - wave_from) / 1000
    );
    eprintln!(
        "rotation ({flavor:?}): listed until {} ms, gone by {} ms after the wave",
        (last_listed - wave_to) / 1000,
        (first_empty - wave_from) / 1000
    );
    // A new wave is counted afresh.
    run_checks(&mut c, &[("wave".into(), 1)]);
    assert_eq!(top(&mut c, &[]), [("wave".to_string(), 1, 0)]);
}

fn reset(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    run_checks(&mut c, &[("r".into(), 1), ("r".into(), 1), ("r".into(), 1)]);
    assert_eq!(
        top(&mut c, &["5", "RESET"]),
        [("r".to_string(), 2, 0)],
        "read, then cleared"
    );
    assert!(top(&mut c, &[]).is_empty());
    assert!(
        top(&mut c, &["ALLOWED"]).is_empty(),
        "both outcomes cleared"
    );
    // The keys themselves are untouched.
    assert_eq!(zcard(&mut c, "r"), 1);
}

fn configuration(flavor: Flavor) {
    // Off at load: TOP says so, and checks work as ever.
    let off = Options::new(flavor)
        .module_args(&["top-capacity", "0"])
        .start();
    let mut c = off.conn();
    run_checks(&mut c, &[("k".into(), 1), ("k".into(), 1)]);
    assert_eq!(
        top_err(&mut c, &[]),
        "ERR the heavy-hitters summary is off: slidewin.top-capacity is 0"
    );
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_top_capacity").as_deref(),
        Some("0")
    );
    // On at runtime, with a capacity of 2 keys.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "slidewin.top-capacity", "2"])
        .query(&mut c)
        .unwrap();
    let calls: Vec<(String, i64)> = (0..5)
        .flat_map(|i| std::iter::repeat_n((format!("k{i}"), 1), 3))
        .collect();
    run_checks(&mut c, &calls);
    assert_eq!(top(&mut c, &["100"]).len(), 2, "at most the capacity");
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_top_capacity").as_deref(),
        Some("2")
    );
    let get: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "slidewin.top-period-ms"])
        .query(&mut c)
        .unwrap();
    assert_eq!(get, ["slidewin.top-period-ms", "300000"]);
    // Out of range: refused by the server, and nothing changes.
    for (name, value) in [
        ("slidewin.top-capacity", "-1"),
        ("slidewin.top-period-ms", "99"),
    ] {
        let refused = redis::cmd("CONFIG")
            .arg(&["SET", name, value])
            .query::<()>(&mut c)
            .is_err();
        assert!(refused, "{name} {value} accepted");
    }
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_top_capacity").as_deref(),
        Some("2")
    );
    // A bad value at load refuses the module, naming the range.
    let log = Options::new(flavor)
        .module_args(&["top-period-ms", "50"])
        .start_expecting_failure();
    assert!(
        log.contains("top-period-ms must be an integer between 100 and 86400000"),
        "{log}"
    );
    // Memory at the default capacity, reported by INFO.
    let on = Options::new(flavor).start();
    let mut c = on.conn();
    let calls: Vec<(String, i64)> = (0..2_000).map(|i| (format!("sms:limit:{i}"), 1)).collect();
    run_checks(&mut c, &calls);
    run_checks(&mut c, &calls);
    let bytes: u64 = info_field(&mut c, "slidewin", "slidewin_top_memory_bytes")
        .and_then(|v| v.parse().ok())
        .expect("top_memory_bytes");
    let keys: u64 = info_field(&mut c, "slidewin", "slidewin_top_keys_tracked")
        .and_then(|v| v.parse().ok())
        .expect("top_keys_tracked");
    assert_eq!(keys, 2 * 128, "one epoch of each outcome, full");
    assert!(bytes > 0 && bytes < 200_000, "{bytes} bytes");
    eprintln!("top memory ({flavor:?}): {bytes} bytes with {keys} keys tracked at capacity 128");
}

fn acl(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    // Tied to the server binary, not to the module's own detection.
    let categories = server.exports_api("SetCommandACLCategories");
    assert_eq!(server.acl_categories(), categories);
    // Without the categories API (Redis 7.0) the command is granted by name.
    let deny = if categories {
        "-@admin"
    } else {
        "-slidewin.top"
    };
    for rule in [
        &["SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", deny][..],
        &["SETUSER", "ops", "on", ">pw", "~*", "&*", "+@all"][..],
    ] {
        let _: () = redis::cmd("ACL").arg(rule).query(&mut c).unwrap();
    }
    if categories {
        let e = top_command_info(&mut c);
        let cats: Vec<String> = redis::from_redis_value_ref(&e[6]).unwrap();
        for cat in ["@admin", "@dangerous", "@slow"] {
            assert!(cats.contains(&cat.to_string()), "{cats:?}");
        }
        let dangerous: Vec<String> = redis::cmd("ACL")
            .arg(&["CAT", "dangerous"])
            .query(&mut c)
            .unwrap();
        assert!(dangerous.contains(&"slidewin.top".to_string()));
    }
    let dry = |c: &mut Connection, user: &str| -> String {
        redis::cmd("ACL")
            .arg(&["DRYRUN", user, "slidewin.top"])
            .query(c)
            .unwrap()
    };
    assert_eq!(dry(&mut c, "ops"), "OK");
    assert!(
        dry(&mut c, "app").contains("slidewin.top"),
        "{}",
        dry(&mut c, "app")
    );
    // And for real: the app user may check but not list.
    let mut app = server.conn();
    let _: () = redis::cmd("AUTH")
        .arg(&["app", "pw"])
        .query(&mut app)
        .unwrap();
    assert_eq!(check(&mut app, "k", 5, 1000), 1);
    let err = redis::cmd("SLIDEWIN.TOP")
        .query::<Value>(&mut app)
        .expect_err("refused");
    assert_eq!(err.code(), Some("NOPERM"), "{err:?}");
}

fn bad_arguments(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    run_checks(&mut c, &[("b".into(), 1), ("b".into(), 1)]);
    let before = top(&mut c, &[]);
    let errors_before = info_field(&mut c, "slidewin", "slidewin_errors");
    for (args, expected) in [
        (
            &["0"][..],
            "ERR count must be an integer between 1 and 100000",
        ),
        (
            &["100001"][..],
            "ERR count must be an integer between 1 and 100000",
        ),
        (
            &["-3"][..],
            "ERR count must be an integer between 1 and 100000",
        ),
        (
            &["DENIED", "0"][..],
            "ERR count must be an integer between 1 and 100000",
        ),
        (
            &["3", "DENIED", "4"][..],
            "ERR option count given more than once",
        ),
        (
            &["DENIED", "ALLOWED"][..],
            "ERR DENIED and ALLOWED exclude each other",
        ),
        (
            &["RESET", "RESET"][..],
            "ERR option RESET given more than once",
        ),
        (&["5", "SOON"][..], "ERR unknown option 'SOON'"),
        (&["5", "RESET", "NOW"][..], "ERR unknown option 'NOW'"),
    ] {
        assert_eq!(top_err(&mut c, args), expected, "{args:?}");
    }
    // Nothing changed: a refused RESET did not clear.
    assert_eq!(top(&mut c, &[]), before);
    let errors: i64 = info_field(&mut c, "slidewin", "slidewin_errors")
        .unwrap()
        .parse()
        .unwrap();
    let was: i64 = errors_before.unwrap().parse().unwrap();
    assert_eq!(errors, was + 9);
    // The count may come after the words, as in every other option list.
    assert_eq!(top(&mut c, &["DENIED", "1"]), before[..1]);
}

fn denial_events(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut events = KeyEvents::subscribe(&server);
    let denied_events = |events: &mut KeyEvents, c: &mut Connection| -> Vec<(String, String)> {
        events
            .drain(c)
            .into_iter()
            .filter(|(ch, msg)| ch.ends_with(":slidewin.denied") || msg == "slidewin.denied")
            .collect()
    };
    assert_eq!(check(&mut c, "sms:limit:1.2.3.4", 1, 60_000), 1);
    assert!(
        denied_events(&mut events, &mut c).is_empty(),
        "none for an allowed call"
    );
    assert_eq!(check(&mut c, "sms:limit:1.2.3.4", 1, 60_000), 0);
    assert_eq!(check(&mut c, "sms:limit:1.2.3.4", 1, 60_000), 0);
    let got = denied_events(&mut events, &mut c);
    let one = [
        (
            "__keyspace@0__:sms:limit:1.2.3.4".to_string(),
            "slidewin.denied".to_string(),
        ),
        (
            "__keyevent@0__:slidewin.denied".to_string(),
            "sms:limit:1.2.3.4".to_string(),
        ),
    ];
    assert_eq!(
        got,
        [one.clone(), one].concat(),
        "one event per denial, on both channels"
    );
    // PEEK, even a "denied" one, decides nothing.
    let _: Value = redis::cmd("SLIDEWIN.PEEK")
        .arg(&["sms:limit:1.2.3.4", "1", "60000"])
        .query(&mut c)
        .unwrap();
    assert!(denied_events(&mut events, &mut c).is_empty());
    // MCHECK: the event names the key whose rule had no room.
    for expected in [0usize, 1] {
        let _: i64 = redis::cmd("SLIDEWIN.MCHECK")
            .arg(&["2", "{m}ip", "10", "60000", "{m}phone", "1", "60000"])
            .query(&mut c)
            .unwrap();
        let got = denied_events(&mut events, &mut c);
        assert_eq!(got.len(), 2 * expected, "{got:?}");
        assert!(got
            .iter()
            .all(|(ch, msg)| ch.contains("{m}phone") || msg == "{m}phone"));
    }
    // With notifications off, a denial publishes nothing.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", ""])
        .query(&mut c)
        .unwrap();
    assert_eq!(check(&mut c, "sms:limit:1.2.3.4", 1, 60_000), 0);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "KEA"])
        .query(&mut c)
        .unwrap();
    assert!(
        denied_events(&mut events, &mut c).is_empty(),
        "off means off"
    );
}

fn no_trace(flavor: Flavor) {
    let master = Options::new(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let replica = replica_without_module(&master, flavor);
    let mut c = master.conn();
    let calls: Vec<(String, i64)> = (0..200).map(|i| (format!("t{}", i % 7), 3)).collect();
    run_checks(&mut c, &calls);
    let _ = top(&mut c, &["5", "RESET"]);
    let _ = top(&mut c, &["ALLOWED"]);
    let mut r = assert_replica_matches(&master, &replica);
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut r)
        .unwrap();
    assert!(!stats.to_lowercase().contains("slidewin"), "{stats}");
    let names: std::collections::BTreeSet<String> = aof_commands(&master.dir)
        .into_iter()
        .filter_map(|cmd| {
            cmd.first()
                .map(|n| String::from_utf8_lossy(n).to_uppercase())
        })
        .collect();
    let allowed: std::collections::BTreeSet<String> = [
        "MULTI",
        "EXEC",
        "SELECT",
        "ZADD",
        "PEXPIREAT",
        "ZREMRANGEBYSCORE",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert!(names.is_subset(&allowed), "the AOF holds {names:?}");
    // An RDB snapshot holds the keys only: a server started from it without
    // the module has the same data (the replica's initial sync also was one).
    let saved = wait_until(Duration::from_secs(20), || {
        redis::cmd("SAVE").query::<()>(&mut c).is_ok()
    });
    assert!(saved, "SAVE (after the replica's sync) did not succeed");
    assert_eq!(digest(&mut c), digest(&mut r));
}
