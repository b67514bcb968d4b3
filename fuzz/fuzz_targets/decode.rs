//! The compact log's decoder on arbitrary bytes (what RESTORE, an RDB and
//! `SLIDEWIN.APPLY ... LOG` hand it): no panic, and a log it accepts passes
//! the oracle (every invariant, the round trip, the queries).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use slidewin::fuzzing::compact::CompactLog;

fuzz_target!(|data: &[u8]| {
    if let Ok(log) = CompactLog::decode(data) {
        common::sound(&log);
    }
});
