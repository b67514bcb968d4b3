//! The compact log's unit and property tests, by subject; here, the
//! properties `make fuzz` runs a million cases of (hostile and mutated
//! encodings, effects from clients).

mod charges;
mod chunks;
mod decoding;
mod golden;
mod held_commands;
mod model;
mod small_charges;
mod support;

use proptest::prelude::*;

use super::codec::*;
use super::log::*;
use crate::window::{self, Rule, Want};
use support::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn hostile_bytes_are_refused_or_give_a_sound_log(
        versioned in any::<bool>(),
        mut bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        // Half of them past the version check, so the rest is exercised.
        if versioned && bytes.len() >= 2 {
            bytes[0] = VERSION;
            bytes[1] &= 1;
        }
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            sound(&mut log)?;
        }
    }

    #[test]
    fn mutated_encodings_are_refused_or_give_a_sound_log(
        ops in proptest::collection::vec((0..5000i64, 1..4u64), 1..40),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut log = CompactLog::new();
        let mut now = 1_796_000_000_000i64;
        for (step, cost) in ops {
            now += step;
            window::check(&mut log, now, &Rule { cost, ..Rule::new(1000, 3_600_000) }, Want { detail: false, members: false }).unwrap();
        }
        let mut bytes = log.encode();
        for (at, b) in flips {
            let i = at % bytes.len();
            bytes[i] ^= b;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            sound(&mut log)?;
        }
    }

    #[test]
    fn effects_from_clients_are_refused_whole_or_give_a_sound_log(
        words in proptest::collection::vec(effect_word(), 0..12),
    ) {
        let mut log = CompactLog::new();
        for (i, score) in [990i64, 995, 1000, 1000, 1005].into_iter().enumerate() {
            window::check(
                &mut log,
                score,
                &Rule { cost: 1 + i as u64 % 2, ..Rule::new(100, 1000) },
                Want { detail: false, members: false },
            )
            .unwrap();
        }
        let before = log.clone();
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
        match crate::store::compact::effect::Effect::parse(&args) {
            Err(e) => prop_assert!(e.to_string().starts_with("ERR "), "{e}"),
            Ok(effect) => match effect.apply(&mut log) {
                Err(e) => {
                    prop_assert!(e.to_string().starts_with("ERR "), "{e}");
                    prop_assert_eq!(&log, &before, "a refused effect changed the log");
                }
                Ok(()) => sound(&mut log)?,
            },
        }
    }
}
