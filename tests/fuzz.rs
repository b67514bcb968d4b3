//! Live fuzzing: thousands of random argument vectors against a running
//! server with a replica (without the module). Every reply must be a valid
//! reply or an error, the server must stay up, keys outside the fuzzed pool
//! must stay untouched, and the replica must end with the same data.

mod support;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use support::*;

on_every_server! {
    random_argument_vectors_never_hurt_the_server => fuzz;
}

const CALLS: usize = 4000;

/// Keys the fuzzer may touch: missing ones, sorted sets it creates, and keys
/// of other types (which must answer WRONGTYPE and stay as they are).
const POOL: &[&[u8]] = &[
    b"fz:a",
    b"fz:b",
    b"fz:\xff\x00bin",
    b"",
    b"fz:str",
    b"fz:list",
    b"fz:hash",
];

/// Keys the fuzzer never names.
const SENTINELS: &[&str] = &["keep:str", "keep:zset", "keep:list"];

fn number(rng: &mut StdRng) -> Vec<u8> {
    let choices: &[&str] = &[
        "0",
        "1",
        "5",
        "-1",
        "100000",
        "100001",
        "31622400000",
        "31622400001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "99999999999999999999999999",
        "1.5",
        "1e3",
        "nan",
        "inf",
        "-inf",
        "+5",
        "05",
        " 5",
        "0x10",
    ];
    match rng.random_range(0..5) {
        0 => choices[rng.random_range(0..choices.len())]
            .as_bytes()
            .to_vec(),
        4 => b"100000".to_vec(),
        // Small valid windows expire quickly; large ones outlive the test.
        1 => rng.random_range(1..=50i64).to_string().into_bytes(),
        2 => rng
            .random_range(3_600_000..=31_622_400_000i64)
            .to_string()
            .into_bytes(),
        _ => rng.random_range(-1_000i64..1_000).to_string().into_bytes(),
    }
}

fn token(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => b"COST".to_vec(),
        1 => b"cost".to_vec(),
        2 => b"DETAIL".to_vec(),
        3 => b"detail".to_vec(),
        4 => Vec::new(),
        5 => (0..rng.random_range(1..24)).map(|_| rng.random()).collect(),
        6 => b"\xc3\x28\xff".to_vec(),
        _ => number(rng),
    }
}

fn argv(rng: &mut StdRng) -> (String, Vec<Vec<u8>>) {
    let command = match rng.random_range(0..4) {
        0 => "SLIDEWIN.PEEK",
        1 => "slidewin.check",
        _ => "SLIDEWIN.CHECK",
    }
    .to_string();
    let mut args = Vec::new();
    let shape = rng.random_range(0..10);
    if shape > 0 {
        args.push(POOL[rng.random_range(0..POOL.len())].to_vec());
    }
    if shape > 1 {
        // Mostly well-formed limit and window, sometimes not.
        if rng.random_bool(0.7) {
            args.push(rng.random_range(1..=8i64).to_string().into_bytes());
        } else {
            args.push(token(rng));
        }
        args.push(number(rng));
    }
    match rng.random_range(0..10) {
        0..=4 => {}
        5..=7 => {
            // Well-formed options, sometimes repeated.
            for _ in 0..rng.random_range(1..=2) {
                if rng.random_bool(0.5) {
                    args.push(b"COST".to_vec());
                    args.push(rng.random_range(1..=6i64).to_string().into_bytes());
                } else {
                    args.push(b"detail".to_vec());
                }
            }
        }
        _ => {
            for _ in 0..rng.random_range(1..5) {
                args.push(token(rng));
            }
        }
    }
    (command, args)
}

fn valid_reply(v: &Value) -> bool {
    match v {
        Value::Int(0 | 1) => true,
        Value::Array(items) => {
            items.len() == 5
                && items.iter().all(|i| matches!(i, Value::Int(_)))
                && matches!(items[0], Value::Int(0 | 1))
        }
        _ => false,
    }
}

fn digest_value(c: &mut Connection, key: &str) -> Value {
    redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(c)
        .unwrap()
}

fn fuzz(flavor: Flavor) {
    let master = Options::new(flavor).start();
    let replica = replica_without_module(&master, flavor);
    let mut c = master.conn();
    let _: () = redis::cmd("SET")
        .arg("fz:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("fz:list")
        .arg("a")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("fz:hash")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("keep:str")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("keep:zset")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("keep:list")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let kept: Vec<Value> = SENTINELS.iter().map(|k| digest_value(&mut c, k)).collect();
    let typed: Vec<Value> = ["fz:str", "fz:list", "fz:hash"]
        .iter()
        .map(|k| digest_value(&mut c, k))
        .collect();

    let mut rng = StdRng::seed_from_u64(0x5eed_f022);
    let (mut ok, mut errors) = (0, 0);
    for i in 0..CALLS {
        let (command, args) = argv(&mut rng);
        let mut cmd = redis::cmd(&command);
        for a in &args {
            cmd.arg(a.as_slice());
        }
        match cmd.query::<Value>(&mut c) {
            Ok(v) => {
                assert!(
                    valid_reply(&v),
                    "call {i}: {command} {args:?} replied {v:?}"
                );
                ok += 1;
            }
            Err(e) if e.code().is_some() => {
                let text = error_text(&e);
                assert!(
                    text.starts_with("ERR ") || text.starts_with("WRONGTYPE "),
                    "call {i}: {command} {args:?}: unexpected error {text}"
                );
                errors += 1;
            }
            Err(e) => panic!("call {i}: {command} {args:?}: the connection failed: {e}"),
        }
    }
    assert!(
        ok > 100 && errors > 100,
        "both replies and errors seen: {ok} / {errors}"
    );
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG", "the server is up");
    let kept_after: Vec<Value> = SENTINELS.iter().map(|k| digest_value(&mut c, k)).collect();
    assert_eq!(kept_after, kept, "keys outside the pool are untouched");
    let typed_after: Vec<Value> = ["fz:str", "fz:list", "fz:hash"]
        .iter()
        .map(|k| digest_value(&mut c, k))
        .collect();
    assert_eq!(typed_after, typed, "keys of other types are untouched");

    // Windows under a second expire quickly (the others outlive the test);
    // let them go (touching a key
    // deletes it if expired and propagates the deletion), then compare.
    std::thread::sleep(Duration::from_millis(1100));
    for k in POOL {
        let _: i64 = redis::cmd("EXISTS").arg(*k).query(&mut c).unwrap();
    }
    wait_caught_up(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(
        digest(&mut c),
        digest(&mut r),
        "the replica has the same data"
    );
    eprintln!("fuzz ({flavor:?}): {CALLS} calls, {ok} replies, {errors} errors");
}
