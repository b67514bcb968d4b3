//! Programs and scripts beside the server: the FUNCTION library and its
//! EVAL form, Python (the examples, the client), any command's output.

use std::path::{Path, PathBuf};
use std::process::Command;

use redis::Connection;

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
