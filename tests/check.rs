//! SLIDEWIN.CHECK against real servers: every server of the suite.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashSet;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

// `(Zset, Compact)`: the semantic tests that read only replies, entries,
// expiries and digests run again on compact logs (support's `entries` and
// `zcard` read those from their DUMP payloads). The boundary and
// future-entry tests have compact twins of their own that place entries
// with `SLIDEWIN.APPLY`, which only a compact log takes.
on_every_server! {
    sms_example => sms_example;
    window_slides => window_slides(Zset, Compact);
    witholdest_replies_the_oldest_entrys_age => oldest_age(Zset, Compact);
    boundary_entry_exactly_window_old_is_gone => boundary;
    boundary_entry_exactly_window_old_is_gone => boundary_compact(Compact);
    denied_calls_add_nothing_and_keep_the_ttl => denied_keeps_ttl(Zset, Compact);
    expiry_is_newest_score_plus_window => expiry_follows_newest(Zset, Compact);
    entries_from_the_future_keep_the_key_alive => future_entries;
    entries_from_the_future_keep_the_key_alive => future_entries_compact(Compact);
    any_sorted_set_named_is_taken_as_a_log => foreign_sorted_set;
    bad_arguments_are_refused_and_change_nothing => bad_arguments(Zset, Compact);
    wrong_arity_is_worded_by_the_server => wrong_arity(Zset, Compact);
    wrongtype_on_other_types => wrongtype(Zset, Compact);
    binary_keys => binary_keys(Zset, Compact);
    continues_keys_written_by_the_seed_lua_script => seed_script_keys;
    multi_exec_admits_exactly_the_limit => multi_exec(Zset, Compact);
    callable_from_lua => from_lua(Zset, Compact);
    command_getkeys_and_info => command_metadata;
    replica_without_module_matches => replica_matches;
    aof_reload_and_restart_without_module => aof_and_restart;
    rdb_restart_without_module => rdb_restart;
}

/// A server for a test that runs on both log types, which it says it makes
/// (`slidewin.log-type`).
fn start(flavor: Flavor, log: LogType) -> Server {
    let server = Options::new(flavor).log_type(log).start();
    let reported: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "slidewin.log-type"])
        .query(&mut server.conn())
        .expect("CONFIG GET slidewin.log-type");
    assert_eq!(reported, ["slidewin.log-type", log.name()], "{log:?}");
    server
}

fn sms_example(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let key = "sms:limit:1.2.3.4";
    let replies: Vec<i64> = (0..7).map(|_| check(&mut c, key, 5, 60_000)).collect();
    assert_eq!(replies, [1, 1, 1, 1, 1, 0, 0]);
    assert_eq!(zcard(&mut c, key.as_bytes()), 5);
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut c).expect("PTTL");
    assert!(
        (50_000..=60_000).contains(&pttl),
        "TTL should be about 60 s, got {pttl} ms"
    );
    // Members are integers, distinct, and never look like the script's.
    let members: HashSet<Vec<u8>> = entries(&mut c, key.as_bytes())
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    // Short ids: one more than the newest entry's, from 1 in a new key.
    let expected: HashSet<Vec<u8>> = (1..=5).map(|i: i64| i.to_string().into_bytes()).collect();
    assert_eq!(members, expected);
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(&mut c)
        .expect("OBJECT ENCODING");
    assert_eq!(encoding, "listpack");
}

fn window_slides(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let key = "slide";
    let window = 2_000;
    assert_eq!(check(&mut c, key, 2, window), 1);
    let first = entries(&mut c, key.as_bytes())[0].1 as i64;
    // A second entry half a window later (bounded wait on the server clock).
    assert!(wait_until(Duration::from_secs(10), || server_ms(&mut c)
        > first + window / 2));
    assert_eq!(check(&mut c, key, 2, window), 1);
    assert_eq!(check(&mut c, key, 2, window), 0);
    // Once the first entry has left the window a slot is free again.
    assert!(wait_until(Duration::from_secs(10), || server_ms(&mut c)
        > first + window));
    assert_eq!(check(&mut c, key, 2, window), 1);
    let scores: Vec<i64> = entries(&mut c, key.as_bytes())
        .iter()
        .map(|(_, s)| *s as i64)
        .collect();
    let newest = *scores.last().expect("an entry");
    assert!(!scores.contains(&first), "the first entry was trimmed");
    // Exactly the entries inside the last call's window remain: the second
    // one (about half a window old) and the new one.
    assert!(scores.iter().all(|&s| s > newest - window), "{scores:?}");
    assert_eq!(scores.len(), 2, "{scores:?}");
}

