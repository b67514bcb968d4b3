//! The Python example and client on a cluster, the client's FUNCTION
//! library fallback on nodes without the module.

use std::process::Command;

use crate::support::*;

/// examples/python/sms_cluster.py (redis-py's RedisCluster) against the cluster.
pub(crate) fn python_cluster_example(flavor: Flavor) {
    let cluster = shared_cluster(flavor);
    let out = python_example("examples/python/sms_cluster.py", cluster.base);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "user 42, six codes in a minute: [200, 200, 200, 200, 200, 429]",
            "user 43 meanwhile: 200",
            "both keys of user 42 in one slot: True",
            "most denied: [('sms:{user:42}:ip:203.0.113.7', 1, 0)]",
        ]
    );
}

/// The Python client on a cluster whose nodes lack the module: the first
/// call meets "unknown command", the client loads the FUNCTION library on
/// every primary, and CHECK, MCHECK, PEEK and UNDO answer through FCALL on
/// keys of every master, with the same decisions as the module's; the
/// asyncio client (AsyncLimiter over redis.asyncio's RedisCluster) too.
pub(crate) fn python_function_fallback(flavor: Flavor) {
    let cluster = Cluster::start_without_module(flavor);
    let masters = cluster.masters(cluster.base);
    // One key per master, found by its slot.
    let mut c = cluster.conn(cluster.base);
    let mut keys: Vec<String> = Vec::new();
    for (_, _, ranges) in &masters {
        let key = (0..10_000)
            .map(|i| format!("fb:{i}"))
            .find(|k| {
                let slot = keyslot(&mut c, k);
                ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .expect("a key on every master");
        keys.push(key);
    }
    let script = r#"
import sys
import redis.cluster
from slidewin import Limiter, Rule
port, keys = int(sys.argv[1]), sys.argv[2:]
rc = redis.cluster.RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
lim = Limiter(rc)
for key in keys:
    got = [lim.check(key, 2, 60000) for _ in range(3)]
    print(key, [d.allowed for d in got], sorted({d.source for d in got}), got[2].retry_after_ms > 0)
    print("peek", lim.peek(key, 2, 60000).remaining)
    undone = lim.undo(got[0])
    print("undo", undone, lim.peek(key, 2, 60000).remaining)
both = lim.check_all([Rule("{u:1}:ip", 1, 60000), Rule("{u:1}:phone", 1, 60000)])
again = lim.check_all([Rule("{u:1}:ip", 5, 60000), Rule("{u:1}:phone", 1, 60000)])
print("mcheck", both.allowed, again.allowed, both.source)

import asyncio
import redis.asyncio.cluster
from slidewin import AsyncLimiter

async def on_asyncio():
    arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    alim = AsyncLimiter(arc)
    got = [await alim.check("{u:2}:async", 1, 60000) for _ in range(2)]
    print("async", [d.allowed for d in got], got[0].source)
    await arc.aclose()

asyncio.run(on_asyncio())
"#;
    let out = stdout_of(
        Command::new(python())
            .arg("-c")
            .arg(script)
            .arg(cluster.base.to_string())
            .args(&keys),
        "run python3 with the slidewin client (make python-client)",
    );
    let mut expected: Vec<String> = Vec::new();
    for key in &keys {
        expected.push(format!("{key} [True, True, False] ['function'] True"));
        expected.push("peek 0".into());
        expected.push("undo 1 1".into());
    }
    expected.push("mcheck True False function".into());
    expected.push("async [True, False] function".into());
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{out}");
    // The library is on every primary and, replicated, on its replica; the
    // module is on none of them.
    for port in cluster.ports() {
        let mut n = cluster.conn(port);
        let libs: redis::Value = redis::cmd("FUNCTION").arg("LIST").query(&mut n).unwrap();
        assert!(
            format!("{libs:?}").contains("slidewin"),
            "node {port}: {libs:?}"
        );
        let modules: redis::Value = redis::cmd("MODULE").arg("LIST").query(&mut n).unwrap();
        assert!(
            !format!("{modules:?}").contains("slidewin"),
            "node {port}: {modules:?}"
        );
    }
    // Each key holds what the decisions say: one entry left after the undo.
    for key in &keys {
        let (port, _) = cluster.owner(keyslot(&mut c, key));
        let n: i64 = redis::cmd("ZCARD")
            .arg(key)
            .query(&mut cluster.conn(port))
            .unwrap();
        assert_eq!(n, 1, "{key}");
    }
}
