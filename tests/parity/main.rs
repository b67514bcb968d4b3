//! The FUNCTION library (lua/slidewin.lua) against the module: the same
//! random command sequences on the same server (the module on `{m}` keys,
//! the function on `{f}` keys) must give the same replies and sets. The
//! same again for the library's EVAL form (scripts/eval-script.sh: the same
//! Lua through EVALSHA) on every server, and on Redis 6.2, which has no
//! FUNCTION and cannot load the module: there the EVAL form's replies are
//! compared with the module's on Redis 7.0, each call sent to both servers
//! back to back.
//!
//! The two cannot read one clock: the module uses the server's cached
//! command time, the function TIME. Each pair runs back to back in one
//! MULTI, so the two `now`s differ by a millisecond or two (more on a loaded
//! machine); to keep that from ever flipping a decision, calls are made only
//! 20-60 ms into a 200 ms slot and every window is a whole number of slots
//! plus 100 ms, so no entry ever expires within 60 ms of a call. Decisions,
//! limits and remainders must then match exactly; waits and scores within
//! that slack.
//!
//! One test program (`cargo test --test parity`), by subject: [`errors`],
//! [`sequences`] (random sequences, shared keys), [`ids`] (request ids, the
//! fence) and [`compare`] (how two replies and two keys are compared). The
//! tests are declared here, so that their names are `<server>::<test>` (and
//! `redis_6_2::<test>`) whatever file holds them.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod compare;
mod errors;
mod ids;
mod sequences;

use errors::{errors, errors_on, eval_errors};
use ids::{eval_ids, fence, ids, ids_on};
use redis::Value;
use sequences::{eval_sequences, eval_shared_keys, sequences, sequences_on, shared_keys};
use support::*;

on_every_server! {
    errors_match_the_module => errors;
    random_sequences_match_the_module => sequences;
    function_and_module_share_live_keys => shared_keys;
    eval_errors_match_the_module => eval_errors;
    eval_random_sequences_match_the_module => eval_sequences;
    eval_and_module_share_live_keys => eval_shared_keys;
    request_ids_match_the_module => ids;
    eval_request_ids_match_the_module => eval_ids;
    a_token_undone_in_its_millisecond_names_no_later_entry => fence;
}

/// Redis 6.2 (no FUNCTION): the EVAL form there against the module on
/// Redis 7.0.
mod redis_6_2 {
    use super::*;

    #[test]
    fn eval_errors_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        errors_on(&mut pair);
    }

    #[test]
    fn eval_random_sequences_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        sequences_on(&mut pair);
    }

    #[test]
    fn eval_request_ids_match_the_module_on_redis_7_0() {
        let (_m, _e, mut pair) = Pair::redis_6_2();
        ids_on(&mut pair);
    }

    #[test]
    fn the_server_has_no_function_command() {
        let server = Options::new(Flavor::Redis62).without_module().start();
        let mut c = server.conn();
        let e = redis::cmd("FUNCTION")
            .arg("LIST")
            .query::<Value>(&mut c)
            .expect_err("Redis 6.2 has no FUNCTION");
        assert!(error_text(&e).contains("unknown command"), "{e:?}");
        // And the module refuses to load there (what the EVAL form is for).
        let log = Options::new(Flavor::Redis62).start_expecting_failure();
        assert!(log.contains("Module not loaded"), "{log}");
    }
}

/// How the library is called: through FCALL (its FUNCTION form) or EVALSHA
/// (its EVAL form, loaded under this sha1).
#[derive(Clone)]
enum Form {
    Function,
    Eval(String),
}

/// The module's side and the library's side of a comparison: one
/// connection (both on one server, each pair of calls in one MULTI) or two
/// (the library on another server, the two calls back to back).
struct Pair {
    m: Connection,
    other: Option<Connection>,
    form: Form,
}