/// WITHOLDEST (CHECK and PEEK) appends `oldest_age_ms` to the DETAIL
/// reply: the age of the oldest entry still in the window on the server's
/// clock, -1 when there is none; WITHMEMBERS' array stays last; MCHECK
/// refuses it.
fn oldest_age(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let key = "old";
    let window = 1_500;
    let call = |c: &mut Connection, command: &str, extra: &[&str]| -> Vec<Value> {
        redis::cmd(command)
            .arg(key)
            .arg(3)
            .arg(window)
            .arg(extra)
            .query(c)
            .expect(command)
    };
    let int = |v: &Value| -> i64 { redis::from_redis_value_ref(v).expect("an integer") };
    // Nothing yet: -1, and the peek creates nothing.
    let r = call(&mut c, "SLIDEWIN.PEEK", &["WITHOLDEST"]);
    assert_eq!(r.iter().map(int).collect::<Vec<_>>(), [1, 3, 3, 0, 0, -1]);
    assert!(!exists(&mut c, key));
    // The first call's own entry is the oldest: age 0.
    let r = call(&mut c, "SLIDEWIN.CHECK", &["WITHOLDEST"]);
    assert_eq!((r.len(), int(&r[0]), int(&r[5])), (6, 1, 0));
    let first = entries(&mut c, key.as_bytes())[0].1 as i64;
    assert!(wait_until(Duration::from_secs(10), || server_ms(&mut c) > first + 300));
    let r = call(&mut c, "SLIDEWIN.CHECK", &["withoLDest", "WITHMEMBERS"]);
    let after = server_ms(&mut c);
    assert_eq!(r.len(), 7, "{r:?}");
    assert!(matches!(&r[6], Value::Array(m) if m.len() == 1), "{r:?}");
    let age = int(&r[5]);
    assert!(
        (300..=after - first).contains(&age),
        "{age} {first} {after}"
    );
    // A denial and a peek report the oldest too, as the clock moves.
    call(&mut c, "SLIDEWIN.CHECK", &["DETAIL"]);
    let before = server_ms(&mut c);
    let r = call(&mut c, "SLIDEWIN.CHECK", &["WITHOLDEST"]);
    let after = server_ms(&mut c);
    assert_eq!(int(&r[0]), 0, "the fourth call is denied");
    assert!(
        (before - first..=after - first).contains(&int(&r[5])),
        "{r:?}"
    );
    let r = call(
        &mut c,
        "SLIDEWIN.PEEK",
        &["COST", "2", "DETAIL", "WITHOLDEST"],
    );
    assert!(int(&r[5]) >= before - first, "{r:?}");
    // Once the first entry has left the window, the second is the oldest.
    let second = entries(&mut c, key.as_bytes())[1].1 as i64;
    assert!(wait_until(Duration::from_secs(10), || server_ms(&mut c)
        > first + window));
    let before = server_ms(&mut c);
    let r = call(&mut c, "SLIDEWIN.PEEK", &["WITHOLDEST"]);
    let after = server_ms(&mut c);
    let age = int(&r[5]);
    assert!((before - second..=after - second).contains(&age), "{age}");
    // Several windows have no one oldest entry.
    let e = redis::cmd("SLIDEWIN.MCHECK")
        .arg(1)
        .arg(key)
        .arg(3)
        .arg(window)
        .arg("WITHOLDEST")
        .query::<Value>(&mut c)
        .expect_err("MCHECK WITHOLDEST");
    assert_eq!(error_text(&e), "ERR unknown option 'WITHOLDEST'");
    let e = redis::cmd("SLIDEWIN.PEEK")
        .arg(&[key, "3", "1", "WITHOLDEST", "witholdest"])
        .query::<Value>(&mut c)
        .expect_err("WITHOLDEST twice");
    assert!(error_text(&e).contains("WITHOLDEST"), "{e}");
}

