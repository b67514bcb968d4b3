//! slidewin on Redis Cluster (3 masters, 3 replicas, started by
//! scripts/cluster.sh, the script behind `make cluster`), on every server of the suite.
//!
//! One test program (`cargo test --test cluster`), by subject: [`routing`],
//! [`failover`], [`python`] (the Python example and client), [`migration`]
//! (slots moving under load) and [`load`] (the load they move under). The
//! tests are declared here, so that their names are `<server>::<test>`
//! whatever file holds them.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod failover;
mod load;
mod migration;
mod python;
mod routing;

use failover::failover;
use migration::{atomic_slot_migration, compact_migration, reshard, reshard_compact};
use python::{python_cluster_example, python_function_fallback};
use routing::{ask, crossslot, hash_tags, moved, routing};
use support::*;

on_every_server! {
    every_key_lands_on_its_slot_owner => routing;
    wrong_node_replies_moved_and_writes_nothing => moved;
    ask_during_slot_migration_is_honoured => ask;
    crossslot_transactions_and_scripts_are_refused => crossslot;
    hash_tagged_keys_work_together => hash_tags;
    python_cluster_example_runs => python_cluster_example;
    python_client_falls_back_to_the_function_library_on_every_primary => python_function_fallback;
    failover_keeps_replicated_decisions => failover;
    atomic_slot_migration_under_load => atomic_slot_migration;
    redis_cli_reshard_under_load => reshard;
    redis_cli_reshard_under_load_with_compact_logs => reshard_compact;
    compact_logs_move_by_migrate_and_migrateslots => compact_migration;
}

fn check_on(c: &mut Connection, key: &str) -> redis::RedisResult<i64> {
    redis::cmd("SLIDEWIN.CHECK")
        .arg(key)
        .arg(3)
        .arg(600_000)
        .query(c)
}
