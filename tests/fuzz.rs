//! Live fuzzing: thousands of random argument vectors for CHECK, PEEK,
//! MCHECK and UNDO, with and without DETAIL and WITHMEMBERS, against a
//! running server with a replica (without the module). Every reply must be
//! a valid reply of its command or an error, the server must stay up, keys
//! outside the fuzzed pool must stay untouched, and the replica must end
//! with the same data. UNDO is given members that WITHMEMBERS returned as
//! well as made-up ones.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    random_argument_vectors_never_hurt_the_server => fuzz;
}

const CALLS: usize = 4000;

/// Keys the fuzzer may touch: missing ones, sorted sets it creates, and keys
/// of other types (which must answer WRONGTYPE and stay as they are).
const POOL: &[&[u8]] = &[
    b"fz:a",
    b"fz:b",
    b"fz:\xff\x00bin",
    b"",
    b"fz:str",
    b"fz:list",
    b"fz:hash",
];

/// Keys the fuzzer never names.
const SENTINELS: &[&str] = &["keep:str", "keep:zset", "keep:list"];

fn number(rng: &mut StdRng) -> Vec<u8> {
    let choices: &[&str] = &[
        "0",
        "1",
        "5",
        "-1",
        "100000",
        "100001",
        "31622400000",
        "31622400001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "99999999999999999999999999",
        "1.5",
        "1e3",
        "nan",
        "inf",
        "-inf",
        "+5",
        "05",
        " 5",
        "0x10",
    ];
    match rng.random_range(0..5) {
        0 => choices[rng.random_range(0..choices.len())]
            .as_bytes()
            .to_vec(),
        4 => b"100000".to_vec(),
        // Small valid windows expire quickly; large ones outlive the test.
        1 => rng.random_range(1..=50i64).to_string().into_bytes(),
        2 => rng
            .random_range(3_600_000..=31_622_400_000i64)
            .to_string()
            .into_bytes(),
        _ => rng.random_range(-1_000i64..1_000).to_string().into_bytes(),
    }
}

fn token(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..12) {
        0 => b"COST".to_vec(),
        1 => b"cost".to_vec(),
        2 => b"DETAIL".to_vec(),
        3 => b"detail".to_vec(),
        10 => b"WITHMEMBERS".to_vec(),
        11 => b"withMembers".to_vec(),
        4 => Vec::new(),
        5 => (0..rng.random_range(1..24)).map(|_| rng.random()).collect(),
        6 => b"\xc3\x28\xff".to_vec(),
        _ => number(rng),
    }
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    POOL[rng.random_range(0..POOL.len())].to_vec()
}

/// Options after the rules: none, well-formed ones (sometimes repeated), or
/// random tokens.
fn options(rng: &mut StdRng, args: &mut Vec<Vec<u8>>) {
    match rng.random_range(0..10) {
        0..=4 => {}
        5..=7 => {
            for _ in 0..rng.random_range(1..=2) {
                match rng.random_range(0..4) {
                    0 => {
                        args.push(b"COST".to_vec());
                        args.push(rng.random_range(1..=6i64).to_string().into_bytes());
                    }
                    1 => args.push(b"detail".to_vec()),
                    2 => {
                        args.push(b"ID".to_vec());
                        args.push(request_id(rng));
                    }
                    _ => args.push(b"WITHMEMBERS".to_vec()),
                }
            }
        }
        _ => {
            for _ in 0..rng.random_range(1..5) {
                args.push(token(rng));
            }
        }
    }
}

/// A request id from a small set (so that repeats, UNDO and SETTLE find
/// charges), sometimes an empty, over-long or binary one.
fn request_id(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => Vec::new(),
        1 => vec![b'x'; 129],
        2 => vec![0, 0xff, b'#', b':', b'@'],
        _ => format!("r{}", rng.random_range(0..6)).into_bytes(),
    }
}

/// Mostly a well-formed limit, sometimes not; then a window.
fn limit_window(rng: &mut StdRng, args: &mut Vec<Vec<u8>>) {
    if rng.random_bool(0.7) {
        args.push(rng.random_range(1..=8i64).to_string().into_bytes());
    } else {
        args.push(token(rng));
    }
    args.push(number(rng));
}

