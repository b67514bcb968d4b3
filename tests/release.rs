//! One version, Cargo.toml's, everywhere a user reads one: `MODULE LIST`
//! (`ver`, as major * 10000 + minor * 100 + patch), `INFO slidewin`
//! (`slidewin_version`), the Python client (`slidewin.__version__`, its
//! pyproject.toml) and CHANGELOG.md's entry for the release.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use redis::Value;
use support::*;

on_every_server! {
    module_list_and_info_show_cargos_version => shown;
}

/// Cargo.toml's version as `MODULE LIST` shows it.
fn module_ver() -> i64 {
    let parts: Vec<i64> = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse().expect("a numeric version part"))
        .collect();
    assert_eq!(parts.len(), 3, "major.minor.patch");
    assert!(parts.iter().all(|p| (0..100).contains(p)));
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

fn shown(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let mut c = server.conn();
    let modules: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let ours: Vec<&Vec<Value>> = modules
        .iter()
        .filter(|m| m.get(1) == Some(&Value::BulkString(b"slidewin".to_vec())))
        .collect();
    assert_eq!(ours.len(), 1, "{modules:?}");
    let m = ours[0];
    let at = m
        .iter()
        .position(|v| *v == Value::BulkString(b"ver".to_vec()))
        .expect("a ver field");
    assert_eq!(m.get(at + 1), Some(&Value::Int(module_ver())), "{m:?}");
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[test]
fn the_python_client_and_the_changelog_carry_cargos_version() {
    let version = env!("CARGO_PKG_VERSION");
    for (file, line) in [
        (
            "clients/python/pyproject.toml",
            format!("version = \"{version}\""),
        ),
        (
            "clients/python/slidewin/__init__.py",
            format!("__version__ = \"{version}\""),
        ),
    ] {
        assert!(read(file).lines().any(|l| l == line), "{file}: want {line}");
    }
    let changelog = read("CHANGELOG.md");
    let entry = format!("## [{version}] - ");
    assert!(
        changelog.lines().any(|l| l.starts_with(&entry)),
        "CHANGELOG.md: no '{entry}<date>' entry"
    );
    assert!(
        changelog.contains("## [Unreleased]"),
        "CHANGELOG.md: an Unreleased section"
    );
}
