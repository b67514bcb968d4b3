//! The FUNCTION library (lua/slidewin.lua) against the module: the same
//! random command sequences on the same server (the module on `{m}` keys,
//! the function on `{f}` keys) must give the same replies and sets. The
//! same again for the library's EVAL form (scripts/eval-script.sh: the same
//! Lua through EVALSHA) on every server, and on Redis 6.2, which has no
//! FUNCTION and cannot load the module: there the EVAL form's replies are
//! compared with the module's on Redis 7.0, each call sent to both servers
//! back to back.
//!
//! The two cannot read one clock: the module uses the server's cached
//! command time, the function TIME. Each pair runs back to back in one
//! MULTI, so the two `now`s differ by a millisecond or two (more on a loaded
//! machine); to keep that from ever flipping a decision, calls are made only
//! 20-60 ms into a 200 ms slot and every window is a whole number of slots
//! plus 100 ms, so no entry ever expires within 60 ms of a call. Decisions,
//! limits and remainders must then match exactly; waits and scores within
//! that slack.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    errors_match_the_module => errors;
    random_sequences_match_the_module => sequences;
    function_and_module_share_live_keys => shared_keys;
    eval_errors_match_the_module => eval_errors;
    eval_random_sequences_match_the_module => eval_sequences;
    eval_and_module_share_live_keys => eval_shared_keys;
    request_ids_match_the_module => ids;
    eval_request_ids_match_the_module => eval_ids;
    a_token_undone_in_its_millisecond_names_no_later_entry => fence;
}

/// Redis 6.2 (no FUNCTION): the EVAL form there against the module on
/// Redis 7.0.
mod redis_6_2 {
    use super::*;

    #[test]
    fn eval_errors_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        errors_on(&mut pair);
    }

    #[test]
    fn eval_random_sequences_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        sequences_on(&mut pair);
    }

    #[test]
    fn eval_request_ids_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        ids_on(&mut pair);
    }

    #[test]
    fn the_server_has_no_function_command() {
        let server = Options::new(Flavor::Redis62).without_module().start();
        let mut c = server.conn();
        let e = redis::cmd("FUNCTION")
            .arg("LIST")
            .query::<Value>(&mut c)
            .expect_err("Redis 6.2 has no FUNCTION");
        assert!(error_text(&e).contains("unknown command"), "{e:?}");
        // And the module refuses to load there (what the EVAL form is for).
        let log = Options::new(Flavor::Redis62).start_expecting_failure();
        assert!(log.contains("Module not loaded"), "{log}");
    }
}

/// How the library is called: through FCALL (its FUNCTION form) or EVALSHA
/// (its EVAL form, loaded under this sha1).
#[derive(Clone)]
enum Form {
    Function,
    Eval(String),
}

/// The module's side and the library's side of a comparison: one
/// connection (both on one server, each pair of calls in one MULTI) or two
/// (the library on another server, the two calls back to back).
struct Pair {
    m: Connection,
    other: Option<Connection>,
    form: Form,
}

impl Pair {
    /// Both sides on `c`'s server, the library loaded in `form`.
    fn one(mut c: Connection, eval: bool) -> Pair {
        let form = if eval {
            Form::Eval(load_eval_script(&mut c))
        } else {
            load_function_library(&mut c);
            Form::Function
        };
        Pair {
            m: c,
            other: None,
            form,
        }
    }

    /// The module on Redis 7.0, the EVAL form on Redis 6.2 (the servers
    /// are returned to be kept running).
    fn redis_6_2() -> (Server, Server, Pair) {
        let m = Options::new(Flavor::Redis70).start();
        let e = Options::new(Flavor::Redis62).without_module().start();
        let mut ec = e.conn();
        let sha = load_eval_script(&mut ec);
        let pair = Pair {
            m: m.conn(),
            other: Some(ec),
            form: Form::Eval(sha),
        };
        (m, e, pair)
    }

    /// The library's connection.
    fn lib(&mut self) -> &mut Connection {
        self.other.as_mut().unwrap_or(&mut self.m)
    }

    /// The module's call and the library's for the same request.
    fn query(&mut self, kind: &str, keys: &[String], args: &[String]) -> (Value, Value) {
        self.query_each(kind, keys, args, args)
    }

    /// The module's call with `m_args` and the library's with `f_args`
    /// (each side's own tokens).
    fn query_each(
        &mut self,
        kind: &str,
        keys: &[String],
        m_args: &[String],
        f_args: &[String],
    ) -> (Value, Value) {
        let args = m_args;
        let m = both(kind, keys, m_args, "m", &self.form);
        let f = both(kind, keys, f_args, "f", &self.form);
        match &mut self.other {
            None => redis::pipe()
                .atomic()
                .add_command(m)
                .add_command(f)
                .query(&mut self.m)
                .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}")),
            Some(other) => {
                let mv = m
                    .query(&mut self.m)
                    .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}"));
                let fv = f
                    .query(other)
                    .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}"));
                (mv, fv)
            }
        }
    }
}

const SLACK_MS: i64 = 50;

/// A request id one byte over the longest (128 bytes).
const LONG_ID: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// Member ids from here up are wide (`ms << 20 | seq`), below short.
const WIDE_FROM: i64 = 1 << 20;

thread_local! {
    /// Short and wide member ids compared by this test's thread.
    static ID_KINDS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// The module's command and the library's call (FCALL, or EVALSHA with the
/// function's name first) for the same request. `keys` are the command's
/// keys (one, or MCHECK's rules' keys).
fn both(kind: &str, keys: &[String], args: &[String], prefix: &str, form: &Form) -> redis::Cmd {
    let with = |k: &String| format!("{{{prefix}}}{k}");
    match (prefix, kind) {
        ("m", "MCHECK") => {
            // numrules key limit window ...
            let mut cmd = redis::cmd("SLIDEWIN.MCHECK");
            cmd.arg(keys.len());
            for (i, k) in keys.iter().enumerate() {
                cmd.arg(with(k)).arg(&args[2 * i]).arg(&args[2 * i + 1]);
            }
            cmd.arg(&args[2 * keys.len()..]);
            cmd
        }
        ("m", _) => {
            let mut cmd = redis::cmd(&format!("SLIDEWIN.{kind}"));
            cmd.arg(with(&keys[0])).arg(args);
            cmd
        }
        (_, _) => {
            let function = format!("slidewin_{}", kind.to_lowercase());
            let mut cmd = match form {
                Form::Function => {
                    let mut cmd = redis::cmd("FCALL");
                    cmd.arg(&function).arg(keys.len());
                    cmd
                }
                Form::Eval(sha) => {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(sha).arg(keys.len());
                    cmd
                }
            };
            for k in keys {
                cmd.arg(with(k));
            }
            if matches!(form, Form::Eval(_)) {
                cmd.arg(&function);
            }
            cmd.arg(args);
            cmd
        }
    }
}

fn errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    errors_on(&mut Pair::one(server.conn(), false));
}

