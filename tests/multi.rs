//! SLIDEWIN.MCHECK, SLIDEWIN.UNDO and WITHMEMBERS on every server of the suite.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashSet;
use std::time::Duration;

use redis::Value;
use support::*;

on_every_server! {
    sms_policy_is_all_or_nothing => sms_policy;
    several_windows_on_one_key_keep_what_the_longest_needs => several_windows;
    detail_reply_shape_and_values => mcheck_detail;
    wrong_type_or_bad_rules_change_nothing => mcheck_errors;
    all_or_nothing_under_concurrency => concurrency;
    withmembers_and_undo_give_an_attempt_back => undo;
    keys_and_acl_follow_the_rules => mcheck_keys;
    replica_without_module_matches_after_mcheck_and_undo => replication;
    taken_member_ids_are_skipped => member_collisions;
    entries_added_by_one_call_are_bounded => entries_bound(Zset, Compact);
}

const DAY: i64 = 86_400_000;

fn mcheck(c: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    slidewin(c, "SLIDEWIN.MCHECK", args)
}

/// Per IP 5 per minute; per phone 1 per minute and 10 per day.
fn policy<'a>(ip: &'a str, phone: &'a str) -> Vec<&'a str> {
    vec![
        "3", ip, "5", "60000", phone, "1", "60000", phone, "10", "86400000",
    ]
}

fn sms_policy(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let (ip, phone, phone2) = ("{u}:ip:1.2.3.4", "{u}:phone:138", "{u}:phone:139");
    assert_eq!(mcheck(&mut c, &policy(ip, phone)).unwrap(), Value::Int(1));
    assert_eq!(zcard(&mut c, ip), 1);
    assert_eq!(zcard(&mut c, phone), 1, "once per key, not once per rule");
    let pexpiretime =
        |c: &mut Connection, k: &str| -> i64 { redis::cmd("PEXPIRETIME").arg(k).query(c).unwrap() };
    let newest =
        |c: &mut Connection, k: &str| -> i64 { entries(c, k.as_bytes()).last().unwrap().1 as i64 };
    assert_eq!(pexpiretime(&mut c, ip), newest(&mut c, ip) + 60_000);
    assert_eq!(
        pexpiretime(&mut c, phone),
        newest(&mut c, phone) + DAY,
        "expires with its longest window"
    );
    // The phone's minute rule denies: the IP is not charged either.
    for _ in 0..3 {
        assert_eq!(mcheck(&mut c, &policy(ip, phone)).unwrap(), Value::Int(0));
    }
    assert_eq!(zcard(&mut c, ip), 1, "nothing added on a denial");
    assert_eq!(zcard(&mut c, phone), 1);
    // Other phones from the same IP pass until the IP rule is full.
    let mut replies = Vec::new();
    for i in 0..6 {
        let p = format!("{phone2}:{i}");
        let v = mcheck(&mut c, &policy(ip, &p)).unwrap();
        replies.push(v);
    }
    assert_eq!(
        replies,
        [1, 1, 1, 1, 0, 0].map(Value::Int).to_vec(),
        "the IP allows 5 per minute in all"
    );
    assert_eq!(zcard(&mut c, ip), 5);
    let denied_phone: i64 = redis::cmd("EXISTS")
        .arg(format!("{phone2}:4"))
        .query(&mut c)
        .unwrap();
    assert_eq!(denied_phone, 0, "a denied call creates nothing");
}

