//! `SLIDEWIN.APPLY`'s parser and its application, on arbitrary words (one
//! a line, see `common::words`), against four logs (empty, small with an
//! expiry, chunked with runs out of member order, one with charges made
//! with an ID, version 2): a refused effect leaves
//! the log exactly as it was and says `ERR ...`; an accepted one leaves a
//! log that passes the oracle and holds what the effect said.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use slidewin::fuzzing::compact::CompactLog;
use slidewin::fuzzing::compact::Effect;
use slidewin::fuzzing::window::WindowLog;

/// The logs each effect is applied to, built by effects themselves.
fn bases() -> Vec<CompactLog> {
    let built = |args: &[&str]| {
        let words: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut log = CompactLog::new();
        if let Ok(e) = Effect::parse(&words) {
            // A base that does not build is a bug the oracle reports.
            e.apply(&mut log)
                .unwrap_or_else(|why| panic!("base {args:?}: {why}"));
        }
        log
    };
    let mut chunked: Vec<String> = Vec::new();
    for i in 0..12i64 {
        // Runs of two entries 10 ms apart, every third one with members
        // below the others' (out of member order), and a PXAT.
        let first = if i % 3 == 2 {
            10_000 - 10 * i
        } else {
            100 + 3 * i
        };
        for w in [
            "ADD".to_string(),
            (1_000 + 10 * i).to_string(),
            first.to_string(),
            "2".into(),
        ] {
            chunked.push(w);
        }
    }
    chunked.extend(["PXAT".to_string(), "5000".to_string()]);
    let chunked: Vec<&str> = chunked.iter().map(String::as_str).collect();
    vec![
        CompactLog::new(),
        built(&[
            "ADD", "10", "1", "3", "ADD", "10", "9", "1", "PXAT", "70010",
        ]),
        built(&chunked),
        built(&[
            "ADD", "990", "1", "2", "CHARGE", "r1", "1000", "3", "3", "CHARGE", "r2", "1005", "6",
            "1", "CHARGE", "r1", "1000", "7", "2", "PXAT", "70000",
        ]),
    ]
}

fuzz_target!(|data: &[u8]| {
    let words = common::words(data);
    let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let effect = match Effect::parse(&args) {
        Ok(e) => e,
        Err(why) => {
            assert!(why.to_string().starts_with("ERR "), "{why}");
            return;
        }
    };
    // What the store propagates parses back to the same effect.
    let again: Vec<Vec<u8>> = effect.to_args();
    let again: Vec<&[u8]> = again.iter().map(Vec::as_slice).collect();
    assert!(
        Effect::parse(&again).ok().as_ref() == Some(&effect),
        "to_args does not parse back"
    );

    for base in bases() {
        let mut log = base.clone();
        match effect.apply(&mut log) {
            Err(why) => {
                assert!(why.to_string().starts_with("ERR "), "{why}");
                assert!(log == base, "a refused effect changed the log: {why}");
                assert_eq!(
                    log.encode(),
                    base.encode(),
                    "a refused effect changed the bytes"
                );
            }
            Ok(()) => {
                common::sound(&log);
                let mut from = effect.log.clone().unwrap_or(base);
                let cutoff = effect.trim.unwrap_or(i64::MIN);
                let kept = from.count_above(cutoff).unwrap_or(u64::MAX);
                // (checked: an accepted REMOVE of a member that was not
                // there would take more than the log kept)
                let added = effect
                    .add
                    .iter()
                    .chain(effect.charges().iter().map(|(_, r)| r))
                    .try_fold(0u64, |t, r| t.checked_add(r.count));
                // A CUT keeps `units` of the units the charge held.
                let cut = effect.cuts().iter().try_fold(0u64, |t, (request, units)| {
                    let held = from.charge_of(request).map_or(0, |c| c.1);
                    t.checked_add(held.checked_sub(*units)?)
                });
                let expected = kept
                    .checked_sub(effect.remove.len() as u64)
                    .and_then(|k| k.checked_sub(cut?))
                    .and_then(|k| k.checked_add(added?));
                assert_eq!(
                    Some(log.count_entries()),
                    expected,
                    "entries after {effect:?}"
                );
                for r in &effect.add {
                    assert!(
                        log.has_member(r.first).unwrap_or(false),
                        "ADD {r:?} not there"
                    );
                    assert!(
                        log.has_member(r.last()).unwrap_or(false),
                        "ADD {r:?} not there"
                    );
                }
                for (request, r) in effect.charges() {
                    let charge = log.charge_of(request);
                    assert!(
                        charge.is_some_and(|(score, _)| score == r.score),
                        "CHARGE {r:?} not there: {charge:?}"
                    );
                }
                for (request, units) in effect.cuts() {
                    let charged_again = effect.charges().iter().any(|(r, _)| r == request);
                    if !charged_again {
                        let now = log.charge_of(request).map_or(0, |c| c.1);
                        assert_eq!(now, *units, "CUT {units}");
                    }
                }
                for &id in &effect.remove {
                    assert!(
                        !log.has_member(id).unwrap_or(true),
                        "REMOVE {id} still there"
                    );
                }
                // (TRIM goes first: an ADD or a CHARGE at or below its
                // cutoff stays.)
                if effect.add.iter().all(|r| r.score > cutoff)
                    && effect.charges().iter().all(|(_, r)| r.score > cutoff)
                {
                    let above = log.count_above(cutoff).unwrap_or(u64::MAX);
                    assert_eq!(above, log.count_entries(), "TRIM {cutoff} left entries");
                }
                if let Some(at) = effect.expire_at {
                    assert_eq!(log.expire_at_ms(), Some(at), "PXAT");
                }
            }
        }
    }
});