fn eval_errors(flavor: Flavor) {
    let server = Options::new(flavor).start();
    errors_on(&mut Pair::one(server.conn(), true));
}

fn errors_on(pair: &mut Pair) {
    let _: () = redis::cmd("SET")
        .arg("{m}str")
        .arg("v")
        .query(&mut pair.m)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{f}str")
        .arg("v")
        .query(pair.lib())
        .unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        ("CHECK", "k", &["0", "1000"]),
        ("CHECK", "k", &["100001", "1000"]),
        ("CHECK", "k", &["1.5", "1000"]),
        ("CHECK", "k", &["05", "1000"]),
        ("CHECK", "k", &["+5", "1000"]),
        ("CHECK", "k", &["99999999999999999999", "1000"]),
        ("CHECK", "k", &["5", "0"]),
        ("CHECK", "k", &["5", "31622400001"]),
        ("CHECK", "k", &["5", "-1"]),
        ("CHECK", "k", &["5", "1000", "FOO"]),
        ("CHECK", "k", &["5", "1000", "bad\u{1}opt"]),
        ("CHECK", "k", &["5", "1000", "COST"]),
        ("CHECK", "k", &["5", "1000", "COST", "0"]),
        ("CHECK", "k", &["5", "1000", "COST", "1", "cost", "2"]),
        ("CHECK", "k", &["5", "1000", "DETAIL", "detail"]),
        ("CHECK", "k", &["5"]),
        ("CHECK", "str", &["5", "1000"]),
        ("PEEK", "k", &["5", "1000", "WITHMEMBERS"]),
        ("PEEK", "k", &["5", "1000", "DETAIL", "detail"]),
        ("PEEK", "k", &["0", "1000"]),
        ("PEEK", "str", &["5", "1000"]),
        ("UNDO", "str", &["m"]),
        // Request ids (issue 32).
        ("CHECK", "k", &["5", "1000", "ID"]),
        ("CHECK", "k", &["5", "1000", "ID", ""]),
        ("CHECK", "k", &["5", "1000", "ID", LONG_ID]),
        ("CHECK", "k", &["5", "1000", "ID", "a", "id", "b"]),
        ("CHECK", "k", &["5", "1000", "ID", "a", "WITHMEMBERS"]),
        (
            "CHECK",
            "k",
            &["5", "1000", "WITHMEMBERS", "DETAIL", "id", "a"],
        ),
        ("CHECK", "k", &["5", "1000", "ID", "a", "COST", "0"]),
        ("CHECK", "str", &["5", "1000", "ID", "a"]),
        ("PEEK", "k", &["5", "1000", "ID", "a"]),
        ("PEEK", "k", &["5", "1000", "DETAIL", "id", "a"]),
        ("UNDO", "k", &["ID", ""]),
        ("UNDO", "k", &["id", LONG_ID]),
        ("UNDO", "str", &["ID", "a"]),
        ("UNDO", "str", &["1@1"]),
        // `ID` first takes exactly one request id (issue 39).
        ("UNDO", "k", &["ID"]),
        ("UNDO", "k", &["id", "a", "b"]),
        ("UNDO", "str", &["ID", "a", "b"]),
        ("SETTLE", "k", &["ID", "a", "COST", "-1"]),
        ("SETTLE", "k", &["ID", "a", "COST", "1.5"]),
        ("SETTLE", "k", &["ID", "a", "COST", "01"]),
        ("SETTLE", "k", &["ID", "a", "COST", "100001"]),
        ("SETTLE", "k", &["ID", "a", "COST", ""]),
        ("SETTLE", "k", &["ID", "", "COST", "1"]),
        ("SETTLE", "k", &["ID", LONG_ID, "COST", "1"]),
        ("SETTLE", "k", &["XX", "a", "COST", "1"]),
        ("SETTLE", "k", &["ID", "a", "UNITS", "1"]),
        ("SETTLE", "k", &["COST", "1", "ID", "a"]),
        ("SETTLE", "k", &["ID", "a", "COST"]),
        ("SETTLE", "k", &["ID", "a", "COST", "1", "DETAIL"]),
        ("SETTLE", "k", &[]),
        ("SETTLE", "str", &["ID", "a", "COST", "1"]),
        // SHADOW (issue 40).
        ("CHECK", "k", &["5", "1000", "SHADOW", "shadow"]),
        ("CHECK", "k", &["5", "1000", "SHADOWS"]),
        ("PEEK", "k", &["5", "1000", "SHADOW"]),
        ("CHECK", "str", &["5", "1000", "SHADOW"]),
    ];
    for (kind, key, args) in cases {
        let keys = vec![key.to_string()];
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let m = both(kind, &keys, &args, "m", &pair.form).query::<Value>(&mut pair.m);
        let f = both(kind, &keys, &args, "f", &pair.form).query::<Value>(pair.lib());
        match (m, f) {
            (Err(m), Err(f)) => assert_eq!(
                error_text(&m).replace("slidewin.", ""),
                error_text(&f).replace("slidewin.", ""),
                "{kind} {key} {args:?}"
            ),
            other => panic!("{kind} {key} {args:?}: both must fail: {other:?}"),
        }
    }
    // Above the per-call bound (COST times the distinct keys: the
    // module's default, max-limit), refused before the keys are read.
    let mut many: Vec<String> = vec!["64".to_string()];
    for i in 0..64 {
        many.extend([format!("k{i}"), "100000".to_string(), "1000".to_string()]);
    }
    many.extend(["COST".to_string(), "100000".to_string()]);
    let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    for args in [
        &["0", "k", "5", "1000"][..],
        &["1", "k", "0", "1000"][..],
        &["1", "k", "5", "1000", "PEEK"][..],
        &["2", "k", "5", "1000", "str", "5", "1000"][..],
        &[
            "2", "k", "100000", "1000", "k2", "100000", "1000", "COST", "60000",
        ][..],
        &[
            "2", "k", "100000", "1000", "str", "100000", "1000", "COST", "60000",
        ][..],
        &many[..],
        &["1", "k", "5", "1000", "ID"][..],
        &["1", "k", "5", "1000", "ID", ""][..],
        &[
            "2",
            "k",
            "5",
            "1000",
            "k2",
            "5",
            "1000",
            "ID",
            "a",
            "WITHMEMBERS",
        ][..],
        &[
            "2", "k", "5", "1000", "k2", "5", "1000", "ID", "a", "ID", "a",
        ][..],
        &["2", "k", "5", "1000", "str", "5", "1000", "ID", "a"][..],
        &["1", "k", "5", "1000", "SHADOW", "DETAIL", "Shadow"][..],
    ] {
        let n: usize = args[0].parse().unwrap();
        let keys: Vec<String> = (0..n).map(|i| args[1 + 3 * i].to_string()).collect();
        let mut flat: Vec<String> = Vec::new();
        for i in 0..n {
            flat.push(args[2 + 3 * i].to_string());
            flat.push(args[3 + 3 * i].to_string());
        }
        flat.extend(args[1 + 3 * n..].iter().map(|a| a.to_string()));
        let m = both("MCHECK", &keys, &flat, "m", &pair.form).query::<Value>(&mut pair.m);
        let f = both("MCHECK", &keys, &flat, "f", &pair.form).query::<Value>(pair.lib());
        match (m, f) {
            (Err(m), Err(f)) => {
                assert_eq!(error_text(&m), error_text(&f), "{args:?}");
                // The texts docs/reference.md shows.
                if args.contains(&"COST") {
                    let (cost, entries) = if n == 64 {
                        ("100000", "6400000")
                    } else {
                        ("60000", "120000")
                    };
                    assert_eq!(
                        error_text(&m),
                        format!("ERR COST {cost} on {n} keys would add {entries} entries; slidewin.max-entries-per-call allows 100000 a call"),
                    );
                }
            }
            other => panic!("{args:?}: both must fail: {other:?}"),
        }
    }
    // SLIDEWIN.TOP needs the module's summary: the function says so.
    let err = both("TOP", &[], &[], "f", &pair.form)
        .query::<Value>(pair.lib())
        .expect_err("slidewin_top is not available");
    assert!(
        error_text(&err).starts_with("ERR slidewin_top is not available without the module"),
        "{err:?}"
    );
}

