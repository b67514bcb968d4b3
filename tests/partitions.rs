//! Partitions on real hosts: a 3-master Redis Cluster with one replica each,
//! every node in its own network namespace with its own address, the
//! clients in the root namespace reaching them over a bridge. One master is
//! cut off from every other node (iptables DROP inside its namespace, both
//! directions; the clients' address stays allowed) until the cluster fails
//! it over, then the link heals and the old master rejoins as a replica.
//! Measured per run: the acknowledged decisions no node holds afterwards,
//! and the over-admission in the clients' own log of granted calls, for
//! (a) plain asynchronous replication, (b) `min-replicas-to-write 1`,
//! (c) callers that act on a `1` only once `WAIT 1 200` confirms it.
//!
//! Needs root (network namespaces, veth, iptables). `make test` runs
//! [`short`] (2 runs of each configuration on Redis 7.0); `make
//! test-partitions` runs [`full`] (`SLIDEWIN_PARTITION_RUNS`, default 20,
//! on each of `SLIDEWIN_PARTITION_SERVERS`) and writes the tables to
//! `target/partitions/`. docs/operating.md ("Failover: what a decision is
//! worth") explains the numbers.
//!
//! Cleanup: everything the test makes is named `swp<pid>x<n>...`. A Drop
//! guard removes the namespaces (and with them the veths, the bridge and the
//! iptables rules, which live only inside them) and stops the servers; a
//! watchdog process in its own process group does the same if the test
//! process dies without unwinding (Ctrl-C, SIGKILL); and every start sweeps
//! what a dead test process left.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, ErrorKind, RedisError, ServerErrorKind, Value};
use support::{module_path, target_dir, token_member, wait_until, wall_ms, Flavor};

// ---------------------------------------------------------------------------
// The load and the scenario's constants.

/// Limit and window of every key: 5 per 60 s. The window is longer than a
/// run (about 10-15 s), so no entry an allowed call made may legitimately
/// have left its key when the run is checked: a missing entry is a lost one.
const LIMIT: i64 = 5;
const WINDOW_MS: i64 = 60_000;
/// Keys come into use at a steady rate and each is called for about 30 s
/// (the newest `ACTIVE_KEYS`: longer than a run, so a key whose entries
/// were lost is called again after the failover), much faster than its
/// limit allows: every key fills up within its first seconds, then is
/// denied, so decisions (grants on new keys, denials on full ones) go on at
/// every moment of the run.
const ACTIVE_KEYS: u64 = 600;
const KEYS_PER_SECOND: u64 = 20;
const CLIENTS: usize = 6;
/// Each client's pause between calls (about 250-300 calls/s each).
const PACE: Duration = Duration::from_millis(3);
const MAX_CALLS_PER_CLIENT: usize = 40_000;
/// A call (with its redirects and retries) gives up after this.
const CALL_DEADLINE: Duration = Duration::from_secs(2);
/// The confirmation of configuration (c).
const WAIT_MS: i64 = 200;
const NODE_TIMEOUT_MS: u32 = 1500;
const WARMUP: Duration = Duration::from_millis(2500);
/// How long the split brain lasts past the promotion before the heal.
const AFTER_PROMOTION: Duration = Duration::from_millis(1000);
const TAIL: Duration = Duration::from_millis(2000);
const PROMOTION_DEADLINE: Duration = Duration::from_secs(30);
const REJOIN_DEADLINE: Duration = Duration::from_secs(45);
const HEALTHY_DEADLINE: Duration = Duration::from_secs(60);

/// Configuration (b)'s `min-replicas-max-lag` in seconds:
/// `SLIDEWIN_PARTITION_MAX_LAG`, 2 unless set (a series with another value
/// writes `target/partitions/lag<n>-<server>.*`).
fn max_lag() -> u32 {
    std::env::var("SLIDEWIN_PARTITION_MAX_LAG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    /// Plain asynchronous replication.
    Async,
    /// `min-replicas-to-write 1`, `min-replicas-max-lag 2`.
    MinReplicas,
    /// A `1` counts only once `WAIT 1 200` returns >= 1; else it is undone.
    Wait,
}

impl Config {
    const ALL: [Config; 3] = [Config::Async, Config::MinReplicas, Config::Wait];
    fn name(self) -> &'static str {
        match self {
            Config::Async => "(a) asynchronous replication",
            Config::MinReplicas => "(b) min-replicas-to-write 1, min-replicas-max-lag (2)",
            Config::Wait => "(c) act on a 1 only after WAIT 1 200 >= 1",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Config::Async => "a",
            Config::MinReplicas => "b",
            Config::Wait => "c",
        }
    }
}

