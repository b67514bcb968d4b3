//! The clients: a small cluster client (a slot map, MOVED/ASK followed,
//! CLUSTERDOWN and broken connections retried with a fresh map, every call
//! bounded) and the load each client drives, every call logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, ErrorKind, RedisError, ServerErrorKind, Value};

use crate::nodes::connect;
use crate::support::wall_ms;
use crate::{
    Config, ACTIVE_KEYS, CALL_DEADLINE, KEYS_PER_SECOND, LIMIT, MAX_CALLS_PER_CLIENT, PACE,
    WAIT_MS, WINDOW_MS,
};

pub(crate) fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The key's slot (the keys here carry no hash tag).
pub(crate) fn slot(key: &str) -> usize {
    (crc16(key.as_bytes()) % 16384) as usize
}

#[derive(Default, Debug, Clone)]
pub(crate) struct RouterStats {
    pub(crate) moved: u64,
    pub(crate) ask: u64,
    pub(crate) clusterdown: u64,
    pub(crate) io_errors: u64,
    pub(crate) refreshes: u64,
}

pub(crate) struct Router {
    addrs: Vec<String>,
    pub(crate) slots: Vec<Option<usize>>,
    conns: HashMap<usize, Connection>,
    next_seed: usize,
    stats: RouterStats,
}

impl Router {
    pub(crate) fn new(addrs: Vec<String>, seed: usize) -> Router {
        let mut r = Router {
            addrs,
            slots: vec![None; 16384],
            conns: HashMap::new(),
            next_seed: seed,
            stats: RouterStats::default(),
        };
        r.refresh();
        r
    }

    fn index_of(&self, host_port: &str) -> Option<usize> {
        let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
        self.addrs.iter().position(|a| a == host)
    }

    pub(crate) fn conn(&mut self, i: usize) -> redis::RedisResult<&mut Connection> {
        if !self.conns.contains_key(&i) {
            let c = connect(&self.addrs[i], Duration::from_millis(500))?;
            self.conns.insert(i, c);
        }
        Ok(self.conns.get_mut(&i).unwrap())
    }

    /// CLUSTER SLOTS from the next node that answers (they take turns, so a
    /// partitioned node's stale view is not asked twice in a row).
    fn refresh(&mut self) {
        self.stats.refreshes += 1;
        for _ in 0..self.addrs.len() {
            let i = self.next_seed % self.addrs.len();
            self.next_seed += 1;
            let Ok(c) = self.conn(i) else {
                self.conns.remove(&i);
                continue;
            };
            let Ok(Value::Array(ranges)) = redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(c)
            else {
                self.conns.remove(&i);
                continue;
            };
            for range in ranges {
                let Value::Array(f) = range else { continue };
                let (Some(Value::Int(a)), Some(Value::Int(b)), Some(Value::Array(m))) =
                    (f.first(), f.get(1), f.get(2))
                else {
                    continue;
                };
                let host = match m.first() {
                    Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                    Some(Value::SimpleString(h)) => h.clone(),
                    _ => continue,
                };
                let owner = self.index_of(&host);
                for s in *a..=*b {
                    self.slots[s as usize] = owner;
                }
            }
            return;
        }
    }

    /// Sends `cmd` (about `key`) to the key's owner, following redirects;
    /// returns the reply and the node that gave it (or the last error).
    fn call(&mut self, key: &str, cmd: &redis::Cmd) -> (redis::RedisResult<Value>, Option<usize>) {
        let s = slot(key);
        let deadline = Instant::now() + CALL_DEADLINE;
        let mut ask: Option<usize> = None;
        let mut last: RedisError = RedisError::from((ErrorKind::Io, "no attempt"));
        let mut last_node = None;
        for _attempt in 0..12 {
            if Instant::now() >= deadline {
                break;
            }
            let target = match ask.or(self.slots[s]) {
                Some(t) => t,
                None => {
                    self.refresh();
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            last_node = Some(target);
            let reply = match self.conn(target) {
                Err(e) => Err(e),
                Ok(c) => {
                    if ask.take().is_some() {
                        redis::pipe()
                            .cmd("ASKING")
                            .ignore()
                            .add_command(cmd.clone())
                            .query::<Vec<Value>>(c)
                            .map(|mut v| v.pop().unwrap_or(Value::Nil))
                    } else {
                        cmd.query::<Value>(c)
                    }
                }
            };
            match reply {
                Ok(v) => return (Ok(v), Some(target)),
                Err(e) => {
                    match e.kind() {
                        ErrorKind::Server(ServerErrorKind::Moved) => {
                            self.stats.moved += 1;
                            let to = e.redirect_node().and_then(|(a, _)| self.index_of(a));
                            self.slots[s] = to;
                            if to.is_none() {
                                self.refresh();
                            }
                        }
                        ErrorKind::Server(ServerErrorKind::Ask) => {
                            self.stats.ask += 1;
                            ask = e.redirect_node().and_then(|(a, _)| self.index_of(a));
                        }
                        ErrorKind::Server(
                            ServerErrorKind::ClusterDown
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::MasterDown,
                        ) => {
                            self.stats.clusterdown += 1;
                            thread::sleep(Duration::from_millis(50));
                            self.refresh();
                        }
                        _ if e.is_io_error()
                            || e.is_timeout()
                            || e.is_connection_dropped()
                            || e.is_connection_refusal() =>
                        {
                            self.stats.io_errors += 1;
                            self.conns.remove(&target);
                            thread::sleep(Duration::from_millis(20));
                            self.refresh();
                        }
                        // NOREPLICAS and anything else: the answer.
                        _ => return (Err(e), Some(target)),
                    }
                    last = e;
                }
            }
        }
        (Err(last), last_node)
    }
}

// ---------------------------------------------------------------------------
// The clients.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Acted on: a `1` (configurations a and b), a `1` WAIT confirmed (c).
    Granted,
    Denied,
    /// (b): the master refused the write.
    NoReplicas,
    /// (c): a `1` WAIT did not confirm (then undone).
    Unconfirmed,
    /// No answer within the call's bounds (CLUSTERDOWN, timeouts, ...).
    Error,
}

#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) key: u64,
    pub(crate) sent_ms: i64,
    pub(crate) received_ms: i64,
    pub(crate) node: Option<usize>,
    pub(crate) outcome: Outcome,
    pub(crate) member: Option<String>,
}