fn several_windows(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let key = "{w}:phone";
    // An entry 2 minutes old: outside the minute rule, inside the day rule.
    let now = server_ms(&mut c);
    let _: i64 = redis::cmd("ZADD")
        .arg(key)
        .arg(now - 120_000)
        .arg("old")
        .query(&mut c)
        .unwrap();
    let args = ["2", key, "1", "60000", key, "2", "86400000"];
    assert_eq!(mcheck(&mut c, &args).unwrap(), Value::Int(1));
    assert_eq!(
        zcard(&mut c, key),
        2,
        "the day rule still needs the old entry"
    );
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(key)
        .arg("old")
        .query(&mut c)
        .unwrap();
    assert!(score.is_some());
    // The day rule is now full (2), even though the minute rule would pass
    // a minute from now.
    let v = mcheck(
        &mut c,
        &["2", key, "1", "60000", key, "2", "86400000", "DETAIL"],
    )
    .unwrap();
    let Value::Array(fields) = v else {
        panic!("{v:?}")
    };
    assert_eq!(fields[0], Value::Int(0));
    let retry: i64 = redis::from_redis_value_ref(&fields[1]).unwrap();
    assert!(retry > 86_000_000, "the day rule's wait: {retry}");
    // A plain CHECK with a minute window on the same key trims the old
    // entry: the documented reason to judge a log with its longest window.
    assert_eq!(check(&mut c, key, 5, 60_000), 1);
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(key)
        .arg("old")
        .query(&mut c)
        .unwrap();
    assert!(score.is_none());
}

fn mcheck_detail(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let v: Vec<Value> = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&[
            "2", "{d}:a", "3", "10000", "{d}:b", "1", "5000", "COST", "1", "DETAIL",
        ])
        .query(&mut c)
        .unwrap();
    let ints = |v: &Value| -> Vec<i64> { redis::from_redis_value_ref(v).unwrap() };
    assert_eq!(v.len(), 4);
    assert_eq!(v[0], Value::Int(1));
    assert_eq!(v[1], Value::Int(0));
    assert_eq!(ints(&v[2]), [1, 3, 2, 0, 10000]);
    assert_eq!(ints(&v[3]), [1, 1, 0, 0, 5000]);
    let v: Vec<Value> = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&["2", "{d}:a", "3", "10000", "{d}:b", "1", "5000", "DETAIL"])
        .query(&mut c)
        .unwrap();
    assert_eq!(v[0], Value::Int(0));
    let retry: i64 = redis::from_redis_value_ref(&v[1]).unwrap();
    let a = ints(&v[2]);
    let b = ints(&v[3]);
    assert_eq!(
        a[..4],
        [1, 3, 2, 0],
        "rule a alone would allow; nothing added"
    );
    assert_eq!(b[..3], [0, 1, 0]);
    assert!(b[3] >= 1 && b[3] <= 5000);
    assert_eq!(retry, b[3], "the overall wait is the denying rule's");
    // A cost above any rule's limit: -1.
    let v: Vec<Value> = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&[
            "2", "{d}:x", "3", "10000", "{d}:y", "1", "5000", "COST", "2", "DETAIL",
        ])
        .query(&mut c)
        .unwrap();
    assert_eq!(v[1], Value::Int(-1));
    assert_eq!(ints(&v[2])[..4], [1, 3, 3, 0]);
    assert_eq!(ints(&v[3])[..4], [0, 1, 1, -1]);
}