// ---------------------------------------------------------------------------
// Commands.

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn must(r: Result<String, String>) -> String {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn iptables(ns: &str, rule: &[&str]) -> Result<String, String> {
    let mut args = vec!["netns", "exec", ns, "iptables", "-w", "5"];
    args.extend_from_slice(rule);
    ip(&args)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

// ---------------------------------------------------------------------------
// The network: a hub namespace holding a bridge, one namespace per node, a
// veth from the root namespace (the clients) to the bridge.

static NET_SEQ: AtomicUsize = AtomicUsize::new(0);
/// Held while a subnet is chosen and taken, so two nets of one process
/// never pick the same.
static SUBNET_LOCK: Mutex<()> = Mutex::new(());

/// `swp<pid>x<n>` and its suffixes: the owner's pid, if `name` is one of ours.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("swp")?;
    let (pid, tail) = rest.split_once('x')?;
    let n_end = tail
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(tail.len());
    let suffix = &tail[n_end..];
    let ok_suffix = suffix.is_empty()
        || suffix == "hub"
        || suffix
            .strip_prefix('n')
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
    (n_end > 0 && ok_suffix && !pid.is_empty() && pid.chars().all(|c| c.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces and links a dead test process left (its servers are
/// killed: they were that process's, inside its own namespaces).
fn sweep_leftovers() {
    let me = std::process::id();
    for line in ip(&["netns", "list"]).unwrap_or_default().lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        match owner_pid(name) {
            Some(pid) if pid != me && !alive(pid) => {
                kill_namespace(name);
                eprintln!("partitions: removed namespace {name} left by process {pid}");
            }
            _ => {}
        }
    }
    for line in ip(&["-o", "link", "show"]).unwrap_or_default().lines() {
        let Some(name) = line.split(": ").nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or("");
        match owner_pid(name) {
            Some(pid) if pid != me && !alive(pid) => {
                let _ = ip(&["link", "del", name]);
                eprintln!("partitions: removed link {name} left by process {pid}");
            }
            _ => {}
        }
    }
}

/// Kills what runs in one of our namespaces, then deletes it.
fn kill_namespace(ns: &str) {
    for pid in ip(&["netns", "pids", ns])
        .unwrap_or_default()
        .split_whitespace()
    {
        let _ = Command::new("kill").args(["-9", pid]).status();
    }
    let _ = ip(&["netns", "del", ns]);
}

struct Net {
    prefix: String,
    subnet: u8,
    nodes: usize,
    watchdog: Option<Child>,
}

impl Net {
    fn hub(&self) -> String {
        format!("{}hub", self.prefix)
    }
    fn ns(&self, i: usize) -> String {
        format!("{}n{}", self.prefix, i)
    }
    fn addr(&self, i: usize) -> String {
        format!("10.77.{}.{}", self.subnet, 11 + i)
    }
    fn client_addr(&self) -> String {
        format!("10.77.{}.1", self.subnet)
    }
    fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = (0..self.nodes).map(|i| self.ns(i)).collect();
        v.push(self.hub());
        v
    }

    /// Makes the hub, the nodes' namespaces and the client's veth;
    /// `also_remove` is deleted by the watchdog too (the cluster's files).
    fn create(nodes: usize, also_remove: &Path) -> Net {
        assert!(
            is_root(),
            "the partition tests need root: network namespaces, veth pairs and iptables \
             (run them as root, e.g. in the project's container or VM)"
        );
        sweep_leftovers();
        let k = NET_SEQ.fetch_add(1, Ordering::SeqCst);
        let prefix = format!("swp{}x{}", std::process::id(), k);
        let _guard = SUBNET_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let used = ip(&["-4", "-o", "addr", "show"]).unwrap_or_default();
        let start = (std::process::id() as usize * 7 + k * 13) % 200;
        let subnet = (0..200)
            .map(|d| (20 + (start + d) % 200) as u8)
            .find(|s| !used.contains(&format!("10.77.{s}.")))
            .expect("a free 10.77.x.0/24 subnet");
        let mut net = Net {
            prefix,
            subnet,
            nodes,
            watchdog: None,
        };
        net.watchdog = Some(net.spawn_watchdog(also_remove));
        let hub = net.hub();
        must(ip(&["netns", "add", &hub]));
        must(ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]));
        must(ip(&["-n", &hub, "link", "set", "br0", "up"]));
        must(ip(&["-n", &hub, "link", "set", "lo", "up"]));
        let root_if = net.prefix.clone();
        must(ip(&[
            "link", "add", &root_if, "type", "veth", "peer", "name", "r", "netns", &hub,
        ]));
        must(ip(&["-n", &hub, "link", "set", "r", "master", "br0"]));
        must(ip(&["-n", &hub, "link", "set", "r", "up"]));
        must(ip(&[
            "addr",
            "add",
            &format!("{}/24", net.client_addr()),
            "dev",
            &root_if,
        ]));
        must(ip(&["link", "set", &root_if, "up"]));
        drop(_guard);
        for i in 0..nodes {
            let ns = net.ns(i);
            let port = format!("h{i}");
            must(ip(&["netns", "add", &ns]));
            must(ip(&[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]));
            must(ip(&["-n", &hub, "link", "set", &port, "master", "br0"]));
            must(ip(&["-n", &hub, "link", "set", &port, "up"]));
            must(ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(i)),
                "dev",
                "eth0",
            ]));
            must(ip(&["-n", &ns, "link", "set", "eth0", "up"]));
            must(ip(&["-n", &ns, "link", "set", "lo", "up"]));
        }
        net
    }

    /// A shell in its own process group (a Ctrl-C on the terminal does not
    /// reach it) that removes everything once this process is gone.
    fn spawn_watchdog(&self, also_remove: &Path) -> Child {
        let nss = self.namespaces().join(" ");
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             for ns in {nss}; do for p in $(ip netns pids $ns 2>/dev/null); do kill -9 $p; done; done; \
             for ns in {nss}; do ip netns del $ns 2>/dev/null; done; \
             ip link del {root} 2>/dev/null; rm -rf '{dir}'",
            pid = std::process::id(),
            root = self.prefix,
            dir = also_remove.display()
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn the watchdog")
    }

    /// Whether the partition is sabotaged on purpose (to see the checks fail).
    fn sabotage() -> String {
        std::env::var("SLIDEWIN_PARTITION_SABOTAGE").unwrap_or_default()
    }

    /// Cuts node `i` off from `others`: DROP both ways inside its namespace.
    /// `SLIDEWIN_PARTITION_SABOTAGE` breaks it on purpose, to see the run's
    /// checks fail: `no-cut` adds no rule; `bus-open` drops only the data
    /// port (6379: clients and replication), not the cluster bus (16379),
    /// so the cut looks complete to the probes but no failover follows.
    fn cut(&self, i: usize, others: &[usize]) {
        let sabotage = Self::sabotage();
        if sabotage == "no-cut" {
            eprintln!("partitions: SABOTAGE no-cut: the link is left alone");
            return;
        }
        let ns = self.ns(i);
        for &j in others {
            let a = self.addr(j);
            if sabotage == "bus-open" {
                eprintln!("partitions: SABOTAGE bus-open: port 6379 only");
                for (chain, dir, port) in [
                    ("INPUT", "-s", "--dport"),
                    ("INPUT", "-s", "--sport"),
                    ("OUTPUT", "-d", "--dport"),
                    ("OUTPUT", "-d", "--sport"),
                ] {
                    must(iptables(
                        &ns,
                        &[
                            "-A", chain, dir, &a, "-p", "tcp", port, "6379", "-j", "DROP",
                        ],
                    ));
                }
                continue;
            }
            must(iptables(&ns, &["-A", "INPUT", "-s", &a, "-j", "DROP"]));
            must(iptables(&ns, &["-A", "OUTPUT", "-d", &a, "-j", "DROP"]));
        }
    }

    fn heal(&self, i: usize) {
        let ns = self.ns(i);
        must(iptables(&ns, &["-F", "INPUT"]));
        must(iptables(&ns, &["-F", "OUTPUT"]));
    }

    /// Whether a TCP connection from inside namespace `ns` to
    /// `to_addr:6379` succeeds within a second.
    fn reaches_from(ns: &str, to_addr: &str) -> bool {
        Command::new("ip")
            .args(["netns", "exec", ns, "timeout", "1", "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/{to_addr}/6379"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces() {
            kill_namespace(&ns);
        }
        let _ = ip(&["link", "del", &self.prefix]);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// The cluster.

struct Node {
    addr: String,
    child: Child,
}

fn connect(addr: &str, timeout: Duration) -> redis::RedisResult<Connection> {
    let sock: SocketAddr = format!("{addr}:6379").parse().expect("address");
    // A quick TCP probe first: redis-rs's own connect timeout applies to
    // the TCP connect too, but the probe keeps failing nodes cheap.
    TcpStream::connect_timeout(&sock, timeout).map_err(RedisError::from)?;
    let client = redis::Client::open(format!("redis://{addr}:6379/"))?;
    let c = client.get_connection_with_timeout(timeout)?;
    c.set_read_timeout(Some(Duration::from_secs(3)))?;
    c.set_write_timeout(Some(Duration::from_secs(3)))?;
    Ok(c)
}

struct PCluster {
    flavor: Flavor,
    nodes: Vec<Node>,
    net: Net,
    _dir: tempfile::TempDir,
}

#[derive(Debug, Clone)]
struct Role {
    master: bool,
    /// For a replica: the index of its master and whether the link is up.
    master_of: Option<usize>,
    link_up: bool,
}

impl PCluster {
    fn start(flavor: Flavor) -> PCluster {
        let dir = tempfile::Builder::new()
            .prefix("slidewin-partitions-")
            .tempdir()
            .expect("temp dir");
        let net = Net::create(6, dir.path());
        let module = module_path();
        let binary = flavor.binary();
        let mut nodes = Vec::new();
        for i in 0..6 {
            let addr = net.addr(i);
            let ndir = dir.path().join(format!("n{i}"));
            std::fs::create_dir_all(&ndir).unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &net.ns(i)])
                .arg(&binary)
                .args(["--port", "6379", "--bind", &addr, "--protected-mode", "no"])
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .args(["--cluster-announce-ip", &addr])
                .arg("--dir")
                .arg(&ndir)
                .args([
                    "--logfile",
                    "server.log",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                // A full resync (the old master rejoining) starts at once,
                // not after the default 5 s wait for more replicas.
                .args(["--repl-diskless-sync-delay", "0"])
                .arg("--loadmodule")
                .arg(&module)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn a server in its namespace");
            nodes.push(Node { addr, child });
        }
        let cluster = PCluster {
            flavor,
            nodes,
            net,
            _dir: dir,
        };
        for (i, n) in cluster.nodes.iter().enumerate() {
            assert!(
                wait_until(Duration::from_secs(15), || connect(
                    &n.addr,
                    Duration::from_secs(1)
                )
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()),
                "node {i} ({flavor:?}) did not start: {}",
                cluster.log(i)
            );
        }
        let addrs: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("{}:6379", n.addr))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_healthy();
        cluster
    }

    fn log(&self, i: usize) -> String {
        let p = self._dir.path().join(format!("n{i}/server.log"));
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn conn(&self, i: usize) -> Connection {
        connect(&self.nodes[i].addr, Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("connect to node {i}: {e}"))
    }

    fn index_of(&self, ip: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.addr == ip)
    }

    fn role(&self, i: usize) -> Option<Role> {
        let mut c = connect(&self.nodes[i].addr, Duration::from_secs(1)).ok()?;
        let v: Vec<Value> = redis::cmd("ROLE").query(&mut c).ok()?;
        let kind: String = redis::from_redis_value_ref(v.first()?).ok()?;
        if kind == "master" {
            return Some(Role {
                master: true,
                master_of: None,
                link_up: false,
            });
        }
        let host: String = redis::from_redis_value_ref(v.get(1)?).ok()?;
        let state: String = redis::from_redis_value_ref(v.get(3)?).ok()?;
        Some(Role {
            master: false,
            master_of: self.index_of(&host),
            link_up: state == "connected",
        })
    }

    fn cluster_ok(&self, i: usize) -> bool {
        connect(&self.nodes[i].addr, Duration::from_secs(1))
            .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
            .is_ok_and(|s| s.contains("cluster_state:ok"))
    }

    /// No node flagged as failing (or suspected) in `i`'s view.
    fn no_failures_seen_by(&self, i: usize) -> bool {
        connect(&self.nodes[i].addr, Duration::from_secs(1))
            .and_then(|mut c| redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut c))
            .is_ok_and(|s| {
                s.lines().count() == 6
                    && s.lines().all(|l| {
                        l.split(' ')
                            .nth(2)
                            .is_some_and(|f| !f.contains("fail") && !f.contains("handshake"))
                    })
            })
    }

    /// Which nodes `i` flags as failing or suspected (`fail`, `fail?`).
    fn failures_seen_by(&self, i: usize) -> Vec<String> {
        connect(&self.nodes[i].addr, Duration::from_secs(1))
            .and_then(|mut c| redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut c))
            .map(|s| {
                s.lines()
                    .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("fail")))
                    .map(|l| l.split(' ').nth(1).unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Three masters, each with one replica whose link is up; every node
    /// in state ok and seeing no failure.
    fn healthy(&self) -> bool {
        let roles: Vec<Option<Role>> = (0..6).map(|i| self.role(i)).collect();
        if roles.iter().any(|r| r.is_none()) {
            return false;
        }
        let roles: Vec<Role> = roles.into_iter().flatten().collect();
        let masters: Vec<usize> = (0..6).filter(|&i| roles[i].master).collect();
        masters.len() == 3
            && masters.iter().all(|&m| {
                roles
                    .iter()
                    .filter(|r| r.master_of == Some(m) && r.link_up)
                    .count()
                    == 1
            })
            && (0..6).all(|i| self.cluster_ok(i) && self.no_failures_seen_by(i))
    }

    fn wait_healthy(&self) {
        assert!(
            wait_until(HEALTHY_DEADLINE, || self.healthy()),
            "the cluster ({:?}) did not become healthy within {HEALTHY_DEADLINE:?}",
            self.flavor
        );
    }

    /// (master, its replica) pairs, masters in index order.
    fn shards(&self) -> Vec<(usize, usize)> {
        let roles: Vec<Role> = (0..6).map(|i| self.role(i).expect("role")).collect();
        (0..6)
            .filter(|&i| roles[i].master)
            .map(|m| {
                let r = (0..6)
                    .find(|&r| roles[r].master_of == Some(m))
                    .expect("a replica");
                (m, r)
            })
            .collect()
    }

    fn config_set_all(&self, name: &str, value: &str) {
        for i in 0..6 {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query(&mut self.conn(i))
                .unwrap_or_else(|e| panic!("CONFIG SET {name} {value} on node {i}: {e}"));
        }
    }
}

impl Drop for PCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Ok(mut c) = connect(&n.addr, Duration::from_millis(500)) {
                let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
            }
        }
        for n in &mut self.nodes {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if matches!(n.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
            let _ = n.child.kill();
            let _ = n.child.wait();
        }
        // Then `net` drops: the namespaces, veths and rules go.
    }
}

