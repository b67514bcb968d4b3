//! A repeated id is charged once (CHECK, and MCHECK even when one key
//! already forgot it), UNDO by id is exact and idempotent, and a stale token
//! never removes a later call's entry.

use redis::Value;

use crate::support::*;
use crate::{call, int, offset};

pub(crate) fn repeated_check(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let k = "llm:key:1";
    // Reserve 3 of 5 under an id; the reply is lost, the client retries.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "3", "ID", "req-1"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 3);
    let offset_before = offset(&mut c);
    for _ in 0..3 {
        assert_eq!(
            call(
                &mut c,
                "SLIDEWIN.CHECK",
                &[k, "5", "60000", "COST", "3", "ID", "req-1"]
            ),
            Value::Int(1)
        );
    }
    assert_eq!(zcard(&mut c, k), 3, "a repeat charges nothing");
    assert_eq!(offset(&mut c), offset_before, "a repeat replicates nothing");
    // A repeat with DETAIL: allowed, the state as it is now.
    let d = detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &[k, "5", "60000", "COST", "3", "ID", "req-1", "DETAIL"],
    );
    assert_eq!(d[..4], [1, 5, 2, 0]);
    assert!((59_000..=60_000).contains(&d[4]), "{d:?}");
    // A repeat with another COST is still the first charge.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "5", "ID", "req-1"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 3);
    // Another id is a new call: 3 more do not fit; denied, so not remembered.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "3", "ID", "req-2"]
        ),
        Value::Int(0)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "5", "60000", "COST", "2", "ID", "req-2"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 5);
    // A binary id, 128 bytes: its own charge.
    let long = vec![0xffu8; 128];
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(k)
        .arg("10")
        .arg("60000")
        .arg("ID")
        .arg(&long)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, Value::Int(1));
    let v: Value = redis::cmd("SLIDEWIN.CHECK")
        .arg(k)
        .arg("10")
        .arg("60000")
        .arg("ID")
        .arg(&long)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, Value::Int(1));
    assert_eq!(zcard(&mut c, k), 6);
    let repeated: i64 = info_field(&mut c, "slidewin", "slidewin_repeated")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(repeated, 6, "INFO counts the repeats");
    // Once the charge has left the window the id is forgotten: charged anew.
    let short = "llm:key:short";
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100", "ID", "r"]),
        Value::Int(1)
    );
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100", "ID", "r"]),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, short), 1);
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[short, "1", "100"]),
        Value::Int(0),
        "and it counts"
    );
}

pub(crate) fn repeated_mcheck(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    // Requests per second and tokens per minute.
    let rules = ["2", "{k}:rps", "200", "200", "{k}:tpm", "1000", "60000"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v: Vec<&'static str> = rules.to_vec();
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.MCHECK",
            &with(&["COST", "100", "ID", "q1"])
        ),
        Value::Int(1)
    );
    assert_eq!(
        (zcard(&mut c, "{k}:rps"), zcard(&mut c, "{k}:tpm")),
        (100, 100)
    );
    let d: Vec<Value> = redis::from_redis_value_ref(&call(
        &mut c,
        "SLIDEWIN.MCHECK",
        &with(&["COST", "100", "ID", "q1", "DETAIL"]),
    ))
    .unwrap();
    assert_eq!(d[0], Value::Int(1), "a repeat is allowed: {d:?}");
    assert_eq!(d[1], Value::Int(0));
    let tpm: Vec<i64> = redis::from_redis_value_ref(&d[3]).unwrap();
    assert_eq!(tpm[..4], [1, 1000, 900, 0], "as the key is now");
    assert_eq!(
        (zcard(&mut c, "{k}:rps"), zcard(&mut c, "{k}:tpm")),
        (100, 100)
    );
    // The per-second key forgets the charge; the minute key still holds it:
    // a retry is still a repeat, charged nowhere.
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.MCHECK",
            &with(&["COST", "100", "ID", "q1"])
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, "{k}:tpm"), 100);
    assert_eq!(zcard(&mut c, "{k}:rps"), 0, "trimmed, not charged again");
    // UNDO by id on each key gives it back everywhere.
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["{k}:tpm", "ID", "q1"])),
        100
    );
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &["{k}:rps", "ID", "q1"])),
        0
    );
    assert!(!exists(&mut c, "{k}:tpm"));
}

