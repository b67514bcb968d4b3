//! The runnable examples, run against a server with the module.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::*;

on_every_server! {
    python_sms_policy_example_runs => python_sms_policy;
    python_wsgi_middleware_example_runs => python_wsgi_middleware;
    python_llm_gateway_example_runs => python_llm_gateway;
    redis_cli_example_runs => cli_example;
    node_example_runs => node_example;
    go_example_runs => go_example;
    every_example_runs_twice_after_the_others => all_examples_twice;
}

/// Runs one example program against `port`; its output (a failing exit
/// fails the test).
fn run_example(name: &str, port: u16) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let node_path = match std::env::var("NODE_PATH") {
        Ok(p) if !p.is_empty() => format!("/usr/share/nodejs:{p}"),
        _ => "/usr/share/nodejs".to_string(),
    };
    let gocache = std::env::temp_dir().join("slidewin-test-gocache");
    match name {
        "cli" => stdout_of(
            Command::new("bash")
                .arg(root.join("examples/cli/sms.sh"))
                .arg(port.to_string()),
            "bash",
        ),
        "sms_policy.py" => python_example("examples/python/sms_policy.py", port),
        "wsgi_middleware.py" => python_example("examples/python/wsgi_middleware.py", port),
        "llm_gateway.py" => python_example("examples/python/llm_gateway.py", port),
        "node" => stdout_of(
            Command::new("node")
                .env("NODE_PATH", node_path)
                .arg(root.join("examples/node/sms.js"))
                .args(["--port", &port.to_string()]),
            "run node (make deps installs nodejs and node-redis)",
        ),
        "go" => stdout_of(
            Command::new("go")
                .env("GO111MODULE", "off")
                .env("GOPATH", "/usr/share/gocode")
                .env("GOCACHE", gocache)
                .arg("run")
                .arg(root.join("examples/go/sms.go"))
                .arg(format!("127.0.0.1:{port}")),
            "run go (make deps installs golang-go and redigo)",
        ),
        other => panic!("no example {other}"),
    }
}

/// Every example, on one server, after the others and then again at once:
/// each exits 0 with the keys the others left (none shares a key with
/// another) and, run again within the window, answers the refusals it now
/// meets (a 429, a 0) instead of failing, and gives back nothing it did not
/// get.
fn all_examples_twice(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let names = [
        "cli",
        "sms_policy.py",
        "wsgi_middleware.py",
        "node",
        "go",
        "llm_gateway.py",
    ];
    let first: Vec<String> = names.iter().map(|n| run_example(n, server.port)).collect();
    let again: Vec<String> = names.iter().map(|n| run_example(n, server.port)).collect();
    for (name, (one, two)) in names.iter().zip(first.iter().zip(&again)) {
        assert!(
            !one.trim().is_empty() && !two.trim().is_empty(),
            "{name} printed nothing"
        );
    }
    // Each output starts as a fresh key's does on the first run (no example
    // shares a key with another), and as a refused one's on the second.
    let starts: [(&str, &str); 6] = [
        (
            "# 5 SMS codes per minute per IP: the 6th is refused\n1\n",
            "# 5 SMS codes per minute per IP: the 6th is refused\n0\n0\n0\n0\n0\n0\n",
        ),
        ("first code: 200", "first code: 429"),
        ("request 1: 200 OK", "request 1: 429"),
        (
            "six requests from one IP: 200",
            "six requests from one IP: 429 429 429 429 429 429",
        ),
        ("code 1: 200", "code 1: 429"),
        ("request 1: 200 450 tokens", "request 1: 429 Retry-After "),
    ];
    for (i, (fresh, refused)) in starts.iter().enumerate() {
        assert!(
            first[i].starts_with(fresh),
            "{} first: {}",
            names[i],
            first[i]
        );
        assert!(
            again[i].starts_with(refused),
            "{} again: {}",
            names[i],
            again[i]
        );
    }
    // What they give back when refused: nothing, without an error.
    assert!(again[1].contains("given back: 0"), "{}", again[1]);
    assert!(again[4].contains("policy: 429"), "{}", again[4]);
}

/// examples/go/sms.go on redigo (Debian's golang-go and
/// golang-github-gomodule-redigo-dev, GOPATH mode, installed by `make deps`):
/// a missing `go` or redigo fails the test.
fn go_example(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let cache = tempfile::tempdir().expect("temp dir");
    let text = stdout_of(
        Command::new("go")
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", cache.path())
            .arg("run")
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/go/sms.go"))
            .arg(format!("127.0.0.1:{}", server.port)),
        "run go (make deps installs golang-go and redigo)",
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "{text}");
    for i in 1..=5 {
        let remaining = 5 - i;
        assert_eq!(
            lines[i - 1],
            format!(
                "code {i}: 200 map[RateLimit-Limit:5 RateLimit-Remaining:{remaining} RateLimit-Reset:60]"
            )
        );
    }
    assert_eq!(
        lines[5],
        "code 6: 429 map[RateLimit-Limit:5 RateLimit-Remaining:0 RateLimit-Reset:60 Retry-After:60]"
    );
    // One token, `<member>@<ms>`: member 1 of a fresh key.
    let token = lines[6]
        .strip_prefix("policy: 200, members=[1@")
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{}", lines[6]));
    assert!(token.parse::<i64>().is_ok(), "{}", lines[6]);
    assert_eq!(lines[7], "policy: 429, Retry-After 60 s");
    assert_eq!(lines[8], "given back: 2");
    let mut c = server.conn();
    assert_eq!(zcard(&mut c, "sms:limit:203.0.113.21"), 5);
    assert_eq!(zcard(&mut c, "sms:limit:phone:+8613800000021"), 0);
}

