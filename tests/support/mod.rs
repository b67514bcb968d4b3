//! Test harness: real servers started per test.
//!
//! Each [`Server`] runs in its own temp dir on a free loopback port, with the
//! module loaded unless asked otherwise, and is shut down (SHUTDOWN NOSAVE,
//! then SIGKILL after a deadline) when dropped. Every wait has a deadline.
//! A missing server binary or module file fails the test with the command
//! that fixes it; nothing is skipped.
//!
//! With `SLIDEWIN_TEST_BACKEND=docker` each Redis server runs as a container
//! of `SLIDEWIN_DOCKER_IMAGE` (default `slidewin:test`, built by
//! `make test-docker`) instead: the module file and the temp dir are mounted
//! at the same paths, the container shares the host's network and listens on
//! 127.0.0.1 only (so containers replicate from each other over loopback,
//! never over a bridge address), it is removed on drop, and every wait keeps
//! its deadline.
#![allow(dead_code)]
//!
//! By subject: [`binaries`] (the server binaries and the module file), [`cluster`]
//! (Redis Cluster, and one shared per server),
//! [`options`] and [`server`] (starting and stopping one), [`docker`] (the
//! container backend), [`probes`] (what a server supports), [`logs`] (the
//! log type and the per-server test macro), [`replicas`], [`aof`],
//! [`commands`] (short forms of commands, waits), [`compact_decode`] (a
//! compact log's entries from its DUMP payload), [`events`] (keyspace
//! notifications) and [`programs`] (the Lua library, Python, scripts).

pub mod aof;
pub mod binaries;
pub mod cluster;
pub mod commands;
pub mod compact_decode;
pub mod docker;
pub mod events;
pub mod logs;
pub mod options;
pub mod probes;
pub mod programs;
pub mod replicas;
pub mod server;

#[allow(unused_imports)]
pub use redis::Connection;

#[allow(unused_imports)]
pub use aof::*;
#[allow(unused_imports)]
pub use binaries::*;
#[allow(unused_imports)]
pub use cluster::*;
#[allow(unused_imports)]
pub use commands::*;
#[allow(unused_imports)]
pub use events::*;
#[allow(unused_imports)]
pub use logs::*;
#[allow(unused_imports)]
pub use options::*;
#[allow(unused_imports)]
pub use programs::*;
#[allow(unused_imports)]
pub use replicas::*;
#[allow(unused_imports)]
pub use server::*;
