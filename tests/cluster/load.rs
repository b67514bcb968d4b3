//! The load a slot's move runs under: clients calling CHECK and MCHECK
//! on keys of one slot, following MOVED, ASK and TRYAGAIN as a cluster
//! client does, and the check of what the new owner holds against what
//! they were told.

use std::collections::HashMap;
use std::time::Duration;

use rand::Rng;
use redis::Value;

use crate::support::*;

/// One call of the migration load as its client saw it.
pub(crate) struct AsmCall {
    /// Indices into the load's keys.
    keys: Vec<usize>,
    pub(crate) allowed: bool,
    members: Vec<Vec<u8>>,
    pub(crate) sent_ms: i64,
    pub(crate) received_ms: i64,
}

/// What one client of the migration load saw.
#[derive(Default)]
pub(crate) struct AsmClient {
    pub(crate) calls: Vec<AsmCall>,
    pub(crate) moved: usize,
    pub(crate) asked: usize,
    pub(crate) tryagain: usize,
}

/// Room for allowed calls long after the slot moved; a few hot keys take a
/// fifth of the calls, so denials start at once.
pub(crate) const ASM_KEYS: usize = 4096;
const ASM_HOT_KEYS: usize = 16;
pub(crate) const ASM_LIMIT: usize = 8;

/// Allowed and denied calls of the migration load so far, over its clients.
#[derive(Default)]
struct AsmProgress {
    allowed: std::sync::atomic::AtomicUsize,
    denied: std::sync::atomic::AtomicUsize,
    /// Set once the move starts: from then on each client waits
    /// `ASM_PACED` between calls. At full speed 16 clients used up the
    /// keys' whole capacity (4,096 keys x 8) while a slow move ran, and no
    /// call could be allowed after it (seen: 26,312 allowed, 3.7M denied);
    /// paced, the load goes on through the move and leaves room after it.
    paced: std::sync::atomic::AtomicBool,
}

/// The pause between a client's calls once the move started (16 clients:
/// at most 800 calls a second).
const ASM_PACED: Duration = Duration::from_millis(20);

impl AsmProgress {
    fn get(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.allowed.load(Relaxed), self.denied.load(Relaxed))
    }
}
pub(crate) const ASM_WINDOW_MS: i64 = 600_000;

pub(crate) fn asm_key(i: usize) -> String {
    load_key("asm", i)
}

/// Key `i` of a load whose keys share the hash tag `tag` (one slot).
pub(crate) fn load_key(tag: &str, i: usize) -> String {
    format!("{{{tag}}}load:{i}")
}

/// CHECKs and two-rule MCHECKs on `{asm}` keys until `stop`, sent to the
/// node the client believes owns the slot, following MOVED (and ASK, and
/// retrying TRYAGAIN) as a cluster client does; any other error fails.
fn asm_client(
    ports: Vec<u16>,
    mut owner: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    progress: std::sync::Arc<AsmProgress>,
    tag: String,
) -> std::thread::JoinHandle<AsmClient> {
    std::thread::spawn(move || {
        let connect = |port: u16| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            let c = client
                .get_connection_with_timeout(Duration::from_secs(5))
                .unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c
        };
        let mut conns: HashMap<u16, Connection> = ports.iter().map(|&p| (p, connect(p))).collect();
        let mut rng = rand::rng();
        let mut seen = AsmClient::default();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            let pick = |rng: &mut rand::rngs::ThreadRng| {
                if rng.random_bool(0.2) {
                    rng.random_range(0..ASM_HOT_KEYS)
                } else {
                    rng.random_range(0..ASM_KEYS)
                }
            };
            let keys: Vec<usize> = if rng.random_bool(0.3) {
                let a = pick(&mut rng);
                vec![a, (a + 1 + rng.random_range(0..ASM_KEYS - 1)) % ASM_KEYS]
            } else {
                vec![pick(&mut rng)]
            };
            let mut cmd = if keys.len() == 1 {
                let mut cmd = redis::cmd("SLIDEWIN.CHECK");
                cmd.arg(load_key(&tag, keys[0]))
                    .arg(ASM_LIMIT)
                    .arg(ASM_WINDOW_MS);
                cmd
            } else {
                let mut cmd = redis::cmd("SLIDEWIN.MCHECK");
                cmd.arg(2);
                for &k in &keys {
                    cmd.arg(load_key(&tag, k)).arg(ASM_LIMIT).arg(ASM_WINDOW_MS);
                }
                cmd
            };
            cmd.arg("WITHMEMBERS");
            if progress.paced.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(ASM_PACED);
            }
            let mut asking = false;
            // MOVED and ASK are bounded by count (more means a loop);
            // TRYAGAIN by time: it lasts while the slot's keys move, which
            // under load can take seconds (seen: 200 tries 5 ms apart).
            let mut redirects = 0;
            let tryagain_until = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                assert!(redirects < 200, "a call was redirected 200 times");
                assert!(
                    std::time::Instant::now() < tryagain_until,
                    "a call got TRYAGAIN for 30 s"
                );
                let c = conns.get_mut(&owner).expect("a node of the cluster");
                let sent_ms = wall_ms();
                let reply = if asking {
                    redis::pipe()
                        .cmd("ASKING")
                        .ignore()
                        .add_command(cmd.clone())
                        .query::<(Value,)>(c)
                        .map(|(v,)| v)
                } else {
                    cmd.query::<Value>(c)
                };
                let received_ms = wall_ms();
                match reply {
                    Ok(Value::Array(items)) => {
                        let allowed = items.first() == Some(&Value::Int(1));
                        let counter = if allowed {
                            &progress.allowed
                        } else {
                            &progress.denied
                        };
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // The stored member of each token `<id>@<ms>`.
                        let members: Vec<Vec<u8>> = redis::from_redis_value_ref::<Vec<Vec<u8>>>(
                            items.last().expect("members"),
                        )
                        .expect("members")
                        .iter()
                        .map(|t| token_member(t))
                        .collect();
                        seen.calls.push(AsmCall {
                            keys: keys.clone(),
                            allowed,
                            members,
                            sent_ms,
                            received_ms,
                        });
                        break;
                    }
                    Ok(other) => panic!("not a WITHMEMBERS reply: {other:?}"),
                    Err(e) => {
                        let text = error_text(&e);
                        let port = |t: &str| -> u16 {
                            t.rsplit(':')
                                .next()
                                .and_then(|p| p.parse().ok())
                                .unwrap_or_else(|| panic!("a redirection: {t}"))
                        };
                        if text.starts_with("MOVED ") {
                            redirects += 1;
                            seen.moved += 1;
                            owner = port(&text);
                            asking = false;
                        } else if text.starts_with("ASK ") {
                            redirects += 1;
                            seen.asked += 1;
                            owner = port(&text);
                            asking = true;
                        } else if text.starts_with("TRYAGAIN") {
                            seen.tryagain += 1;
                            std::thread::sleep(Duration::from_millis(5));
                        } else {
                            panic!("a client got an error it cannot follow: {text}");
                        }
                    }
                }
            }
        }
        seen
    })
}

