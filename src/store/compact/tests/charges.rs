//! Charges made with an ID: bounds, loading, effects, SETTLE and UNDO.

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::charge::*;
use super::super::codec::*;
use super::super::form_codec::{CHARGES, FORM};
use super::super::log::*;
use super::support::*;
use crate::window::WindowLog;
use crate::window::{self, Rule, Want};

/// The request ids the charge tests use: a few, so that calls repeat them.
pub(super) fn request(i: u8) -> Vec<u8> {
    match i % 4 {
        0 => b"r0".to_vec(),
        1 => vec![0u8; MAX_REQUEST_ID],
        2 => b"\x00\xff binary".to_vec(),
        _ => format!("req-{i}").into_bytes(),
    }
}

/// A change to a log with charges made with an ID.
#[derive(Debug, Clone)]
enum ChargeChange {
    /// CHECK ... ID r at the clock: a repeat when the charge is there.
    Charge(u8, u64),
    /// SETTLE r units.
    Settle(u8, u64),
    /// UNDO ID r.
    UndoId(u8),
    /// UNDO of a member by id, or a token `<id>@<ms>` (any score).
    UndoMember(i64),
    /// A CHECK without an ID.
    Check(u64),
    /// SLIDEWIN.APPLY ... CHARGE r score first count (members anywhere).
    ApplyCharge(u8, i64, i64, u64),
    /// SLIDEWIN.APPLY ... CUT r units.
    ApplyCut(u8, u64),
    /// A trim (around the clock).
    Trim(i64),
    Reload,
    Clock(i64),
}

fn charge_change() -> impl Strategy<Value = ChargeChange> {
    prop_oneof![
        4 => (0..12u8, 1..5u64).prop_map(|(r, c)| ChargeChange::Charge(r, c)),
        3 => (0..12u8, 0..8u64).prop_map(|(r, u)| ChargeChange::Settle(r, u)),
        1 => (0..12u8).prop_map(ChargeChange::UndoId),
        2 => (0..40i64).prop_map(ChargeChange::UndoMember),
        2 => (1..4u64).prop_map(ChargeChange::Check),
        2 => (0..12u8, -100..20i64, 0..60i64, 1..4u64)
            .prop_map(|(r, s, f, c)| ChargeChange::ApplyCharge(r, s, f, c)),
        1 => (0..12u8, 0..4u64).prop_map(|(r, u)| ChargeChange::ApplyCut(r, u)),
        1 => (-300..0i64).prop_map(ChargeChange::Trim),
        1 => Just(ChargeChange::Reload),
        2 => prop_oneof![3 => 0..40i64, 1 => -300..0i64].prop_map(ChargeChange::Clock),
    ]
}