fn mcheck_errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let _: () = redis::cmd("SET")
        .arg("{e}:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    check(&mut c, "{e}:z", 5, 60_000);
    let before = digest(&mut c);
    const RULES: &str = "ERR numrules must be an integer between 1 and 64, followed by that many 'key limit window_ms' triples";
    let cases: &[(&[&str], &str)] = &[
        (
            &["1", "{e}:str", "5", "60000"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            &["2", "{e}:z", "5", "60000", "{e}:str", "5", "60000"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (&["0", "{e}:z", "5", "60000"], RULES),
        (&["65", "{e}:z", "5", "60000"], RULES),
        (&["x", "{e}:z", "5", "60000"], RULES),
        (&["2", "{e}:z", "5", "60000"], RULES),
        (
            &["1", "{e}:z", "0", "60000"],
            "ERR limit must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            &["1", "{e}:z", "5", "0"],
            "ERR window_ms must be an integer between 1 and 31622400000 (slidewin.max-window-ms)",
        ),
        (
            &["1", "{e}:z", "5", "60000", "PEEK"],
            "ERR unknown option 'PEEK'",
        ),
        (
            &["1", "{e}:z", "5", "60000", "COST", "0"],
            "ERR COST count must be an integer between 1 and 100000 (slidewin.max-limit)",
        ),
        (
            &["1", "{e}:z", "5"],
            "ERR wrong number of arguments for 'slidewin.mcheck' command",
        ),
    ];
    for (args, expected) in cases {
        let err = mcheck(&mut c, args).expect_err("refused");
        assert_eq!(error_text(&err), *expected, "{args:?}");
    }
    for (args, expected) in [
        (
            &["{e}:z"][..],
            "ERR wrong number of arguments for 'slidewin.undo' command",
        ),
        (
            &["{e}:str", "m"][..],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ] {
        let err = slidewin(&mut c, "SLIDEWIN.UNDO", args).expect_err("refused");
        assert_eq!(error_text(&err), expected);
    }
    assert_eq!(digest(&mut c), before, "errors change nothing");
}

/// 16 clients run the same two-rule check: a shared key with a limit of 50
/// and a per-client key. Every allowed call charged both keys, no denied
/// call charged either.
fn concurrency(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let workers: Vec<_> = (0..16)
        .map(|t| {
            let mut c = server.conn();
            std::thread::spawn(move || {
                let own = format!("{{c}}:client:{t}");
                let mut allowed = 0;
                for _ in 0..100 {
                    let r: i64 = redis::cmd("SLIDEWIN.MCHECK")
                        .arg(&["2", "{c}:shared", "50", "600000", &own, "5", "600000"])
                        .query(&mut c)
                        .unwrap();
                    allowed += r;
                }
                (own, allowed)
            })
        })
        .collect();
    let results: Vec<(String, i64)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut c = server.conn();
    let total: i64 = results.iter().map(|(_, a)| a).sum();
    assert_eq!(total, 50, "the shared limit admitted exactly 50");
    assert_eq!(zcard(&mut c, "{c}:shared"), 50);
    for (own, allowed) in &results {
        assert!(*allowed <= 5);
        assert_eq!(
            zcard(&mut c, own),
            *allowed,
            "{own}: charged only when allowed"
        );
    }
}

fn undo(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let v: Vec<Value> = redis::cmd("SLIDEWIN.CHECK")
        .arg(&["sms:{u}", "2", "60000", "COST", "2", "WITHMEMBERS"])
        .query(&mut c)
        .unwrap();
    assert_eq!(v.len(), 6, "the five DETAIL fields and the members");
    let fields: Vec<i64> = v[..5]
        .iter()
        .map(|f| redis::from_redis_value_ref(f).unwrap())
        .collect();
    assert_eq!(fields, [1, 2, 0, 0, 60000]);
    let added: Vec<String> = redis::from_redis_value_ref(&v[5]).unwrap();
    assert_eq!(added.len(), 2);
    // Tokens `<id>@<ms>`: the stored member and its score.
    let stored: HashSet<String> = entries(&mut c, b"sms:{u}")
        .into_iter()
        .map(|(m, s)| format!("{}@{s}", String::from_utf8(m).unwrap()))
        .collect();
    assert_eq!(stored, added.iter().cloned().collect());
    // The window is full; the provider failed: give one attempt back.
    assert_eq!(check(&mut c, "sms:{u}", 2, 60_000), 0);
    let removed: i64 = redis::cmd("SLIDEWIN.UNDO")
        .arg("sms:{u}")
        .arg(&added[0])
        .arg("not-a-member")
        .query(&mut c)
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(check(&mut c, "sms:{u}", 2, 60_000), 1);
    // A denied check adds no members.
    let v: Vec<Value> = redis::cmd("SLIDEWIN.CHECK")
        .arg(&["sms:{u}", "2", "60000", "WITHMEMBERS"])
        .query(&mut c)
        .unwrap();
    assert_eq!(v[0], Value::Int(0));
    assert_eq!(v[5], Value::Array(vec![]));
    // MCHECK: the same members in every key, undone key by key.
    let v: Vec<Value> = redis::cmd("SLIDEWIN.MCHECK")
        .arg(&[
            "2",
            "{m}:ip",
            "5",
            "60000",
            "{m}:phone",
            "1",
            "60000",
            "WITHMEMBERS",
        ])
        .query(&mut c)
        .unwrap();
    assert_eq!(v[0], Value::Int(1));
    let added: Vec<String> = redis::from_redis_value_ref(v.last().unwrap()).unwrap();
    assert_eq!(added.len(), 1);
    for key in ["{m}:ip", "{m}:phone"] {
        let s: Option<f64> = redis::cmd("ZSCORE")
            .arg(key)
            .arg(token_member(added[0].as_bytes()))
            .query(&mut c)
            .unwrap();
        assert!(s.is_some(), "{key} holds the member");
        let n: i64 = redis::cmd("SLIDEWIN.UNDO")
            .arg(key)
            .arg(&added[0])
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 1);
    }
    let exists: i64 = redis::cmd("EXISTS").arg("{m}:phone").query(&mut c).unwrap();
    assert_eq!(exists, 0, "an emptied key is deleted");
    let n: i64 = redis::cmd("SLIDEWIN.UNDO")
        .arg("{m}:missing")
        .arg("1")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_undone").as_deref(),
        Some("3")
    );
}

fn mcheck_keys(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&[
            "GETKEYS",
            "SLIDEWIN.MCHECK",
            "3",
            "a",
            "1",
            "1000",
            "b",
            "1",
            "1000",
            "a",
            "2",
            "5000",
            "COST",
            "1",
            "DETAIL",
        ])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["a", "b", "a"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "SLIDEWIN.UNDO", "k", "m1", "m2"])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["k"]);
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "rl", "on", "nopass", "~rl:*", "+@all"])
        .query(&mut c)
        .unwrap();
    let dry = |c: &mut Connection, args: &[&str]| -> String {
        let mut cmd = redis::cmd("ACL");
        cmd.arg(&["DRYRUN", "rl", "SLIDEWIN.MCHECK"]).arg(args);
        cmd.query(c).unwrap()
    };
    assert_eq!(
        dry(&mut c, &["2", "rl:a", "1", "1000", "rl:b", "1", "1000"]),
        "OK"
    );
    assert!(
        dry(&mut c, &["2", "rl:a", "1", "1000", "other", "1", "1000"])
            .contains("no permissions to access the 'other' key")
    );
    // An option is never taken for a key.
    assert_eq!(dry(&mut c, &["1", "rl:a", "1", "1000", "COST", "1"]), "OK");
}