/// An entry exactly `window_ms` old has expired; one a millisecond younger
/// still counts. A later call never reads an earlier clock, so the exact
/// case is allowed on every server. Where the server freezes its clock for
/// a script (asked of the server), the younger entry must also still count;
/// where the clock may tick inside the script, that outcome is checked
/// against the score the call actually used.
fn boundary(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let script = r"
        redis.call('SLIDEWIN.CHECK', KEYS[1], 1000, 100000)
        local now = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
        redis.call('ZADD', KEYS[2], now - tonumber(ARGV[1]) + tonumber(ARGV[2]), 'old')
        local r = redis.call('SLIDEWIN.CHECK', KEYS[2], 1, ARGV[1])
        return {r, now, redis.call('ZSCORE', KEYS[2], 'old') or false,
                redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]}
    ";
    let window = 10_000i64;
    let frozen = server.clock_frozen_in_script();
    for (offset, key) in [(0i64, "exact"), (1, "younger")] {
        let v: Vec<Value> = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("probe")
            .arg(key)
            .arg(window)
            .arg(offset)
            .query(&mut c)
            .expect("EVAL");
        let allowed: i64 = redis::from_redis_value_ref(&v[0]).expect("reply");
        let now: i64 = redis::from_redis_value_ref(&v[1]).expect("now");
        let old_present = !matches!(v[2], Value::Nil);
        let newest: f64 = redis::from_redis_value_ref(&v[3]).expect("newest");
        let old_score = now - window + offset;
        if allowed == 1 {
            // The call's clock is the score it wrote.
            let call_now = newest as i64;
            assert!(
                !old_present,
                "{key}: a slot was free, so 'old' must be gone"
            );
            assert!(old_score <= call_now - window, "{key}: trimmed too early");
        } else {
            assert!(old_present, "{key}: denied, so 'old' must still count");
        }
        if offset == 0 {
            assert_eq!(
                allowed, 1,
                "{key}: an entry window_ms old has left the window"
            );
        } else if frozen {
            assert_eq!(allowed, 0, "{key}: one clock for the whole script");
        }
    }
}

fn denied_keeps_ttl(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let key = b"deny";
    assert_eq!(check_raw(&mut c, &[key, b"2", b"100000"]).unwrap(), 1);
    assert_eq!(check_raw(&mut c, &[key, b"2", b"100000"]).unwrap(), 1);
    let before = entries(&mut c, key);
    let expire = pexpiretime(&mut c, key);
    for _ in 0..3 {
        assert_eq!(check_raw(&mut c, &[key, b"2", b"100000"]).unwrap(), 0);
    }
    assert_eq!(entries(&mut c, key), before);
    assert_eq!(pexpiretime(&mut c, key), expire);
}

fn expiry_follows_newest(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let key = b"exp";
    for _ in 0..4 {
        assert_eq!(check_raw(&mut c, &[key, b"10", b"50000"]).unwrap(), 1);
        let newest = entries(&mut c, key).last().expect("an entry").1 as i64;
        assert_eq!(pexpiretime(&mut c, key), newest + 50_000);
    }
}

fn future_entries(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let key = b"future";
    let ahead = server_ms(&mut c) + 100_000;
    let _: i64 = redis::cmd("ZADD")
        .arg(key)
        .arg(ahead)
        .arg(format!("{ahead}-client-clock-ahead"))
        .query(&mut c)
        .unwrap();
    assert_eq!(check_raw(&mut c, &[key, b"2", b"60000"]).unwrap(), 1);
    assert_eq!(pexpiretime(&mut c, key), ahead + 60_000);
    // The future entry counts: the limit of 2 is now reached.
    assert_eq!(check_raw(&mut c, &[key, b"2", b"60000"]).unwrap(), 0);
}

