//! SHADOW (a dry run) on SLIDEWIN.CHECK and SLIDEWIN.MCHECK, on every server
//! of the suite and both log types: a call the limit would refuse is
//! answered allowed and charged nothing, its DETAIL reply carries the real
//! numbers and `shadow_refused`, `INFO slidewin` counts it in
//! `checks_shadow_refused` (not in `checks_denied`), SLIDEWIN.TOP DENIED
//! lists it, and no `slidewin.denied` event fires for it.
#![allow(clippy::unwrap_used)]

mod support;

use redis::Value;
use support::*;

on_every_server! {
    a_refused_shadow_call_is_answered_allowed_and_charges_nothing => check_replies(Zset, Compact);
    mcheck_shadow_replies_and_charges_nothing => mcheck_replies(Zset, Compact);
    shadow_refusals_are_counted_apart_in_info => info_counter;
    top_denied_lists_shadow_refusals_and_no_event_fires => top_and_events;
    shadow_with_an_id_charges_once_and_repeats => with_id(Zset, Compact);
}

fn call(c: &mut Connection, command: &str, args: &[&str]) -> Value {
    redis::cmd(command)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{command} {args:?}: {e}"))
}

fn ints(v: &Value) -> Vec<i64> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .iter()
        .map(|i| match i {
            Value::Int(n) => *n,
            other => panic!("not an integer: {other:?} in {v:?}"),
        })
        .collect()
}

fn check_replies(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let key = "api:shadow";
    // Under the limit SHADOW changes nothing: charged, answered as usual,
    // shadow_refused 0 as the last field.
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[key, "2", "60000", "SHADOW"]),
        Value::Int(1)
    );
    let d = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[key, "2", "60000", "DETAIL", "shadow"],
    ));
    assert_eq!(d.len(), 6, "{d:?}");
    assert_eq!(&d[..3], &[1, 2, 0], "{d:?}");
    assert_eq!(d[3], 0);
    assert!(d[4] > 59_000 && d[4] <= 60_000, "{d:?}");
    assert_eq!(d[5], 0, "shadow_refused");
    assert_eq!(zcard(&mut c, key), 2, "both charged");
    // Full: without SHADOW refused; with SHADOW answered 1, charged nothing.
    assert_eq!(check(&mut c, key, 2, 60_000), 0);
    for _ in 0..3 {
        assert_eq!(
            call(&mut c, "SLIDEWIN.CHECK", &[key, "2", "60000", "SHADOW"]),
            Value::Int(1)
        );
    }
    assert_eq!(zcard(&mut c, key), 2, "a shadow refusal charges nothing");
    // DETAIL: allowed 1, the real remaining and waits, shadow_refused 1.
    let plain = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[key, "2", "60000", "DETAIL"],
    ));
    let d = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[key, "2", "60000", "DETAIL", "SHADOW"],
    ));
    assert_eq!(plain[0], 0);
    assert_eq!(d.len(), 6, "{d:?}");
    assert_eq!(d[0], 1, "answered allowed: {d:?}");
    assert_eq!(&d[1..3], &[2, 0], "limit and the real remaining: {d:?}");
    assert!(
        d[3] > 0 && (d[3] - plain[3]).abs() <= 50,
        "the real retry_after_ms: {d:?} vs {plain:?}"
    );
    assert!(
        d[4] > 0 && (d[4] - plain[4]).abs() <= 50,
        "{d:?} vs {plain:?}"
    );
    assert_eq!(d[5], 1, "shadow_refused: {d:?}");
    // WITHOLDEST's field comes before shadow_refused; WITHMEMBERS' array
    // after it, empty when refused.
    let v = call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[key, "2", "60000", "WITHMEMBERS", "SHADOW", "WITHOLDEST"],
    );
    let Value::Array(items) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(items.len(), 8, "{v:?}");
    assert_eq!(ints(&Value::Array(items[..7].to_vec()))[0], 1);
    let Value::Int(oldest) = items[5] else {
        panic!("{v:?}")
    };
    assert!((0..60_000).contains(&oldest), "oldest_age_ms {oldest}");
    assert_eq!(items[6], Value::Int(1), "shadow_refused: {v:?}");
    assert_eq!(items[7], Value::Array(vec![]), "no members added: {v:?}");
    // An allowed one hands out its members after shadow_refused 0.
    let v = call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["api:other", "2", "60000", "SHADOW", "WITHMEMBERS"],
    );
    let Value::Array(items) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(items.len(), 7, "{v:?}");
    assert_eq!((&items[0], &items[5]), (&Value::Int(1), &Value::Int(0)));
    let Value::Array(members) = &items[6] else {
        panic!("{v:?}")
    };
    assert_eq!(members.len(), 1, "{v:?}");
    // A cost above the limit can never pass: retry_after_ms -1, still allowed.
    let d = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["api:big", "2", "60000", "COST", "3", "DETAIL", "SHADOW"],
    ));
    assert_eq!(d, [1, 2, 2, -1, 0, 1]);
    assert!(!exists(&mut c, "api:big"), "nothing created");
    assert_eq!(zcard(&mut c, key), 2, "still two entries");
    // PEEK refuses nothing and says so; SHADOW at most once.
    let e = redis::cmd("SLIDEWIN.PEEK")
        .arg(&[key, "2", "60000", "SHADOW"])
        .query::<Value>(&mut c)
        .expect_err("PEEK takes no SHADOW");
    assert_eq!(
        error_text(&e),
        "ERR PEEK refuses nothing: SHADOW applies to CHECK and MCHECK"
    );
    let e = redis::cmd("SLIDEWIN.CHECK")
        .arg(&[key, "2", "60000", "SHADOW", "Shadow"])
        .query::<Value>(&mut c)
        .expect_err("twice");
    assert_eq!(error_text(&e), "ERR option SHADOW given more than once");
}

