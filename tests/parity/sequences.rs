//! Random command sequences through both sides, and live keys the library
//! and the module share.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;

use crate::compare::{same, same_keys, wait_for_slot};
use crate::support::*;
use crate::{both, Pair, ID_KINDS};

pub(crate) fn sequences(flavor: Flavor) {
    let server = Options::new(flavor).start();
    sequences_on(&mut Pair::one(server.conn(), false));
}

pub(crate) fn eval_sequences(flavor: Flavor) {
    let server = Options::new(flavor).start();
    sequences_on(&mut Pair::one(server.conn(), true));
}

/// Request ids the random sequences use: few, so calls repeat them.
const POOL: [&str; 3] = ["r0", "r1", "r2"];

pub(crate) fn sequences_on(pair: &mut Pair) {
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

/// A deployment moving between the function and the module: each continues
/// the other's keys, entries counted alike, members never colliding.
pub(crate) fn shared_keys(flavor: Flavor) {
    let server = Options::new(flavor).start();
    shared_keys_on(&mut Pair::one(server.conn(), false));
}

/// The same with the EVAL form.
pub(crate) fn eval_shared_keys(flavor: Flavor) {
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