/// Compares two replies: integers equal, except the waits (`timing`
/// positions), which may differ by the slack but never in sign or -1.
fn same(m: &Value, f: &Value, path: &str) {
    match (m, f) {
        (Value::Int(a), Value::Int(b)) => assert_eq!(a, b, "{path}"),
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: {m:?} vs {f:?}");
            // A five-field detail array: [allowed, limit, remaining, retry, reset].
            let five = a.len() >= 5 && a[..5].iter().all(|v| matches!(v, Value::Int(_)));
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let timing = (five && (i == 3 || i == 4)) || (!five && i == 1 && a.len() > 2);
                match (x, y) {
                    (Value::Int(p), Value::Int(q)) if timing => {
                        assert_eq!(*p <= 0, *q <= 0, "{path}[{i}]: {m:?} vs {f:?}");
                        if *p <= 0 {
                            assert_eq!(p, q, "{path}[{i}]");
                        }
                        assert!((p - q).abs() <= SLACK_MS, "{path}[{i}]: {m:?} vs {f:?}");
                    }
                    // Last (after SHADOW's field, when given) or sixth.
                    (Value::Array(_), Value::Array(_)) if i == a.len() - 1 || i == 5 => {
                        // WITHMEMBERS: same number of members, tokens
                        // `<id>@<score_ms>`.
                        let (Value::Array(p), Value::Array(q)) = (x, y) else {
                            unreachable!()
                        };
                        if p.iter().all(|v| matches!(v, Value::BulkString(_))) {
                            assert_eq!(p.len(), q.len(), "{path}: members");
                            let tokens = |vs: &[Value]| -> Vec<(i64, i64)> {
                                vs.iter()
                                    .map(|v| {
                                        let s: String = redis::from_redis_value_ref(v).unwrap();
                                        token(&s).unwrap_or_else(|| panic!("{path}: token {s}"))
                                    })
                                    .collect()
                            };
                            // Both pick short ids the same way from the same
                            // keys, and fall back to wide ids in the same
                            // cases (a wide id carries each side's own
                            // sequence, so only its kind is compared); the
                            // scores within the slack.
                            let (ip, iq) = (tokens(p), tokens(q));
                            for ((a, ams), (b, bms)) in ip.iter().zip(&iq) {
                                assert!(
                                    (ams - bms).abs() <= SLACK_MS,
                                    "{path}: token scores {ams} vs {bms}"
                                );
                                let short = *a < WIDE_FROM;
                                assert_eq!(
                                    short,
                                    *b < WIDE_FROM,
                                    "{path}: one side gave a short member id, the other a wide one: {a} vs {b}"
                                );
                                if short {
                                    assert_eq!(a, b, "{path}: short member ids");
                                }
                                ID_KINDS.with(|k| {
                                    let (s, w) = k.get();
                                    k.set(if short { (s + 1, w) } else { (s, w + 1) });
                                });
                            }
                        } else {
                            same(x, y, &format!("{path}[{i}]"));
                        }
                    }
                    _ => same(x, y, &format!("{path}[{i}]")),
                }
            }
        }
        _ => assert_eq!(m, f, "{path}"),
    }
}

/// A token `<id>@<score_ms>` as WITHMEMBERS hands it out: both parts
/// canonical non-negative integers.
fn token(s: &str) -> Option<(i64, i64)> {
    let (id, ms) = s.split_once('@')?;
    let canonical =
        |t: &str| t == "0" || (!t.starts_with('0') && t.bytes().all(|b| b.is_ascii_digit()));
    if !canonical(id) || !canonical(ms) {
        return None;
    }
    Some((id.parse().ok()?, ms.parse().ok()?))
}

/// Waits until the server clock is 20-60 ms into a 200 ms slot.
fn wait_for_slot(c: &mut Connection) {
    assert!(wait_until(Duration::from_secs(5), || {
        let off = server_ms(c) % 200;
        (20..=60).contains(&off)
    }));
}

fn sequences(flavor: Flavor) {
    let server = Options::new(flavor).start();
    sequences_on(&mut Pair::one(server.conn(), false));
}

fn eval_sequences(flavor: Flavor) {
    let server = Options::new(flavor).start();
    sequences_on(&mut Pair::one(server.conn(), true));
}

/// Request ids the random sequences use: few, so calls repeat them.
const POOL: [&str; 3] = ["r0", "r1", "r2"];

