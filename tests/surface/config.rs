//! INFO counters and configuration: from load arguments and at runtime, and
//! bad load arguments refusing the module.

use std::collections::HashMap;

use crate::support::*;

fn stats(c: &mut Connection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("slidewin").query(c).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

pub(crate) fn info_counters(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let info: String = redis::cmd("INFO").arg("slidewin").query(&mut c).unwrap();
    assert!(info.contains("# slidewin_stats"), "{info}");
    check(&mut c, "i", 4, 60000);
    detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["i", "4", "60000", "COST", "2", "DETAIL"],
    );
    check(&mut c, "j", 4, 60000);
    detail(
        &mut c,
        "SLIDEWIN.CHECK",
        &["i", "4", "60000", "COST", "2", "DETAIL"],
    );
    check(&mut c, "i", 1, 60000);
    for _ in 0..4 {
        detail(&mut c, "SLIDEWIN.PEEK", &["i", "4", "60000"]);
    }
    for bad in [&["i", "0", "1"][..], &["i", "1", "1", "X"][..], &["i"][..]] {
        slidewin(&mut c, "SLIDEWIN.CHECK", bad).expect_err("bad");
    }
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    slidewin(&mut c, "SLIDEWIN.PEEK", &["str", "1", "1"]).expect_err("wrongtype");
    let s = stats(&mut c);
    let get = |f: &str| {
        s.get(f)
            .copied()
            .unwrap_or_else(|| panic!("no {f} in {s:?}"))
    };
    assert_eq!(get("slidewin_checks_allowed"), 3);
    assert_eq!(get("slidewin_checks_denied"), 2);
    assert_eq!(get("slidewin_peeks"), 4);
    assert_eq!(get("slidewin_cost_granted"), 4);
    // The arity error is the server's own reply (the module declares its
    // arity), so it is counted in INFO errorstats, not here.
    assert_eq!(get("slidewin_errors"), 3);
}

fn config_get(c: &mut Connection, name: &str) -> String {
    let v: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    v.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {v:?}"))
}

pub(crate) fn config_load_and_runtime(flavor: Flavor) {
    let server = Options::new(flavor)
        .module_args(&["max-limit", "10", "max-window-ms", "5000"])
        .start();
    let mut c = server.conn();
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "10");
    assert_eq!(config_get(&mut c, "slidewin.max-window-ms"), "5000");
    let all: HashMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slidewin.*")
        .query(&mut c)
        .unwrap();
    assert_eq!(all.len(), 7, "{all:?}");
    assert_eq!(all["slidewin.max-entries-per-call"], "0");
    assert_eq!(all["slidewin.max-charges-per-key"], "5000");
    assert_eq!(all["slidewin.top-capacity"], "128");
    assert_eq!(all["slidewin.log-type"], "zset");
    assert_eq!(all["slidewin.top-period-ms"], "300000");
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "11", "1000"]).expect_err("limit");
    assert_eq!(
        error_text(&err),
        "ERR limit must be an integer between 1 and 10 (slidewin.max-limit)"
    );
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "5", "5001"]).expect_err("window");
    assert_eq!(
        error_text(&err),
        "ERR window_ms must be an integer between 1 and 5000 (slidewin.max-window-ms)"
    );
    let err =
        slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "5", "1000", "COST", "11"]).expect_err("cost");
    assert_eq!(
        error_text(&err),
        "ERR COST count must be an integer between 1 and 10 (slidewin.max-limit)"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slidewin.max-limit")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "1000");
    assert_eq!(check(&mut c, "k", 11, 1000), 1);
    for (name, bad) in [
        ("slidewin.max-limit", "0"),
        ("slidewin.max-limit", "10000001"),
        ("slidewin.max-limit", "abc"),
        ("slidewin.max-window-ms", "-1"),
        ("slidewin.max-window-ms", "3155760000001"),
        ("slidewin.max-entries-per-call", "-1"),
        ("slidewin.max-entries-per-call", "640000001"),
        ("slidewin.max-charges-per-key", "0"),
        ("slidewin.max-charges-per-key", "16777217"),
    ] {
        let was = config_get(&mut c, name);
        let err = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(bad)
            .query::<()>(&mut c)
            .expect_err("refused");
        assert!(
            error_text(&err).starts_with("ERR"),
            "{name} {bad}: {}",
            error_text(&err)
        );
        assert_eq!(config_get(&mut c, name), was, "{name} {bad}: unchanged");
    }
    assert_eq!(config_get(&mut c, "slidewin.max-limit"), "1000");
    // And the limits in force are the ones read back.
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "1001", "1000"]).expect_err("limit");
    assert_eq!(
        error_text(&err),
        "ERR limit must be an integer between 1 and 1000 (slidewin.max-limit)"
    );
}

pub(crate) fn bad_load_arguments(flavor: Flavor) {
    for (args, expected) in [
        (&["max-limt", "5"][..], "unknown module argument 'max-limt'"),
        (
            &["max-limit", "0"][..],
            "max-limit must be an integer between 1 and 10000000",
        ),
        (
            &["max-window-ms"][..],
            "module argument max-window-ms needs a value",
        ),
        // Logged as text: with the message as the log's format string, the
        // conversions read arguments that are not there and crash the server.
        (
            &["max-limit", "%s%s%s%s%s%s%s%s%n"][..],
            "got '%s%s%s%s%s%s%s%s%n'",
        ),
    ] {
        let log = Options::new(flavor)
            .module_args(args)
            .start_expecting_failure();
        assert!(log.contains(expected), "{args:?}: log was\n{log}");
    }
}