// ---------------------------------------------------------------------------
// A small cluster client: a slot map, MOVED/ASK followed, CLUSTERDOWN and
// broken connections retried with a fresh map, every call bounded.

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The key's slot (the keys here carry no hash tag).
fn slot(key: &str) -> usize {
    (crc16(key.as_bytes()) % 16384) as usize
}

#[derive(Default, Debug, Clone)]
struct RouterStats {
    moved: u64,
    ask: u64,
    clusterdown: u64,
    io_errors: u64,
    refreshes: u64,
}

struct Router {
    addrs: Vec<String>,
    slots: Vec<Option<usize>>,
    conns: HashMap<usize, Connection>,
    next_seed: usize,
    stats: RouterStats,
}

impl Router {
    fn new(addrs: Vec<String>, seed: usize) -> Router {
        let mut r = Router {
            addrs,
            slots: vec![None; 16384],
            conns: HashMap::new(),
            next_seed: seed,
            stats: RouterStats::default(),
        };
        r.refresh();
        r
    }

    fn index_of(&self, host_port: &str) -> Option<usize> {
        let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
        self.addrs.iter().position(|a| a == host)
    }

    fn conn(&mut self, i: usize) -> redis::RedisResult<&mut Connection> {
        if !self.conns.contains_key(&i) {
            let c = connect(&self.addrs[i], Duration::from_millis(500))?;
            self.conns.insert(i, c);
        }
        Ok(self.conns.get_mut(&i).unwrap())
    }