fn sequences_on(pair: &mut Pair) {
    let mut rng = StdRng::seed_from_u64(0x5117_e0a1);
    // SHADOW is drawn from a generator of its own, so the calls (and the
    // state they leave) are those of the sequence without it: a refused
    // call charges nothing either way.
    let mut shadow_rng = StdRng::seed_from_u64(0x5_4ad0);
    let mut shadow_refusals = 0;
    let keys = ["a", "b", "c"];
    let windows = ["300", "500", "700", "900"];
    // Decisions of each kind, so the sequence is known to take both paths.
    let (mut allowed, mut denied) = (0, 0);
    // Repeats answered from a charge, and SETTLE/UNDO ID calls that found one.
    let (mut repeats, mut found) = (0, 0);
    // The last CHECK or MCHECK made with an ID: kind, keys, arguments (the id last).
    let mut last: Option<(String, Vec<String>, Vec<String>)> = None;
    for step in 0..100 {
        wait_for_slot(&mut pair.m);
        let retry = last.is_some() && rng.random_bool(0.25);
        let kind: &str = match (&last, retry) {
            (Some((k, _, _)), true) => {
                if k == "MCHECK" {
                    "MCHECK"
                } else {
                    "CHECK"
                }
            }
            _ => [
                "CHECK", "CHECK", "CHECK", "PEEK", "MCHECK", "MCHECK", "UNDO", "SETTLE",
            ][rng.random_range(0..8)],
        };
        let (call_keys, mut args): (Vec<String>, Vec<String>) = if let (true, Some((_, k, a))) =
            (retry, &last)
        {
            // A retry of the last call with an ID, sent again as it was.
            (k.clone(), a.clone())
        } else if kind == "MCHECK" {
            let n = rng.random_range(1..=3);
            let ks: Vec<String> = (0..n)
                .map(|_| keys[rng.random_range(0..3)].to_string())
                .collect();
            let mut a = Vec::new();
            for _ in 0..n {
                a.push(rng.random_range(1..=3).to_string());
                a.push(windows[rng.random_range(0..4)].to_string());
            }
            (ks, a)
        } else if kind == "UNDO" || kind == "SETTLE" {
            // Mostly the last charge made with an ID, in its first key.
            let (k, id) = match &last {
                Some((_, k, a)) if rng.random_bool(0.7) => (k[0].clone(), a[a.len() - 1].clone()),
                _ => (
                    keys[rng.random_range(0..3)].to_string(),
                    POOL[rng.random_range(0..3)].to_string(),
                ),
            };
            let mut a = vec!["ID".to_string(), id];
            if kind == "SETTLE" {
                a.extend(["COST".to_string(), rng.random_range(0..=5).to_string()]);
            }
            (vec![k], a)
        } else {
            (
                vec![keys[rng.random_range(0..3)].to_string()],
                vec![
                    rng.random_range(1..=3).to_string(),
                    windows[rng.random_range(0..4)].to_string(),
                ],
            )
        };
        let judged = kind != "UNDO" && kind != "SETTLE";
        let mut with_id = retry;
        if judged && !retry {
            if rng.random_bool(0.4) {
                args.push("COST".into());
                args.push(rng.random_range(1..=3).to_string());
            }
            if kind != "PEEK" && rng.random_bool(0.6) {
                args.push(
                    if rng.random_bool(0.5) {
                        "DETAIL"
                    } else {
                        "WITHMEMBERS"
                    }
                    .into(),
                );
            }
            if kind != "PEEK" && shadow_rng.random_bool(0.3) {
                args.push(
                    if shadow_rng.random_bool(0.5) {
                        "SHADOW"
                    } else {
                        "shadow"
                    }
                    .into(),
                );
            }
            if kind != "PEEK" && !args.iter().any(|a| a == "WITHMEMBERS") && rng.random_bool(0.5) {
                args.push("ID".into());
                args.push(POOL[rng.random_range(0..3)].to_string());
                with_id = true;
                last = Some((kind.to_string(), call_keys.clone(), args.clone()));
            }
        }
        // Whether the call was a repeat, seen on the module's side: the
        // charge under its id was in one of its keys before the call.
        let id_held = with_id && {
            let id = &args[args.len() - 1];
            call_keys.iter().any(|k| {
                let member = format!("#1:{id}");
                let score: Option<f64> = redis::cmd("ZSCORE")
                    .arg(format!("{{m}}{k}"))
                    .arg(member)
                    .query(&mut pair.m)
                    .unwrap();
                score.is_some()
            })
        };
        let replies = pair.query(kind, &call_keys, &args);
        same(
            &replies.0,
            &replies.1,
            &format!("step {step}: {kind} {call_keys:?} {args:?}"),
        );
        let first = match &replies.0 {
            Value::Array(items) => items.first().cloned(),
            other => Some(other.clone()),
        };
        if !judged {
            if !matches!(first, Some(Value::Int(0)) | Some(Value::Int(-1))) {
                found += 1;
            }
        } else if args.iter().any(|a| a.eq_ignore_ascii_case("SHADOW")) {
            // Always answered allowed; the detail says whether it was
            // refused: its shadow_refused field, last but WITHMEMBERS'.
            assert_eq!(first, Some(Value::Int(1)), "step {step}: SHADOW");
            if let Value::Array(items) = &replies.0 {
                let members = usize::from(args.iter().any(|a| a == "WITHMEMBERS"));
                match items.get(items.len() - 1 - members) {
                    Some(Value::Int(1)) => {
                        shadow_refusals += 1;
                        denied += 1;
                    }
                    Some(Value::Int(0)) => allowed += 1,
                    other => panic!("step {step}: shadow_refused {other:?}"),
                }
            }
        } else {
            match first {
                Some(Value::Int(1)) => allowed += 1,
                Some(Value::Int(0)) => denied += 1,
                other => panic!("step {step}: {other:?}"),
            }
        }
        // A window may trim the charge this very call (expired entries
        // go first), so a charge seen before is not always a repeat; a
        // repeat is always allowed.
        if id_held && first == Some(Value::Int(1)) {
            repeats += 1;
        }
        // Sometimes let time pass so windows slide.
        if rng.random_bool(0.3) {
            std::thread::sleep(Duration::from_millis(200 * rng.random_range(1..4)));
        }
    }
    same_keys(pair, &keys);
    let (short, wide) = ID_KINDS.with(|k| k.get());
    eprintln!(
        "sequence: {allowed} allowed, {denied} denied, {repeats} repeats, {found} SETTLE/UNDO ID found, member ids {short} short {wide} wide"
    );
    assert!(
        allowed >= 10 && denied >= 10,
        "{allowed} allowed, {denied} denied"
    );
    assert!(
        repeats >= 3 && found >= 3,
        "{repeats} calls repeated an id, {found} SETTLE/UNDO ID found their charge"
    );
    assert!(
        shadow_refusals >= 3,
        "{shadow_refusals} calls with SHADOW refused"
    );
    // WITHMEMBERS replies and the final entries were compared id by id; most ids must be short
    // (one more than the key's newest), or a fall back to wide ids on both
    // sides would pass unseen.
    assert!(
        short >= 10 && wide <= short / 4,
        "member ids compared: {short} short, {wide} wide"
    );
}

/// The module's and the library's copies of `keys` hold the same entries:
/// integer members the same short id (or both wide), a charge's members
/// `#<i>:<r>` the same; scores and expiries within the slack.
fn same_keys(pair: &mut Pair, keys: &[&str]) {
    same_keys_within(pair, keys, SLACK_MS)
}

