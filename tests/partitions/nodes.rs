//! The cluster: six servers, each in its node's namespace, and what the
//! nodes say of it (roles, health, the failures each one sees).

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, RedisError, Value};

use crate::net::Net;
use crate::support::{module_path, wait_until, Flavor};
use crate::{HEALTHY_DEADLINE, NODE_TIMEOUT_MS};

pub(crate) struct Node {
    pub(crate) addr: String,
    child: Child,
}

pub(crate) fn connect(addr: &str, timeout: Duration) -> redis::RedisResult<Connection> {
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

pub(crate) struct PCluster {
    pub(crate) flavor: Flavor,
    pub(crate) nodes: Vec<Node>,
    pub(crate) net: Net,
    _dir: tempfile::TempDir,
}

#[derive(Debug, Clone)]
pub(crate) struct Role {
    pub(crate) master: bool,
    /// For a replica: the index of its master and whether the link is up.
    pub(crate) master_of: Option<usize>,
    pub(crate) link_up: bool,
}

impl PCluster {
    pub(crate) fn start(flavor: Flavor) -> PCluster {
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

    pub(crate) fn log(&self, i: usize) -> String {
        let p = self._dir.path().join(format!("n{i}/server.log"));
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub(crate) fn conn(&self, i: usize) -> Connection {
        connect(&self.nodes[i].addr, Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("connect to node {i}: {e}"))
    }

    fn index_of(&self, ip: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.addr == ip)
    }

    pub(crate) fn role(&self, i: usize) -> Option<Role> {
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
    pub(crate) fn failures_seen_by(&self, i: usize) -> Vec<String> {
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
    pub(crate) fn healthy(&self) -> bool {
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

    pub(crate) fn wait_healthy(&self) {
        assert!(
            wait_until(HEALTHY_DEADLINE, || self.healthy()),
            "the cluster ({:?}) did not become healthy within {HEALTHY_DEADLINE:?}",
            self.flavor
        );
    }

    /// (master, its replica) pairs, masters in index order.
    pub(crate) fn shards(&self) -> Vec<(usize, usize)> {
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

    pub(crate) fn config_set_all(&self, name: &str, value: &str) {
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
