//! Executable documentation: every `console` transcript of README.md (of
//! clients/python/README.md, and of
//! every page under docs/) is run in document order, one fresh server with
//! the module per page, and its replies compared with what the page shows.
//!
//! How a page is read:
//! - A line `$ command` is run by bash in the repository root, with a
//!   `redis-cli` first in PATH that talks to the test server (`--no-raw`,
//!   so replies are shown as a terminal shows them) and `6379` in the
//!   command replaced by the server's port. The lines up to the next `$`
//!   are its expected output.
//! - A comment after a reply (`(integer) 1   # allowed`) is the page's
//!   explanation, not output: whitespace, `#`, a space and the rest of the
//!   line are dropped before comparing. A line that *starts* with `#`
//!   (INFO's section headers) is output.
//! - `~` before a number marks a value that depends on the clock (a wait in
//!   ms, a timestamp): an integer of the same sign within half of the shown
//!   value matches there (`~59981`: 29991 to 89971; `~0` only 0).
//! - A line `…` stands for any number of lines not shown.
//! - A ```python block runs, in the same order, with the project's Python
//!   and `redis.Redis` pointed at the test server (its port, and `6379`
//!   in the code replaced by it); it must finish without
//!   an error (what it prints is not compared).
//! - A command that subscribes (`SUBSCRIBE`, `PSUBSCRIBE`) runs until its
//!   expected lines arrived, and a further 300 ms in which nothing more may
//!   arrive; the HTML comment `<!-- meanwhile: command -->` before the block
//!   gives what another client does once it is subscribed.
//! - Every command must exit 0, and each step has a 60 s deadline.
//!
//! A transcript that no longer matches fails the suite with the page, the
//! line and both outputs.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

on_every_server! {
    readme_and_docs_transcripts_match_the_server => pages;
}

/// A command or python block taking longer than this fails the page.
const STEP_DEADLINE_S: &str = "60";

/// One `$ command` of a page, with what the page says it prints.
#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    expected: Vec<String>,
    /// What another client runs once a subscribing command is subscribed.
    meanwhile: Option<String>,
    /// A python block's code (then `command` is empty).
    python: Option<String>,
}

/// The steps of every `console` block of `text`, in order.
fn transcript(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    let mut python: Option<(usize, String)> = None;
    let mut meanwhile: Option<String> = None;
    let mut block_meanwhile: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some((start, code)) = python.as_mut() {
            if trimmed == "```" {
                steps.push(Step {
                    line: *start,
                    command: String::new(),
                    expected: Vec::new(),
                    meanwhile: None,
                    python: Some(std::mem::take(code)),
                });
                python = None;
            } else {
                code.push_str(line);
                code.push('\n');
            }
            continue;
        }
        if !in_console && trimmed == "```python" {
            python = Some((i + 1, String::new()));
            continue;
        }
        if !in_console {
            if let Some(rest) = trimmed.strip_prefix("<!-- meanwhile:") {
                meanwhile = Some(rest.trim_end_matches("-->").trim().to_string());
            } else if trimmed == "```console" {
                in_console = true;
                block_meanwhile = meanwhile.take();
            } else if !trimmed.is_empty() {
                meanwhile = None;
            }
            continue;
        }
        if trimmed == "```" {
            in_console = false;
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                line: i + 1,
                command: command.to_string(),
                expected: Vec::new(),
                meanwhile: block_meanwhile.clone(),
                python: None,
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(without_comment(line));
        }
    }
    steps
}

/// A reply line without the page's explanation after it.
fn without_comment(line: &str) -> String {
    if line.trim_start().starts_with('#') {
        return line.trim_end().to_string();
    }
    let bytes = line.as_bytes();
    for (i, w) in bytes.windows(2).enumerate() {
        if w == b"# " && i > 0 && bytes[i - 1].is_ascii_whitespace() {
            return line[..i].trim_end().to_string();
        }
    }
    line.trim_end().to_string()
}

