//! Comparing the two sides: replies (waits within the slack, member ids of
//! the same kind), the entries of keys, one request sent to both, and the
//! 200 ms slots the calls are made in.

use std::time::Duration;

use redis::Value;

use crate::support::*;
use crate::{Pair, ID_KINDS, SLACK_MS, WIDE_FROM};

/// Compares two replies: integers equal, except the waits (`timing`
/// positions), which may differ by the slack but never in sign or -1.
pub(crate) fn same(m: &Value, f: &Value, path: &str) {
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
pub(crate) fn token(s: &str) -> Option<(i64, i64)> {
    let (id, ms) = s.split_once('@')?;
    let canonical =
        |t: &str| t == "0" || (!t.starts_with('0') && t.bytes().all(|b| b.is_ascii_digit()));
    if !canonical(id) || !canonical(ms) {
        return None;
    }
    Some((id.parse().ok()?, ms.parse().ok()?))
}

/// Waits until the server clock is 20-60 ms into a 200 ms slot.
pub(crate) fn wait_for_slot(c: &mut Connection) {
    assert!(wait_until(Duration::from_secs(5), || {
        let off = server_ms(c) % 200;
        (20..=60).contains(&off)
    }));
}

/// The module's and the library's copies of `keys` hold the same entries:
/// integer members the same short id (or both wide), a charge's members
/// `#<i>:<r>` the same; scores and expiries within the slack.
pub(crate) fn same_keys(pair: &mut Pair, keys: &[&str]) {
    same_keys_within(pair, keys, SLACK_MS)
}

/// [`same_keys`], scores and expiries within `slack_ms`.
pub(crate) fn same_keys_within(pair: &mut Pair, keys: &[&str], slack_ms: i64) {
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

/// One request sent to both sides; the replies must match. The module's.
pub(crate) fn step(pair: &mut Pair, kind: &str, keys: &[&str], args: &[&str]) -> Value {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (m, f) = pair.query(kind, &keys, &args);
    same(&m, &f, &format!("{kind} {keys:?} {args:?}"));
    m
}

/// The integers of a reply (a five-field detail, or 1/0 as one).
pub(crate) fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Int(i) => vec![*i],
        other => redis::from_redis_value_ref(other).unwrap_or_else(|e| panic!("{other:?}: {e}")),
    }
}

/// The members of a key on one side, in order.
pub(crate) fn members(c: &mut Connection, key: &str) -> Vec<String> {
    entries(c, key.as_bytes())
        .into_iter()
        .map(|(m, _)| String::from_utf8_lossy(&m).into_owned())
        .collect()
}

/// The tokens of a WITHMEMBERS reply (its last field).
pub(crate) fn tokens_of(v: &Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not a detail reply: {v:?}")
    };
    redis::from_redis_value_ref(items.last().expect("fields")).expect("tokens")
}
