//! Command metadata (COMMAND INFO, COMMAND DOCS), ACL categories and
//! `ACL DRYRUN`.

use std::collections::HashMap;

use redis::Value;

use crate::support::*;

/// A flat RESP2 map (`[k1, v1, k2, v2, ...]`) or a RESP3 map as pairs.
fn as_map(v: &Value) -> HashMap<String, Value> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| match kv {
                [k, v] => Some((redis::from_redis_value_ref::<String>(k).ok()?, v.clone())),
                _ => None,
            })
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((redis::from_redis_value_ref::<String>(k).ok()?, v.clone())))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    redis::from_redis_value_ref(v).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

pub(crate) fn command_info_docs(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .query(&mut c)
        .unwrap();
    let expect = [
        (
            "slidewin.check",
            &["write", "denyoom"][..],
            &["readonly", "fast"][..],
            &["RW", "access", "update"][..],
        ),
        (
            // Not fast: it steps over expired entries (O(M) in them).
            "slidewin.peek",
            &["readonly"][..],
            &["write", "denyoom", "fast"][..],
            &["RO", "access"][..],
        ),
    ];
    for (entry, (name, has, lacks, key_flags)) in info.iter().zip(expect) {
        let Value::Array(e) = entry else {
            panic!("{entry:?}")
        };
        assert_eq!(redis::from_redis_value_ref::<String>(&e[0]).unwrap(), name);
        assert_eq!(redis::from_redis_value_ref::<i64>(&e[1]).unwrap(), -4);
        let flags = strings(&e[2]);
        for f in has {
            assert!(flags.contains(&f.to_string()), "{name}: {flags:?}");
        }
        for f in lacks {
            assert!(!flags.contains(&f.to_string()), "{name}: {flags:?}");
        }
        let Value::Array(specs) = &e[8] else {
            panic!("key specs {:?}", e[8])
        };
        assert_eq!(specs.len(), 1);
        let spec = as_map(&specs[0]);
        assert_eq!(
            strings(&spec["flags"]),
            key_flags.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        );
    }
}

pub(crate) fn command_docs(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .arg("slidewin.top")
        .query(&mut c)
        .unwrap();
    let docs = as_map(&docs);
    for (name, args) in [
        (
            "slidewin.check",
            &[
                ("key", "key", None),
                ("limit", "integer", None),
                ("window_ms", "integer", None),
                ("count", "integer", Some("COST")),
                ("request-id", "string", Some("ID")),
                ("detail", "pure-token", Some("DETAIL")),
                ("withmembers", "pure-token", Some("WITHMEMBERS")),
                ("witholdest", "pure-token", Some("WITHOLDEST")),
                ("shadow", "pure-token", Some("SHADOW")),
            ][..],
        ),
        (
            "slidewin.peek",
            &[
                ("key", "key", None),
                ("limit", "integer", None),
                ("window_ms", "integer", None),
                ("count", "integer", Some("COST")),
                ("detail", "pure-token", Some("DETAIL")),
                ("witholdest", "pure-token", Some("WITHOLDEST")),
            ][..],
        ),
        (
            "slidewin.top",
            &[
                ("count", "integer", None),
                ("outcome", "oneof", None),
                ("reset", "pure-token", Some("RESET")),
            ][..],
        ),
    ] {
        let doc = as_map(&docs[name]);
        assert!(
            redis::from_redis_value_ref::<String>(&doc["summary"])
                .unwrap()
                .len()
                > 20
        );
        assert_eq!(
            redis::from_redis_value_ref::<String>(&doc["since"]).unwrap(),
            "0.1.0"
        );
        assert!(redis::from_redis_value_ref::<String>(&doc["complexity"])
            .unwrap()
            .starts_with("O("));
        assert_eq!(
            redis::from_redis_value_ref::<String>(&doc["module"]).unwrap(),
            "slidewin"
        );
        let Value::Array(got) = &doc["arguments"] else {
            panic!("arguments")
        };
        assert_eq!(got.len(), args.len(), "{name}");
        for (arg, (arg_name, arg_type, token)) in got.iter().zip(args) {
            let a = as_map(arg);
            assert_eq!(
                redis::from_redis_value_ref::<String>(&a["name"]).unwrap(),
                *arg_name
            );
            assert_eq!(
                redis::from_redis_value_ref::<String>(&a["type"]).unwrap(),
                *arg_type
            );
            match token {
                Some(t) => {
                    assert_eq!(
                        redis::from_redis_value_ref::<String>(&a["token"]).unwrap(),
                        *t
                    );
                    assert_eq!(strings(&a["flags"]), vec!["optional".to_string()]);
                }
                None => assert!(!a.contains_key("token")),
            }
        }
    }
}

