//! Short forms of the commands tests run and read: SLIDEWIN calls, the
//! entries of a log whichever type holds it, INFO fields, digests, errors
//! as a client prints them, and waiting for a condition.

use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::Connection;

use super::compact_decode::compact_entries;

/// The client's wall clock in ms (the same clock as the server's on this
/// machine), to bracket a call's server time by its send and receive.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep(Duration::from_millis(20));
    }
}

/// One field of `INFO <section>` as a string.
pub fn info_field(c: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    info.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// `CONFIG SET name value`, which must succeed.
pub fn config_set(c: &mut Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
        .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
}

/// `ZCARD key`, or the entries of a compact log.
pub fn zcard(c: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let name = key.to_redis_args().concat();
    let kind: String = redis::cmd("TYPE").arg(&name).query(c).expect("TYPE");
    if kind == "slidewlog" {
        return entries(c, &name).len() as i64;
    }
    redis::cmd("ZCARD").arg(&name).query(c).expect("ZCARD")
}

/// `PEXPIRETIME key`: when the key expires, in ms (-1: never, -2: no key).
pub fn pexpiretime(c: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(c)
        .expect("PEXPIRETIME")
}

/// `EXISTS key` as a bool.
pub fn exists(c: &mut Connection, key: impl redis::ToRedisArgs) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(c)
        .expect("EXISTS")
        == 1
}

/// `"CODE detail"` of a server error, as a client library prints it raw.
pub fn error_text(e: &redis::RedisError) -> String {
    // A pipeline's one failure carries its code and detail inside it
    // (redis-rs 1.x: `detail()` is None on the pipeline's error).
    if e.detail().is_none() {
        if let Some(items) = e.clone().into_server_errors() {
            if let [(_, server)] = &items[..] {
                return match server.details() {
                    Some(detail) => format!("{} {detail}", server.code()),
                    None => server.code().to_string(),
                };
            }
        }
    }
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs SLIDEWIN.CHECK with raw byte arguments.
pub fn check_raw(c: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<i64> {
    let mut cmd = redis::cmd("SLIDEWIN.CHECK");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// Runs a SLIDEWIN command with string arguments, returning the raw reply.
pub fn slidewin(
    c: &mut Connection,
    command: &str,
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(command);
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// Runs a SLIDEWIN command that must reply with the five-field array.
pub fn detail(c: &mut Connection, command: &str, args: &[&str]) -> [i64; 5] {
    let v: Vec<i64> = redis::cmd(command)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("{command} {args:?}: {e}"));
    v.try_into()
        .unwrap_or_else(|v| panic!("{command} {args:?}: not five fields: {v:?}"))
}

/// Runs `SLIDEWIN.CHECK key limit window_ms`.
pub fn check(c: &mut Connection, key: &str, limit: i64, window_ms: i64) -> i64 {
    redis::cmd("SLIDEWIN.CHECK")
        .arg(key)
        .arg(limit)
        .arg(window_ms)
        .query(c)
        .expect("SLIDEWIN.CHECK")
}

/// The server's clock (TIME) in milliseconds.
pub fn server_ms(c: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    secs * 1000 + micros / 1000
}

/// When `key` expires, as a server time in ms (from TIME and PTTL: Redis
/// 6.2 has no PEXPIRETIME); PTTL's -1 (no expiry) and -2 (no key) as they are.
pub fn expires_at(c: &mut Connection, key: &str) -> i64 {
    let (now, pttl): (Vec<i64>, i64) = redis::pipe()
        .cmd("TIME")
        .cmd("PTTL")
        .arg(key)
        .query(c)
        .expect("TIME, PTTL");
    if pttl < 0 {
        return pttl;
    }
    now[0] * 1000 + now[1] / 1000 + pttl
}

/// The member inside a WITHMEMBERS token `<id>@<ms>` (what the key
/// stores); anything else as it is.
pub fn token_member(token: &[u8]) -> Vec<u8> {
    match token.iter().position(|&b| b == b'@') {
        Some(at) => token[..at].to_vec(),
        None => token.to_vec(),
    }
}

/// Members and scores of a sorted set, lowest score first.
pub fn entries(c: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
    let kind: String = redis::cmd("TYPE").arg(key).query(c).expect("TYPE");
    if kind == "slidewlog" {
        return compact_entries(c, key);
    }
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE")
}

pub fn digest(c: &mut Connection) -> String {
    redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(c)
        .expect("DEBUG DIGEST")
}

/// `DEBUG DIGEST-VALUE key`, joined: the value's digest (it covers whether
/// the key expires).
pub fn digest_value(c: &mut Connection, key: &str) -> String {
    let v: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .expect("DEBUG DIGEST-VALUE");
    v.join(",")
}