/// Whether `actual` is what the page's `expected` line shows, with `~N`
/// matching any integer.
fn line_matches(expected: &str, actual: &str) -> bool {
    let (mut e, mut a) = (expected.as_bytes(), actual.trim_end().as_bytes());
    loop {
        match (e.first(), a.first()) {
            (None, None) => return true,
            (Some(b'~'), _) => {
                // An integer at the front: its length and value.
                let number = |s: &[u8]| -> Option<(usize, i128)> {
                    let sign = usize::from(s.first() == Some(&b'-'));
                    let n = s[sign..].iter().take_while(|b| b.is_ascii_digit()).count();
                    let text = std::str::from_utf8(&s[..sign + n]).ok()?;
                    Some((sign + n, text.parse().ok()?))
                };
                let (Some((le, shown)), Some((la, got))) = (number(&e[1..]), number(a)) else {
                    return false;
                };
                let close =
                    shown.signum() == got.signum() && (got - shown).abs() * 2 <= shown.abs();
                if !close {
                    return false;
                }
                e = &e[1 + le..];
                a = &a[la..];
            }
            (Some(x), Some(y)) if x == y => {
                e = &e[1..];
                a = &a[1..];
            }
            _ => return false,
        }
    }
}

/// Whether the output matches the expected lines (`…` for any lines).
fn output_matches(expected: &[String], actual: &[String]) -> bool {
    let expected: Vec<&String> = expected.iter().filter(|l| !l.is_empty()).collect();
    let actual: Vec<&String> = actual.iter().filter(|l| !l.trim().is_empty()).collect();
    fn go(e: &[&String], a: &[&String]) -> bool {
        match e.split_first() {
            None => a.is_empty(),
            Some((first, rest)) if first.trim() == "…" => {
                (0..=a.len()).any(|k| go(rest, &a[k..]))
            }
            Some((first, rest)) => a
                .split_first()
                .is_some_and(|(x, more)| line_matches(first, x) && go(rest, more)),
        }
    }
    go(&expected, &actual)
}

/// A folder holding `redis-cli`, a wrapper that talks to `port`.
fn cli_wrapper(port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = stdout_of(
        Command::new("bash").args(["-c", "command -v redis-cli"]),
        "redis-cli (make deps installs redis-tools)",
    );
    let path = dir.path().join("redis-cli");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nexec {} --no-raw -p {port} \"$@\"\n",
            real.trim()
        ),
    )
    .expect("write the wrapper");
    Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .expect("chmod");
    dir
}

fn shell(command: &str, port: u16, wrapper: &Path) -> Command {
    let path = format!(
        "{}:{}",
        wrapper.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("timeout");
    cmd.arg(STEP_DEADLINE_S)
        .arg("bash")
        .arg("-c")
        .arg(command.replace("6379", &port.to_string()))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path)
        .env("PYTHON", python());
    cmd
}