/// What the reference and the operating guide say: a sorted set made for
/// something else (a leaderboard) is read as a log when a call names it:
/// scores are taken as ms, those a window old are trimmed, the call's entry
/// is added and the key gets an expiry. A PEEK reads it the same way and
/// changes nothing; a denied call trims but adds nothing.
fn foreign_sorted_set(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let _: i64 = redis::cmd("ZADD")
        .arg(&["lb", "100", "alice", "200", "bob"])
        .query(&mut c)
        .unwrap();
    let peek = detail(&mut c, "SLIDEWIN.PEEK", &["lb", "5", "60000"]);
    assert_eq!(
        peek[..3],
        [1, 5, 5],
        "scores 100 and 200 (ms) are long out of the window"
    );
    assert_eq!(entries(&mut c, b"lb").len(), 2, "PEEK changed nothing");
    let ttl: i64 = redis::cmd("PTTL").arg("lb").query(&mut c).unwrap();
    assert_eq!(ttl, -1, "no expiry before a CHECK");
    let before = server_ms(&mut c);
    assert_eq!(check(&mut c, "lb", 5, 60_000), 1);
    let left = entries(&mut c, b"lb");
    assert_eq!(
        left.len(),
        1,
        "alice and bob trimmed, one entry added: {left:?}"
    );
    assert!(
        left[0].1 as i64 >= before,
        "the entry is scored with the server time"
    );
    let at = pexpiretime(&mut c, b"lb");
    assert_eq!(at, left[0].1 as i64 + 60_000, "an expiry was set");
    // A set whose scores are large numbers (e.g. points) is read as entries
    // from the future: they count, so the call is refused, and nothing of
    // it is trimmed.
    let _: i64 = redis::cmd("ZADD")
        .arg("points")
        .arg(9_000_000_000_000_i64)
        .arg("carol")
        .query(&mut c)
        .unwrap();
    assert_eq!(check(&mut c, "points", 1, 60_000), 0);
    assert_eq!(entries(&mut c, b"points").len(), 1);
}

fn bad_arguments(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    const LIMIT: &str = "ERR limit must be an integer between 1 and 100000 (slidewin.max-limit)";
    const WINDOW: &str =
        "ERR window_ms must be an integer between 1 and 31622400000 (slidewin.max-window-ms)";
    let cases: &[(&[u8], &[u8], &str)] = &[
        (b"0", b"1000", LIMIT),
        (b"-1", b"1000", LIMIT),
        (b"100001", b"1000", LIMIT),
        (b"1.5", b"1000", LIMIT),
        (b"1e3", b"1000", LIMIT),
        (b"", b"1000", LIMIT),
        (b" 5", b"1000", LIMIT),
        (b"+5", b"1000", LIMIT),
        (b"05", b"1000", LIMIT),
        (b"99999999999999999999999", b"1000", LIMIT),
        (b"\xff\xfe", b"1000", LIMIT),
        (b"5", b"0", WINDOW),
        (b"5", b"-1000", WINDOW),
        (b"5", b"31622400001", WINDOW),
        (b"5", b"1.5", WINDOW),
        (b"5", b"1e3", WINDOW),
        (b"5", b"", WINDOW),
        (b"5", b"inf", WINDOW),
        (b"5", b"9223372036854775808", WINDOW),
    ];
    // A key that exists must come out untouched, a missing one uncreated.
    check_raw(&mut c, &[b"present", b"5", b"60000"]).unwrap();
    let before = digest(&mut c);
    for (limit, window, expected) in cases {
        for key in [&b"present"[..], b"absent"] {
            let err = check_raw(&mut c, &[key, limit, window]).expect_err("must be refused");
            assert_eq!(
                error_text(&err),
                *expected,
                "limit {limit:?} window {window:?}"
            );
        }
    }
    assert_eq!(digest(&mut c), before);
    assert!(!exists(&mut c, b"absent"));
    // The valid extremes are accepted.
    assert_eq!(
        check_raw(&mut c, &[b"edge", b"100000", b"31622400000"]).unwrap(),
        1
    );
    assert_eq!(check_raw(&mut c, &[b"edge2", b"1", b"1"]).unwrap(), 1);
}

