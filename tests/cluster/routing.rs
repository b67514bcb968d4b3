//! Keys on their slot's owner: routing, MOVED, ASK during a slot's
//! migration, CROSSSLOT refusals, hash tags.

use std::collections::HashMap;
use std::process::Command;

use redis::Value;

use crate::check_on;
use crate::support::*;

pub(crate) fn routing(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut cc = cluster.cluster_conn();
    // 2000 keys, each called 1 to 4 times under a limit of 3.
    const KEYS: usize = 2000;
    let key = |i: usize| format!("sms:limit:10.{}.{}", i / 250, i % 250);
    let calls = |i: usize| 1 + (i % 4) as i64;
    let mut allowed: HashMap<String, i64> = HashMap::new();
    for i in 0..KEYS {
        for _ in 0..calls(i) {
            let r: i64 = redis::cmd("SLIDEWIN.CHECK")
                .arg(key(i))
                .arg(3)
                .arg(600_000)
                .query(&mut cc)
                .expect("cluster CHECK");
            *allowed.entry(key(i)).or_default() += r;
        }
    }
    assert_eq!(allowed.len(), KEYS);
    for i in 0..KEYS {
        assert_eq!(allowed[&key(i)], calls(i).min(3), "{}", key(i));
    }
    let masters = cluster.masters(cluster.base);
    assert_eq!(masters.len(), 3);
    let mut conns: HashMap<u16, Connection> = masters
        .iter()
        .map(|(p, _, _)| (*p, cluster.conn(*p)))
        .collect();
    let mut any = cluster.conn(cluster.base);
    let mut per_master: HashMap<u16, usize> = HashMap::new();
    for (key, n) in &allowed {
        let slot = keyslot(&mut any, key);
        let (owner, _) = cluster.owner(slot);
        *per_master.entry(owner).or_default() += 1;
        for (port, c) in conns.iter_mut() {
            let reply: redis::RedisResult<i64> = redis::cmd("ZCARD").arg(key).query(c);
            if *port == owner {
                assert_eq!(reply.ok(), Some(*n), "{key} on its owner {port}");
            } else {
                // Another master answers MOVED to the owner, never data.
                let err = reply.expect_err("a non-owner must redirect");
                assert_eq!(
                    error_text(&err),
                    format!("MOVED {slot} 127.0.0.1:{owner}"),
                    "{key} asked of {port}"
                );
            }
        }
    }
    // The keys spread over all three masters.
    assert_eq!(per_master.len(), 3, "{per_master:?}");
    assert!(per_master.values().all(|&n| n > KEYS / 6), "{per_master:?}");
}

pub(crate) fn moved(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    let key = "user:7:ip";
    let slot = keyslot(&mut any, key);
    let (owner, _) = cluster.owner(slot);
    let (wrong, _, _) = cluster
        .masters(cluster.base)
        .into_iter()
        .find(|(p, _, _)| *p != owner)
        .expect("another master");
    let mut c = cluster.conn(wrong);
    let err = check_on(&mut c, key).expect_err("MOVED");
    assert_eq!(err.code(), Some("MOVED"), "{err}");
    assert_eq!(error_text(&err), format!("MOVED {slot} 127.0.0.1:{owner}"));
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 0, "nothing written on the wrong node");
    assert_eq!(check_on(&mut cluster.conn(owner), key).unwrap(), 1);
}

/// ZCARD on the importing node of a slot under migration (after ASKING).
fn asking_zcard(c: &mut Connection, key: &str) -> i64 {
    let (_, card): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("ZCARD")
        .arg(key)
        .query(c)
        .unwrap();
    card
}

pub(crate) fn ask(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    // Two keys in one slot: one exists before the migration starts.
    let (old, new) = ("{mig}:old", "{mig}:new");
    let slot = keyslot(&mut any, old);
    let (source, source_id) = cluster.owner(slot);
    let (target, target_id, _) = cluster
        .masters(cluster.base)
        .into_iter()
        .find(|(p, _, _)| *p != source)
        .expect("target");
    let mut src = cluster.conn(source);
    let mut tgt = cluster.conn(target);
    assert_eq!(check_on(&mut src, old).unwrap(), 1);
    let setslot = |c: &mut Connection, how: &str, id: &str| set_slot(c, slot, how, id);
    setslot(&mut tgt, "IMPORTING", &source_id);
    setslot(&mut src, "MIGRATING", &target_id);
    // A key still on the source is served there.
    assert_eq!(check_on(&mut src, old).unwrap(), 1);
    // A missing key is redirected with ASK, and nothing is written.
    let err = check_on(&mut src, new).expect_err("ASK");
    assert_eq!(error_text(&err), format!("ASK {slot} 127.0.0.1:{target}"));
    let in_slot: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut src)
        .unwrap();
    assert_eq!(in_slot, 1, "only the old key is on the source");
    // Without ASKING the target refuses; with it, it serves the key.
    let err = check_on(&mut tgt, new).expect_err("MOVED without ASKING");
    assert_eq!(err.code(), Some("MOVED"));
    let (_, r): ((), i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("SLIDEWIN.CHECK")
        .arg(new)
        .arg(3)
        .arg(600_000)
        .query(&mut tgt)
        .unwrap();
    assert_eq!(r, 1);
    assert_eq!(asking_zcard(&mut tgt, new), 1, "the entry is on the target");
    // A cluster-aware client (redis-cli -c) follows the ASK by itself.
    let out = Command::new(cli())
        .args([
            "-c",
            "-p",
            &source.to_string(),
            "SLIDEWIN.CHECK",
            new,
            "3",
            "600000",
        ])
        .output()
        .expect("redis-cli -c");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    assert_eq!(
        asking_zcard(&mut tgt, new),
        2,
        "the second entry went to the target too"
    );

    // MCHECK with its keys split between the two nodes: neither node holds
    // them all, so each refuses (TRYAGAIN, or ASK where it holds none), and
    // nothing is written on either.
    let digests = |src: &mut Connection, tgt: &mut Connection| (digest(src), digest(tgt));
    let before = digests(&mut src, &mut tgt);
    let mcheck = |c: &mut Connection, asking: bool, keys: [&str; 2]| -> String {
        let mut pipe = redis::pipe();
        if asking {
            pipe.cmd("ASKING").ignore();
        }
        pipe.cmd("SLIDEWIN.MCHECK")
            .arg(2)
            .arg(keys[0])
            .arg(3)
            .arg(600_000)
            .arg(keys[1])
            .arg(5)
            .arg(600_000);
        let err = pipe
            .query::<Vec<i64>>(c)
            .expect_err("a split MCHECK is refused");
        error_text(&err)
    };
    let on_source = mcheck(&mut src, false, [old, new]);
    assert!(on_source.starts_with("TRYAGAIN"), "source: {on_source}");
    let on_target = mcheck(&mut tgt, true, [old, new]);
    assert!(on_target.starts_with("TRYAGAIN"), "target: {on_target}");
    let none_here = mcheck(&mut src, false, [new, "{mig}:other"]);
    assert_eq!(none_here, format!("ASK {slot} 127.0.0.1:{target}"));
    assert_eq!(
        digests(&mut src, &mut tgt),
        before,
        "nothing written on either node"
    );
    assert_eq!(asking_zcard(&mut tgt, new), 2);
    let on_src: i64 = redis::cmd("ZCARD").arg(old).query(&mut src).unwrap();
    assert_eq!(on_src, 2);
}

