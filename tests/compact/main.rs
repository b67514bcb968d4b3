//! The compact log (`slidewin.log-type compact`) against real servers: the
//! same decisions as the sorted-set log, the data type's paths (replication
//! by effects, RDB, AOF rewrite, DUMP/RESTORE, COPY, RENAME, MOVE), the
//! effect command's checks, hostile RESTORE payloads, and the default mode
//! left exactly as it was.
//!
//! One test program (`cargo test --test compact`), by subject:
//! [`decisions`] (decisions, type, setting), [`paths`] (replication,
//! persistence, key moves, the effect command's and RESTORE's checks),
//! [`memory`] and [`charges`] (request ids). The tests are declared here,
//! so that their names are `<server>::<test>` whatever file holds them.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod charges;
mod decisions;
mod memory;
mod paths;

use charges::{charge_memory, few_charges, request_ids};
use decisions::{existing_zsets, module_type, same_decisions, setting};
use memory::{defrag, documented_sizes, memory, small_keys};
use paths::{apply_checks, hostile_restore, key_moves, persistence, replica_matches};
use redis::Value;
use support::*;

on_every_server! {
    decides_as_the_sorted_set_log_does => same_decisions;
    keys_are_of_the_module_type_and_other_commands_get_wrongtype => module_type;
    existing_sorted_sets_stay_sorted_sets => existing_zsets;
    a_replica_with_the_module_holds_the_same_logs => replica_matches;
    rdb_aof_and_dump_carry_the_log => persistence;
    copy_rename_move_and_swapdb_carry_the_log => key_moves;
    apply_checks_every_argument_and_changes_nothing_on_error => apply_checks;
    hostile_restore_payloads_are_refused => hostile_restore;
    the_setting_is_fixed_at_load_and_the_default_mode_is_unchanged => setting;
    memory_is_as_documented_and_frees_off_the_main_thread => memory;
    many_limit_5_keys_take_less_memory_than_as_sorted_sets => small_keys;
    active_defragmentation_moves_logs_and_keeps_them => defrag;
    request_ids_charge_once_and_travel_with_the_log => request_ids;
    charges_take_the_documented_memory => charge_memory;
    a_key_of_few_charges_is_small_and_travels => few_charges;
}

fn cmd(c: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut command = redis::cmd(args[0]);
    for a in &args[1..] {
        command.arg(*a);
    }
    command.query(c)
}

fn text(c: &mut Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Ok(v) => format!("{v:?}"),
        Err(e) => error_text(&e),
    }
}

fn key_type(c: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(c).expect("TYPE")
}

/// Replaces the two time-dependent fields of five-field replies (retry and
/// reset after) by their sign, so replies of two servers a few ms apart
/// compare.
fn shape(v: Value) -> Value {
    match v {
        Value::Array(items)
            if items.len() >= 5 && items.iter().take(5).all(|i| matches!(i, Value::Int(_))) =>
        {
            Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| match (i, x) {
                        (3 | 4, Value::Int(n)) => Value::Int(n.signum()),
                        (_, x) => shape(x),
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(shape).collect()),
        v => v,
    }
}

/// README's compact column gives, per size, the smallest and largest of
/// the four servers' figures in docs/compact-log.md's table (which the
/// servers' tests assert), so neither page drifts from the other.
#[test]
fn the_readme_prints_the_documented_memory() {
    let per_server: Vec<Vec<(usize, i64, i64)>> = [
        Flavor::Redis70,
        Flavor::Redis82,
        Flavor::Valkey81,
        Flavor::Valkey91,
    ]
    .into_iter()
    .map(documented_sizes)
    .collect();
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .expect("read README.md");
    let thousands = |v: i64| -> String {
        let digits = v.to_string();
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    let mut rows = 0;
    for line in readme
        .lines()
        .skip_while(|l| !l.starts_with("| entries in a key (its limit)"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let n: usize = cells[1].replace(',', "").parse().expect("entries");
        let sizes: Vec<i64> = per_server
            .iter()
            .map(|rows| {
                rows.iter()
                    .find(|r| r.0 == n)
                    .unwrap_or_else(|| panic!("no {n}-entry row in docs/compact-log.md"))
                    .1
            })
            .collect();
        let (lo, hi) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
        let want = format!("{}-{} B", thousands(lo), thousands(hi));
        assert!(
            cells[3].starts_with(&want),
            "README's {n}-entry compact figure {:?}: docs/compact-log.md gives {want}",
            cells[3]
        );
        rows += 1;
    }
    assert_eq!(rows, 4, "README's table of sizes");
}