fn wrong_arity(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let expected = "ERR wrong number of arguments for 'slidewin.check' command";
    for args in [&[][..], &[&b"k"[..]][..], &[&b"k"[..], b"5"][..]] {
        let err = check_raw(&mut c, args).expect_err("arity");
        assert_eq!(error_text(&err), expected, "args {args:?}");
    }
    let err = check_raw(&mut c, &[b"k", b"5", b"1000", b"extra"]).expect_err("extra");
    assert_eq!(error_text(&err), "ERR unknown option 'extra'");
    assert!(!exists(&mut c, b"k"));
}

fn wrongtype(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("list")
        .arg("a")
        .query(&mut c)
        .unwrap();
    let _: bool = redis::cmd("EXPIRE")
        .arg("list")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let before = digest(&mut c);
    for key in ["str", "list"] {
        let err = check_raw(&mut c, &[key.as_bytes(), b"5", b"60000"]).expect_err("wrongtype");
        assert_eq!(
            error_text(&err),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }
    assert_eq!(digest(&mut c), before);
    let v: String = redis::cmd("GET").arg("str").query(&mut c).unwrap();
    assert_eq!(v, "v");
}

fn binary_keys(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let key: &[u8] = b"bin\x00\xff\xfe\r\n key";
    let other: &[u8] = b"bin\x00\xff\xfe\r\n kez";
    let replies: Vec<i64> = (0..3)
        .map(|_| check_raw(&mut c, &[key, b"2", b"60000"]).unwrap())
        .collect();
    assert_eq!(replies, [1, 1, 0]);
    assert_eq!(zcard(&mut c, key), 2);
    assert!(pexpiretime(&mut c, key) > 0);
    assert!(!exists(&mut c, other));
    assert_eq!(check_raw(&mut c, &[other, b"2", b"60000"]).unwrap(), 1);
}

/// The seed's script, as its Python and Java callers run it: the caller's
/// `now`, `now - 60000` and `"<ms>-<uuid>"` members.
const SEED_SCRIPT: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then
    return 0
else
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
    redis.call('EXPIRE', KEYS[1], 60)
    return 1
end
";

/// Runs the seed script as its callers do, with `now` from the server's
/// TIME and a `<ms>-<uuid>` member.
fn run_seed_script(c: &mut Connection, key: &str, uuid: &str) -> i64 {
    let ms = server_ms(c);
    redis::cmd("EVAL")
        .arg(SEED_SCRIPT)
        .arg(1)
        .arg(key)
        .arg(ms)
        .arg(ms - 60_000)
        .arg(5)
        .arg(format!("{ms}-{uuid}"))
        .query(c)
        .unwrap()
}

fn seed_script_keys(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let key = "sms:limit:192.168.1.100";
    let now = server_ms(&mut c);
    // One old entry the script wrote long ago: outside the window now.
    let _: i64 = redis::cmd("ZADD")
        .arg(key)
        .arg(now - 120_000)
        .arg(format!(
            "{}-0b1c2d3e-aaaa-bbbb-cccc-000000000000",
            now - 120_000
        ))
        .query(&mut c)
        .unwrap();
    for i in 0..3 {
        let r = run_seed_script(
            &mut c,
            key,
            &format!("6f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f{i}"),
        );
        assert_eq!(r, 1);
    }
    // The script trimmed its old entry; three of its entries count.
    assert_eq!(zcard(&mut c, key.as_bytes()), 3);
    let replies: Vec<i64> = (0..3).map(|_| check(&mut c, key, 5, 60_000)).collect();
    assert_eq!(replies, [1, 1, 0]);
    let all = entries(&mut c, key.as_bytes());
    assert_eq!(all.len(), 5);
    let script_members = all.iter().filter(|(m, _)| m.contains(&b'-')).count();
    assert_eq!(
        script_members, 3,
        "the script's entries are kept and counted"
    );
    // And the script keeps working on a key the module wrote.
    let r = run_seed_script(&mut c, key, "ffffffff-0000-0000-0000-000000000000");
    assert_eq!(r, 0, "the script sees the module's entries as full");
}

fn multi_exec(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..7 {
        pipe.cmd("SLIDEWIN.CHECK").arg("tx").arg(5).arg(60_000);
    }
    let replies: Vec<i64> = pipe.query(&mut c).expect("EXEC");
    assert_eq!(replies, [1, 1, 1, 1, 1, 0, 0]);
    let all = entries(&mut c, b"tx");
    let members: HashSet<&Vec<u8>> = all.iter().map(|(m, _)| m).collect();
    assert_eq!(members.len(), 5, "five distinct members");
    if server.clock_frozen_in_multi() {
        let scores: HashSet<i64> = all.iter().map(|(_, s)| *s as i64).collect();
        assert_eq!(scores.len(), 1, "one clock for the whole transaction");
    }
}

fn from_lua(flavor: Flavor, log: LogType) {
    let server = start(flavor, log);
    let mut c = server.conn();
    let script = "return redis.call('SLIDEWIN.CHECK', KEYS[1], ARGV[1], ARGV[2])";
    let replies: Vec<i64> = (0..3)
        .map(|_| {
            redis::cmd("EVAL")
                .arg(script)
                .arg(1)
                .arg("lua:k")
                .arg(2)
                .arg(60_000)
                .query(&mut c)
                .unwrap()
        })
        .collect();
    assert_eq!(replies, [1, 1, 0]);
    // Errors reach the script like any command's.
    let err = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("lua:k")
        .arg(0)
        .arg(60_000)
        .query::<i64>(&mut c)
        .expect_err("bad limit");
    assert!(
        error_text(&err).contains("limit must be an integer between 1 and 100000"),
        "{}",
        error_text(&err)
    );
    let caught: String = redis::cmd("EVAL")
        .arg(
            "local ok, e = pcall(redis.call, 'SLIDEWIN.CHECK', KEYS[1], 5, 0) \
             if ok then return 'no error' end \
             return type(e) == 'table' and e.err or e",
        )
        .arg(1)
        .arg("lua:k")
        .query(&mut c)
        .unwrap();
    assert!(caught.contains("window_ms must be an integer"), "{caught}");
}

fn command_metadata(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let keys: Vec<Vec<u8>> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("SLIDEWIN.CHECK")
        .arg("user:{42}:ip")
        .arg(5)
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec![b"user:{42}:ip".to_vec()]);
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("slidewin.check")
        .query(&mut c)
        .unwrap();
    let Some(Value::Array(entry)) = info.first() else {
        panic!("COMMAND INFO: {info:?}")
    };
    let name: String = redis::from_redis_value_ref(&entry[0]).unwrap();
    let arity: i64 = redis::from_redis_value_ref(&entry[1]).unwrap();
    let flags: Vec<String> = redis::from_redis_value_ref(&entry[2]).unwrap();
    let (first, last, step): (i64, i64, i64) = (
        redis::from_redis_value_ref(&entry[3]).unwrap(),
        redis::from_redis_value_ref(&entry[4]).unwrap(),
        redis::from_redis_value_ref(&entry[5]).unwrap(),
    );
    assert_eq!(name, "slidewin.check");
    assert_eq!(arity, -4, "key limit window_ms and options");
    assert!(flags.contains(&"write".to_string()), "{flags:?}");
    assert!(flags.contains(&"denyoom".to_string()), "{flags:?}");
    assert!(!flags.contains(&"readonly".to_string()), "{flags:?}");
    assert_eq!((first, last, step), (1, 1, 1));
}