    /// CLUSTER SLOTS from the next node that answers (they take turns, so a
    /// partitioned node's stale view is not asked twice in a row).
    fn refresh(&mut self) {
        self.stats.refreshes += 1;
        for _ in 0..self.addrs.len() {
            let i = self.next_seed % self.addrs.len();
            self.next_seed += 1;
            let Ok(c) = self.conn(i) else {
                self.conns.remove(&i);
                continue;
            };
            let Ok(Value::Array(ranges)) = redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(c)
            else {
                self.conns.remove(&i);
                continue;
            };
            for range in ranges {
                let Value::Array(f) = range else { continue };
                let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(m))) =
                    (f.first(), f.get(1), f.get(2))
                else {
                    continue;
                };
                let host = match m.first() {
                    Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                    Some(Value::SimpleString(h)) => h.clone(),
                    _ => continue,
                };
                let owner = self.index_of(&host);
                for s in *a..=*b {
                    self.slots[s as usize] = owner;
                }
            }
            return;
        }
    }

    /// Sends `cmd` (about `key`) to the key's owner, following redirects;
    /// returns the reply and the node that gave it (or the last error).
    fn call(&mut self, key: &str, cmd: &redis::Cmd) -> (redis::RedisResult<Value>, Option<usize>) {
        let s = slot(key);
        let deadline = Instant::now() + CALL_DEADLINE;
        let mut ask: Option<usize> = None;
        let mut last: RedisError = RedisError::from((ErrorKind::Io, "no attempt"));
        let mut last_node = None;
        for _attempt in 0..12 {
            if Instant::now() >= deadline {
                break;
            }
            let target = match ask.or(self.slots[s]) {
                Some(t) => t,
                None => {
                    self.refresh();
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            last_node = Some(target);
            let reply = match self.conn(target) {
                Err(e) => Err(e),
                Ok(c) => {
                    if ask.take().is_some() {
                        redis::pipe()
                            .cmd("ASKING")
                            .ignore()
                            .add_command(cmd.clone())
                            .query::<Vec<Value>>(c)
                            .map(|mut v| v.pop().unwrap_or(Value::Nil))
                    } else {
                        cmd.query::<Value>(c)
                    }
                }
            };
            match reply {
                Ok(v) => return (Ok(v), Some(target)),
                Err(e) => {
                    match e.kind() {
                        ErrorKind::Server(ServerErrorKind::Moved) => {
                            self.stats.moved += 1;
                            let to = e.redirect_node().and_then(|(a, _)| self.index_of(a));
                            self.slots[s] = to;
                            if to.is_none() {
                                self.refresh();
                            }
                        }
                        ErrorKind::Server(ServerErrorKind::Ask) => {
                            self.stats.ask += 1;
                            ask = e.redirect_node().and_then(|(a, _)| self.index_of(a));
                        }
                        ErrorKind::Server(
                            ServerErrorKind::ClusterDown
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::MasterDown,
                        ) => {
                            self.stats.clusterdown += 1;
                            thread::sleep(Duration::from_millis(50));
                            self.refresh();
                        }
                        _ if e.is_io_error()
                            || e.is_timeout()
                            || e.is_connection_dropped()
                            || e.is_connection_refusal() =>
                        {
                            self.stats.io_errors += 1;
                            self.conns.remove(&target);
                            thread::sleep(Duration::from_millis(20));
                            self.refresh();
                        }
                        // NOREPLICAS and anything else: the answer.
                        _ => return (Err(e), Some(target)),
                    }
                    last = e;
                }
            }
        }
        (Err(last), last_node)
    }
}

// ---------------------------------------------------------------------------
// The clients.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Acted on: a `1` (configurations a and b), a `1` WAIT confirmed (c).
    Granted,
    Denied,
    /// (b): the master refused the write.
    NoReplicas,
    /// (c): a `1` WAIT did not confirm (then undone).
    Unconfirmed,
    /// No answer within the call's bounds (CLUSTERDOWN, timeouts, ...).
    Error,
}