fn mcheck_replies(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    // Rule 2 (one a minute) has room once.
    let rules = ["2", "user:1", "5", "60000", "phone:1", "1", "60000"];
    let with = |opts: &[&'static str]| -> Vec<&str> {
        let mut v = rules.to_vec();
        v.extend_from_slice(opts);
        v
    };
    let v = call(&mut c, "SLIDEWIN.MCHECK", &with(&["DETAIL", "SHADOW"]));
    let Value::Array(items) = &v else {
        panic!("{v:?}")
    };
    // [allowed, retry, rule 1, rule 2, shadow_refused]
    assert_eq!(items.len(), 5, "{v:?}");
    assert_eq!((&items[0], &items[4]), (&Value::Int(1), &Value::Int(0)));
    assert_eq!((zcard(&mut c, "user:1"), zcard(&mut c, "phone:1")), (1, 1));
    // Now rule 2 refuses: answered allowed, nothing charged in either key.
    assert_eq!(
        call(&mut c, "SLIDEWIN.MCHECK", &with(&["SHADOW"])),
        Value::Int(1)
    );
    assert_eq!(call(&mut c, "SLIDEWIN.MCHECK", &with(&[])), Value::Int(0));
    let v = call(&mut c, "SLIDEWIN.MCHECK", &with(&["shadow", "WITHMEMBERS"]));
    let Value::Array(items) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(items.len(), 6, "{v:?}");
    assert_eq!(items[0], Value::Int(1), "answered allowed: {v:?}");
    let Value::Int(retry) = items[1] else {
        panic!("{v:?}")
    };
    assert!(retry > 59_000 && retry <= 60_000, "the real wait: {v:?}");
    // Each rule's own field is real: rule 1 had room, rule 2 not.
    assert_eq!(ints(&items[2])[..3], [1, 5, 4], "{v:?}");
    assert_eq!(ints(&items[3])[..3], [0, 1, 0], "{v:?}");
    assert_eq!(items[4], Value::Int(1), "shadow_refused: {v:?}");
    assert_eq!(items[5], Value::Array(vec![]), "no members: {v:?}");
    assert_eq!((zcard(&mut c, "user:1"), zcard(&mut c, "phone:1")), (1, 1));
    let e = redis::cmd("SLIDEWIN.MCHECK")
        .arg(with(&["SHADOW", "SHADOW"]))
        .query::<Value>(&mut c)
        .expect_err("twice");
    assert_eq!(error_text(&e), "ERR option SHADOW given more than once");
}