pub(crate) fn undo_by_id(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let k = "sms:phone:1";
    assert_eq!(
        call(&mut c, "SLIDEWIN.CHECK", &[k, "10", "60000", "COST", "2"]),
        Value::Int(1)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "3", "ID", "a"]
        ),
        Value::Int(1)
    );
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "4", "ID", "b"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 9);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])), 3);
    assert_eq!(zcard(&mut c, k), 6, "exactly a's entries");
    assert_eq!(
        int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])),
        0,
        "a second UNDO removes nothing"
    );
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "id", "never"])), 0);
    assert_eq!(zcard(&mut c, k), 6);
    // b is untouched, and still a repeat.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "4", "ID", "b"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 6);
    // After UNDO the id is forgotten: the same id is a new charge.
    assert_eq!(
        call(
            &mut c,
            "SLIDEWIN.CHECK",
            &[k, "10", "60000", "COST", "3", "ID", "a"]
        ),
        Value::Int(1)
    );
    assert_eq!(zcard(&mut c, k), 9);
    // UNDO by member never removes an entry of a charge made with an id,
    // whatever name it is given.
    // (A compact log names a charge's units by member ids, like any
    // entry's: every id but the call's without an id, plain and as a token.)
    let members: Vec<Vec<u8>> = match log {
        LogType::Zset => redis::cmd("ZRANGE")
            .arg(k)
            .arg(0)
            .arg(-1)
            .query(&mut c)
            .unwrap(),
        LogType::Compact => entries(&mut c, k.as_bytes())
            .into_iter()
            // The first call's members, 1 and 2, are the call's without an id.
            .filter(|(m, _)| m.as_slice() != b"1" && m.as_slice() != b"2")
            .flat_map(|(m, s)| {
                let token = [m.clone(), format!("@{s}").into_bytes()].concat();
                [[b"#".to_vec(), m].concat(), token]
            })
            .collect(),
    };
    let mut undo = redis::cmd("SLIDEWIN.UNDO");
    undo.arg(k);
    for m in members.iter().filter(|m| m.first() == Some(&b'#')) {
        undo.arg(m);
    }
    if log == LogType::Compact {
        for m in members.iter().filter(|m| m.first() != Some(&b'#')) {
            undo.arg(m);
            undo.arg(m.split(|&b| b == b'@').next().unwrap_or(&[]));
        }
    }
    assert_eq!(undo.query::<i64>(&mut c).unwrap(), 0);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "b"])), 4);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &[k, "ID", "a"])), 3);
    assert_eq!(zcard(&mut c, k), 2, "the call without an id is left");
    let undone: i64 = info_field(&mut c, "slidewin", "slidewin_undone")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(undone, 10);
}

pub(crate) fn stale_tokens(flavor: Flavor, log: LogType) {
    let server = Options::new(flavor).log_type(log).start();
    let mut c = server.conn();
    let token = |v: &Value| -> String {
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        let members: Vec<String> = redis::from_redis_value_ref(items.last().unwrap()).unwrap();
        assert_eq!(members.len(), 1, "{v:?}");
        members[0].clone()
    };
    // A caller got member 1; the window passes and the key empties.
    let first = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:a", "1", "150", "WITHMEMBERS"],
    ));
    assert!(first.starts_with("1@"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let second = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:a", "1", "150", "WITHMEMBERS"],
    ));
    assert!(second.starts_with("1@"), "the key started over: {second}");
    assert_ne!(first, second);
    // The first caller's late UNDO never takes the second caller's entry.
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:a", &first])), 0);
    assert_eq!(zcard(&mut c, "h:a"), 1);
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:a", &second])), 1);
    assert!(!exists(&mut c, "h:a"));
    // Within one millisecond (MULTI keeps the clock where the server
    // caches it): UNDO, then a new call, then the first UNDO again.
    for _ in 0..20 {
        let replies: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .query(&mut c)
            .unwrap();
        let (t1, t2) = (token(&replies[0]), token(&replies[1]));
        let replies: Vec<Value> = redis::pipe()
            .atomic()
            .cmd("SLIDEWIN.UNDO")
            .arg("h:b")
            .arg(&t2)
            .cmd("SLIDEWIN.CHECK")
            .arg(&["h:b", "5", "60000", "WITHMEMBERS"])
            .cmd("SLIDEWIN.UNDO")
            .arg("h:b")
            .arg(&t2)
            .query(&mut c)
            .unwrap();
        assert_eq!(int(&replies[0]), 1);
        let t3 = token(&replies[1]);
        assert_ne!(
            t3, t2,
            "a freed id is not handed out again in its millisecond"
        );
        assert_eq!(int(&replies[2]), 0, "the stale token removes nothing");
        assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:b", &t1, &t3])), 2);
        assert!(!exists(&mut c, "h:b"));
    }
    // Bare members (0.1.0's replies, other writers' members) still work.
    let t = token(&call(
        &mut c,
        "SLIDEWIN.CHECK",
        &["h:c", "5", "60000", "WITHMEMBERS"],
    ));
    let bare = String::from_utf8(token_member(t.as_bytes())).unwrap();
    assert_eq!(int(&call(&mut c, "SLIDEWIN.UNDO", &["h:c", &bare])), 1);
}