/// A log's entries (member, score) and expiry, sorted set or compact log
/// (support's `entries` reads a compact log from its DUMP payload).
pub(crate) fn entries_and_expiry(c: &mut Connection, key: &str) -> (Vec<(String, i64)>, i64) {
    let entries: Vec<(String, i64)> = entries(c, key.as_bytes())
        .into_iter()
        .map(|(m, s)| (String::from_utf8_lossy(&m).into_owned(), s as i64))
        .collect();
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    (entries, at)
}

/// The members allowed calls were given in one key, each with its call's
/// send and receive times (ms).
type GivenMembers = HashMap<Vec<u8>, (i64, i64)>;

/// What a load left on the node `tgt` that now owns its slot, checked
/// against what its clients were told: every member an allowed call got is
/// there, at a score within the call's time, and nothing else; no key holds
/// more than its limit; each expiry is the newest entry plus the window, or
/// up to `late_ms` later (never earlier). Returns the members given per key
/// and the entries checked.
pub(crate) fn assert_load_on(
    tgt: &mut Connection,
    calls: &[&AsmCall],
    tag: &str,
    late_ms: i64,
) -> (Vec<GivenMembers>, usize) {
    let mut given: Vec<GivenMembers> = vec![HashMap::new(); ASM_KEYS];
    for c in calls.iter().filter(|c| c.allowed) {
        assert_eq!(c.members.len(), 1, "cost 1");
        for &k in &c.keys {
            let earlier = given[k].insert(c.members[0].clone(), (c.sent_ms, c.received_ms));
            assert!(
                earlier.is_none(),
                "{}: a member given twice",
                load_key(tag, k)
            );
        }
    }
    let mut entries_total = 0;
    for (k, members) in given.iter().enumerate() {
        let key = load_key(tag, k);
        let (entries, expiry) = entries_and_expiry(tgt, &key);
        assert!(
            entries.len() <= ASM_LIMIT,
            "{key}: {} entries",
            entries.len()
        );
        assert_eq!(
            entries.len(),
            members.len(),
            "{key}: entries vs allowed calls"
        );
        for (member, score) in &entries {
            let (sent, received) = members
                .get(member.as_bytes())
                .unwrap_or_else(|| panic!("{key}: {member} was never given"));
            assert!(
                (sent - 1..=received + 1).contains(score),
                "{key}: {member} scored {score}, the call ran {sent}..{received}"
            );
        }
        if let Some(newest) = entries.iter().map(|e| e.1).max() {
            let late = expiry - (newest + ASM_WINDOW_MS);
            assert!(
                (0..=late_ms).contains(&late),
                "{key}: expiry {expiry}, newest {newest}: {late} ms late"
            );
        }
        entries_total += entries.len();
    }
    (given, entries_total)
}

/// Runs `clients` load clients on the keys tagged `tag` (first sent to
/// `source`) and `move_slot` in the middle of their load, driven by counts,
/// not by time: the move starts once 1,000 calls were allowed and 200
/// denied, the load ends once 500 more were allowed after it, however fast
/// the machine is. Returns what each client saw and the wall-clock ms just
/// before and after the move.
pub(crate) fn drive_load(
    cluster: &Cluster,
    source: u16,
    tag: &str,
    clients: usize,
    what: &str,
    move_slot: impl FnOnce(),
) -> (Vec<AsmClient>, i64, i64) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = std::sync::Arc::new(AsmProgress::default());
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            asm_client(
                cluster.ports(),
                source,
                stop.clone(),
                progress.clone(),
                tag.to_string(),
            )
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(60), || {
            let (allowed, denied) = progress.get();
            allowed >= 1000 && denied >= 200
        }),
        "the load before the {what}: {:?}",
        progress.get()
    );
    progress
        .paced
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let started_ms = wall_ms();
    move_slot();
    let done_ms = wall_ms();
    let allowed_at_move = progress.get().0;
    assert!(
        wait_until(Duration::from_secs(60), || progress.get().0
            >= allowed_at_move + 500),
        "the load after the {what}: {:?}",
        progress.get()
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = handles
        .into_iter()
        .map(|c| c.join().expect("a load client"))
        .collect();
    (seen, started_ms, done_ms)
}