/// [`same_keys`], scores and expiries within `slack_ms`.
fn same_keys_within(pair: &mut Pair, keys: &[&str], slack_ms: i64) {
    for k in keys {
        let m = entries(&mut pair.m, format!("{{m}}{k}").as_bytes());
        let f = entries(pair.lib(), format!("{{f}}{k}").as_bytes());
        assert_eq!(
            m.len(),
            f.len(),
            "{k}: the same number of entries: {m:?} vs {f:?}"
        );
        // A charge's members (`#<i>:<id>`) by name: each side ran the call
        // in its own millisecond, so two charges one side made within a
        // millisecond tie there (ordered by name) while the other side
        // scored them apart (ordered by time).
        let charges = |all: &[(Vec<u8>, f64)]| -> Vec<(String, f64)> {
            let mut named: Vec<(String, f64)> = all
                .iter()
                .filter(|(name, _)| name.starts_with(b"#"))
                .map(|(name, score)| (String::from_utf8_lossy(name).into_owned(), *score))
                .collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            named
        };
        let (mc, fc) = (charges(&m), charges(&f));
        let names = |c: &[(String, f64)]| c.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&mc), names(&fc), "{k}: the same charge members");
        for ((name, ms), (_, fs)) in mc.iter().zip(&fc) {
            assert!(
                (ms - fs).abs() <= slack_ms as f64,
                "{k}: {name} scored {ms} vs {fs}"
            );
        }
        let plain = |all: &[(Vec<u8>, f64)]| -> Vec<(Vec<u8>, f64)> {
            all.iter()
                .filter(|(name, _)| !name.starts_with(b"#"))
                .cloned()
                .collect()
        };
        for ((mm, ms), (fm, fs)) in plain(&m).iter().zip(&plain(&f)) {
            assert!(
                (ms - fs).abs() <= slack_ms as f64,
                "{k}: scores {ms} vs {fs}"
            );
            let id = |name: &[u8]| -> i64 {
                std::str::from_utf8(name)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_else(|| panic!("{k}: member {name:?}"))
            };
            let (mi, fi) = (id(mm), id(fm));
            assert_eq!(
                mi < WIDE_FROM,
                fi < WIDE_FROM,
                "{k}: member ids {mi} vs {fi}"
            );
            if mi < WIDE_FROM {
                assert_eq!(mi, fi, "{k}: the same short member");
            }
            ID_KINDS.with(|kinds| {
                let (s, w) = kinds.get();
                kinds.set(if mi < WIDE_FROM {
                    (s + 1, w)
                } else {
                    (s, w + 1)
                });
            });
        }
        let (mt, ft) = (
            expires_at(&mut pair.m, &format!("{{m}}{k}")),
            expires_at(pair.lib(), &format!("{{f}}{k}")),
        );
        assert_eq!(mt < 0, ft < 0, "{k}: both or neither expire");
        assert!((mt - ft).abs() <= slack_ms, "{k}: expiry {mt} vs {ft}");
    }
}

/// A deployment moving between the function and the module: each continues
/// the other's keys, entries counted alike, members never colliding.
fn shared_keys(flavor: Flavor) {
    let server = Options::new(flavor).start();
    shared_keys_on(&mut Pair::one(server.conn(), false));
}

/// The same with the EVAL form.
fn eval_shared_keys(flavor: Flavor) {
    let server = Options::new(flavor).start();
    shared_keys_on(&mut Pair::one(server.conn(), true));
}

fn shared_keys_on(pair: &mut Pair) {
    let key = "live".to_string();
    let full = "{f}live";
    let form = pair.form.clone();
    let lib = |c: &mut Connection, kind: &str, args: &[&str]| -> Value {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        both(kind, std::slice::from_ref(&key), &args, "f", &form)
            .query(c)
            .unwrap()
    };
    let c = &mut pair.m;
    assert_eq!(lib(c, "CHECK", &["4", "60000"]), Value::Int(1));
    assert_eq!(check(c, full, 4, 60_000), 1);
    assert_eq!(lib(c, "CHECK", &["4", "60000"]), Value::Int(1));
    assert_eq!(check(c, full, 4, 60_000), 1);
    assert_eq!(lib(c, "CHECK", &["4", "60000"]), Value::Int(0));
    assert_eq!(check(c, full, 4, 60_000), 0);
    let all = entries(c, full.as_bytes());
    assert_eq!(all.len(), 4);
    let names: std::collections::HashSet<&Vec<u8>> = all.iter().map(|(m, _)| m).collect();
    assert_eq!(names.len(), 4, "no member collided");
    // The peek agrees too, and the library's UNDO gives an entry back.
    let p: Vec<i64> = redis::from_redis_value_ref(&lib(c, "PEEK", &["4", "60000"])).unwrap();
    assert_eq!(p[..3], [0, 4, 0]);
    let m = String::from_utf8(all[0].0.clone()).unwrap();
    assert_eq!(lib(c, "UNDO", &[&m]), Value::Int(1));
    assert_eq!(check(c, full, 4, 60_000), 1);
}

fn ids(flavor: Flavor) {
    let server = Options::new(flavor).start();
    ids_on(&mut Pair::one(server.conn(), false));
}

fn eval_ids(flavor: Flavor) {
    let server = Options::new(flavor).start();
    ids_on(&mut Pair::one(server.conn(), true));
}

/// One request sent to both sides; the replies must match. The module's.
fn step(pair: &mut Pair, kind: &str, keys: &[&str], args: &[&str]) -> Value {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (m, f) = pair.query(kind, &keys, &args);
    same(&m, &f, &format!("{kind} {keys:?} {args:?}"));
    m
}

/// The integers of a reply (a five-field detail, or 1/0 as one).
fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Int(i) => vec![*i],
        other => redis::from_redis_value_ref(other).unwrap_or_else(|e| panic!("{other:?}: {e}")),
    }
}

/// The members of a key on one side, in order.
fn members(c: &mut Connection, key: &str) -> Vec<String> {
    entries(c, key.as_bytes())
        .into_iter()
        .map(|(m, _)| String::from_utf8_lossy(&m).into_owned())
        .collect()
}

/// The tokens of a WITHMEMBERS reply (its last field).
fn tokens_of(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not a detail reply: {v:?}")
    };
    redis::from_redis_value_ref(items.last().expect("fields")).expect("tokens")
}