/// A reproducible random load over a few keys with windows short enough to
/// trim during the run, plus long-window keys that stay.
fn random_load(c: &mut Connection, seed: u64, calls: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let windows = [20i64, 50, 100, 600_000];
    let keys: Vec<Vec<u8>> = (0..24).map(|i| format!("load:{i}").into_bytes()).collect();
    let mut allowed = 0;
    for i in 0..calls {
        let k = rng.random_range(0..keys.len());
        let window = windows[k % windows.len()];
        let limit = 1 + (k % 5) as i64;
        let r: i64 = redis::cmd("SLIDEWIN.CHECK")
            .arg(&keys[k])
            .arg(limit)
            .arg(window)
            .query(c)
            .unwrap();
        allowed += r;
        if i % 25 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(allowed > 0);
    keys
}

/// Lets the short-window keys expire, then touches every key so the server
/// deletes (and propagates the deletion of) the expired ones: afterwards no
/// key is about to expire, and digests taken now stay comparable.
fn settle(c: &mut Connection, keys: &[Vec<u8>]) {
    std::thread::sleep(Duration::from_millis(250));
    for k in keys {
        let _: i64 = redis::cmd("EXISTS").arg(k).query(c).unwrap();
    }
}

fn replica_matches(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = replica_without_module(&master, flavor);
    let mut m = master.conn();
    let keys = random_load(&mut m, 7, 3000);
    // Effects of calls made from a script and inside MULTI replicate too.
    for _ in 0..3 {
        let _: Vec<i64> = redis::cmd("EVAL")
            .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 2, 600000), redis.call('SLIDEWIN.CHECK', KEYS[1], 2, 600000, 'COST', 2)}")
            .arg(1)
            .arg("scripted")
            .query(&mut m)
            .unwrap();
        let _: Vec<i64> = redis::pipe()
            .atomic()
            .cmd("SLIDEWIN.CHECK")
            .arg("tx")
            .arg(3)
            .arg(600_000)
            .cmd("SLIDEWIN.CHECK")
            .arg("tx")
            .arg(3)
            .arg(600_000)
            .query(&mut m)
            .unwrap();
    }
    settle(&mut m, &keys);
    let mut r = assert_replica_matches(&master, &replica);
    for k in ["scripted", "tx"] {
        let n: i64 = redis::cmd("ZCARD").arg(k).query(&mut r).unwrap();
        assert!(n >= 2, "{k} reached the replica");
    }
    let live: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut m).unwrap();
    assert!(!live.is_empty(), "long-window keys remain");
    for k in &live {
        assert_eq!(pexpiretime(&mut m, k), pexpiretime(&mut r, k), "key {k:?}");
    }
    // The replica executed effects, never the command.
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut r)
        .unwrap();
    for effect in [
        "cmdstat_zadd",
        "cmdstat_zremrangebyscore",
        "cmdstat_pexpireat",
    ] {
        assert!(
            stats.contains(effect),
            "replica never ran {effect}:\n{stats}"
        );
    }
    assert!(!stats.to_lowercase().contains("slidewin"), "{stats}");
}