/// Runs a step; its output lines.
fn run(step: &Step, port: u16, wrapper: &Path) -> Vec<String> {
    let subscribes = step.command.to_ascii_uppercase().contains("SUBSCRIBE ");
    if !subscribes {
        let out = shell(&step.command, port, wrapper)
            .output()
            .unwrap_or_else(|e| panic!("line {}: run {}: {e}", step.line, step.command));
        assert!(
            out.status.success(),
            "line {}: `{}` exited {:?}: {}",
            step.line,
            step.command,
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        lines.extend(
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .map(|l| format!("stderr: {l}")),
        );
        return lines;
    }
    // A subscriber: read its confirmation, let another client act, read
    // as many lines as the page shows (each read with a deadline).
    let mut child = shell(&step.command, port, wrapper)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the subscriber");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let want = step.expected.iter().filter(|l| !l.is_empty()).count();
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut acted = false;
    while lines.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        // The confirmation ends with the subscription count; then the
        // other client acts.
        let confirmed = line.starts_with("3) (integer)");
        lines.push(line);
        if confirmed && !acted {
            acted = true;
            if let Some(meanwhile) = &step.meanwhile {
                let out = shell(meanwhile, port, wrapper).output().expect("meanwhile");
                assert!(out.status.success(), "meanwhile: {meanwhile}");
            }
        }
    }
    // Nothing more may arrive (an event the page does not show).
    if let Ok(extra) = rx.recv_timeout(Duration::from_millis(300)) {
        lines.push(extra);
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// Runs a python block against `port`: `redis.Redis` is given the port.
fn run_python(step: &Step, code: &str, port: u16, page: &Path) {
    let prelude = format!(
        "import functools, redis\nredis.Redis = functools.partial(redis.Redis, port={port})\n"
    );
    let out = Command::new("timeout")
        .arg(STEP_DEADLINE_S)
        .arg(python())
        .arg("-c")
        .arg(format!(
            "{prelude}{}",
            code.replace("6379", &port.to_string())
        ))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the project's python");
    assert!(
        out.status.success(),
        "{}:{}: the python block failed\n{code}\n--- stdout:\n{}\n--- stderr:\n{}",
        page.display(),
        step.line,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs every transcript of `page` on a fresh server.
fn check_page(flavor: Flavor, page: &Path) -> usize {
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{page:?}: {e}"));
    let steps = transcript(&text);
    let server = Options::new(flavor).start();
    let wrapper = cli_wrapper(server.port);
    for step in &steps {
        if let Some(code) = &step.python {
            run_python(step, code, server.port, page);
            continue;
        }
        let actual = run(step, server.port, wrapper.path());
        assert!(
            output_matches(&step.expected, &actual),
            "{}:{}: `{}` on {}\n--- the page shows:\n{}\n--- the server gave:\n{}\n",
            page.display(),
            step.line,
            step.command,
            flavor.name(),
            step.expected.join("\n"),
            actual.join("\n")
        );
    }
    steps.len()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, the Python client's README, then every page of docs/ (the
/// reference, the guides), each on its own fresh server.
fn pages(flavor: Flavor) {
    let mut pages = vec![
        root().join("README.md"),
        root().join("clients/python/README.md"),
    ];
    if let Ok(entries) = std::fs::read_dir(root().join("docs")) {
        let mut more: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        more.sort();
        pages.extend(more);
    }
    let readme = root().join("README.md");
    let mut total = 0;
    for page in &pages {
        let n = check_page(flavor, page);
        if *page == readme {
            // The quick start's transcript and the client's first call.
            assert!(n >= 5, "README.md has {n} transcript steps");
        }
        total += n;
        eprintln!("docs ({flavor:?}): {}, {n} steps matched", page.display());
    }
    // The README held 20 steps before its guides moved to docs/: each is
    // still found and run.
    assert!(
        total >= 20,
        "{} pages have {total} transcript steps",
        pages.len()
    );
}

#[test]
fn the_matching_rules_can_fail() {
    // Comments are dropped, section headers kept.
    assert_eq!(
        without_comment("(integer) 1        # allowed"),
        "(integer) 1"
    );
    assert_eq!(without_comment("# slidewin_stats"), "# slidewin_stats");
    assert_eq!(without_comment(r#"2) "a#b""#), r#"2) "a#b""#);
    // `~` matches any integer, and only an integer.
    assert!(line_matches("4) (integer) ~8980", "4) (integer) 8975"));
    assert!(line_matches("4) (integer) ~8980", "4) (integer) 10000"));
    // Not any integer: the same sign, within half of the shown value.
    assert!(!line_matches("4) (integer) ~8980", "4) (integer) -1"));
    assert!(!line_matches("4) (integer) ~8980", "4) (integer) 0"));
    assert!(!line_matches("4) (integer) ~8980", "4) (integer) 20000"));
    assert!(!line_matches("4) (integer) ~8980", "4) (integer) x"));
    assert!(!line_matches("4) (integer) 8980", "4) (integer) 8975"));
    assert!(line_matches(
        r#"2) "~1796018543916""#,
        r#"2) "1796161234567""#
    ));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(output_matches(
        &s(&["a", "…", "z"]),
        &s(&["a", "b", "c", "z"])
    ));
    assert!(output_matches(&s(&["a", "…"]), &s(&["a"])));
    assert!(!output_matches(&s(&["a", "z"]), &s(&["a", "b", "z"])));
    assert!(!output_matches(&s(&["a"]), &s(&[])));
    let steps = transcript(
        "text\n<!-- meanwhile: redis-cli X -->\n```console\n$ redis-cli A   # why\n1) \"1\"   # the member\n$ B\n```\n",
    );
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|s| s.python.is_none()));
    let py = transcript("```python\nprint(1)\n```\n");
    assert_eq!(py[0].python.as_deref(), Some("print(1)\n"));
    assert_eq!(steps[0].expected, ["1) \"1\""]);
    assert_eq!(steps[0].meanwhile.as_deref(), Some("redis-cli X"));
    assert!(steps[1].expected.is_empty());
}