/// Issue 32 on sorted-set keys, module against library: a repeated ID is
/// charged once (CHECK and MCHECK, also when one key already forgot it),
/// UNDO by ID is exact and idempotent, SETTLE down, up past the limit and
/// to zero with the decisions that follow, and a stale token cannot remove
/// a later entry of a key that emptied and filled again.
fn ids_on(pair: &mut Pair) {
    // A repeated ID is charged once, whatever its COST.
    wait_for_slot(&mut pair.m);
    let args = ["3", "900", "COST", "2", "ID", "r1", "DETAIL"];
    assert_eq!(
        ints(&step(pair, "CHECK", &["i1"], &args))[..4],
        [1, 3, 1, 0]
    );
    let args = ["3", "900", "COST", "3", "ID", "r1", "DETAIL"];
    assert_eq!(
        ints(&step(pair, "CHECK", &["i1"], &args))[..4],
        [1, 3, 1, 0],
        "a repeat answers 1 with the log as it is"
    );
    let args = ["3", "900", "ID", "r1"];
    assert_eq!(step(pair, "CHECK", &["i1"], &args), Value::Int(1));
    let args = ["3", "900", "COST", "2"];
    assert_eq!(
        step(pair, "CHECK", &["i1"], &args),
        Value::Int(0),
        "charged once: one unit is left"
    );
    same_keys(pair, &["i1"]);
    assert_eq!(members(&mut pair.m, "{m}i1"), ["#1:r1", "#2:r1"]);

    // MCHECK: the charge in each key; a repeat while any key holds it.
    let rules = ["4", "900", "3", "300", "ID", "r 2:#", "DETAIL"];
    assert_eq!(
        step(pair, "MCHECK", &["i1", "i2"], &rules[..6]),
        Value::Int(1)
    );
    let v = step(pair, "MCHECK", &["i1", "i2"], &rules);
    let Value::Array(fields) = &v else {
        panic!("{v:?}")
    };
    assert_eq!(fields[..2], [Value::Int(1), Value::Int(0)], "a repeat");
    assert_eq!(ints(&fields[2])[..4], [1, 4, 1, 0]);
    assert_eq!(ints(&fields[3])[..4], [1, 3, 2, 0]);
    // i2's 300 ms window passes; i1 still holds the charge: still a repeat,
    // and i2 is not charged again.
    std::thread::sleep(Duration::from_millis(400));
    wait_for_slot(&mut pair.m);
    assert_eq!(
        step(pair, "MCHECK", &["i1", "i2"], &rules[..6]),
        Value::Int(1)
    );
    same_keys(pair, &["i1", "i2"]);
    assert!(members(&mut pair.m, "{m}i2").is_empty());

    // UNDO by ID: exactly the charge, once.
    assert_eq!(step(pair, "UNDO", &["i1"], &["ID", "r1"]), Value::Int(2));
    assert_eq!(step(pair, "UNDO", &["i1"], &["id", "r1"]), Value::Int(0));
    assert_eq!(step(pair, "UNDO", &["i1"], &["ID", "never"]), Value::Int(0));
    // By member, a charge's entries are never removed (`ID` alone or with
    // two more arguments is a syntax error: errors_on).
    assert_eq!(step(pair, "UNDO", &["i1"], &["#1:r 2:#"]), Value::Int(0));
    same_keys(pair, &["i1"]);
    assert_eq!(members(&mut pair.m, "{m}i1"), ["#1:r 2:#"]);
    // Undone, r1 is forgotten: the same id charges again.
    let args = ["4", "900", "ID", "r1", "DETAIL"];
    assert_eq!(
        ints(&step(pair, "CHECK", &["i1"], &args))[..4],
        [1, 4, 2, 0]
    );
    same_keys(pair, &["i1"]);

    // Any bytes make a request id, up to 128 of them.
    binary_ids(pair);

    // SETTLE down, up past the limit, to zero.
    wait_for_slot(&mut pair.m);
    let args = ["4", "900", "COST", "3", "ID", "t", "DETAIL"];
    assert_eq!(ints(&step(pair, "CHECK", &["s"], &args))[..4], [1, 4, 1, 0]);
    let settle =
        |pair: &mut Pair, units: &str| step(pair, "SETTLE", &["s"], &["ID", "t", "cost", units]);
    assert_eq!(settle(pair, "1"), Value::Int(1), "down");
    assert_eq!(members(&mut pair.m, "{m}s"), ["#1:t"]);
    assert_eq!(settle(pair, "1"), Value::Int(1), "unchanged");
    assert_eq!(
        step(pair, "CHECK", &["s"], &["4", "900", "COST", "3"]),
        Value::Int(1)
    );
    assert_eq!(step(pair, "CHECK", &["s"], &["4", "900"]), Value::Int(0));
    assert_eq!(settle(pair, "6"), Value::Int(6), "up past the limit");
    same_keys(pair, &["s"]);
    // Every unit of the charge is scored at the charge's time, on each side.
    let charge_scores = |c: &mut Connection, key: &str| {
        let e = entries(c, key.as_bytes());
        let charged: Vec<f64> = e
            .iter()
            .filter(|(m, _)| m.starts_with(b"#"))
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(charged.len(), 6, "{key}: {e:?}");
        assert!(charged.iter().all(|s| *s == charged[0]), "{key}: {e:?}");
    };
    charge_scores(&mut pair.m, "{m}s");
    charge_scores(pair.lib(), "{f}s");
    // 9 entries, limit 4: the following calls wait for six of them to go.
    let d = ints(&step(pair, "CHECK", &["s"], &["4", "900", "DETAIL"]));
    assert_eq!(d[..3], [0, 4, 0]);
    assert!(d[3] > 0, "{d:?}");
    let d = ints(&step(pair, "PEEK", &["s"], &["4", "900"]));
    assert_eq!(d[..3], [0, 4, 0]);
    assert_eq!(settle(pair, "0"), Value::Int(0), "to zero");
    assert_eq!(
        members(&mut pair.m, "{m}s").len(),
        3,
        "the other call's three stay"
    );
    assert_eq!(settle(pair, "2"), Value::Int(-1), "forgotten");
    assert_eq!(step(pair, "UNDO", &["s"], &["ID", "t"]), Value::Int(0));
    let args = ["4", "900", "ID", "t", "DETAIL"];
    assert_eq!(
        ints(&step(pair, "CHECK", &["s"], &args))[..4],
        [1, 4, 0, 0],
        "a new charge under the same id"
    );
    same_keys(pair, &["s"]);
    // A key that only held the charge is deleted when it settles to zero.
    assert_eq!(
        step(pair, "CHECK", &["z"], &["2", "900", "COST", "2", "ID", "q"]),
        Value::Int(1)
    );
    assert_eq!(
        step(pair, "SETTLE", &["z"], &["ID", "q", "COST", "0"]),
        Value::Int(0)
    );
    same_keys(pair, &["z"]);
    let exists: i64 = redis::cmd("EXISTS").arg("{m}z").query(&mut pair.m).unwrap();
    assert_eq!(exists, 0);

    // Large calls (the library once failed from 4000 units on, past
    // what one unpack() takes): the same entries. The library runs after
    // the module's large call, so its clock is further on: scores within a
    // wider slack here.
    let w = "60100";
    let args = ["100000", w, "COST", "10000"];
    assert_eq!(step(pair, "CHECK", &["big1"], &args), Value::Int(1));
    let args = ["100000", w, "100000", w, "COST", "5000", "ID", "b"];
    assert_eq!(
        step(pair, "MCHECK", &["big2", "big3"], &args),
        Value::Int(1)
    );
    let args = ["100000", w, "COST", "10000", "ID", "b"];
    assert_eq!(
        step(pair, "CHECK", &["big2"], &args),
        Value::Int(1),
        "a repeat"
    );
    for units in ["3", "20000", "0"] {
        let args = ["ID", "b", "COST", units];
        assert_eq!(
            step(pair, "SETTLE", &["big3"], &args),
            Value::Int(units.parse().unwrap())
        );
    }
    assert_eq!(
        step(pair, "UNDO", &["big2"], &["ID", "b"]),
        Value::Int(5000)
    );
    same_keys_within(pair, &["big1", "big2", "big3"], 5000);
    assert_eq!(members(&mut pair.m, "{m}big1").len(), 10_000);

    // A stale token cannot remove a later entry: the key expired and
    // started its ids again at 1, each entry now scored later.
    wait_for_slot(&mut pair.m);
    let e = vec!["e".to_string()];
    let with = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    let (m1, f1) = pair.query("CHECK", &e, &with(&["1", "300", "WITHMEMBERS"]));
    same(&m1, &f1, "first call");
    let (tm1, tf1) = (tokens_of(&m1), tokens_of(&f1));
    std::thread::sleep(Duration::from_millis(400));
    wait_for_slot(&mut pair.m);
    let (m2, f2) = pair.query("CHECK", &e, &with(&["1", "300", "WITHMEMBERS"]));
    same(&m2, &f2, "second call");
    let (tm2, tf2) = (tokens_of(&m2), tokens_of(&f2));
    for (old, new) in [(&tm1, &tm2), (&tf1, &tf2)] {
        let (a, b) = (token(&old[0]).unwrap(), token(&new[0]).unwrap());
        assert_eq!(a.0, b.0, "the key restarted its ids: {old:?} {new:?}");
        assert!(b.1 > a.1, "{old:?} {new:?}");
    }
    let (m, f) = pair.query_each("UNDO", &e, &tm1, &tf1);
    assert_eq!((m, f), (Value::Int(0), Value::Int(0)), "the stale token");
    // Not tokens (not canonical): plain members, none of them held.
    assert_eq!(
        step(pair, "UNDO", &["e"], &["01@5", "1@", "@1", "1@-5"]),
        Value::Int(0)
    );
    same_keys(pair, &["e"]);
    let (m, f) = pair.query_each("UNDO", &e, &tm2, &tf2);
    assert_eq!((m, f), (Value::Int(1), Value::Int(1)), "the live token");
    same_keys(pair, &["e"]);
    // The same when an UNDO emptied the key and a later millisecond refills it.
    // First a millisecond of its own: the UNDO of "e" above fenced id 1 for
    // the rest of its millisecond on the whole server (member.rs), and a
    // first call in that millisecond would be given id 2.
    std::thread::sleep(Duration::from_millis(2));
    wait_for_slot(&mut pair.m);
    let e2 = vec!["e2".to_string()];
    let (m1, f1) = pair.query("CHECK", &e2, &with(&["5", "900", "WITHMEMBERS"]));
    same(&m1, &f1, "first call");
    let (tm1, tf1) = (tokens_of(&m1), tokens_of(&f1));
    let (m, f) = pair.query_each("UNDO", &e2, &tm1, &tf1);
    assert_eq!((m, f), (Value::Int(1), Value::Int(1)));
    std::thread::sleep(Duration::from_millis(5));
    let (m2, f2) = pair.query("CHECK", &e2, &with(&["5", "900", "WITHMEMBERS"]));
    same(&m2, &f2, "refilled");
    assert_eq!(
        token(&tokens_of(&m2)[0]).unwrap().0,
        token(&tm1[0]).unwrap().0
    );
    let (m, f) = pair.query_each("UNDO", &e2, &tm1, &tf1);
    assert_eq!((m, f), (Value::Int(0), Value::Int(0)), "the stale token");
    same_keys(pair, &["e2"]);

    // Issue 39: SETTLE and UNDO trim to the key's window; max-limit.
    charges_in_their_window(pair);
    settle_within_max_limit(pair);
}

