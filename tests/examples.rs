//! The runnable examples, run against a server with the module.

mod support;

use std::process::Command;

use support::*;

on_both_servers! {
    python_sms_policy_example_runs => python_sms_policy;
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