/// Every unit of every charge, as (score, member).
fn charged_entries(log: &CompactLog) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for r in log.charges() {
        for s in &r.spans {
            for i in 0..s.count as i64 {
                out.push((r.score, s.first + i));
            }
        }
    }
    out.sort_unstable();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Whatever charges, SETTLEs, UNDOs (by ID, by member, by token),
    /// APPLYs, trims and reloads a log goes through: every bound the
    /// loader checks holds after every step (a refused change changes
    /// nothing), the records load again the same, a charge's units are
    /// entries at its score, and an UNDO by member never removes one.
    #[test]
    fn charges_keep_every_bound_and_load_again(
        changes in proptest::collection::vec(charge_change(), 1..80),
    ) {
        use crate::store::compact::effect::Effect;
        let mut log = CompactLog::new();
        let mut now = 1_000_000i64;
        for change in changes {
            let before = log.clone();
            let refused = |r: Result<(), String>, log: &CompactLog| -> Result<(), TestCaseError> {
                if let Err(e) = r {
                    prop_assert!(e.starts_with("ERR "), "{e}");
                    prop_assert_eq!(log, &before, "a refused change changed the log");
                }
                Ok(())
            };
            match change {
                ChargeChange::Charge(r, cost) => {
                    let req = request(r);
                    if log.charge_of(&req).is_none() {
                        let res = log.add_charge_units(&req, now, cost).map(|_| ()).map_err(|b| format!("ERR {b}"));
                        refused(res, &log)?;
                        if log != before {
                            let (s, units) = log.charge_of(&req).expect("the charge was made");
                            prop_assert_eq!(units, cost);
                            prop_assert!(s >= now);
                        }
                    }
                }
                ChargeChange::Settle(r, units) => {
                    let req = request(r);
                    if let Some((s, held)) = log.charge_of(&req) {
                        let res = if units > held {
                            log.add_charge_units(&req, s, units - held).map(|_| ())
                        } else {
                            log.cut_charge(&req, units).map(|_| ())
                        };
                        let res = res.map_err(|b| format!("ERR {b}"));
                        let ok = res.is_ok();
                        refused(res, &log)?;
                        if ok {
                            let after = log.charge_of(&req);
                            if units == 0 {
                                prop_assert_eq!(after, None);
                            } else {
                                prop_assert_eq!(after, Some((s, units)));
                            }
                            prop_assert_eq!(
                                log.count_entries() as i128 - before.count_entries() as i128,
                                units as i128 - held as i128
                            );
                        }
                    }
                }
                ChargeChange::UndoId(r) => {
                    let req = request(r);
                    let held = log.charge_of(&req).map_or(0, |c| c.1);
                    match log.cut_charge(&req, 0) {
                        Ok(n) => {
                            prop_assert_eq!(n, held);
                            prop_assert_eq!(log.charge_of(&req), None);
                            prop_assert_eq!(log.cut_charge(&req, 0), Ok(0));
                        }
                        Err(b) => refused(Err(format!("ERR {b}")), &log)?,
                    }
                }
                ChargeChange::UndoMember(id) => {
                    let charged = charged_entries(&log);
                    let _ = log.remove(id);
                    prop_assert_eq!(charged_entries(&log), charged, "UNDO by member took a charge's unit");
                }
                ChargeChange::Check(cost) => {
                    let rule = Rule { cost, ..Rule::new(20, 1000) };
                    let _ = window::check(&mut log, now, &rule, Want { detail: true, members: true });
                }
                ChargeChange::ApplyCharge(r, at, first, count) => {
                    let req = request(r);
                    let (score, first, count) = ((now + at).max(0).to_string(), first.to_string(), count.to_string());
                    let args: Vec<&[u8]> = vec![b"CHARGE", &req, score.as_bytes(), first.as_bytes(), count.as_bytes()];
                    let e = Effect::parse(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let res = e.apply(&mut log).map_err(|e| e.to_string());
                    refused(res, &log)?;
                }
                ChargeChange::ApplyCut(r, units) => {
                    let req = request(r);
                    let units = units.to_string();
                    let args: Vec<&[u8]> = vec![b"CUT", &req, units.as_bytes()];
                    let e = Effect::parse(&args).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let res = e.apply(&mut log).map_err(|e| e.to_string());
                    refused(res, &log)?;
                }
                ChargeChange::Trim(at) => {
                    let _ = log.trim(now + at);
                    prop_assert!(log.charges().iter().all(|r| r.score > now + at));
                }
                ChargeChange::Reload => {
                    let again = CompactLog::decode(&log.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(again.charges(), log.charges());
                    log = again;
                }
                ChargeChange::Clock(step) => now += step,
            }
            // The loader's bounds, the records' index, units at their score.
            if let Err(e) = log.check() {
                return Err(TestCaseError::fail(e));
            }
            let records = log.charges();
            prop_assert!(records.len() <= MAX_CHARGES);
            prop_assert!(records.iter().all(|r| r.spans.len() <= MAX_CHARGE_SPANS));
            // A small form holds few charges in few bytes.
            if let Repr::Small(b) = &log.repr {
                prop_assert!(records.len() <= SMALL_CHARGES);
                prop_assert!(records.is_empty() || b.len() <= super::super::spare::SMALL_FORM_BYTES);
            }
            // Without a charge, the encoding is version 1.
            let bytes = log.encode();
            prop_assert_eq!(bytes.first().copied(), Some(if records.is_empty() { VERSION } else { VERSION_CHARGES }));
            sound(&mut log)?;
        }
    }

    /// Mangled version-2 payloads are refused or give a sound log.
    #[test]
    fn mangled_payloads_with_charges_are_refused_or_sound(
        costs in proptest::collection::vec(1..4u64, 1..6),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut log = CompactLog::new();
        for (i, &c) in costs.iter().enumerate() {
            log.add_charge_units(&request(i as u8), 1_000 + i as i64, c).unwrap();
        }
        let mut bytes = log.encode();
        prop_assert_eq!(bytes[0], VERSION_CHARGES);
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        if cut % 3 == 0 {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        if let Ok(mut log) = CompactLog::decode(&bytes) {
            if let Err(e) = log.check() {
                return Err(TestCaseError::fail(e));
            }
            sound(&mut log)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Mangled small forms with charges (version 0x82, the module's own
    /// bytes in memory) are refused or give a sound log: the decoder of
    /// the small form checks what the loader checks.
    #[test]
    fn mangled_small_forms_with_charges_are_refused_or_sound(
        costs in proptest::collection::vec(1..3u64, 1..=SMALL_CHARGES),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        use super::super::chunked::Chunked;
        let mut c = CompactLog::new();
        for (i, &cost) in costs.iter().enumerate() {
            c.add_charge_units(format!("r{i}").as_bytes(), 1_000, cost).unwrap();
        }
        let mut bytes = Vec::new();
        c.view().encode_small_into(&mut bytes);
        prop_assert_eq!(bytes[0], FORM | CHARGES);
        // Read back as written.
        let back = Chunked::decode_small(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &*c.view());
        for (at, b) in flips {
            let n = bytes.len();
            bytes[at % n] = b;
        }
        if cut % 3 == 0 {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        if let Ok(log) = Chunked::decode_small(&bytes) {
            if let Err(e) = log.check() {
                return Err(TestCaseError::fail(e));
            }
            let mut log = CompactLog::decode(&log.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            sound(&mut log)?;
        }
    }
}

/// A charge's units: fresh ids above every other, one run, found by its
/// request id; a SETTLE up continues it when nothing came after, else a
/// new span at the charge's score; SETTLE down removes the highest units;
/// UNDO by ID removes exactly the charge, UNDO by member never a unit.
#[test]
fn a_charge_is_named_by_its_request_id() {
    let mut log = CompactLog::new();
    let rule = Rule::new(100, 10_000);
    let want = Want::default();
    window::check(&mut log, 1_000, &rule, want).unwrap();
    assert_eq!(log.add_charge_units(b"a", 1_005, 3), Ok(Some((1_005, 2))));
    assert_eq!(log.charge_of(b"a"), Some((1_005, 3)));
    assert_eq!(log.charge_of(b"b"), None);
    // Continued: the same span.
    assert_eq!(log.add_charge_units(b"a", 1_005, 2), Ok(Some((1_005, 5))));
    assert_eq!(log.charges()[0].spans, [Span { first: 2, count: 5 }]);
    // A later entry takes id 7: the next units are a new span, scored as
    // the charge.
    window::check(&mut log, 1_010, &rule, want).unwrap();
    assert_eq!(log.add_charge_units(b"a", 1_005, 2), Ok(Some((1_005, 8))));
    assert_eq!(
        log.charges()[0].spans,
        [Span { first: 2, count: 5 }, Span { first: 8, count: 2 }]
    );
    assert_eq!(log.count_entries(), 9);
    log.check().unwrap();
    // UNDO by member: never a unit, by id or by token.
    for id in [2, 5, 8, 9] {
        assert_eq!(log.remove(id), Ok(false));
    }
    assert_eq!(log.count_entries(), 9);
    // SETTLE down to 4: units 5..=7 go (ids 8, 9 and 6).
    assert_eq!(log.cut_charge(b"a", 4), Ok(3));
    assert_eq!(log.charges()[0].spans, [Span { first: 2, count: 4 }]);
    assert_eq!(
        log.entries().collect::<Vec<_>>(),
        [
            (1_000, 1),
            (1_005, 2),
            (1_005, 3),
            (1_005, 4),
            (1_005, 5),
            (1_010, 7)
        ]
    );
    log.check().unwrap();
    // UNDO ID: exactly the charge, once.
    assert_eq!(log.cut_charge(b"a", 0), Ok(4));
    assert_eq!(log.cut_charge(b"a", 0), Ok(0));
    assert_eq!(log.charge_of(b"a"), None);
    assert_eq!(log.entries().collect::<Vec<_>>(), [(1_000, 1), (1_010, 7)]);
    // Without a charge the log is small again, its encoding version 1.
    assert_eq!(log.encode()[0], VERSION);
    log.check().unwrap();
    // A trim past a charge's score forgets it with its entries.
    log.add_charge_units(b"z", 1_020, 2).unwrap();
    assert_eq!(log.trim(1_019), Ok(2));
    assert!(log.charge_of(b"z").is_some());
    assert_eq!(log.trim(1_020), Ok(2));
    assert_eq!(log.charge_of(b"z"), None);
    log.check().unwrap();
}

/// The bounds on charges (how many, spans each, the request id's length)
/// are refused at every change, changing nothing, and by the loader.
#[test]
fn charges_have_bounds_the_loader_and_every_change_check() {
    let mut log = CompactLog::new();
    assert_eq!(log.add_charge_units(b"", 1, 1), Err(Bound::RequestId));
    assert_eq!(
        log.add_charge_units(&[7u8; MAX_REQUEST_ID + 1], 1, 1),
        Err(Bound::RequestId)
    );
    assert_eq!(
        Bound::RequestId.message(),
        format!("ID must be 1 to {MAX_REQUEST_ID} bytes")
    );
    for i in 0..MAX_CHARGES {
        log.add_charge_units(format!("r{i:04}").as_bytes(), 1_000, 1)
            .unwrap();
    }
    let before = log.clone();
    assert_eq!(
        log.add_charge_units(b"one more", 1_000, 1),
        Err(Bound::Charges)
    );
    assert_eq!(log, before);
    // An existing charge still grows (no new record).
    log.add_charge_units(b"r0000", 1_000, 1).unwrap();
    log.check().unwrap();
    // Spans: each SETTLE up with an entry after it makes one more.
    let mut log = CompactLog::new();
    log.add_charge_units(b"s", 1_000, 1).unwrap();
    for i in 1..MAX_CHARGE_SPANS as i64 {
        log.add_charge_units(b"t", 1_000 + i, 1).unwrap();
        log.add_charge_units(b"s", 1_000, 1).unwrap();
    }
    assert_eq!(log.charges()[0].spans.len(), MAX_CHARGE_SPANS);
    log.add_charge_units(b"t2", 2_000, 1).unwrap();
    let before = log.clone();
    assert_eq!(
        log.add_charge_units(b"s", 1_000, 1),
        Err(Bound::ChargeSpans)
    );
    assert_eq!(log, before);
    log.check().unwrap();
    // The loader: one span more is refused.
    let mut bytes = log.encode();
    let rec_spans_at = {
        // The record of "s": find the span count byte after its score.
        let key = [1u8, b's'];
        let at = bytes
            .windows(2)
            .position(|w| w == key)
            .expect("the record of s");
        at + 2 + 2 // length, id, score (2 bytes: 1000)
    };
    assert_eq!(bytes[rec_spans_at] as usize, MAX_CHARGE_SPANS);
    bytes[rec_spans_at] += 1;
    assert_eq!(
        CompactLog::decode(&bytes),
        Err(DecodeError::Bound(Bound::ChargeSpans))
    );
}

/// SLIDEWIN.APPLY's CHARGE and CUT reach the same log and charges as the
/// calls that made them, and are refused whole when wrong.
#[test]
fn charge_effects_reproduce_the_log() {
    use crate::store::compact::effect::Effect;
    let mut master = CompactLog::new();
    let mut replica = CompactLog::new();
    let ship = |e: &Effect, replica: &mut CompactLog| {
        let args = e.to_args();
        let words: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let parsed = Effect::parse(&words).unwrap();
        assert_eq!(&parsed, e);
        parsed.apply(replica).unwrap();
    };
    let mut e = Effect::default();
    let (score, first) = master.add_charge_units(b"req", 5_000, 3).unwrap().unwrap();
    e.record_charge(b"req", score, first, 3);
    ship(&e, &mut replica);
    let mut e = Effect::default();
    master.add_charge_units(b"other", 5_001, 1).unwrap();
    e.record_charge(b"other", 5_001, 4, 1);
    let (score, first) = master.add_charge_units(b"req", 5_000, 2).unwrap().unwrap();
    e.record_charge(b"req", score, first, 2);
    ship(&e, &mut replica);
    assert_eq!(replica, master);
    assert_eq!(replica.charges(), master.charges());
    let mut e = Effect::default();
    master.cut_charge(b"req", 1).unwrap();
    e.record_cut(b"req", 1);
    ship(&e, &mut replica);
    assert_eq!(replica, master);
    replica.check().unwrap();
    // Refusals: no such charge, more units than held, another score, a
    // unit by REMOVE, a request id too long.
    let before = replica.clone();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"CUT", b"nope", b"0"],
            "ERR CUT request-id 'nope' names no charge in the log",
        ),
        (
            &[b"CUT", b"req", b"2"],
            "ERR CUT units must be an integer between 0 and 1",
        ),
        (
            &[b"CHARGE", b"req", b"5003", b"100", b"1"],
            "ERR CHARGE score_ms must be the charge's own score, 5000",
        ),
        (
            &[b"REMOVE", b"1"],
            "ERR REMOVE member 1 is a unit of a charge made with an ID",
        ),
        (
            &[b"CHARGE", b"x", b"5003", b"4", b"1"],
            "ERR ADD members 4 to 4 are already in the log",
        ),
    ];
    for (args, expected) in cases {
        let err = Effect::parse(args)
            .unwrap()
            .apply(&mut replica)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(expected), "{err}");
        assert_eq!(replica, before);
    }
    let long = vec![b'x'; MAX_REQUEST_ID + 1];
    let err = Effect::parse(&[b"CUT", &long, b"0"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("ERR CUT request-id must be 1 to {MAX_REQUEST_ID} bytes")
    );
    assert_eq!(
        Effect::parse(&[b"CHARGE"]).unwrap_err().to_string(),
        "ERR CHARGE needs a request id"
    );
}

/// A SETTLE raising an older charge never fails for the layout: where its
/// new units at the charge's own score would pass the bound on runs out of
/// member order (or on a charge's runs of ids), the whole charge moves to
/// the newest score; its effect (CUT to 0, then CHARGE) reaches a replica,
/// applied in place, to the same log.
#[test]
fn raising_an_older_charge_never_fails_for_the_layout() {
    use crate::store::compact::effect::Effect;
    let mut master = CompactLog::new();
    let mut replica = CompactLog::new();
    let ship = |e: &Effect, replica: &mut CompactLog| {
        let args = e.to_args();
        let words: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        Effect::parse(&words).unwrap().apply(replica).unwrap();
    };
    // Charges one a millisecond; each raise of an older one puts a run out
    // of member order, up to the bound, then moves.
    let n = MAX_CHARGES as i64;
    for i in 0..n {
        let mut e = Effect::default();
        let request = format!("c{i:03}");
        let r = master
            .raise_charge(request.as_bytes(), 10_000 + i, 0, 1)
            .unwrap()
            .unwrap();
        assert!(!r.moved);
        e.record_charge(request.as_bytes(), r.score, r.first, r.count);
        ship(&e, &mut replica);
    }
    let mut moved = 0;
    for i in 0..n - 1 {
        let request = format!("c{i:03}");
        let before = master.charge_of(request.as_bytes()).unwrap();
        let base = master.clone();
        let r = master
            .raise_charge(request.as_bytes(), 0, 1, 2)
            .unwrap()
            .unwrap();
        let mut e = Effect::default();
        if r.moved {
            moved += 1;
            // Moved whole, to the newest score, later never earlier.
            assert_eq!(r.count, 2);
            assert!(r.score >= before.0);
            e.record_cut(request.as_bytes(), 0);
        } else {
            assert_eq!(r.score, before.0);
        }
        e.record_charge(request.as_bytes(), r.score, r.first, r.count);
        assert_eq!(master.charge_of(request.as_bytes()).unwrap().1, 2);
        // The replica's step fits its log as it is: applied in place.
        let (req, run) = &e.charges()[0];
        if r.moved {
            assert!(base.move_fits(req, run));
        } else {
            assert!(base.charge_fits(req, run));
        }
        ship(&e, &mut replica);
        assert_eq!(replica, master);
        assert_eq!(replica.charges(), master.charges());
        master.check().unwrap();
    }
    assert!(moved > 0, "no raise reached the bound");
    let (_, strays) = master.shape();
    assert!(strays <= MAX_STRAYS);
}