/// SETTLE and UNDO take no window: they trim first to the key's own (its
/// expiry less its newest entry's score), so a charge that has left it is
/// absent (SETTLE -1, UNDO 0) and its entries go, on both sides alike.
/// Three calls a slot (200 ms) apart, 300 ms windows: at the third, the
/// first slot's entries are 100 ms out of the window, the second's 100 ms in.
fn charges_in_their_window(pair: &mut Pair) {
    let with = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    wait_for_slot(&mut pair.m);
    let args = ["5", "300", "COST", "2", "ID", "old"];
    assert_eq!(step(pair, "CHECK", &["w"], &args), Value::Int(1));
    assert_eq!(
        step(pair, "CHECK", &["u"], &["5", "300", "ID", "old"]),
        Value::Int(1)
    );
    let (m, f) = pair.query("CHECK", &with(&["v"]), &with(&["5", "300", "WITHMEMBERS"]));
    same(&m, &f, "v");
    let (tm, tf) = (tokens_of(&m), tokens_of(&f));
    std::thread::sleep(Duration::from_millis(150));
    wait_for_slot(&mut pair.m);
    for key in ["w", "u", "v"] {
        let args = ["5", "300", "ID", "new"];
        assert_eq!(step(pair, "CHECK", &[key], &args), Value::Int(1));
    }
    std::thread::sleep(Duration::from_millis(150));
    wait_for_slot(&mut pair.m);
    let settle = ["ID", "old", "COST", "4"];
    assert_eq!(
        step(pair, "SETTLE", &["w"], &settle),
        Value::Int(-1),
        "the charge has left its window"
    );
    assert_eq!(step(pair, "UNDO", &["u"], &["ID", "old"]), Value::Int(0));
    let (m, f) = pair.query_each("UNDO", &with(&["v"]), &tm, &tf);
    assert_eq!(
        (m, f),
        (Value::Int(0), Value::Int(0)),
        "a token out of its window"
    );
    same_keys(pair, &["w", "u", "v"]);
    for key in ["{m}w", "{m}u", "{m}v"] {
        assert_eq!(members(&mut pair.m, key), ["#1:new"], "{key}: trimmed");
    }
    let settle = ["ID", "new", "COST", "3"];
    assert_eq!(step(pair, "SETTLE", &["w"], &settle), Value::Int(3));
    same_keys(pair, &["w"]);
}