pub(crate) fn acl_categories(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("slidewin.check")
        .arg("slidewin.peek")
        .query(&mut c)
        .unwrap();
    let cats: Vec<Vec<String>> = info
        .iter()
        .map(|e| match e {
            Value::Array(e) => strings(&e[6]),
            other => panic!("{other:?}"),
        })
        .collect();
    // The expectation follows the server binary (does it export the API?),
    // not the module's own report of what it detected.
    let categories = server.exports_api("SetCommandACLCategories");
    assert_eq!(
        server.acl_categories(),
        categories,
        "the module's detection of RedisModule_SetCommandACLCategories"
    );
    let in_write: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .arg("write")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        in_write.contains(&"slidewin.check".to_string()),
        categories,
        "ACL CAT write lists slidewin.check exactly where categories exist"
    );
    if categories {
        assert_eq!(cats[0], ["@write", "@sortedset", "@slow"]);
        assert_eq!(cats[1], ["@read", "@sortedset", "@slow"]);
        let in_cat = |c: &mut Connection, cat: &str| -> Vec<String> {
            redis::cmd("ACL").arg("CAT").arg(cat).query(c).unwrap()
        };
        assert!(in_cat(&mut c, "write").contains(&"slidewin.check".to_string()));
        assert!(!in_cat(&mut c, "write").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "read").contains(&"slidewin.peek".to_string()));
        // PEEK is not O(1): it steps over expired entries.
        assert!(!in_cat(&mut c, "fast").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "slow").contains(&"slidewin.peek".to_string()));
        assert!(in_cat(&mut c, "slow").contains(&"slidewin.check".to_string()));
        assert!(in_cat(&mut c, "sortedset").contains(&"slidewin.check".to_string()));
        // A user granted @read only may peek but not check.
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "reader", "on", "nopass", "~*", "+@read"])
            .query(&mut c)
            .unwrap();
        let dry = |c: &mut Connection, cmd: &str| -> String {
            redis::cmd("ACL")
                .arg(&["DRYRUN", "reader", cmd, "k", "1", "1000"])
                .query(c)
                .unwrap()
        };
        assert_eq!(dry(&mut c, "slidewin.peek"), "OK");
        assert!(dry(&mut c, "slidewin.check").contains("no permissions to run"));
    } else {
        // A server without RedisModule_SetCommandACLCategories (Redis 7.0)
        // has no per-command categories for modules: none are shown, and the
        // module still loads and works.
        assert!(cats.iter().all(|c| c.is_empty()), "{cats:?}");
        assert_eq!(check(&mut c, "k", 1, 1000), 1);
    }
}

pub(crate) fn acl_dryrun(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    for rule in [
        &["SETUSER", "rw", "on", ">pw", "~rl:*", "+@all"][..],
        &["SETUSER", "ro", "on", ">pw", "%R~rl:*", "+@all"][..],
        &["SETUSER", "other", "on", ">pw", "~other:*", "+@all"][..],
    ] {
        let _: () = redis::cmd("ACL").arg(rule).query(&mut c).unwrap();
    }
    let dry = |c: &mut Connection, user: &str, cmd: &str, key: &str| -> String {
        redis::cmd("ACL")
            .arg(&["DRYRUN", user, cmd, key, "5", "1000"])
            .query(c)
            .unwrap()
    };
    let cases = [
        ("rw", "slidewin.check", "rl:1", None),
        ("rw", "slidewin.peek", "rl:1", None),
        ("rw", "slidewin.check", "other:1", Some("other:1")),
        ("ro", "slidewin.peek", "rl:1", None),
        ("ro", "slidewin.check", "rl:1", Some("rl:1")),
        ("other", "slidewin.check", "rl:1", Some("rl:1")),
        ("other", "slidewin.peek", "rl:1", Some("rl:1")),
        ("other", "slidewin.check", "other:1", None),
    ];
    for (user, cmd, key, denied_key) in cases {
        let got = dry(&mut c, user, cmd, key);
        match denied_key {
            None => assert_eq!(got, "OK", "{user} {cmd} {key}"),
            Some(k) => assert!(
                got.contains(&format!("no permissions to access the '{k}' key")),
                "{user} {cmd} {key}: {got}"
            ),
        }
    }
    // And for real: the read-only user peeks, and is refused a check.
    let mut ro = server.conn();
    let _: () = redis::cmd("AUTH")
        .arg("ro")
        .arg("pw")
        .query(&mut ro)
        .unwrap();
    assert_eq!(
        detail(&mut ro, "SLIDEWIN.PEEK", &["rl:1", "5", "1000"])[0],
        1
    );
    let err = slidewin(&mut ro, "SLIDEWIN.CHECK", &["rl:1", "5", "1000"]).expect_err("noperm");
    assert!(
        error_text(&err).starts_with("NOPERM"),
        "{}",
        error_text(&err)
    );
}