fn replication(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = replica_without_module(&master, flavor);
    let mut m = master.conn();
    let mut undone = 0;
    for i in 0..300 {
        let phone = format!("{{r}}:phone:{}", i % 7);
        let v: Vec<Value> = redis::cmd("SLIDEWIN.MCHECK")
            .arg(&[
                "3",
                "{r}:ip",
                "50",
                "600000",
                &phone,
                "2",
                "40",
                &phone,
                "5",
                "600000",
                "WITHMEMBERS",
            ])
            .query(&mut m)
            .unwrap();
        if i % 5 == 0 && v[0] == Value::Int(1) {
            let added: Vec<String> = redis::from_redis_value_ref(v.last().unwrap()).unwrap();
            let n: i64 = redis::cmd("SLIDEWIN.UNDO")
                .arg(&phone)
                .arg(&added)
                .query(&mut m)
                .unwrap();
            assert_eq!(n, added.len() as i64, "UNDO removes what MCHECK added");
            undone += n;
        }
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(undone > 0, "some calls were undone");
    assert_eq!(
        info_field(&mut m, "slidewin", "slidewin_undone"),
        Some(undone.to_string())
    );
    let mut r = assert_replica_matches(&master, &replica);
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut r)
        .unwrap();
    assert!(stats.contains("cmdstat_zrem:"), "UNDO replicated as ZREM");
    assert!(!stats.to_lowercase().contains("slidewin"));
}

/// Bits of the sequence inside a member id (`src/member.rs`).
const SEQ_BITS: u32 = 20;
const SEQ_MASK: i64 = (1 << SEQ_BITS) - 1;
/// How far ahead of the learned time the collisions are laid: every call
/// below runs within this many ms of it.
const AHEAD_MS: i64 = 2000;
/// Laid ids are scored this long before the learned time.
const LAID_BEFORE_MS: i64 = 1000;

