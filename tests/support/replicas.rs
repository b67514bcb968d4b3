//! Replicas: started, waited for until caught up, compared with their
//! master.

use std::time::Duration;

use redis::Connection;

use super::{digest, info_field, wait_until, Flavor, Options, Server};

/// Starts a replica of `master` running the given flavor **without** the
/// module, and waits until its link is up and it has caught up.
pub fn replica_without_module(master: &Server, flavor: Flavor) -> Server {
    replica_with(master, Options::new(flavor).without_module())
}

/// Starts a replica of `master` with `options`, and waits until its link
/// is up and it has caught up.
pub fn replica_with(master: &Server, options: Options) -> Server {
    let replica = options.arg("replicaof", &master.replica_address()).start();
    let mut c = replica.conn();
    assert!(
        wait_until(Duration::from_secs(20), || info_field(
            &mut c,
            "replication",
            "master_link_status"
        )
        .as_deref()
            == Some("up")),
        "replica link never came up; log:\n{}",
        replica.log()
    );
    replica
}

/// Waits until `replica` has processed everything `master` propagated.
pub fn wait_caught_up(master: &Server, replica: &Server) {
    let mut m = master.conn();
    let mut r = replica.conn();
    let ok = wait_until(Duration::from_secs(20), || {
        let mo = info_field(&mut m, "replication", "master_repl_offset");
        let ro = info_field(&mut r, "replication", "master_repl_offset");
        mo.is_some() && mo == ro
    });
    assert!(ok, "replica did not catch up");
}

/// Waits until `replica` has caught up with `master`, checks that both hold
/// the same data (DEBUG DIGEST), and returns a connection to the replica.
pub fn assert_replica_matches(master: &Server, replica: &Server) -> Connection {
    wait_caught_up(master, replica);
    let mut r = replica.conn();
    assert_eq!(
        digest(&mut master.conn()),
        digest(&mut r),
        "the replica has the same data"
    );
    r
}
