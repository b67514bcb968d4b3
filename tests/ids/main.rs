//! Request ids (`ID <request-id>` on CHECK and MCHECK, `UNDO key ID`,
//! `SLIDEWIN.SETTLE`) and the tokens WITHMEMBERS hands out, on every server
//! of the suite: a repeated id is charged once, UNDO by id is exact and
//! idempotent, SETTLE moves a charge down, up past the limit and to zero,
//! a stale token never removes a later call's entry, and a replica and an
//! AOF replay reach the same data after each.
//!
//! One test program (`cargo test --test ids`), by subject: [`charges`]
//! (charged once, UNDO by id, stale tokens), [`settling`] (SETTLE, the
//! key's window, max-limit), [`replication`] (bad input, replicas and the
//! AOF) and [`members`] (what an id costs). The tests are declared here, so
//! that their names are `<server>::<test>` whatever file holds them.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod charges;
mod members;
mod replication;
mod settling;

use charges::{repeated_check, repeated_mcheck, stale_tokens, undo_by_id};
use members::{crafted_units, memory_figures, short_after_charges};
use redis::Value;
use replication::{bad_input, replication_and_aof};
use settling::{out_of_window, settle, within_max_limit};
use support::*;

on_every_server! {
    a_repeated_id_is_charged_once => repeated_check(Zset, Compact);
    a_repeated_mcheck_is_charged_once_even_when_one_key_forgot_it => repeated_mcheck(Zset, Compact);
    undo_by_id_is_exact_and_idempotent => undo_by_id(Zset, Compact);
    settle_moves_a_charge_down_up_and_to_zero => settle(Zset, Compact);
    a_stale_token_never_removes_a_later_entry => stale_tokens(Zset, Compact);
    bad_input_changes_and_replicates_nothing => bad_input(Zset, Compact);
    replicas_and_the_aof_reach_the_same_entries => replication_and_aof(Zset, Compact);
    settle_and_undo_see_no_charge_that_left_its_window => out_of_window(Zset, Compact);
    settle_keeps_a_key_within_max_limit_entries => within_max_limit(Zset, Compact);

    // Sorted sets only: a compact log stores members as deltas, so a wide
    // member costs it no more than a short one (and a charge's units take
    // fresh ids above every other there).
    what_an_id_costs_is_what_performance_md_says => memory_figures;
    plain_calls_after_a_charge_keep_short_members => short_after_charges(Zset);
    a_crafted_charge_layout_costs_only_its_entries => crafted_units;
}

fn call(c: &mut Connection, command: &str, args: &[&str]) -> Value {
    slidewin(c, command, args).unwrap_or_else(|e| panic!("{command} {args:?}: {e}"))
}

fn int(v: &Value) -> i64 {
    redis::from_redis_value_ref(v).unwrap_or_else(|_| panic!("an integer: {v:?}"))
}

/// The replication offset: it moves when anything is propagated.
fn offset(c: &mut Connection) -> String {
    info_field(c, "replication", "master_repl_offset").expect("master_repl_offset")
}