fn stat(c: &mut Connection, field: &str) -> i64 {
    info_field(c, "slidewin", field)
        .unwrap_or_else(|| panic!("INFO slidewin has no {field}"))
        .parse()
        .unwrap()
}

fn info_counter(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    assert_eq!(stat(&mut c, "slidewin_checks_shadow_refused"), 0);
    assert_eq!(check(&mut c, "k", 1, 60_000), 1);
    assert_eq!(check(&mut c, "k", 1, 60_000), 0);
    for _ in 0..3 {
        call(&mut c, "SLIDEWIN.CHECK", &["k", "1", "60000", "SHADOW"]);
    }
    call(
        &mut c,
        "SLIDEWIN.MCHECK",
        &[
            "2", "k", "1", "60000", "k2", "9", "60000", "SHADOW", "DETAIL",
        ],
    );
    // An allowed shadow call is counted as allowed.
    call(&mut c, "SLIDEWIN.CHECK", &["k3", "1", "60000", "SHADOW"]);
    assert_eq!(stat(&mut c, "slidewin_checks_shadow_refused"), 4);
    assert_eq!(stat(&mut c, "slidewin_checks_denied"), 1, "not denials");
    assert_eq!(stat(&mut c, "slidewin_checks_allowed"), 2);
    assert_eq!(stat(&mut c, "slidewin_cost_granted"), 2);
}

fn top_and_events(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let mut events = KeyEvents::subscribe(&server);
    assert_eq!(check(&mut c, "sms:1", 1, 60_000), 1);
    for _ in 0..4 {
        call(&mut c, "SLIDEWIN.CHECK", &["sms:1", "1", "60000", "SHADOW"]);
    }
    assert_eq!(check(&mut c, "sms:2", 1, 60_000), 1);
    assert_eq!(check(&mut c, "sms:2", 1, 60_000), 0);
    call(
        &mut c,
        "SLIDEWIN.MCHECK",
        &["1", "sms:2", "1", "60000", "SHADOW"],
    );
    let top: Vec<(String, i64, i64)> = redis::cmd("SLIDEWIN.TOP")
        .arg("DENIED")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        top,
        [("sms:1".to_string(), 4, 0), ("sms:2".to_string(), 2, 0)],
        "shadow refusals are denials to TOP"
    );
    // Events: only the one real denial of sms:2.
    let denied: Vec<(String, String)> = events
        .drain(&mut c)
        .into_iter()
        .filter(|(ch, msg)| ch.ends_with(":slidewin.denied") || msg == "slidewin.denied")
        .collect();
    assert_eq!(
        denied,
        [
            (
                "__keyspace@0__:sms:2".to_string(),
                "slidewin.denied".to_string()
            ),
            (
                "__keyevent@0__:slidewin.denied".to_string(),
                "sms:2".to_string()
            ),
        ],
        "no event for a shadow refusal"
    );
}

fn with_id(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let key = "llm:tokens";
    // Allowed under SHADOW with an ID: charged under it, repeats charge nothing.
    let d = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[
            key, "10", "60000", "COST", "6", "ID", "r1", "SHADOW", "DETAIL",
        ],
    ));
    assert_eq!((d[0], d[2], d[5]), (1, 4, 0), "{d:?}");
    let d = ints(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &[
            key, "10", "60000", "COST", "6", "ID", "r1", "SHADOW", "DETAIL",
        ],
    ));
    assert_eq!((d[0], d[5]), (1, 0), "a repeat: {d:?}");
    assert_eq!(zcard(&mut c, key), 6);
    // Refused under SHADOW with another ID: no charge under it to give back.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[key, "10", "60000", "COST", "6", "ID", "r2", "SHADOW"],
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, key), 6);
    assert_eq!(
        call(&mut c, "SLIDEWIN.UNDO", &[key, "ID", "r2"]),
        Value::Int(0)
    );
    assert_eq!(
        call(&mut c, "SLIDEWIN.SETTLE", &[key, "ID", "r2", "COST", "1"]),
        Value::Int(-1)
    );
    assert_eq!(stat(&mut c, "slidewin_repeated"), 1);
    assert_eq!(stat(&mut c, "slidewin_checks_shadow_refused"), 1);
}
