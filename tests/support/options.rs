//! How to start a server: [`Options`], built up and then started.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::docker::{backend, Backend};
use super::{wait_until, Flavor, LogType, Server, START_DEADLINE};

pub(super) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
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
