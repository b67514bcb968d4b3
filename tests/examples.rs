//! The runnable examples, run against a server with the module.

mod support;

use std::process::Command;

use support::*;

on_every_server! {
    python_sms_policy_example_runs => python_sms_policy;
    redis_cli_example_runs => cli_example;
}

/// The Node.js example needs ioredis, which this machine cannot install (no
/// npm registry): it is checked for syntax where node exists.
#[test]
fn node_example_parses() {
    let Ok(out) = Command::new("node")
        .arg("--check")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/node/sms.js"))
        .output()
    else {
        eprintln!("node not installed: examples/node/sms.js not checked");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn cli_example(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let out = Command::new("bash")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cli/sms.sh"))
        .arg(server.port.to_string())
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1..7], ["1", "1", "1", "1", "1", "0"]);
    assert!(lines[8].starts_with("0 5 0 "), "{}", lines[8]);
    assert_eq!(lines[10].trim(), "1 5 5 0 0");
    assert_eq!(lines[13..15], ["1", "0"]);
}

fn run_example(script: &str, port: u16) -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(["--port", &port.to_string()])
        .output()
        .expect("run python3 (make deps installs redis-py)");
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn python_sms_policy(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let out = run_example("examples/python/sms_policy.py", server.port);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "first code: 200 {'X-RateLimit-Remaining': '0'}",
            "second code, same phone: 429 {'Retry-After': '60'}",
            "given back: 2",
            "after give-back: 200 {'X-RateLimit-Remaining': '0'}",
            "five more phones from the IP: [200, 200, 200, 200, 429]",
            "that phone from another IP: 429 {'Retry-After': '60'}",
        ]
    );
}