impl Pair {
    /// Both sides on `c`'s server, the library loaded in `form`.
    fn one(mut c: Connection, eval: bool) -> Pair {
        let form = if eval {
            Form::Eval(load_eval_script(&mut c))
        } else {
            load_function_library(&mut c);
            Form::Function
        };
        Pair {
            m: c,
            other: None,
            form,
        }
    }

    /// The module on Redis 7.0, the EVAL form on Redis 6.2 (the servers
    /// are returned to be kept running).
    fn redis_6_2() -> (Server, Server, Pair) {
        let m = Options::new(Flavor::Redis70).start();
        let e = Options::new(Flavor::Redis62).without_module().start();
        let mut ec = e.conn();
        let sha = load_eval_script(&mut ec);
        let pair = Pair {
            m: m.conn(),
            other: Some(ec),
            form: Form::Eval(sha),
        };
        (m, e, pair)
    }

    /// The library's connection.
    fn lib(&mut self) -> &mut Connection {
        self.other.as_mut().unwrap_or(&mut self.m)
    }

    /// The module's call and the library's for the same request.
    fn query(&mut self, kind: &str, keys: &[String], args: &[String]) -> (Value, Value) {
        self.query_each(kind, keys, args, args)
    }

    /// The module's call with `m_args` and the library's with `f_args`
    /// (each side's own tokens).
    fn query_each(
        &mut self,
        kind: &str,
        keys: &[String],
        m_args: &[String],
        f_args: &[String],
    ) -> (Value, Value) {
        let args = m_args;
        let m = both(kind, keys, m_args, "m", &self.form);
        let f = both(kind, keys, f_args, "f", &self.form);
        match &mut self.other {
            None => redis::pipe()
                .atomic()
                .add_command(m)
                .add_command(f)
                .query(&mut self.m)
                .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}")),
            Some(other) => {
                let mv = m
                    .query(&mut self.m)
                    .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}"));
                let fv = f
                    .query(other)
                    .unwrap_or_else(|e| panic!("{kind} {keys:?} {args:?}: {e}"));
                (mv, fv)
            }
        }
    }
}

const SLACK_MS: i64 = 50;

/// A request id one byte over the longest (128 bytes).
const LONG_ID: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// Member ids from here up are wide (`ms << 20 | seq`), below short.
const WIDE_FROM: i64 = 1 << 20;

thread_local! {
    /// Short and wide member ids compared by this test's thread.
    static ID_KINDS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// The module's command and the library's call (FCALL, or EVALSHA with the
/// function's name first) for the same request. `keys` are the command's
/// keys (one, or MCHECK's rules' keys).
fn both(kind: &str, keys: &[String], args: &[String], prefix: &str, form: &Form) -> redis::Cmd {
    let with = |k: &String| format!("{{{prefix}}}{k}");
    match (prefix, kind) {
        ("m", "MCHECK") => {
            // numrules key limit window ...
            let mut cmd = redis::cmd("SLIDEWIN.MCHECK");
            cmd.arg(keys.len());
            for (i, k) in keys.iter().enumerate() {
                cmd.arg(with(k)).arg(&args[2 * i]).arg(&args[2 * i + 1]);
            }
            cmd.arg(&args[2 * keys.len()..]);
            cmd
        }
        ("m", _) => {
            let mut cmd = redis::cmd(&format!("SLIDEWIN.{kind}"));
            cmd.arg(with(&keys[0])).arg(args);
            cmd
        }
        (_, _) => {
            let function = format!("slidewin_{}", kind.to_lowercase());
            let mut cmd = match form {
                Form::Function => {
                    let mut cmd = redis::cmd("FCALL");
                    cmd.arg(&function).arg(keys.len());
                    cmd
                }
                Form::Eval(sha) => {
                    let mut cmd = redis::cmd("EVALSHA");
                    cmd.arg(sha).arg(keys.len());
                    cmd
                }
            };
            for k in keys {
                cmd.arg(with(k));
            }
            if matches!(form, Form::Eval(_)) {
                cmd.arg(&function);
            }
            cmd.arg(args);
            cmd
        }
    }
}