/// examples/node/sms.js on node-redis (Debian's node-redis, installed by
/// `make deps`): a missing `node` or `redis` package fails the test.
fn node_example(flavor: Flavor) {
    let server = Options::new(flavor).start();
    // Debian's node-redis lives in /usr/share/nodejs, which only Debian's
    // own node searches by itself.
    let node_path = match std::env::var("NODE_PATH") {
        Ok(p) if !p.is_empty() => format!("/usr/share/nodejs:{p}"),
        _ => "/usr/share/nodejs".to_string(),
    };
    let text = stdout_of(
        Command::new("node")
            .env("NODE_PATH", node_path)
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/node/sms.js"))
            .args(["--port", &server.port.to_string()]),
        "run node (make deps installs nodejs and node-redis)",
    );
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "six requests from one IP: 200 200 200 200 200 429",
            "the sixth: {\"Retry-After\":\"60\"}",
            "policy, first code: true",
            "policy, second code: false",
        ]
    );
    let mut c = server.conn();
    assert_eq!(
        redis::cmd("ZCARD")
            .arg("sms:limit:203.0.113.31")
            .query::<i64>(&mut c)
            .unwrap(),
        5
    );
}

fn cli_example(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let text = stdout_of(
        Command::new("bash")
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cli/sms.sh"))
            .arg(server.port.to_string()),
        "bash",
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1..7], ["1", "1", "1", "1", "1", "0"]);
    assert!(lines[8].starts_with("0 5 0 "), "{}", lines[8]);
    assert_eq!(lines[10].trim(), "1 5 5 0 0");
    assert_eq!(lines[13..15], ["1", "0"]);
}

fn python_sms_policy(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let out = python_example("examples/python/sms_policy.py", server.port);
    let allowed = "{'RateLimit-Limit': '1', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '60'}";
    let refused = "{'RateLimit-Limit': '1', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '60', 'Retry-After': '60'}";
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            format!("first code: 200 {allowed}"),
            format!("second code, same phone: 429 {refused} redis"),
            "third, at once: 429 local-cache".to_string(),
            "given back: 2".to_string(),
            format!("after give-back: 200 {allowed}"),
            "five more phones from the IP: [200, 200, 200, 200, 429]".to_string(),
            format!("that phone from another IP: 429 {refused}"),
        ]
    );
}

/// examples/python/llm_gateway.py: requests and tokens per minute per API
/// key, tokens reserved under a request id, settled, refunded on a failure.
fn python_llm_gateway(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let out = python_example("examples/python/llm_gateway.py", server.port);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "request 1: 200 450 tokens (reserved 1200); left this minute: requests 3, tokens 9550",
            "request 2: 502 the model failed (upstream 500); its 1200 tokens given back; left this minute: requests 2, tokens 9550",
            "request 3: 429 Retry-After 60 (9800 tokens do not fit); left this minute: requests 2, tokens 9550",
            "request 4: 200 3200 tokens (reserved 3000); left this minute: requests 1, tokens 6350",
            "request 5: 200 150 tokens (reserved 200); left this minute: requests 0, tokens 6200",
            "request 6: 429 Retry-After 60 (requests); left this minute: requests 0, tokens 6200",
        ]
    );
    // What the server holds: the tokens used (450 + 3200 + 150) on both
    // token keys, four requests.
    let mut c = server.conn();
    assert_eq!(zcard(&mut c, "llm:{sk-demo-7}:tpm"), 3_800);
    assert_eq!(zcard(&mut c, "llm:{sk-demo-7}:tpd"), 3_800);
    assert_eq!(zcard(&mut c, "llm:{sk-demo-7}:rpm"), 4);
}

fn python_wsgi_middleware(flavor: Flavor) {
    let server = Options::new(flavor).start();
    let out = python_example("examples/python/wsgi_middleware.py", server.port);
    let mut expected: Vec<String> = (1..=5)
        .map(|i| {
            format!(
                "request {i}: 200 OK remaining={} retry-after=- body=hello",
                5 - i
            )
        })
        .collect();
    expected.push(
        "request 6: 429 Too Many Requests remaining=0 retry-after=60 body=too many requests"
            .to_string(),
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
}
