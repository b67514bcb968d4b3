//! Server states and faults, on every server of the suite: out of memory,
//! paused writes, missing replicas, read-only scripts, crashes with an AOF,
//! RDB snapshots, and unloading the module.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use support::*;

on_every_server! {
    oom_refuses_check_and_creates_nothing_while_peek_answers => oom;
    client_pause_write_holds_check_not_peek => client_pause;
    min_replicas_unmet_gives_noreplicas => noreplicas;
    read_only_scripts_refuse_check => read_only_scripts;
    kill_9_with_appendfsync_always_loses_no_acknowledged_entry => kill9_aof;
    bgsave_then_crash_keeps_data_and_ttls => bgsave_restart;
    module_unload_is_safe => module_unload;
}

fn oom(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    assert_eq!(check(&mut c, "before", 5, 60_000), 1);
    config_set(&mut c, "maxmemory-policy", "noeviction");
    config_set(&mut c, "maxmemory", "1");
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["new", "5", "60000"]).expect_err("OOM");
    assert!(error_text(&err).starts_with("OOM"), "{}", error_text(&err));
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["before", "5", "60000"]).expect_err("OOM");
    assert!(error_text(&err).starts_with("OOM"));
    assert!(!exists(&mut c, "new"), "nothing created");
    let n: i64 = redis::cmd("ZCARD").arg("before").query(&mut c).unwrap();
    assert_eq!(n, 1, "nothing added");
    // PEEK is read-only: it still answers.
    assert_eq!(
        detail(&mut c, "SLIDEWIN.PEEK", &["new", "5", "60000"]),
        [1, 5, 5, 0, 0]
    );
    assert_eq!(
        detail(&mut c, "SLIDEWIN.PEEK", &["before", "5", "60000"])[..3],
        [1, 5, 4]
    );
    config_set(&mut c, "maxmemory", "0");
    assert_eq!(check(&mut c, "new", 5, 60_000), 1);
}

fn client_pause(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut c)
        .unwrap();
    // PEEK is not held (if it were, this would time out and fail).
    assert_eq!(
        detail(&mut c, "SLIDEWIN.PEEK", &["paused", "5", "60000"]),
        [1, 5, 5, 0, 0]
    );
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut w = server.conn();
        let done = done.clone();
        std::thread::spawn(move || {
            let r = check(&mut w, "paused", 5, 60_000);
            done.store(true, Ordering::SeqCst);
            r
        })
    };
    // The CHECK reached the server and is held there (CLIENT LIST shows it
    // blocked on slidewin.check) for as long as the pause lasts.
    let held = wait_until(Duration::from_secs(10), || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        list.lines().any(|l| {
            l.contains(" cmd=slidewin.check ")
                && l.split(' ')
                    .find_map(|f| f.strip_prefix("flags="))
                    .is_some_and(|f| f.contains('b'))
        })
    });
    assert!(held, "the CHECK never reached the server, or was not held");
    assert!(
        !done.load(Ordering::SeqCst),
        "CHECK ran during CLIENT PAUSE WRITE"
    );
    assert!(!exists(&mut c, "paused"));
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut c).unwrap();
    assert_eq!(writer.join().expect("writer"), 1, "released after UNPAUSE");
    assert!(exists(&mut c, "paused"));
}

fn noreplicas(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    config_set(&mut c, "min-replicas-to-write", "1");
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["k", "5", "60000"]).expect_err("NOREPLICAS");
    assert!(
        error_text(&err).starts_with("NOREPLICAS"),
        "{}",
        error_text(&err)
    );
    assert!(!exists(&mut c, "k"));
    assert_eq!(detail(&mut c, "SLIDEWIN.PEEK", &["k", "5", "60000"])[0], 1);
    config_set(&mut c, "min-replicas-to-write", "0");
    assert_eq!(check(&mut c, "k", 5, 60_000), 1);
}

/// Runs a read-only script (`EVAL_RO`) or function (`FCALL_RO`) on key "ro":
/// its CHECK must be refused as a write, its PEEK must answer.
fn assert_read_only(c: &mut Connection, command: &str, check: &str, peek: &str) {
    let err = redis::cmd(command)
        .arg(check)
        .arg(1)
        .arg("ro")
        .query::<Value>(c)
        .expect_err(command);
    assert!(
        error_text(&err).contains("Write commands are not allowed from read-only scripts"),
        "{command}: {}",
        error_text(&err)
    );
    let reply: Vec<i64> = redis::cmd(command)
        .arg(peek)
        .arg(1)
        .arg("ro")
        .query(c)
        .unwrap();
    assert_eq!(reply, [1, 5, 5, 0, 0], "{command}");
}

