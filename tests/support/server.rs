//! A running server process (or container), shut down on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::Connection;

use super::docker::{backend, docker, Backend};
use super::free_port;
use super::{module_path, wait_until, Flavor, LogType, Options};

/// A running server process (or container), shut down on drop.
pub struct Server {
    pub flavor: Flavor,
    pub port: u16,
    pub dir: PathBuf,
    pub(super) child: Option<Child>,
    pub(super) container: Option<String>,
    pub(super) _tmp: Option<tempfile::TempDir>,
}

pub(super) const START_DEADLINE: Duration = Duration::from_secs(15);
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
    pub(super) fn arguments(opts: &Options, dir: &Path, port: u16) -> Vec<String> {
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

    pub(super) fn try_connect(&self) -> redis::RedisResult<Connection> {
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
