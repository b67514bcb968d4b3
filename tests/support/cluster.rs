//! Redis Cluster for the tests (3 masters, 3 replicas, started by
//! scripts/cluster.sh, the script behind `make cluster`) on a free port
//! range, stopped on drop; and [`shared_cluster`], one cluster per server
//! that the tests which leave its topology as they found it take turns on.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rand::Rng;

use super::{module_path, Connection, Flavor, LogType};

/// A master: (port, node id, slot ranges).
pub type Master = (u16, String, Vec<(u16, u16)>);

/// A cluster started with scripts/cluster.sh in a temp dir; stopped on drop.
pub struct Cluster {
    pub flavor: Flavor,
    pub base: u16,
    dir: tempfile::TempDir,
    /// Whether the nodes load the module (else: the FUNCTION library path).
    module: bool,
    /// The log type the nodes make (`log-type`).
    log: LogType,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster.sh")
}

/// The client that creates the cluster and follows redirects: Debian's
/// `redis-cli` speaks to every server of the suite.
pub fn cli() -> PathBuf {
    PathBuf::from("redis-cli")
}

/// A base port whose six ports and six cluster-bus ports (+10000) are free,
/// all below the kernel's ephemeral range (32768 and up), so no outgoing
/// connection can take one of them between this check and the start.
fn free_base() -> u16 {
    let mut rng = rand::rng();
    for _ in 0..200 {
        let base: u16 = rng.random_range(12_000..22_700);
        let all_free = (0..6).all(|i| {
            TcpListener::bind(("127.0.0.1", base + i)).is_ok()
                && TcpListener::bind(("127.0.0.1", base + i + 10_000)).is_ok()
        });
        if all_free {
            return base;
        }
    }
    panic!("no free port range for a cluster");
}

impl Cluster {
    /// Starts a 3+3 cluster on a free port range; a range taken between the
    /// check and the start (another process bound a port) is retried with
    /// another one.
    pub fn start(flavor: Flavor, node_timeout_ms: u32) -> Cluster {
        Self::launch(flavor, node_timeout_ms, true)
    }

    /// A 3+3 cluster of plain servers, without the module.
    pub fn start_without_module(flavor: Flavor) -> Cluster {
        Self::launch(flavor, 5000, false)
    }

    /// A 3+3 cluster whose nodes make compact logs (`log-type compact`).
    pub fn start_compact(flavor: Flavor) -> Cluster {
        Self::launch_with(flavor, 5000, true, LogType::Compact)
    }

    fn launch(flavor: Flavor, node_timeout_ms: u32, module: bool) -> Cluster {
        Self::launch_with(flavor, node_timeout_ms, module, LogType::Zset)
    }