/// Adds every id `(ms << SEQ_BITS) | seq` for ms in `[t, t + AHEAD_MS)` and
/// the given sequence numbers to `key`, all scored `LAID_BEFORE_MS` before `t` (inside every
/// window of the test, and told apart from what the calls add).
fn seed_ids(c: &mut Connection, key: &str, t: i64, seqs: std::ops::Range<i64>) -> HashSet<i64> {
    let now = t - LAID_BEFORE_MS;
    let ids: HashSet<i64> = (t..t + AHEAD_MS)
        .flat_map(|ms| seqs.clone().map(move |q| (ms << SEQ_BITS) | (q & SEQ_MASK)))
        .collect();
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(key);
    for id in &ids {
        cmd.arg(now).arg(id);
    }
    let added: usize = cmd.query(c).unwrap();
    assert_eq!(added, ids.len());
    ids
}

fn one_member(v: &Value) -> i64 {
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    assert_eq!(items[0], Value::Int(1), "allowed: {v:?}");
    let members: Vec<String> = redis::from_redis_value_ref(items.last().unwrap()).unwrap();
    assert_eq!(members.len(), 1, "{v:?}");
    String::from_utf8(token_member(members[0].as_bytes()))
        .unwrap()
        .parse()
        .unwrap()
}

/// How far after the learned time `block_short` scores its members, so
/// that they stay the newest entries of their key.
const BLOCK_AHEAD_MS: i64 = 300_000;

/// Makes the short id of `key` taken: members "10" and "9" scored ahead of
/// every call, so "9" is the newest entry (equal scores sort by member) and
/// the short id after it, 10, is taken: the next call falls back to a wide
/// id.
fn block_short(c: &mut Connection, key: &str, t: i64) {
    let at = t + BLOCK_AHEAD_MS;
    let added: usize = redis::cmd("ZADD")
        .arg(key)
        .arg(at)
        .arg(10)
        .arg(at)
        .arg(9)
        .query(c)
        .unwrap();
    assert_eq!(added, 2);
}

/// Forces the member-id search. Short ids first: a key's ids count up from
/// 1, and MCHECK takes the next id above every key's newest. Then the wide
/// fallback: with the short id taken, the wide ids the next calls would
/// take (learned from WITHMEMBERS: an id is the call's ms and a per-server
/// sequence) are laid in their keys beforehand, so CHECK and MCHECK must
/// skip them. The counts are exact, nothing laid is overwritten, and a
/// replica without the module ends with the same data.
fn member_collisions(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = replica_without_module(&master, flavor);
    let mut c = master.conn();
    let check = |c: &mut Connection, key: &str| -> i64 {
        let v = slidewin(
            c,
            "SLIDEWIN.CHECK",
            &[key, "100000", "600000", "WITHMEMBERS"],
        )
        .expect("CHECK");
        one_member(&v)
    };
    let mcheck2 = |c: &mut Connection, k1: &str, k2: &str| -> i64 {
        let v = mcheck(
            c,
            &[
                "2",
                k1,
                "100000",
                "600000",
                k2,
                "100000",
                "600000",
                "WITHMEMBERS",
            ],
        )
        .expect("MCHECK");
        one_member(&v)
    };
    // Short ids count up per key; MCHECK starts above both keys' newest.
    let short: Vec<i64> = (0..3).map(|_| check(&mut c, "{c}s")).collect();
    assert_eq!(short, [1, 2, 3]);
    assert_eq!(mcheck2(&mut c, "{c}s", "{c}empty"), 4);

    // The wide id of a call whose short id is taken: its ms, and sequence s.
    let t = server_ms(&mut c);
    block_short(&mut c, "{c}a", t);
    let learned = check(&mut c, "{c}a");
    assert!(learned > SEQ_MASK, "a wide id: {learned}");
    let (t, s) = (learned >> SEQ_BITS, learned & SEQ_MASK);

    // CHECK: the next wide id draws sequence s+1; s+1..s+4 are taken at
    // every ms it can run at, so it must settle on s+5.
    block_short(&mut c, "{c}b", t);
    let taken = seed_ids(&mut c, "{c}b", t, s + 1..s + 5);
    let got = check(&mut c, "{c}b");
    assert!(!taken.contains(&got), "a taken id was reused");
    assert_eq!(got & SEQ_MASK, (s + 5) & SEQ_MASK, "four taken ids skipped");
    assert!((t..t + AHEAD_MS).contains(&(got >> SEQ_BITS)), "{got}");
    assert_eq!(
        zcard(&mut c, "{c}b"),
        taken.len() as i64 + 3,
        "exactly one entry added"
    );

    // MCHECK: the next wide id draws s+2; s+2..s+5 are taken in one key and
    // s+6..s+7 in the other, so the one id both keys get is s+8.
    block_short(&mut c, "{c}c", t);
    block_short(&mut c, "{c}d", t);
    let in_c = seed_ids(&mut c, "{c}c", t, s + 2..s + 6);
    let in_d = seed_ids(&mut c, "{c}d", t, s + 6..s + 8);
    let got = mcheck2(&mut c, "{c}c", "{c}d");
    assert!(!in_c.contains(&got) && !in_d.contains(&got));
    assert_eq!(
        got & SEQ_MASK,
        (s + 8) & SEQ_MASK,
        "ids taken in either key skipped"
    );
    assert_eq!(zcard(&mut c, "{c}c"), in_c.len() as i64 + 3);
    assert_eq!(zcard(&mut c, "{c}d"), in_d.len() as i64 + 3);
    let score = |c: &mut Connection, key: &str, m: i64| -> Option<f64> {
        redis::cmd("ZSCORE").arg(key).arg(m).query(c).unwrap()
    };
    assert_eq!(score(&mut c, "{c}c", got), score(&mut c, "{c}d", got));
    assert!(score(&mut c, "{c}c", got).is_some());
    // The laid ids keep their score (added with NX, never overwritten).
    let laid_at = t - LAID_BEFORE_MS;
    for (key, laid) in [("{c}b", &taken), ("{c}c", &in_c), ("{c}d", &in_d)] {
        let n: usize = redis::cmd("ZCOUNT")
            .arg(key)
            .arg(laid_at)
            .arg(laid_at)
            .query(&mut c)
            .unwrap();
        assert_eq!(n, laid.len(), "{key}: laid ids untouched");
        assert_eq!(score(&mut c, key, 10), score(&mut c, key, 9));
    }

    assert_replica_matches(&master, &replica);
}

