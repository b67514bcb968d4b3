//! The FUNCTION library (scripts/slidewin.lua) against the module: the same
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
        let m = both(kind, keys, args, "m", &self.form);
        let f = both(kind, keys, args, "f", &self.form);
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
                    (Value::Array(_), Value::Array(_)) if i == a.len() - 1 && !five || i == 5 => {
                        // WITHMEMBERS: same number of members, integer names.
                        let (Value::Array(p), Value::Array(q)) = (x, y) else {
                            unreachable!()
                        };
                        if p.iter().all(|v| matches!(v, Value::BulkString(_))) {
                            assert_eq!(p.len(), q.len(), "{path}: members");
                            let ids = |vs: &[Value]| -> Vec<i64> {
                                vs.iter()
                                    .map(|v| {
                                        let s: String = redis::from_redis_value_ref(v).unwrap();
                                        s.parse::<i64>()
                                            .unwrap_or_else(|_| panic!("{path}: member {s}"))
                                    })
                                    .collect()
                            };
                            // Both pick short ids the same way from the same
                            // keys, and fall back to wide ids in the same
                            // cases (a wide id carries each side's own
                            // sequence, so only its kind is compared).
                            let (ip, iq) = (ids(p), ids(q));
                            for (a, b) in ip.iter().zip(&iq) {
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

fn sequences_on(pair: &mut Pair) {
    let mut rng = StdRng::seed_from_u64(0x5117_e0a1);
    let keys = ["a", "b", "c"];
    let windows = ["300", "500", "700", "900"];
    // Decisions of each kind, so the sequence is known to take both paths.
    let (mut allowed, mut denied) = (0, 0);
    for step in 0..60 {
        wait_for_slot(&mut pair.m);
        let kind = ["CHECK", "CHECK", "PEEK", "MCHECK"][rng.random_range(0..4)];
        let (call_keys, mut args): (Vec<String>, Vec<String>) = if kind == "MCHECK" {
            let n = rng.random_range(1..=3);
            let ks: Vec<String> = (0..n)
                .map(|_| keys[rng.random_range(0..3)].to_string())
                .collect();
            let mut a = Vec::new();
            for _ in 0..n {
                a.push(rng.random_range(1..=4).to_string());
                a.push(windows[rng.random_range(0..4)].to_string());
            }
            (ks, a)
        } else {
            (
                vec![keys[rng.random_range(0..3)].to_string()],
                vec![
                    rng.random_range(1..=4).to_string(),
                    windows[rng.random_range(0..4)].to_string(),
                ],
            )
        };
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
        match first {
            Some(Value::Int(1)) => allowed += 1,
            Some(Value::Int(0)) => denied += 1,
            other => panic!("step {step}: {other:?}"),
        }
        // Sometimes let time pass so windows slide.
        if rng.random_bool(0.3) {
            std::thread::sleep(Duration::from_millis(200 * rng.random_range(1..4)));
        }
    }
    assert!(
        allowed >= 10 && denied >= 10,
        "{allowed} allowed, {denied} denied"
    );
    for k in keys {
        let m = entries(&mut pair.m, format!("{{m}}{k}").as_bytes());
        let f = entries(pair.lib(), format!("{{f}}{k}").as_bytes());
        assert_eq!(m.len(), f.len(), "{k}: the same number of entries");
        for ((mm, ms), (fm, fs)) in m.iter().zip(&f) {
            assert!(
                (ms - fs).abs() <= SLACK_MS as f64,
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
        assert!((mt - ft).abs() <= SLACK_MS, "{k}: expiry {mt} vs {ft}");
    }
    // WITHMEMBERS replies and the final entries were compared id by id; most ids must be short
    // (one more than the key's newest), or a fall back to wide ids on both
    // sides would pass unseen.
    let (short, wide) = ID_KINDS.with(|k| k.get());
    assert!(
        short >= 10 && wide <= short / 4,
        "member ids compared: {short} short, {wide} wide"
    );
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