    fn launch_with(flavor: Flavor, node_timeout_ms: u32, module: bool, log: LogType) -> Cluster {
        let mut last = String::new();
        for _attempt in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("slidewin-cluster-")
                .tempdir()
                .expect("temp dir");
            let base = free_base();
            let cluster = Cluster {
                flavor,
                base,
                dir,
                module,
                log,
            };
            let out = cluster
                .command("start")
                .env("NODE_TIMEOUT", node_timeout_ms.to_string())
                .output()
                .expect("run cluster.sh");
            if out.status.success() {
                return cluster;
            }
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if !last.contains("Address already in use") {
                break;
            }
        }
        panic!("cluster.sh start failed:\n{last}");
    }

    fn command(&self, action: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).arg(action);
        self.environment(&mut cmd);
        cmd
    }

    /// What scripts/cluster.sh needs to know of this cluster.
    fn environment(&self, cmd: &mut Command) {
        cmd.env("CLUSTER_DIR", self.dir.path())
            .env("BASE_PORT", self.base.to_string())
            .env("SERVER", self.flavor.binary())
            .env("CLI", cli())
            .env(
                "MODULE",
                if self.module {
                    module_path()
                } else {
                    PathBuf::from("none")
                },
            )
            .env("MODULE_ARGS", format!("log-type {}", self.log.name()));
    }

    /// Stops the cluster and removes its directory once this test process
    /// has exited, however it exits: a shared cluster lives in a static,
    /// which is never dropped. A shell polls the process and then runs
    /// `scripts/cluster.sh stop` (which does nothing for a cluster already
    /// stopped by drop).
    fn stop_after_this_process(&self) {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(
                r#"while kill -0 "$1" 2>/dev/null; do sleep 0.5; done
                   bash "$2" stop; rm -rf "$CLUSTER_DIR""#,
            )
            .arg("stop-after")
            .arg(std::process::id().to_string())
            .arg(script())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.environment(&mut cmd);
        // Never waited for: it outlives this process by design (init reaps it).
        #[allow(clippy::zombie_processes)]
        let _watcher = cmd
            .spawn()
            .expect("start the cluster's stop-after-exit watcher");
    }

    /// Whether the cluster is as a fresh one is: state ok, three masters
    /// with every slot, each with a replica whose link is up.
    fn healthy(&self) -> bool {
        let ok = |port: u16| -> Option<bool> {
            let mut c = self.try_conn(port)?;
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).ok()?;
            Some(info.contains("cluster_state:ok") && info.contains("cluster_slots_assigned:16384"))
        };
        let masters = self.masters(self.base);
        masters.len() == 3
            && self.ports().into_iter().all(|p| ok(p) == Some(true))
            && masters.iter().all(|(port, _, _)| {
                self.try_conn(*port).is_some_and(|mut c| {
                    redis::cmd("WAIT")
                        .arg(1)
                        .arg(5000)
                        .query::<i64>(&mut c)
                        .is_ok_and(|n| n == 1)
                })
            })
    }

    /// Puts the cluster back in the state a test of the shared cluster
    /// starts from: no keys (FLUSHALL on every master, waited for on its
    /// replica), no slot left IMPORTING or MIGRATING, the TOP summaries and
    /// the INFO statistics cleared. Whether it could (else the cluster is
    /// replaced).
    fn reset(&self) -> bool {
        for (port, _, _) in self.masters(self.base) {
            let Some(mut c) = self.try_conn(port) else {
                return false;
            };
            if redis::cmd("FLUSHALL").query::<()>(&mut c).is_err() {
                return false;
            }
            // `[slot->-id]` (migrating) and `[slot-<-id]` (importing) on the
            // node's own line.
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut c)
                .unwrap_or_default();
            let open: Vec<String> = nodes
                .lines()
                .filter(|l| l.contains("myself"))
                .flat_map(|l| l.split(' '))
                .filter_map(|f| f.strip_prefix('['))
                .filter_map(|f| f.split('-').next().map(str::to_string))
                .collect();
            for slot in open {
                let stable = redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(&slot)
                    .arg("STABLE")
                    .query::<()>(&mut c);
                if stable.is_err() {
                    return false;
                }
            }
        }
        for port in self.ports() {
            let Some(mut c) = self.try_conn(port) else {
                return false;
            };
            if self.module {
                for outcome in ["DENIED", "ALLOWED"] {
                    let _: redis::RedisResult<redis::Value> = redis::cmd("SLIDEWIN.TOP")
                        .arg(1)
                        .arg(outcome)
                        .arg("RESET")
                        .query(&mut c);
                }
            }
            if redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query::<()>(&mut c)
                .is_err()
            {
                return false;
            }
        }
        self.healthy()
    }

    fn try_conn(&self, port: u16) -> Option<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
        let c = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .ok()?;
        c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        Some(c)
    }

    pub fn ports(&self) -> Vec<u16> {
        (0..6).map(|i| self.base + i).collect()
    }

    pub fn conn(&self, port: u16) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
        let c = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("cluster command");
        c
    }

    pub fn cluster_conn(&self) -> redis::cluster::ClusterConnection {
        let nodes: Vec<String> = self
            .ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect();
        redis::cluster::ClusterClientBuilder::new(nodes)
            .response_timeout(Duration::from_secs(10))
            .build()
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    /// Every master, from CLUSTER NODES.
    pub fn masters(&self, via: u16) -> Vec<Master> {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.conn(via))
            .expect("cluster command");
        nodes
            .lines()
            .filter(|l| {
                l.split(' ')
                    .nth(2)
                    .is_some_and(|f| f.contains("master") && !f.contains("fail"))
            })
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let port: u16 = f[1]
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .expect("port");
                let ranges = f[8..]
                    .iter()
                    .filter(|r| !r.starts_with('['))
                    .map(|r| match r.split_once('-') {
                        Some((a, b)) => (a.parse().expect("a slot"), b.parse().expect("a slot")),
                        None => (r.parse().expect("a slot"), r.parse().expect("a slot")),
                    })
                    .collect();
                (port, f[0].to_string(), ranges)
            })
            .collect()
    }

    pub fn owner(&self, slot: u16) -> (u16, String) {
        self.masters(self.base)
            .into_iter()
            .find(|(_, _, r)| r.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|(p, id, _)| (p, id))
            .expect("slot owner")
    }

    pub fn pid(&self, port: u16) -> u32 {
        std::fs::read_to_string(self.dir.path().join(port.to_string()).join("server.pid"))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.command("stop").output();
    }
}

/// `CLUSTER SETSLOT slot how id` (IMPORTING, MIGRATING, NODE).
pub fn set_slot(c: &mut Connection, slot: u16, how: &str, id: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(how)
        .arg(id)
        .query(c)
        .expect("cluster command");
}

pub fn keyslot(c: &mut Connection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(c)
        .expect("cluster command")
}

/// A turn on the shared cluster of one server (see [`shared_cluster`]):
/// the other tests of that server wait until it is dropped.
pub struct SharedCluster(MutexGuard<'static, Option<Cluster>>);

impl std::ops::Deref for SharedCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        self.0.as_ref().expect("a shared cluster")
    }
}

/// The cluster of `flavor` (module loaded, sorted sets, node timeout
/// 5000 ms) that tests share, one at a time, when they leave its topology
/// as they found it: no node killed or failed over, no slot moved (a slot
/// left IMPORTING or MIGRATING is set STABLE again). Each turn starts from
/// a clean state ([`Cluster::reset`]: no keys, no open migration, TOP and
/// INFO statistics cleared); a cluster that cannot be reset, or whose last
/// test panicked, is replaced by a fresh one. The cluster is stopped when
/// the test process exits.
pub fn shared_cluster(flavor: Flavor) -> SharedCluster {
    static SHARED: [Mutex<Option<Cluster>>; 5] = [const { Mutex::new(None) }; 5];
    let slot = &SHARED[flavor as usize];
    let mut guard = match slot.lock() {
        Ok(guard) => guard,
        Err(poisoned) => {
            // The last test on it failed: start afresh.
            let mut guard = poisoned.into_inner();
            *guard = None;
            slot.clear_poison();
            guard
        }
    };
    if !guard.as_ref().is_some_and(|c| c.reset()) {
        // Drop (and stop) a cluster that could not be reset first.
        *guard = None;
        let cluster = Cluster::start(flavor, 5000);
        cluster.stop_after_this_process();
        *guard = Some(cluster);
    }
    SharedCluster(guard)
}