/// The entries one call adds in all (COST times MCHECK's distinct keys)
/// are bounded by `slidewin.max-entries-per-call`, which follows
/// `slidewin.max-limit` while it is 0 (the default). Above it the call is
/// refused with an error naming the setting and its value, before any key
/// is read: nothing changes, nothing is replicated (the master's
/// replication offset stands still, a replica holds the same data). A call
/// at the bound is allowed.
fn entries_bound(flavor: Flavor, log: LogType) {
    let options = || {
        Options::new(flavor)
            .module_args(&["max-limit", "1000"])
            .log_type(log)
    };
    let master = options().start();
    let replica = replica_with(&master, options());
    let mut c = master.conn();
    // Two keys holding a few entries each, and a string for the order of
    // the errors.
    let (a, b) = ("{b}:a", "{b}:b");
    for k in [a, b] {
        let _: Value = mcheck(&mut c, &["1", k, "1000", "600000", "COST", "3"]).unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("{b}:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    wait_caught_up(&master, &replica);
    let offset = |c: &mut Connection| info_field(c, "replication", "master_repl_offset");
    let before = (digest(&mut c), offset(&mut c));
    let refused = |c: &mut Connection, args: &[&str]| -> String {
        error_text(&mcheck(c, args).expect_err("above the per-call bound"))
    };
    // 2 keys x COST 501 = 1,002 entries: above max-limit (1,000), though
    // each key would have room. The same key named twice counts once.
    let msg = |cost: u64, keys: u64, max: u64| {
        format!(
            "ERR COST {cost} on {keys} key{} would add {} entries; slidewin.max-entries-per-call allows {max} a call",
            if keys == 1 { "" } else { "s" },
            cost * keys
        )
    };
    let two = ["2", a, "1000", "600000", b, "1000", "600000"];
    let with_cost = |rules: &[&str], cost: &str| -> Vec<String> {
        let mut v: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
        v.extend([
            "COST".to_string(),
            cost.to_string(),
            "WITHMEMBERS".to_string(),
        ]);
        v
    };
    let as_strs = |v: &[String]| -> Vec<String> { v.to_vec() };
    let args = as_strs(&with_cost(&two, "501"));
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    assert_eq!(refused(&mut c, &args), msg(501, 2, 1000));
    // Refused before any key is read: a string key among them does not
    // change the answer.
    assert_eq!(
        refused(
            &mut c,
            &["2", a, "1000", "600000", "{b}:str", "1000", "600000", "COST", "501"]
        ),
        msg(501, 2, 1000)
    );
    // The call in small: 64 keys at COST max-limit.
    let many: Vec<String> = (0..64).map(|i| format!("{{b}}:many:{i}")).collect();
    let mut args: Vec<&str> = vec!["64"];
    for k in &many {
        args.extend([k.as_str(), "1000", "600000"]);
    }
    args.extend(["COST", "1000"]);
    assert_eq!(refused(&mut c, &args), msg(1000, 64, 1000));
    assert_eq!(
        (digest(&mut c), offset(&mut c)),
        before,
        "a refused call changes and replicates nothing"
    );
    let mut r = assert_replica_matches(&master, &replica);
    for k in [a, b] {
        assert_eq!(digest_value(&mut c, k), digest_value(&mut r, k), "{k}");
    }

    // At the bound: 2 keys x COST 500 = 1,000 entries, allowed, the same
    // 500 members in both keys.
    let args = with_cost(&two, "500");
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let v = mcheck(&mut c, &args).unwrap();
    let Value::Array(fields) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(fields[0], Value::Int(1), "{v:?}");
    let added: Vec<String> = redis::from_redis_value_ref(fields.last().unwrap()).unwrap();
    assert_eq!(added.len(), 500);
    for k in [a, b] {
        assert_eq!(entries(&mut c, k.as_bytes()).len(), 503, "{k}");
    }
    // The same key named in three rules is one key: COST 1000 fits.
    let v = mcheck(
        &mut c,
        &[
            "3", "{b}:one", "1000", "600000", "{b}:one", "1000", "60000", "{b}:one", "1000",
            "1000", "COST", "1000",
        ],
    )
    .unwrap();
    assert_eq!(v, Value::Int(1));
    assert_eq!(entries(&mut c, b"{b}:one").len(), 1000);

    let cfg: std::collections::HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slidewin.max-entries-per-call")
        .query(&mut c)
        .unwrap();
    assert_eq!(cfg["slidewin.max-entries-per-call"], "0", "the default");
    // The bound follows max-limit while the setting is 0; set explicitly, it
    // no longer does, and CHECK is bounded by it too.
    config_set(&mut c, "slidewin.max-limit", "2000");
    let two = ["2", "{b}:e", "2000", "600000", "{b}:f", "2000", "600000"];
    let args = with_cost(&two, "501");
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let v = mcheck(&mut c, &args).unwrap();
    assert!(
        matches!(&v, Value::Array(f) if f[0] == Value::Int(1)),
        "follows max-limit: {v:?}"
    );
    config_set(&mut c, "slidewin.max-entries-per-call", "600");
    let before = (digest(&mut c), offset(&mut c));
    let args = with_cost(&two, "301");
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    assert_eq!(refused(&mut c, &args), msg(301, 2, 600));
    let err = slidewin(
        &mut c,
        "SLIDEWIN.CHECK",
        &["{b}:c", "2000", "600000", "COST", "601"],
    )
    .expect_err("CHECK above the bound");
    assert_eq!(error_text(&err), msg(601, 1, 600));
    assert_eq!((digest(&mut c), offset(&mut c)), before);
    assert_eq!(
        slidewin(
            &mut c,
            "SLIDEWIN.CHECK",
            &["{b}:c", "2000", "600000", "COST", "600"]
        )
        .unwrap(),
        Value::Int(1)
    );
    // Back to 0: max-limit again.
    config_set(&mut c, "slidewin.max-entries-per-call", "0");
    assert_eq!(
        slidewin(
            &mut c,
            "SLIDEWIN.CHECK",
            &["{b}:d", "2000", "600000", "COST", "2000"]
        )
        .unwrap(),
        Value::Int(1)
    );
    assert_replica_matches(&master, &replica);
}
