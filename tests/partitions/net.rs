//! The commands the harness runs (ip, iptables) and the network: a hub
//! namespace holding a bridge, one namespace per node, a veth from the root
//! namespace (the clients) to the bridge; what a dead test process left
//! swept.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
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

pub(crate) struct Net {
    prefix: String,
    subnet: u8,
    nodes: usize,
    watchdog: Option<Child>,
}

impl Net {
    fn hub(&self) -> String {
        format!("{}hub", self.prefix)
    }
    pub(crate) fn ns(&self, i: usize) -> String {
        format!("{}n{}", self.prefix, i)
    }
    pub(crate) fn addr(&self, i: usize) -> String {
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
    pub(crate) fn create(nodes: usize, also_remove: &Path) -> Net {
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
    pub(crate) fn cut(&self, i: usize, others: &[usize]) {
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

    pub(crate) fn heal(&self, i: usize) {
        let ns = self.ns(i);
        must(iptables(&ns, &["-F", "INPUT"]));
        must(iptables(&ns, &["-F", "OUTPUT"]));
    }

    /// Whether a TCP connection from inside namespace `ns` to
    /// `to_addr:6379` succeeds within a second.
    pub(crate) fn reaches_from(ns: &str, to_addr: &str) -> bool {
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