pub(crate) fn crossslot(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    // Two keys in different slots owned by the same master.
    let first = "cross:0".to_string();
    let (owner, _) = cluster.owner(keyslot(&mut any, &first));
    let second = (1..10_000)
        .map(|i| format!("cross:{i}"))
        .find(|k| {
            let s = keyslot(&mut any, k);
            s != keyslot(&mut any, &first) && cluster.owner(s).0 == owner
        })
        .expect("a second key on the same node");
    let mut c = cluster.conn(owner);
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    for key in [&first, &second] {
        let queued: String = redis::cmd("SLIDEWIN.CHECK")
            .arg(key)
            .arg(3)
            .arg(1000)
            .query(&mut c)
            .unwrap();
        assert_eq!(queued, "QUEUED");
    }
    let err = redis::cmd("EXEC")
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    let err = redis::cmd("EVAL")
        .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 3, 1000), redis.call('SLIDEWIN.CHECK', KEYS[2], 3, 1000)}")
        .arg(2)
        .arg(&first)
        .arg(&second)
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    // MCHECK declares all its keys: two slots are refused before it runs.
    let err = redis::cmd("SLIDEWIN.MCHECK")
        .arg(2)
        .arg(&first)
        .arg(3)
        .arg(1000)
        .arg(&second)
        .arg(3)
        .arg(1000)
        .query::<Value>(&mut c)
        .expect_err("CROSSSLOT");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    for key in [&first, &second] {
        let n: i64 = redis::cmd("EXISTS").arg(key).query(&mut c).unwrap();
        assert_eq!(n, 0, "nothing was written to {key}");
    }
}

pub(crate) fn hash_tags(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let mut any = cluster.conn(cluster.base);
    let (ip, phone) = ("{user:42}:ip", "{user:42}:phone");
    assert_eq!(keyslot(&mut any, ip), keyslot(&mut any, phone));
    let (owner, _) = cluster.owner(keyslot(&mut any, ip));
    let mut c = cluster.conn(owner);
    let replies: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("SLIDEWIN.CHECK")
        .arg(ip)
        .arg(5)
        .arg(60_000)
        .cmd("SLIDEWIN.CHECK")
        .arg(phone)
        .arg(1)
        .arg(60_000)
        .cmd("SLIDEWIN.CHECK")
        .arg(phone)
        .arg(1)
        .arg(60_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(replies, [1, 1, 0]);
    let both: Vec<i64> = redis::cmd("EVAL")
        .arg("return {redis.call('SLIDEWIN.CHECK', KEYS[1], 5, 60000), redis.call('SLIDEWIN.PEEK', KEYS[2], 1, 60000)[1]}")
        .arg(2)
        .arg(ip)
        .arg(phone)
        .query(&mut c)
        .unwrap();
    assert_eq!(both, [1, 0]);
    // One MCHECK over both hash-tagged keys, through a cluster client.
    let mut cc = cluster.cluster_conn();
    let policy = [
        "2",
        "{user:43}:ip",
        "5",
        "60000",
        "{user:43}:phone",
        "1",
        "60000",
    ];
    let mut mcheck = || -> i64 {
        redis::cmd("SLIDEWIN.MCHECK")
            .arg(&policy)
            .query(&mut cc)
            .unwrap()
    };
    assert_eq!(mcheck(), 1);
    let r = mcheck();
    assert_eq!(r, 0, "the phone rule denies; nothing charged");
    let (owner43, _) = cluster.owner(keyslot(&mut any, "{user:43}:ip"));
    let n: i64 = redis::cmd("ZCARD")
        .arg("{user:43}:ip")
        .query(&mut cluster.conn(owner43))
        .unwrap();
    assert_eq!(n, 1);
}