/// A random call; `members` holds (key, member) pairs WITHMEMBERS returned.
/// `charged` holds (key, request id) pairs of calls allowed with an ID.
fn argv(
    rng: &mut StdRng,
    members: &[(Vec<u8>, Vec<u8>)],
    charged: &[(Vec<u8>, Vec<u8>)],
) -> (String, Vec<Vec<u8>>) {
    let command = match rng.random_range(0..9) {
        0 => "SLIDEWIN.PEEK",
        1 => "slidewin.check",
        2 | 3 => "SLIDEWIN.CHECK",
        4 | 5 => "SLIDEWIN.MCHECK",
        6 => "SLIDEWIN.SETTLE",
        _ => "SLIDEWIN.UNDO",
    }
    .to_string();
    let mut args = Vec::new();
    let shape = rng.random_range(0..10);
    match command.as_str() {
        "SLIDEWIN.MCHECK" => {
            // numrules: mostly the number of triples that follow.
            let n = rng.random_range(1..=3usize);
            if shape == 0 {
                args.push(token(rng));
            } else if shape == 1 {
                args.push((n + 1).to_string().into_bytes());
            } else {
                args.push(n.to_string().into_bytes());
            }
            for _ in 0..n {
                args.push(key(rng));
                limit_window(rng, &mut args);
            }
            options(rng, &mut args);
        }
        "SLIDEWIN.SETTLE" => {
            // Mostly well formed: key ID id COST units, mostly a charge
            // a call made.
            let (k, id) = match charged.is_empty() || rng.random_bool(0.3) {
                true => (key(rng), request_id(rng)),
                // The newest charges: the old ones may have expired.
                false => charged[rng.random_range(charged.len().saturating_sub(4)..charged.len())]
                    .clone(),
            };
            args.push(k);
            args.push(if shape == 0 {
                token(rng)
            } else {
                b"ID".to_vec()
            });
            args.push(id);
            if shape != 1 {
                args.push(b"COST".to_vec());
                args.push(if shape == 2 {
                    number(rng)
                } else {
                    rng.random_range(0..=8i64).to_string().into_bytes()
                });
            }
        }
        "SLIDEWIN.UNDO" if shape == 9 => {
            let (k, id) = match charged.is_empty() || rng.random_bool(0.3) {
                true => (key(rng), request_id(rng)),
                // The newest charges: the old ones may have expired.
                false => charged[rng.random_range(charged.len().saturating_sub(4)..charged.len())]
                    .clone(),
            };
            args.push(k);
            args.push(b"ID".to_vec());
            args.push(id);
        }
        "SLIDEWIN.UNDO" => {
            if !members.is_empty() && rng.random_bool(0.7) {
                let (k, _) = &members[rng.random_range(0..members.len())];
                args.push(k.clone());
                // Some of the members this key was given, and others.
                for _ in 0..rng.random_range(1..=3) {
                    let (other, m) = &members[rng.random_range(0..members.len())];
                    args.push(if other == k || rng.random_bool(0.5) {
                        m.clone()
                    } else {
                        token(rng)
                    });
                }
            } else {
                args.push(key(rng));
                for _ in 0..shape {
                    args.push(token(rng));
                }
            }
        }
        _ => {
            if shape > 0 {
                args.push(key(rng));
            }
            if shape > 1 {
                limit_window(rng, &mut args);
            }
            options(rng, &mut args);
        }
    }
    // Often ask for the members, so that UNDO gets real ones, or charge
    // under a request id, so that SETTLE and UNDO by ID find charges.
    if command.to_ascii_uppercase().ends_with("CHECK") {
        match rng.random_range(0..10) {
            0..=2 => args.push(b"WITHMEMBERS".to_vec()),
            3..=5 => {
                args.push(b"ID".to_vec());
                args.push(format!("r{}", rng.random_range(0..6)).into_bytes());
            }
            _ => {}
        }
    }
    (command, args)
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// The five-field DETAIL array.
fn five(v: &Value) -> bool {
    matches!(v, Value::Array(items) if items.len() == 5
        && items.iter().all(|i| int(i).is_some())
        && matches!(items[0], Value::Int(0 | 1)))
}

/// The members array of WITHMEMBERS: tokens `<id>@<ms>`, one per unit added.
fn member_list(v: &Value) -> Option<Vec<Vec<u8>>> {
    let Value::Array(items) = v else { return None };
    items
        .iter()
        .map(|i| match i {
            // A token `<id>@<ms>`: both parts integers in decimal.
            Value::BulkString(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|t| t.split_once('@'))
                .filter(|(id, ms)| id.parse::<i64>().is_ok() && ms.parse::<i64>().is_ok())
                .map(|_| b.clone()),
            _ => None,
        })
        .collect()
}

/// What an accepted call asked for: where its options begin (after the
/// rules) and whether they include `DETAIL` and `WITHMEMBERS`. Only used for
/// calls the server accepted, so the rules parsed and every token after them
/// is an option (a `COST` count is an integer, never an option word).
fn asked(command: &str, args: &[Vec<u8>]) -> (bool, bool, usize) {
    let start = if command.eq_ignore_ascii_case("SLIDEWIN.MCHECK") {
        let n: usize = args
            .first()
            .and_then(|a| std::str::from_utf8(a).ok())
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        1 + 3 * n
    } else {
        3
    };
    let has = |word: &[u8]| {
        args.iter()
            .skip(start)
            .any(|a| a.eq_ignore_ascii_case(word))
    };
    let options = args.get(start..).unwrap_or_default();
    let cost = options
        .iter()
        .position(|a| a.eq_ignore_ascii_case(b"COST"))
        .and_then(|i| options.get(i + 1))
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    (has(b"DETAIL"), has(b"WITHMEMBERS"), cost)
}

/// Whether `v` is the reply `command` owes to the options in `args`; the
/// members it reports added. The shape follows the options exactly: a plain
/// CHECK or MCHECK is `1`/`0`; `DETAIL` is the five fields (MCHECK: allowed,
/// retry, then one five-field array per rule); `WITHMEMBERS` is that plus
/// the members, last; PEEK is always the five fields; UNDO a count.
fn valid_reply(command: &str, args: &[Vec<u8>], v: &Value) -> Option<Vec<Vec<u8>>> {
    let command = command.to_ascii_uppercase();
    let (detail, with_members, cost) = asked(&command, args);
    // An allowed call reports one member per unit, a denied one none.
    let members_fit = |allowed: &Value, members: &[Vec<u8>]| {
        members.len() == if *allowed == Value::Int(1) { cost } else { 0 }
    };
    match command.as_str() {
        "SLIDEWIN.UNDO" => matches!(v, Value::Int(n) if *n >= 0).then(Vec::new),
        // The units now charged, as asked, or -1: no such charge.
        "SLIDEWIN.SETTLE" => {
            let asked: Option<i64> = args
                .get(4)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|t| t.parse().ok());
            matches!(v, Value::Int(n) if *n == -1 || Some(*n) == asked).then(Vec::new)
        }
        "SLIDEWIN.PEEK" => five(v).then(Vec::new),
        "SLIDEWIN.CHECK" => match v {
            Value::Int(0 | 1) if !detail && !with_members => Some(Vec::new()),
            v if five(v) && detail && !with_members => Some(Vec::new()),
            Value::Array(items)
                if with_members && items.len() == 6 && five(&Value::Array(items[..5].to_vec())) =>
            {
                let members = member_list(&items[5])?;
                members_fit(&items[0], &members).then_some(members)
            }
            _ => None,
        },
        "SLIDEWIN.MCHECK" => {
            let n: usize = std::str::from_utf8(args.first()?).ok()?.parse().ok()?;
            match v {
                Value::Int(0 | 1) if !detail && !with_members => Some(Vec::new()),
                Value::Array(items) => {
                    // [allowed, retry, rule x n, members (WITHMEMBERS only)]
                    let want = 2 + n + usize::from(with_members);
                    if !(detail || with_members) || items.len() != want {
                        return None;
                    }
                    let allowed = matches!(items[0], Value::Int(0 | 1));
                    let retry = int(&items[1]).is_some();
                    let rules_ok = items[2..2 + n].iter().all(five);
                    let members = if with_members {
                        member_list(&items[2 + n])?
                    } else {
                        Vec::new()
                    };
                    let cost_ok = !with_members || members_fit(&items[0], &members);
                    (allowed && retry && rules_ok && cost_ok).then_some(members)
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The keys of an accepted CHECK or MCHECK.
fn call_keys<'a>(command: &str, args: &'a [Vec<u8>]) -> Vec<&'a Vec<u8>> {
    if command.eq_ignore_ascii_case("SLIDEWIN.MCHECK") {
        let n: usize = std::str::from_utf8(&args[0])
            .ok()
            .and_then(|t| t.parse().ok())
            .expect("an accepted numrules");
        args.iter().skip(1).step_by(3).take(n).collect()
    } else {
        vec![&args[0]]
    }
}

/// The request id of an accepted CHECK or MCHECK that was allowed.
fn allowed_id(command: &str, args: &[Vec<u8>], v: &Value) -> Option<Vec<u8>> {
    if !command.to_ascii_uppercase().ends_with("CHECK") {
        return None;
    }
    let allowed = match v {
        Value::Int(1) => true,
        Value::Array(items) => items.first() == Some(&Value::Int(1)),
        _ => false,
    };
    let at = args.iter().rposition(|a| a.eq_ignore_ascii_case(b"ID"))?;
    allowed.then(|| args.get(at + 1).cloned()).flatten()
}

/// An error reply that betrays a bug: a panic caught by the module.
fn is_internal_error(text: &str) -> bool {
    text.contains("internal error")
}

fn digest_value(c: &mut Connection, key: &str) -> Value {
    redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap()
}

fn fuzz(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = replica_without_module(&master, flavor);
    let mut c = master.conn();
    let _: () = redis::cmd("SET")
        .arg("fz:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("fz:list")
        .arg("a")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("fz:hash")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("keep:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("keep:zset")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("keep:list")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let kept: Vec<Value> = SENTINELS.iter().map(|k| digest_value(&mut c, k)).collect();
    let typed: Vec<Value> = ["fz:str", "fz:list", "fz:hash"]
        .iter()
        .map(|k| digest_value(&mut c, k))
        .collect();

    let mut rng = StdRng::seed_from_u64(0x5eed_f022);
    let (mut ok, mut errors) = (0, 0);
    let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut undone = 0;
    let mut settled = 0;
    let mut charged: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for i in 0..CALLS {
        let (command, args) = argv(&mut rng, &members, &charged);
        let mut cmd = redis::cmd(&command);
        for a in &args {
            cmd.arg(a.as_slice());
        }
        match cmd.query::<Value>(&mut c) {
            Ok(v) => {
                let added = valid_reply(&command, &args, &v)
                    .unwrap_or_else(|| panic!("call {i}: {command} {args:?} replied {v:?}"));
                *seen.entry(command.to_ascii_uppercase()).or_default() += 1;
                if command.eq_ignore_ascii_case("SLIDEWIN.UNDO") {
                    undone += int(&v).unwrap_or(0);
                } else if command.eq_ignore_ascii_case("SLIDEWIN.SETTLE") {
                    settled += i64::from(int(&v).is_some_and(|n| n >= 0));
                } else {
                    if let Some(id) = allowed_id(&command, &args, &v) {
                        for k in call_keys(&command, &args) {
                            charged.push((k.clone(), id.clone()));
                        }
                    }
                    // The keys of the call that got the members (a call
                    // with an ID too: its tokens are as good to UNDO).
                    for k in call_keys(&command, &args) {
                        for m in &added {
                            members.push((k.clone(), m.clone()));
                        }
                    }
                }
                ok += 1;
            }
            Err(e) if e.code().is_some() => {
                let text = error_text(&e);
                assert!(
                    (text.starts_with("ERR ") || text.starts_with("WRONGTYPE "))
                        && !is_internal_error(&text),
                    "call {i}: {command} {args:?}: unexpected error {text}"
                );
                errors += 1;
            }
            Err(e) => panic!("call {i}: {command} {args:?}: the connection failed: {e}"),
        }
    }
    for command in [
        "SLIDEWIN.CHECK",
        "SLIDEWIN.PEEK",
        "SLIDEWIN.MCHECK",
        "SLIDEWIN.UNDO",
        "SLIDEWIN.SETTLE",
    ] {
        assert!(
            seen.get(command).is_some_and(|&n| n > 30),
            "{command} answered: {seen:?}"
        );
    }
    // Enough real members for UNDO to be given some: 51 to 60 on the
    // four servers, 46 in a slow container (the same seed, but more calls
    // denied), so the bound leaves room for a slow machine and still
    // fails when WITHMEMBERS replies stop being read.
    assert!(
        members.len() > 25,
        "WITHMEMBERS returned {} members",
        members.len()
    );
    assert!(undone > 10, "UNDO removed {undone} entries");
    assert!(settled > 30, "SETTLE found {settled} charges");
    assert!(
        ok > 100 && errors > 100,
        "both replies and errors seen: {ok} / {errors}"
    );
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG", "the server is up");
    let log = master.log();
    assert!(
        !log.contains("slidewin: internal error"),
        "the server log records a panic of the module:\n{log}"
    );
    let kept_after: Vec<Value> = SENTINELS.iter().map(|k| digest_value(&mut c, k)).collect();
    assert_eq!(kept_after, kept, "keys outside the pool are untouched");
    let typed_after: Vec<Value> = ["fz:str", "fz:list", "fz:hash"]
        .iter()
        .map(|k| digest_value(&mut c, k))
        .collect();
    assert_eq!(typed_after, typed, "keys of other types are untouched");

    // Windows under a second expire quickly (the others outlive the test);
    // let them go (touching a key
    // deletes it if expired and propagates the deletion), then compare.
    std::thread::sleep(Duration::from_millis(1100));
    for k in POOL {
        let _: i64 = redis::cmd("EXISTS").arg(*k).query(&mut c).unwrap();
    }
    assert_replica_matches(&master, &replica);
    eprintln!(
        "fuzz ({flavor:?}): {CALLS} calls, {ok} replies, {errors} errors, {seen:?}, \
         {} members seen, {undone} undone",
        members.len()
    );
}