fn read_only_scripts(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    assert_read_only(
        &mut c,
        "EVAL_RO",
        "return redis.call('SLIDEWIN.CHECK', KEYS[1], 5, 60000)",
        "return redis.call('SLIDEWIN.PEEK', KEYS[1], 5, 60000)",
    );
    let library = "#!lua name=slidewin_ro_test\n\
        redis.register_function{function_name='ro_check', flags={'no-writes'}, \
          callback=function(keys) return redis.call('SLIDEWIN.CHECK', keys[1], 5, 60000) end}\n\
        redis.register_function{function_name='ro_peek', flags={'no-writes'}, \
          callback=function(keys) return redis.call('SLIDEWIN.PEEK', keys[1], 5, 60000) end}";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut c)
        .unwrap();
    assert_read_only(&mut c, "FCALL_RO", "ro_check", "ro_peek");
    assert!(!exists(&mut c, "ro"));
}

/// Calls run from one client while the server is SIGKILLed: after a restart
/// every acknowledged entry is there, plus at most the one call in flight.
fn kill9_aof(flavor: Flavor) {
    let mut server = Options::new(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let keys: Vec<String> = (0..10).map(|i| format!("crash:{i}")).collect();
    let load = {
        let mut c = server.conn();
        let keys = keys.clone();
        std::thread::spawn(move || {
            let mut acked: HashMap<String, i64> = HashMap::new();
            for i in 0..1_000_000usize {
                let key = &keys[i % keys.len()];
                match redis::cmd("SLIDEWIN.CHECK")
                    .arg(key)
                    .arg(100_000)
                    .arg(600_000)
                    .query::<i64>(&mut c)
                {
                    Ok(r) => *acked.entry(key.clone()).or_default() += r,
                    Err(_) => break,
                }
            }
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    let tmp = server.keep_dir();
    server.crash();
    let acked = load.join().expect("load");
    let total: i64 = acked.values().sum();
    assert!(total > 0);
    let restarted = Options::new(flavor)
        .arg("appendonly", "yes")
        .in_dir(&server.dir)
        .start();
    let mut c = restarted.conn();
    let mut extra = 0;
    for key in &keys {
        let present: i64 = redis::cmd("ZCARD").arg(key).query(&mut c).unwrap();
        let ack = acked.get(key).copied().unwrap_or(0);
        assert!(
            present >= ack,
            "{key}: {ack} acknowledged, {present} after the crash"
        );
        extra += present - ack;
    }
    assert!(
        extra <= 1,
        "only the call in flight may be there unacknowledged"
    );
    drop(tmp);
}

fn bgsave_restart(flavor: Flavor) {
    let mut server = Options::new(flavor).start();
    let mut c = server.conn();
    for i in 0..200 {
        check(&mut c, &format!("snap:{}", i % 40), 3, 600_000 + i);
    }
    let before = digest(&mut c);
    let keys: Vec<String> = redis::cmd("KEYS").arg("snap:*").query(&mut c).unwrap();
    let ttls: Vec<i64> = keys
        .iter()
        .map(|k| redis::cmd("PEXPIRETIME").arg(k).query(&mut c).unwrap())
        .collect();
    // rdb_saves counts completed saves (LASTSAVE has one-second steps, so a
    // save in the server's first second would not move it).
    let saves = |c: &mut Connection| -> u64 {
        info_field(c, "persistence", "rdb_saves")
            .and_then(|v| v.parse().ok())
            .expect("rdb_saves")
    };
    let saves_before = saves(&mut c);
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert!(wait_until(Duration::from_secs(30), || {
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("0")
            && info_field(&mut c, "persistence", "rdb_last_bgsave_status").as_deref() == Some("ok")
            && saves(&mut c) > saves_before
            && server.dir.join("dump.rdb").exists()
    }));
    drop(c);
    let tmp = server.keep_dir();
    server.crash();
    let restarted = Options::new(flavor).in_dir(&server.dir).start();
    let mut r = restarted.conn();
    assert_eq!(digest(&mut r), before);
    for (k, ttl) in keys.iter().zip(ttls) {
        let got: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut r).unwrap();
        assert_eq!(got, ttl, "{k}");
    }
    drop(restarted);
    drop(tmp);
}

fn module_unload(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    for _ in 0..3 {
        check(&mut c, "kept", 5, 600_000);
    }
    let before = digest(&mut c);
    let _: () = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("slidewin")
        .query(&mut c)
        .expect("MODULE UNLOAD");
    let err = slidewin(&mut c, "SLIDEWIN.CHECK", &["kept", "5", "600000"]).expect_err("gone");
    assert!(
        error_text(&err).contains("unknown command"),
        "{}",
        error_text(&err)
    );
    assert_eq!(
        digest(&mut c),
        before,
        "the data stays, as plain sorted sets"
    );
    let n: i64 = redis::cmd("ZCARD").arg("kept").query(&mut c).unwrap();
    assert_eq!(n, 3);
    // Loading it again continues the same keys.
    let _: () = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module_path().to_string_lossy().as_ref())
        .query(&mut c)
        .expect("MODULE LOAD");
    assert_eq!(check(&mut c, "kept", 5, 600_000), 1);
    assert_eq!(check(&mut c, "kept", 5, 600_000), 1);
    assert_eq!(check(&mut c, "kept", 5, 600_000), 0);
}