fn aof_and_restart(flavor: Flavor) {
    let mut server = Options::new(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = server.conn();
    let keys = random_load(&mut c, 11, 2000);
    settle(&mut c, &keys);
    let before = digest(&mut c);
    let names: std::collections::HashSet<String> = aof_commands(&server.dir)
        .iter()
        .map(|cmd| String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase())
        .collect();
    for effect in ["ZADD", "PEXPIREAT", "ZREMRANGEBYSCORE", "MULTI", "EXEC"] {
        assert!(names.contains(effect), "{effect} logged: {names:?}");
    }
    assert!(
        names.iter().all(|n| !n.contains("SLIDEWIN")),
        "never the command: {names:?}"
    );
    let _: () = redis::cmd("DEBUG")
        .arg("LOADAOF")
        .query(&mut c)
        .expect("DEBUG LOADAOF");
    assert_eq!(digest(&mut c), before, "DEBUG LOADAOF reproduces the data");
    drop(c);
    // Restart the same directory without the module.
    let _tmp = server.keep_dir();
    server.stop("NOSAVE");
    let plain = Options::new(flavor)
        .without_module()
        .arg("appendonly", "yes")
        .in_dir(&server.dir)
        .start();
    let mut p = plain.conn();
    assert_eq!(digest(&mut p), before, "the AOF loads without the module");
}

fn rdb_restart(flavor: Flavor) {
    let mut server = Options::new(flavor).start();
    let mut c = server.conn();
    let keys = random_load(&mut c, 13, 1500);
    settle(&mut c, &keys);
    let before = digest(&mut c);
    let live: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    let ttls: Vec<i64> = live.iter().map(|k| pexpiretime(&mut c, k)).collect();
    drop(c);
    let _tmp = server.keep_dir();
    server.stop("SAVE");
    let plain = Options::new(flavor)
        .without_module()
        .in_dir(&server.dir)
        .start();
    let mut p = plain.conn();
    assert_eq!(digest(&mut p), before, "the RDB loads without the module");
    for (k, ttl) in live.iter().zip(ttls) {
        assert_eq!(pexpiretime(&mut p, k), ttl);
    }
    // Plain sorted-set commands serve the data.
    let k = &live[0];
    let n: i64 = redis::cmd("ZCOUNT")
        .arg(k)
        .arg("-inf")
        .arg("+inf")
        .query(&mut p)
        .unwrap();
    assert!(n >= 1);
}

/// `boundary` on a compact log: the entry is placed by `SLIDEWIN.APPLY` at
/// exactly `window_ms` (and a millisecond less) before the clock the
/// module reads, which a probe CHECK on a sorted set (kept as one: it
/// exists before the call) shows inside the same script.
fn boundary_compact(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let script = r"
        redis.call('ZADD', KEYS[1], 0, 'seed')
        redis.call('SLIDEWIN.CHECK', KEYS[1], 1000, 100000)
        local now = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
        redis.call('SLIDEWIN.APPLY', KEYS[2], 'ADD', now - tonumber(ARGV[1]) + tonumber(ARGV[2]), 7, 1,
                   'PXAT', now + 100000)
        return {redis.call('SLIDEWIN.CHECK', KEYS[2], 1, ARGV[1]), now}
    ";
    let window = 10_000i64;
    let frozen = server.clock_frozen_in_script();
    for (offset, key) in [(0i64, "exact"), (1, "younger")] {
        let v: Vec<i64> = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg(format!("probe:{key}"))
            .arg(key)
            .arg(window)
            .arg(offset)
            .query(&mut c)
            .expect("EVAL");
        let (allowed, now) = (v[0], v[1]);
        let t: String = redis::cmd("TYPE").arg(key).query(&mut c).unwrap();
        assert_eq!(t, "slidewlog", "{key}: a compact log");
        let log = entries(&mut c, key.as_bytes());
        let old_present = log.iter().any(|(m, _)| m == b"7");
        let old_score = now - window + offset;
        if allowed == 1 {
            let call_now = log
                .iter()
                .map(|(_, s)| *s as i64)
                .max()
                .expect("the new entry");
            assert!(
                !old_present,
                "{key}: a slot was free, so the old entry must be gone"
            );
            assert!(old_score <= call_now - window, "{key}: trimmed too early");
            assert_eq!(log.len(), 1, "{key}: {log:?}");
        } else {
            assert!(
                old_present,
                "{key}: denied, so the old entry must still count"
            );
        }
        if offset == 0 {
            assert_eq!(
                allowed, 1,
                "{key}: an entry window_ms old has left the window"
            );
        } else if frozen {
            assert_eq!(allowed, 0, "{key}: one clock for the whole script");
        }
    }
}

/// `future_entries` on a compact log: an entry scored after now (placed by
/// `SLIDEWIN.APPLY`, as after a clock step back) counts and keeps the key
/// alive until it has left the window.
fn future_entries_compact(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let key = b"future";
    let ahead = server_ms(&mut c) + 100_000;
    let _: Value = redis::cmd("SLIDEWIN.APPLY")
        .arg(key)
        .arg("ADD")
        .arg(ahead)
        .arg(1)
        .arg(1)
        .arg("PXAT")
        .arg(ahead + 60_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(check_raw(&mut c, &[key, b"2", b"60000"]).unwrap(), 1);
    assert_eq!(pexpiretime(&mut c, key), ahead + 60_000);
    // The future entry counts: the limit of 2 is now reached.
    assert_eq!(check_raw(&mut c, &[key, b"2", b"60000"]).unwrap(), 0);
    assert_eq!(entries(&mut c, key).len(), 2);
}
