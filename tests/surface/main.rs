//! The full command surface on every server of the suite: DETAIL, COST,
//! PEEK, INFO counters, configuration, command metadata and ACLs.
//!
//! One test program (`cargo test --test surface`), by subject: [`detail`]
//! (DETAIL, COST, options, RESP3), [`peek`] (PEEK, keyspace events and
//! WATCH), [`config`] (INFO counters, configuration) and [`commands`]
//! (COMMAND INFO/DOCS, ACLs). The tests are declared here, so that their
//! names are `<server>::<test>` whatever file holds them.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod commands;
mod config;
mod detail;
mod peek;

use commands::{acl_categories, acl_dryrun, command_docs, command_info_docs};
use config::{bad_load_arguments, config_load_and_runtime, info_counters};
use detail::{
    cost_edges, detail_empty, detail_values, option_errors, options_parsing, resp3_detail,
};
use peek::{
    events_and_watch, peek_agrees_with_check, peek_on_replica, peek_writes_nothing, peek_wrongtype,
};
use redis::Value;
use support::*;

on_every_server! {
    detail_values_on_seeded_keys => detail_values;
    detail_on_an_empty_key => detail_empty;
    cost_edge_cases => cost_edges;
    options_in_any_order_and_case => options_parsing;
    option_errors_name_the_option => option_errors;
    peek_writes_nothing => peek_writes_nothing;
    peek_agrees_with_check => peek_agrees_with_check;
    peek_on_a_replica_while_check_is_readonly => peek_on_replica;
    peek_on_wrong_type => peek_wrongtype;
    info_counters => info_counters;
    config_from_load_arguments_and_at_runtime => config_load_and_runtime;
    bad_load_arguments_refuse_the_module => bad_load_arguments;
    command_info_gives_arity_flags_and_key_specs => command_info_docs;
    command_docs_describe_every_argument => command_docs;
    acl_categories_where_supported => acl_categories;
    acl_dryrun_and_key_permissions => acl_dryrun;
    resp3_detail_is_the_same_array => resp3_detail;
    keyspace_events_and_watch => events_and_watch;
}

/// Seeds `key` with entries `ages` ms older than the module's own clock,
/// then runs `command key args...` in the same script. Returns the clock
/// reading the entries were aged against and the command's reply.
const SEEDED: &str = r"
redis.call('SLIDEWIN.CHECK', KEYS[2], 100000, 100000)
local now = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('DEL', KEYS[2])
local n = tonumber(ARGV[1])
for i = 1, n do
  redis.call('ZADD', KEYS[1], now - tonumber(ARGV[1 + i]), 'seed-' .. i)
end
local args = {}
for i = n + 3, #ARGV do args[#args + 1] = ARGV[i] end
return {now, redis.call(ARGV[n + 2], KEYS[1], unpack(args))}
";

fn seeded(
    c: &mut Connection,
    key: &str,
    ages: &[i64],
    command: &str,
    args: &[&str],
) -> (i64, Value) {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(SEEDED)
        .arg(2)
        .arg(key)
        .arg(format!("{key}:probe"))
        .arg(ages.len());
    for a in ages {
        cmd.arg(*a);
    }
    cmd.arg(command).arg(args);
    let v: Vec<Value> = cmd.query(c).unwrap_or_else(|e| panic!("EVAL: {e}"));
    let now: i64 = redis::from_redis_value_ref(&v[0]).expect("now");
    (now, v[1].clone())
}

fn five(v: &Value) -> [i64; 5] {
    let v: Vec<i64> = redis::from_redis_value_ref(v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    v.try_into().expect("five fields")
}

/// Checks a DETAIL reply against the expected one. Servers that freeze the
/// module clock for a script must match exactly; on Redis 7.0 the clock may
/// tick between the seeding and the call, which shortens both waits by the
/// same few milliseconds.
fn assert_detail(frozen: bool, got: [i64; 5], expected: [i64; 5], what: &str) {
    if frozen || got == expected {
        assert_eq!(got, expected, "{what}");
        return;
    }
    assert_eq!(got[..3], expected[..3], "{what}: allowed, limit, remaining");
    let delta = expected[4] - got[4];
    assert!((0..50).contains(&delta), "{what}: {got:?} vs {expected:?}");
    if expected[3] > 0 {
        assert_eq!(
            expected[3] - got[3],
            delta,
            "{what}: retry and reset shift together"
        );
    } else {
        assert_eq!(got[3], expected[3], "{what}");
    }
}
