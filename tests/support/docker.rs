//! The docker backend (`SLIDEWIN_TEST_BACKEND=docker`): each server runs
//! as a container of `SLIDEWIN_DOCKER_IMAGE` (default `slidewin:test`,
//! built by `make test-docker`), the module file and the temp dir mounted at
//! the same paths, on the host's network, listening on 127.0.0.1 only (so
//! containers replicate from each other over loopback, never over a bridge
//! address), removed on drop.

use std::path::Path;
use std::process::Command;

use super::{module_path, Options, Server};

/// Where test servers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Backend {
    Local,
    Docker(String),
}

pub(super) fn backend() -> Backend {
    match std::env::var("SLIDEWIN_TEST_BACKEND").as_deref() {
        Ok("docker") => Backend::Docker(
            std::env::var("SLIDEWIN_DOCKER_IMAGE").unwrap_or_else(|_| "slidewin:test".into()),
        ),
        Ok("local") | Err(_) => Backend::Local,
        Ok(other) => panic!("SLIDEWIN_TEST_BACKEND={other}: use local or docker"),
    }
}

pub(super) fn docker(args: &[&str]) -> Option<String> {
    let out = Command::new("docker").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Server {
    /// The command that runs a server container in the foreground or
    /// detached: the temp dir and the module mounted at their own paths,
    /// on the host's network, listening on 127.0.0.1:`port`.
    pub(super) fn docker_run(
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

    pub(super) fn spawn_docker(opts: &Options, dir: &Path, port: u16, image: &str) -> Server {
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
}