#[derive(Debug, Clone)]
struct Call {
    key: u64,
    sent_ms: i64,
    received_ms: i64,
    node: Option<usize>,
    outcome: Outcome,
    member: Option<String>,
}

fn key_name(tag: &str, k: u64) -> String {
    format!("pw:{tag}:{k}")
}

/// The reply of CHECK ... WITHMEMBERS: allowed and the members added.
fn parse_check(v: &Value) -> Option<(bool, Vec<String>)> {
    let Value::Array(f) = v else { return None };
    let allowed = matches!(f.first(), Some(Value::Int(1)));
    let members = match f.last() {
        Some(Value::Array(m)) => m
            .iter()
            .filter_map(|x| match x {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::SimpleString(s) => Some(s.clone()),
                Value::Int(i) => Some(i.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((allowed, members))
}

fn client(
    addrs: Vec<String>,
    seed: usize,
    tag: String,
    config: Config,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(Vec<Call>, RouterStats)> {
    thread::spawn(move || {
        let mut router = Router::new(addrs, seed);
        let mut calls = Vec::new();
        let mut rng_state: u64 =
            0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let hard_stop = start + Duration::from_secs(120);
        while !stop.load(Ordering::Relaxed)
            && calls.len() < MAX_CALLS_PER_CLIENT
            && Instant::now() < hard_stop
        {
            // xorshift: which of the active keys.
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            let newest = ACTIVE_KEYS + start.elapsed().as_millis() as u64 * KEYS_PER_SECOND / 1000;
            let k = newest - ACTIVE_KEYS + rng_state % ACTIVE_KEYS;
            let key = key_name(&tag, k);
            let mut cmd = redis::cmd("SLIDEWIN.CHECK");
            cmd.arg(&key).arg(LIMIT).arg(WINDOW_MS).arg("WITHMEMBERS");
            let sent_ms = wall_ms();
            let (reply, node) = router.call(&key, &cmd);
            let received_ms = wall_ms();
            let (outcome, member) = match reply {
                Ok(v) => match parse_check(&v) {
                    Some((true, m)) => {
                        let member = m.into_iter().next();
                        if config == Config::Wait {
                            // On the connection that made the write, never a
                            // new one: WAIT on a connection that wrote
                            // nothing returns at once with every replica.
                            let confirmed = node.is_some_and(|n| {
                                router.conns.get_mut(&n).is_some_and(|c| {
                                    redis::cmd("WAIT")
                                        .arg(1)
                                        .arg(WAIT_MS)
                                        .query::<i64>(c)
                                        .is_ok_and(|r| r >= 1)
                                })
                            });
                            if confirmed {
                                (Outcome::Granted, member)
                            } else {
                                // Give it back where it was taken (best effort).
                                if let (Some(n), Some(m)) = (node, &member) {
                                    if let Ok(c) = router.conn(n) {
                                        let _ = redis::cmd("SLIDEWIN.UNDO")
                                            .arg(&key)
                                            .arg(m)
                                            .query::<i64>(c);
                                    }
                                }
                                (Outcome::Unconfirmed, member)
                            }
                        } else {
                            (Outcome::Granted, member)
                        }
                    }
                    Some((false, _)) => (Outcome::Denied, None),
                    None => (Outcome::Error, None),
                },
                Err(e) if e.code() == Some("NOREPLICAS") => (Outcome::NoReplicas, None),
                Err(_) => (Outcome::Error, None),
            };
            calls.push(Call {
                key: k,
                sent_ms,
                received_ms,
                node,
                outcome,
                member,
            });
            thread::sleep(PACE);
        }
        (calls, router.stats)
    })
}

// ---------------------------------------------------------------------------
// One run and its measurements.

#[derive(Debug, Clone, Default)]
struct RunResult {
    calls: usize,
    /// `1` replies (before any WAIT).
    ones: usize,
    /// Decisions acted on (see [`Outcome::Granted`]).
    granted: usize,
    denied: usize,
    noreplicas: usize,
    unconfirmed: usize,
    errors: usize,
    /// Granted decisions whose entry no node holds after the heal.
    lost: usize,
    /// Of `lost`: those the cut master gave after the cut (before the heal).
    lost_from_cut_master: usize,
    /// (c) only: unconfirmed `1`s whose entry is gone (not acted on).
    lost_unconfirmed: usize,
    /// Over-admission: the most granted calls certainly in one window
    /// beyond the limit (any key), and the most that may have been.
    over_certain: i64,
    over_possible: i64,
    /// Keys with any certain over-admission.
    keys_over: usize,
    /// Cut to promotion, ms.
    failover_ms: i64,
    /// Calls the cut master answered after the cut, and its `1`s among them.
    victim_replies_after_cut: usize,
    victim_ones_after_cut: usize,
    /// The last `1` the cut master gave after the cut, ms after the cut
    /// (its answer's arrival): how long it went on deciding alone.
    victim_last_one_ms: i64,
    /// NOREPLICAS replies the cut master gave after the cut.
    victim_noreplicas_after_cut: usize,
    stats: RouterStats,
}

/// The most calls of `calls` (server times within [sent, received]) that
/// certainly share one window of `WINDOW_MS` (their server times span less
/// than the window whatever they were: max received - min sent < window),
/// and the most that possibly do (max sent - min received < window).
fn window_counts(calls: &[&Call]) -> (i64, i64) {
    let (mut certain, mut possible) = (0i64, 0i64);
    for a in calls {
        let c = calls
            .iter()
            .filter(|b| b.sent_ms >= a.sent_ms && b.received_ms - a.sent_ms < WINDOW_MS)
            .count() as i64;
        let p = calls
            .iter()
            .filter(|b| b.received_ms >= a.received_ms && b.sent_ms - a.received_ms < WINDOW_MS)
            .count() as i64;
        certain = certain.max(c);
        possible = possible.max(p);
    }
    (certain, possible)
}

fn run_once(cluster: &PCluster, config: Config, run: usize) -> RunResult {
    cluster.wait_healthy();
    let shards = cluster.shards();
    let (victim, replica) = shards[run % shards.len()];
    let others: Vec<usize> = (0..6).filter(|&i| i != victim).collect();
    cluster.config_set_all(
        "min-replicas-to-write",
        if config == Config::MinReplicas {
            "1"
        } else {
            "0"
        },
    );
    cluster.config_set_all("min-replicas-max-lag", &max_lag().to_string());

    let tag = format!("{}{}x{}", config.tag(), run, wall_ms() % 100_000);
    let addrs: Vec<String> = cluster.nodes.iter().map(|n| n.addr.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            client(
                addrs.clone(),
                c + run * CLIENTS,
                tag.clone(),
                config,
                start,
                stop.clone(),
            )
        })
        .collect();
    // Stop the clients on every way out of this function.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());

    thread::sleep(WARMUP);
    let cut_ms = wall_ms();
    cluster.net.cut(victim, &others);
    // The cut holds: the master cannot reach any other node (probed from
    // inside its namespace, in parallel, while the failover is watched).
    let probes: Vec<_> = others
        .iter()
        .map(|&j| {
            let ns = cluster.net.ns(victim);
            let to = cluster.nodes[j].addr.clone();
            thread::spawn(move || (j, Net::reaches_from(&ns, &to)))
        })
        .collect();
    let clients_reach = connect(&cluster.nodes[victim].addr, Duration::from_secs(1)).is_ok();
    let promoted = wait_until(PROMOTION_DEADLINE, || {
        cluster.role(replica).is_some_and(|r| r.master)
    });
    let promoted_ms = wall_ms();
    let still_reaching: Vec<usize> = probes
        .into_iter()
        .map(|p| p.join().expect("probe"))
        .filter(|&(_, reached)| reached)
        .map(|(j, _)| j)
        .collect();
    // Whatever happens next, the link heals before this run can fail.
    let victim_was_master = cluster.role(victim).is_some_and(|r| r.master);
    let victim_saw_failures = cluster.failures_seen_by(victim);
    if !promoted || !still_reaching.is_empty() || !clients_reach {
        cluster.net.heal(victim);
        assert!(
            still_reaching.is_empty(),
            "run {run} {config:?}: the cut master (node {victim}) still reaches nodes \
             {still_reaching:?}"
        );
        assert!(
            clients_reach,
            "run {run} {config:?}: the clients no longer reach the cut master"
        );
        panic!(
            "run {run} {config:?}: the replica (node {replica}) of the cut master (node {victim}) \
             was not promoted within {PROMOTION_DEADLINE:?}"
        );
    }
    if std::env::var_os("SLIDEWIN_PARTITION_LOGS").is_some() {
        eprintln!("--- replica {replica} log:\n{}", cluster.log(replica));
        eprintln!("--- victim {victim} log:\n{}", cluster.log(victim));
    }
    thread::sleep(AFTER_PROMOTION);
    cluster.net.heal(victim);
    let heal_ms = wall_ms();
    let rejoined = wait_until(REJOIN_DEADLINE, || {
        cluster
            .role(victim)
            .is_some_and(|r| !r.master && r.master_of == Some(replica) && r.link_up)
    });
    assert!(
        rejoined,
        "run {run} {config:?}: the old master (node {victim}) did not rejoin as a replica of \
         node {replica} within {REJOIN_DEADLINE:?}: {:?}",
        cluster.role(victim)
    );
    assert!(
        wait_until(HEALTHY_DEADLINE, || cluster.healthy()),
        "run {run} {config:?}: the cluster did not become healthy after the heal"
    );
    thread::sleep(TAIL);
    stop.store(true, Ordering::Relaxed);
    let mut calls: Vec<Call> = Vec::new();
    let mut stats = RouterStats::default();
    for c in clients {
        let (cs, st) = c.join().expect("a client thread");
        calls.extend(cs);
        stats.moved += st.moved;
        stats.ask += st.ask;
        stats.clusterdown += st.clusterdown;
        stats.io_errors += st.io_errors;
        stats.refreshes += st.refreshes;
    }
    cluster.config_set_all("min-replicas-to-write", "0");
    assert!(
        victim_was_master,
        "run {run} {config:?}: the cut master was no longer a master when its replica was \
         promoted (no split brain: was it cut?)"
    );
    assert!(
        !victim_saw_failures.is_empty(),
        "run {run} {config:?}: the cut master saw no other node failing"
    );

    // Where each key lives now, and whether each entry is still there: the
    // member with a score within its call (a member name is given again
    // once its entry is gone, so the name alone is not enough).
    let router = Router::new(addrs.clone(), 0);
    let mut owners: HashMap<usize, Connection> = HashMap::new();
    let mut survives = |call: &Call| -> bool {
        let key = key_name(&tag, call.key);
        let owner = router.slots[slot(&key)].expect("every slot has an owner after the heal");
        let c = owners.entry(owner).or_insert_with(|| cluster.conn(owner));
        let Some(m) = &call.member else { return false };
        // The member inside the token `<id>@<ms>` WITHMEMBERS handed out.
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&key)
            .arg(token_member(m.as_bytes()))
            .query(c)
            .expect("ZSCORE");
        score.is_some_and(|s| {
            let s = s as i64;
            s >= call.sent_ms - 1 && s <= call.received_ms + 1
        })
    };
    let mut r = RunResult {
        calls: calls.len(),
        failover_ms: promoted_ms - cut_ms,
        stats,
        ..Default::default()
    };
    let mut lost_detail = Vec::new();
    for call in &calls {
        match call.outcome {
            Outcome::Granted => r.granted += 1,
            Outcome::Denied => r.denied += 1,
            Outcome::NoReplicas => r.noreplicas += 1,
            Outcome::Unconfirmed => r.unconfirmed += 1,
            Outcome::Error => r.errors += 1,
        }
        if matches!(call.outcome, Outcome::Granted | Outcome::Unconfirmed) {
            r.ones += 1;
        }
        if call.node == Some(victim) && call.sent_ms >= cut_ms && call.received_ms <= heal_ms {
            if call.outcome != Outcome::Error {
                r.victim_replies_after_cut += 1;
            }
            if matches!(call.outcome, Outcome::Granted | Outcome::Unconfirmed) {
                r.victim_ones_after_cut += 1;
                r.victim_last_one_ms = r.victim_last_one_ms.max(call.received_ms - cut_ms);
            }
            if call.outcome == Outcome::NoReplicas {
                r.victim_noreplicas_after_cut += 1;
            }
        }
        if call.outcome == Outcome::Granted && !survives(call) {
            r.lost += 1;
            r.lost_from_cut_master += usize::from(
                call.node == Some(victim) && call.received_ms >= cut_ms && call.sent_ms <= heal_ms,
            );
            if lost_detail.len() < 10 {
                lost_detail.push(call.clone());
            }
        }
        if call.outcome == Outcome::Unconfirmed && !survives(call) {
            r.lost_unconfirmed += 1;
        }
    }
    let mut by_key: HashMap<u64, Vec<&Call>> = HashMap::new();
    for call in calls.iter().filter(|c| c.outcome == Outcome::Granted) {
        by_key.entry(call.key).or_default().push(call);
    }
    for v in by_key.values() {
        let (c, p) = window_counts(v);
        r.over_certain = r.over_certain.max(c - LIMIT);
        r.over_possible = r.over_possible.max(p - LIMIT);
        r.keys_over += usize::from(c > LIMIT);
    }
    r.over_certain = r.over_certain.max(0);
    r.over_possible = r.over_possible.max(0);
    eprintln!(
        "partitions {:?} run {run} {}: node {victim} cut at {cut_ms}, node {replica} promoted \
         after {} ms, healed at +{} ms; {} calls, {} ones, {} granted, {} denied, {} NOREPLICAS, \
         {} unconfirmed, {} errors; the cut master answered {} calls after the cut ({} ones, the last at +{} ms; \
         {} NOREPLICAS); \
         lost {} granted ({} of them given by the cut master during the partition; +{} \
         unconfirmed); over-admission {} certain / {} possible ({} keys); \
         {:?}",
        cluster.flavor,
        config.tag(),
        r.failover_ms,
        heal_ms - cut_ms,
        r.calls,
        r.ones,
        r.granted,
        r.denied,
        r.noreplicas,
        r.unconfirmed,
        r.errors,
        r.victim_replies_after_cut,
        r.victim_ones_after_cut,
        r.victim_last_one_ms,
        r.victim_noreplicas_after_cut,
        r.lost,
        r.lost_from_cut_master,
        r.lost_unconfirmed,
        r.over_certain,
        r.over_possible,
        r.keys_over,
        r.stats
    );
    if config == Config::Wait && r.lost > 0 {
        eprintln!(
            "partitions: BUG: configuration (c) lost {} WAIT-confirmed decisions, e.g. {:?}",
            r.lost, lost_detail
        );
    }
    r
}

/// The checks every run must pass: the partition happened and had effect,
/// the load was what it claims, and (c) lost nothing.
fn assert_run(flavor: Flavor, config: Config, run: usize, r: &RunResult) {
    let what = format!("{flavor:?} run {run} {config:?}");
    assert!(
        r.denied > 0,
        "{what}: no denial: the limits were never reached"
    );
    assert!(r.granted > 0, "{what}: nothing granted");
    assert!(
        r.victim_replies_after_cut > 0,
        "{what}: the clients got no answer from the cut master during the partition"
    );
    if config == Config::Wait {
        assert_eq!(r.lost, 0, "{what}: WAIT-confirmed decisions lost");
        assert_eq!(
            r.over_certain, 0,
            "{what}: over-admission with WAIT-confirmed decisions"
        );
    }
}

fn flavor_named(name: &str) -> Flavor {
    match name {
        "redis-7.0" => Flavor::Redis70,
        "redis-8.2" => Flavor::Redis82,
        "valkey-8.1" => Flavor::Valkey81,
        "valkey-9.1" => Flavor::Valkey91,
        other => panic!("unknown server {other}: redis-7.0, redis-8.2, valkey-8.1, valkey-9.1"),
    }
}

#[derive(Default)]
struct Summary {
    runs: usize,
    calls: usize,
    ones: usize,
    granted: usize,
    denied: usize,
    noreplicas: usize,
    unconfirmed: usize,
    errors: usize,
    lost: usize,
    max_lost: usize,
    runs_with_loss: usize,
    lost_unconfirmed: usize,
    max_over_certain: i64,
    max_over_possible: i64,
    failover_ms: Vec<i64>,
}

impl Summary {
    fn add(&mut self, r: &RunResult) {
        self.runs += 1;
        self.calls += r.calls;
        self.ones += r.ones;
        self.granted += r.granted;
        self.denied += r.denied;
        self.noreplicas += r.noreplicas;
        self.unconfirmed += r.unconfirmed;
        self.errors += r.errors;
        self.lost += r.lost;
        self.max_lost = self.max_lost.max(r.lost);
        self.runs_with_loss += usize::from(r.lost > 0);
        self.lost_unconfirmed += r.lost_unconfirmed;
        self.max_over_certain = self.max_over_certain.max(r.over_certain);
        self.max_over_possible = self.max_over_possible.max(r.over_possible);
        self.failover_ms.push(r.failover_ms);
    }
}

fn table(flavor: Flavor, summaries: &[(Config, Summary)]) -> String {
    let mut s = format!(
        "### {}\n\n| configuration | runs | calls | `1` replies | granted (acted on) | denied | \
         NOREPLICAS | WAIT unconfirmed | no answer | lost granted: total | max per run | runs with \
         a loss | max over-admission (certain / possible) | failover ms (median, max) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        flavor.name()
    );
    for (config, m) in summaries {
        let mut f = m.failover_ms.clone();
        f.sort_unstable();
        let median = f.get(f.len() / 2).copied().unwrap_or(0);
        let max = f.last().copied().unwrap_or(0);
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {median}, {max} |\n",
            config.name(),
            m.runs,
            m.calls,
            m.ones,
            m.granted,
            m.denied,
            m.noreplicas,
            if *config == Config::Wait {
                format!(
                    "{} ({} without their entry afterwards: undone or lost)",
                    m.unconfirmed, m.lost_unconfirmed
                )
            } else {
                "-".into()
            },
            m.errors,
            m.lost,
            m.max_lost,
            m.runs_with_loss,
            m.max_over_certain,
            m.max_over_possible,
        );
    }
    s
}

/// `runs` runs of each configuration on one cluster of `flavor`, the
/// configurations taking turns (a, b, c, a, b, c, ...); every run checked.
/// Writes `target/partitions/<label><server>.md` (the table) and
/// `.runs.txt` (every run).
fn series(flavor: Flavor, runs: usize, label: &str) -> Vec<(Config, Summary)> {
    let cluster = PCluster::start(flavor);
    let mut sums: Vec<(Config, Summary)> = Config::ALL
        .iter()
        .map(|&c| (c, Summary::default()))
        .collect();
    let out_dir = target_dir().join("partitions");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(out_dir.join(format!("{label}{}.runs.txt", flavor.name())))
        .unwrap();
    let mut failures = Vec::new();
    for run in 0..runs {
        for (ci, &config) in Config::ALL.iter().enumerate() {
            let n = run * Config::ALL.len() + ci;
            let r = run_once(&cluster, config, n);
            let _ = writeln!(log, "{} {} run {n}: {r:?}", wall_ms(), config.tag());
            if let Err(e) = std::panic::catch_unwind(|| assert_run(flavor, config, n, &r)) {
                failures.push(
                    e.downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_else(|| "a run check failed".into()),
                );
            }
            sums[ci].1.add(&r);
        }
    }
    let t = table(flavor, &sums);
    eprintln!("{t}");
    std::fs::write(out_dir.join(format!("{label}{}.md", flavor.name())), &t).unwrap();
    assert!(failures.is_empty(), "run checks failed: {failures:#?}");
    // The measurements can see what they measure: without a confirmation
    // a partition loses decisions and over-admits (every run of every
    // server did), so "(c) lost nothing" is not the loss check being blind.
    let a = &sums[0].1;
    assert!(
        a.lost > 0,
        "{flavor:?}: no decision lost in {runs} runs of configuration (a): is the loss check blind?"
    );
    assert!(
        a.max_over_certain > 0,
        "{flavor:?}: no over-admission in {runs} runs of configuration (a): is the check blind?"
    );
    sums
}

/// `make test`: two runs of each configuration on Redis 7.0.
#[test]
fn short() {
    series(Flavor::Redis70, 2, "short-");
}

/// `make test-partitions`: SLIDEWIN_PARTITION_RUNS (20) runs of each
/// configuration on each of SLIDEWIN_PARTITION_SERVERS (the four).
#[test]
#[ignore]
fn full() {
    let runs: usize = std::env::var("SLIDEWIN_PARTITION_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let servers = std::env::var("SLIDEWIN_PARTITION_SERVERS")
        .unwrap_or_else(|_| "redis-7.0 redis-8.2 valkey-8.1 valkey-9.1".into());
    for name in servers.split_whitespace() {
        let label = match max_lag() {
            2 => String::new(),
            n => format!("lag{n}-"),
        };
        series(flavor_named(name), runs, &label);
    }
}

#[test]
fn window_counts_bound_the_truth() {
    let call = |sent_ms, received_ms| Call {
        key: 0,
        sent_ms,
        received_ms,
        node: None,
        outcome: Outcome::Granted,
        member: None,
    };
    // Three calls within 1 s: certainly in one window.
    let v = [call(0, 10), call(500, 510), call(990, 1000)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (3, 3));
    // The last one answered a window after the first was sent: maybe.
    let v = [call(0, 10), call(WINDOW_MS - 5, WINDOW_MS + 5)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (1, 2));
    // Sent a window after the first was answered: never together.
    let v = [call(0, 10), call(WINDOW_MS + 10, WINDOW_MS + 20)];
    assert_eq!(window_counts(&v.iter().collect::<Vec<_>>()), (1, 1));
}

#[test]
fn names_are_recognised() {
    assert_eq!(owner_pid("swp123x0"), Some(123));
    assert_eq!(owner_pid("swp123x0hub"), Some(123));
    assert_eq!(owner_pid("swp123x12n5"), Some(123));
    assert_eq!(owner_pid("swp123x"), None);
    assert_eq!(owner_pid("swpt"), None);
    assert_eq!(owner_pid("swp123x0n"), None);
    assert_eq!(owner_pid("swp12ax0"), None);
    assert_eq!(owner_pid("docker0"), None);
    assert_eq!(slot("foo"), 12182);
    assert_eq!(crc16(b"123456789"), 0x31C3);
}