/// A SETTLE raise that would leave the key with more than max-limit
/// entries (both sides at its default, 100000) is refused with the same
/// error, nothing changed; a raise within it settles. (The boundary itself,
/// exactly max-limit entries, is tests/ids.rs's, at a small max-limit: 100k
/// entries here outlast short windows on a loaded machine.)
fn settle_within_max_limit(pair: &mut Pair) {
    wait_for_slot(&mut pair.m);
    let w = "60100";
    let args = ["10", w, "COST", "10", "ID", "big"];
    assert_eq!(step(pair, "CHECK", &["cap"], &args), Value::Int(1));
    let args = ["11", w, "ID", "other"];
    assert_eq!(step(pair, "CHECK", &["cap"], &args), Value::Int(1));
    let keys = vec!["cap".to_string()];
    let raise: Vec<String> = ["ID", "big", "COST", "100000"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let m = both("SETTLE", &keys, &raise, "m", &pair.form).query::<Value>(&mut pair.m);
    let f = both("SETTLE", &keys, &raise, "f", &pair.form).query::<Value>(pair.lib());
    for side in [m, f] {
        let e = side.expect_err("refused");
        assert_eq!(
            error_text(&e),
            "ERR SETTLE to 100000 units would leave the key with 100001 entries; slidewin.max-limit allows 100000"
        );
    }
    same_keys(pair, &["cap"]);
    assert_eq!(members(&mut pair.m, "{m}cap").len(), 11, "nothing changed");
    let settle = ["ID", "big", "COST", "30"];
    assert_eq!(step(pair, "SETTLE", &["cap"], &settle), Value::Int(30));
    same_keys(pair, &["cap"]);
    assert_eq!(members(&mut pair.m, "{m}cap").len(), 31);
}

/// The same-millisecond case: a CHECK, an UNDO of its token and a new
/// CHECK in one millisecond. The module (a fence per process) and the
/// FUNCTION library (one for the life of the library) give the new entry
/// another id, so the UNDOne token names nothing; the EVAL form keeps
/// nothing between calls and gives the same id again, as docs/clients.md
/// says.
fn fence(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    load_function_library(&mut c);
    let sha = load_eval_script(&mut c);
    for (side, prefix, form) in [
        ("module", "m", Form::Function),
        ("function", "f", Form::Function),
        ("eval", "f", Form::Eval(sha)),
    ] {
        let (mut same_ms, mut reused) = (0, 0);
        for i in 0..300 {
            let key = vec![format!("fence:{side}:{i}")];
            let args: Vec<String> = ["10", "60000", "WITHMEMBERS"]
                .iter()
                .map(|a| a.to_string())
                .collect();
            let first: Value = both("CHECK", &key, &args, prefix, &form)
                .query(&mut c)
                .unwrap();
            let t1 = tokens_of(&first);
            let (undone, second): (i64, Value) = redis::pipe()
                .atomic()
                .add_command(both("UNDO", &key, &t1, prefix, &form))
                .add_command(both("CHECK", &key, &args, prefix, &form))
                .query(&mut c)
                .unwrap();
            assert_eq!(undone, 1, "{side}");
            let (a, b) = (
                token(&t1[0]).unwrap(),
                token(&tokens_of(&second)[0]).unwrap(),
            );
            if a.1 == b.1 {
                same_ms += 1;
                if a.0 == b.0 {
                    reused += 1;
                }
                if same_ms == 5 {
                    break;
                }
            }
        }
        assert!(same_ms > 0, "{side}: never three calls in one millisecond");
        if side == "eval" {
            assert_eq!(reused, same_ms, "{side}: the EVAL form has no fence");
        } else {
            assert_eq!(reused, 0, "{side}: {same_ms} tries in one millisecond");
        }
    }
}

/// A command of one side with binary arguments: the module's
/// `SLIDEWIN.<kind> key args`, or the library's call of the same.
fn raw_cmd(pair: &Pair, side: &str, kind: &str, key: &str, args: &[&[u8]]) -> redis::Cmd {
    let key = format!("{{{side}}}{key}");
    let function = format!("slidewin_{}", kind.to_lowercase());
    let mut cmd = match (side, &pair.form) {
        ("m", _) => {
            let mut c = redis::cmd(&format!("SLIDEWIN.{kind}"));
            c.arg(&key);
            c
        }
        (_, Form::Function) => {
            let mut c = redis::cmd("FCALL");
            c.arg(&function).arg(1).arg(&key);
            c
        }
        (_, Form::Eval(sha)) => {
            let mut c = redis::cmd("EVALSHA");
            c.arg(sha).arg(1).arg(&key).arg(&function);
            c
        }
    };
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

/// Request ids of any bytes (NUL, `:`, `#`, `@`, not UTF-8), the longest
/// (128 bytes) included: the same replies and members on both sides.
fn binary_ids(pair: &mut Pair) {
    let longest = [b'x'; 128];
    let odd: &[u8] = b"\x00\xff:#1@2 %d";
    for id in [odd, &longest[..]] {
        let run = |pair: &mut Pair, kind: &str, args: &[&[u8]]| -> Value {
            let m: Value = raw_cmd(pair, "m", kind, "bin", args)
                .query(&mut pair.m)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            let f: Value = raw_cmd(pair, "f", kind, "bin", args)
                .query(pair.lib())
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            same(&m, &f, &format!("{kind} {args:?}"));
            m
        };
        let check: [&[u8]; 6] = [b"5", b"900", b"COST", b"2", b"ID", id];
        assert_eq!(run(pair, "CHECK", &check), Value::Int(1));
        assert_eq!(run(pair, "CHECK", &check), Value::Int(1));
        let m = entries(&mut pair.m, b"{m}bin");
        let f = entries(pair.lib(), b"{f}bin");
        let names = |e: &[(Vec<u8>, f64)]| e.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>();
        let unit = |i: u8| {
            let mut v = vec![b'#', i, b':'];
            v.extend_from_slice(id);
            v
        };
        assert_eq!(names(&m), [unit(b'1'), unit(b'2')], "charged once");
        assert_eq!(names(&m), names(&f));
        assert_eq!(
            run(pair, "SETTLE", &[b"ID", id, b"COST", b"3"]),
            Value::Int(3)
        );
        assert_eq!(run(pair, "UNDO", &[b"ID", id]), Value::Int(3));
        assert_eq!(run(pair, "UNDO", &[b"ID", id]), Value::Int(0));
        same_keys(pair, &["bin"]);
    }
}