pub(crate) fn key_name(tag: &str, k: u64) -> String {
    format!("pw:{tag}:{k}")
}

/// The reply of CHECK ... WITHMEMBERS: allowed and the members added.
fn parse_check(v: &Value) -> Option<(bool, Vec<String>)> {
    let Value::Array(f) = v else { return None };
    let allowed = matches!(f.first(), Some(Value::Int(1)));
    let members = match f.last() {
        Some(Value::Array(m)) => m
            .iter()
            .filter_map(|x| match x {
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::SimpleString(s) => Some(s.clone()),
                Value::Int(i) => Some(i.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((allowed, members))
}

pub(crate) fn client(
    addrs: Vec<String>,
    seed: usize,
    tag: String,
    config: Config,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<(Vec<Call>, RouterStats)> {
    thread::spawn(move || {
        let mut router = Router::new(addrs, seed);
        let mut calls = Vec::new();
        let mut rng_state: u64 =
            0x9E37_79B9_7F4A_7C15 ^ (seed as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let hard_stop = start + Duration::from_secs(120);
        while !stop.load(Ordering::Relaxed)
            && calls.len() < MAX_CALLS_PER_CLIENT
            && Instant::now() < hard_stop
        {
            // xorshift: which of the active keys.
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            let newest = ACTIVE_KEYS + start.elapsed().as_millis() as u64 * KEYS_PER_SECOND / 1000;
            let k = newest - ACTIVE_KEYS + rng_state % ACTIVE_KEYS;
            let key = key_name(&tag, k);
            let mut cmd = redis::cmd("SLIDEWIN.CHECK");
            cmd.arg(&key).arg(LIMIT).arg(WINDOW_MS).arg("WITHMEMBERS");
            let sent_ms = wall_ms();
            let (reply, node) = router.call(&key, &cmd);
            let received_ms = wall_ms();
            let (outcome, member) = match reply {
                Ok(v) => match parse_check(&v) {
                    Some((true, m)) => {
                        let member = m.into_iter().next();
                        if config == Config::Wait {
                            // On the connection that made the write, never a
                            // new one: WAIT on a connection that wrote
                            // nothing returns at once with every replica.
                            let confirmed = node.is_some_and(|n| {
                                router.conns.get_mut(&n).is_some_and(|c| {
                                    redis::cmd("WAIT")
                                        .arg(1)
                                        .arg(WAIT_MS)
                                        .query::<i64>(c)
                                        .is_ok_and(|r| r >= 1)
                                })
                            });
                            if confirmed {
                                (Outcome::Granted, member)
                            } else {
                                // Give it back where it was taken (best effort).
                                if let (Some(n), Some(m)) = (node, &member) {
                                    if let Ok(c) = router.conn(n) {
                                        let _ = redis::cmd("SLIDEWIN.UNDO")
                                            .arg(&key)
                                            .arg(m)
                                            .query::<i64>(c);
                                    }
                                }
                                (Outcome::Unconfirmed, member)
                            }
                        } else {
                            (Outcome::Granted, member)
                        }
                    }
                    Some((false, _)) => (Outcome::Denied, None),
                    None => (Outcome::Error, None),
                },
                Err(e) if e.code() == Some("NOREPLICAS") => (Outcome::NoReplicas, None),
                Err(_) => (Outcome::Error, None),
            };
            calls.push(Call {
                key: k,
                sent_ms,
                received_ms,
                node,
                outcome,
                member,
            });
            thread::sleep(PACE);
        }
        (calls, router.stats)
    })
}
