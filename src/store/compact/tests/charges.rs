//! Charges made with an ID: bounds, loading, effects, SETTLE and UNDO.

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::charge::*;
use super::super::codec::*;
use super::super::log::*;
use super::super::small::has_charges as small_has_charges;
use super::support::*;
use crate::window::WindowLog;
use crate::window::{self, Rule, Want};

/// The request ids the charge tests use: a few, so that calls repeat them.
fn request(i: u8) -> Vec<u8> {
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
        prop_assert_eq!(bytes[0], VERSION_SMALL_CHARGES);
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

/// A log of a few charges stays in its small form (one block: version
/// [`VERSION_SMALL_CHARGES`] in memory, the records' scores relative to
/// the first run's) through what commands do to it: charges made, a
/// SETTLE raise and lower, UNDO ID, a query, a trim; past
/// [`SMALL_CHARGES`] it is chunks, and small again below. What leaves the
/// process is version 2, the chunks' very bytes, and loads back small.
#[test]
fn a_few_charges_keep_the_small_form() {
    let base = 1_796_000_000_000i64;
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    fn small(log: &CompactLog) -> bool {
        matches!(&log.repr, Repr::Small(b) if b.bytes().first() == Some(&VERSION_SMALL_CHARGES))
    }
    let req = |i: usize| format!("req-{i:012}").into_bytes();
    // One command: the log held, `f`, then settled.
    fn command<R>(log: &mut CompactLog, hold: &mut Hold, f: impl FnOnce(&mut Held<'_>) -> R) -> R {
        let mut h = hold.on(log);
        h.expand();
        let r = f(&mut h);
        hold.settle(log);
        log.check().unwrap();
        r
    }
    for i in 0..SMALL_CHARGES {
        let made = command(&mut log, &mut hold, |h| h.raise_charge(&req(i), base, 0, 1));
        assert!(matches!(made, Ok(Some(_))), "{made:?}");
        assert!(small(&log), "charge {i}");
    }
    assert_eq!(log.charge_count(), SMALL_CHARGES);
    assert_eq!(log.charge_of(&req(1)), Some((base, 1)));
    assert!(log.charged(1) && !log.charged(99));
    // What leaves the process: version 2, as the chunks encode it.
    let bytes = log.encode();
    assert_eq!(bytes[0], VERSION_CHARGES);
    assert_eq!(bytes, log.view().encode());
    let again = CompactLog::decode(&bytes).unwrap();
    assert!(small(&again));
    assert_eq!(again, log);
    assert_eq!(again.charges(), log.charges());
    // The small form's own bytes: shorter, and refused from outside.
    let Repr::Small(form) = &log.repr else {
        panic!("small")
    };
    let own = form.bytes().to_vec();
    assert!(own.len() < bytes.len(), "{} >= {}", own.len(), bytes.len());
    assert_eq!(
        CompactLog::decode(&own).unwrap_err(),
        DecodeError::Version(VERSION_SMALL_CHARGES)
    );
    // A command that changes nothing puts the same bytes back.
    let n = command(&mut log, &mut hold, |h| h.count_above(base - 1));
    assert_eq!(n, Ok(SMALL_CHARGES as u64));
    assert!(matches!(&log.repr, Repr::Small(b) if b.bytes() == own.as_slice()));
    // One more charge: chunks. Its UNDO ID: small again.
    command(&mut log, &mut hold, |h| {
        h.raise_charge(&req(99), base + 1, 0, 1)
    })
    .unwrap();
    assert!(matches!(log.repr, Repr::Large(_)));
    assert_eq!(
        command(&mut log, &mut hold, |h| h.cut_charge(&req(99), 0)),
        Ok(1)
    );
    assert!(small(&log));
    // SETTLE raise of the oldest charge (a second run of ids), then lower.
    let raised = command(&mut log, &mut hold, |h| h.raise_charge(&req(0), base, 1, 3));
    assert!(
        matches!(raised, Ok(Some(Raised { count: 2, .. }))),
        "{raised:?}"
    );
    assert!(small(&log));
    assert_eq!(log.charge_of(&req(0)), Some((base, 3)));
    assert_eq!(
        command(&mut log, &mut hold, |h| h.cut_charge(&req(0), 1)),
        Ok(2)
    );
    assert_eq!(log.charge_of(&req(0)), Some((base, 1)));
    assert!(small(&log));
    // UNDO by member never takes a unit, in the small form either.
    assert_eq!(command(&mut log, &mut hold, |h| h.remove(1)), Ok(false));
    // The window moves past them: every charge goes with its entries,
    // and the small form is version 1 again.
    command(&mut log, &mut hold, |h| h.add_scored(base + 10, 1_000)).unwrap();
    let trimmed = command(&mut log, &mut hold, |h| h.trim(base));
    assert_eq!(trimmed, Ok(SMALL_CHARGES as u64));
    assert_eq!(log.charge_count(), 0);
    assert_eq!(log.encode()[0], VERSION);
    assert!(matches!(&log.repr, Repr::Small(b) if b.bytes().first() == Some(&VERSION)));
}

/// The small form holds charges only while they take few bytes
/// (`SMALL_FORM_BYTES`, 300 in the unit tests): a few charges with long
/// ids keep the log in chunks, with short ids it is small.
#[test]
fn charges_of_many_bytes_stay_in_chunks() {
    let base = 1_796_000_000_000i64;
    for (len, small) in [(MAX_REQUEST_ID, false), (16, true)] {
        let mut log = CompactLog::new();
        for i in 0..SMALL_CHARGES {
            let mut req = vec![b'x'; len];
            req[0] = i as u8;
            log.add_charge_units(&req, base, 1).unwrap();
        }
        log.check().unwrap();
        assert_eq!(log.charge_count(), SMALL_CHARGES);
        assert_eq!(
            matches!(log.repr, Repr::Small(_)),
            small,
            "ids of {len} bytes"
        );
    }
}

/// The small form's records builder refuses what the loader refuses: an
/// id twice, units of two charges that meet (in the written order or
/// not), more than [`SMALL_CHARGES`] records, a bad id or span count.
#[test]
fn small_records_refuse_what_the_loader_refuses() {
    let span = |first, count| Span { first, count };
    let mut b = SmallRecords::with_capacity(64);
    assert_eq!(b.push(b"a", 5, &[span(1, 2)]), Ok(()));
    assert_eq!(b.push(b"a", 5, &[span(9, 1)]), Err(None), "an id twice");
    assert_eq!(
        b.push(b"b", 5, &[span(2, 1)]),
        Err(None),
        "meets, out of order"
    );
    assert_eq!(b.push(b"b", 5, &[span(3, 1)]), Ok(()));
    assert_eq!(b.push(b"", 5, &[span(20, 1)]), Err(Some(Bound::RequestId)));
    assert_eq!(b.push(b"c", 5, &[]), Err(None));
    // Several spans: each pair looked at.
    assert_eq!(
        b.push(b"c", 5, &[span(10, 1), span(3, 1)]),
        Err(None),
        "a further span meets"
    );
    assert_eq!(
        b.push(b"c", 5, &[span(10, 2), span(11, 1)]),
        Err(None),
        "its own spans meet"
    );
    assert_eq!(b.push(b"c", 5, &[span(10, 1), span(12, 1)]), Ok(()));
    assert_eq!(b.push(b"d", 5, &[span(11, 1)]), Ok(()));
    assert_eq!(
        b.push(b"e", 5, &[span(12, 1)]),
        Err(None),
        "meets a further span"
    );
    let many = vec![span(100, 1); MAX_CHARGE_SPANS + 1];
    assert_eq!(b.push(b"e", 5, &many), Err(Some(Bound::ChargeSpans)));
    let mut b = SmallRecords::with_capacity(64);
    for i in 0..SMALL_CHARGES {
        assert_eq!(
            b.push(&[b'a' + i as u8], 5, &[span(i as i64 * 2, 1)]),
            Ok(())
        );
    }
    assert_eq!(
        b.push(b"z", 5, &[span(100, 1)]),
        Err(None),
        "past SMALL_CHARGES"
    );
    assert_eq!(b.finish().len(), SMALL_CHARGES);
}

/// A CHECK without an ID on a small log with charges changes its runs in
/// place (the summary kept, no chunks), the records after them as they
/// were: the very bytes the chunked path writes. A question about a charge
/// is answered off the bytes; a trim that takes a run goes through the
/// chunks.
#[test]
fn a_check_without_id_leaves_the_charges_in_place() {
    let base = 1_796_000_000_000i64;
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    let req = |i: usize| format!("req-{i:012}").into_bytes();
    for i in 0..SMALL_CHARGES {
        log.add_charge_units(&req(i), base, 1).unwrap();
    }
    let own = |log: &CompactLog| match &log.repr {
        Repr::Small(b) if small_has_charges(b) => b.bytes().to_vec(),
        _ => panic!("not a small form with charges"),
    };
    let rule = Rule::new(100, 60_000);
    // (Two runs: the unit tests' SMALL_RUNS.)
    for t in [base, base + 3] {
        hold.on(&mut log).expand();
        let v = window::check(&mut hold.on(&mut log), t, &rule, Want::default()).unwrap();
        assert!(v.allowed);
        assert!(hold.small.is_some(), "held in place at {t}");
        hold.settle(&mut log);
        log.check().unwrap();
        let mut written = Vec::new();
        log.view().encode_small_into(&mut written);
        assert_eq!(own(&log), written, "at {t}");
    }
    assert_eq!(log.charge_count(), SMALL_CHARGES);
    // A question about a charge: read off the bytes, unchanged.
    let before = own(&log);
    hold.on(&mut log).expand();
    assert_eq!(hold.on(&mut log).charge_of(&req(2)), Some((base, 1)));
    assert!(hold.small.is_some());
    hold.settle(&mut log);
    assert_eq!(own(&log), before);
    // The window leaves the charges behind: the trim goes through the
    // chunks, and the charges go with their entries.
    hold.on(&mut log).expand();
    let v = window::check(
        &mut hold.on(&mut log),
        base + 60_100,
        &rule,
        Want::default(),
    )
    .unwrap();
    assert!(v.allowed);
    hold.settle(&mut log);
    log.check().unwrap();
    assert_eq!(log.charge_count(), 0);
    assert_eq!(log.encode()[0], VERSION);
}

/// A step of [`new_charges_in_place_write_what_the_chunks_write`].
#[derive(Debug, Clone)]
enum SmallStep {
    /// A new charge of one unit under request `r` (a lookup first, as a
    /// CHECK with an ID makes), `dt` ms on.
    Charge(u8, i64),
    /// An entry without an ID, `dt` ms on, `gap` members above the top.
    Add(i64, i64),
    /// The expiry set, `dt` ms after the clock.
    Expire(i64),
    /// The clock steps back (a charge scored before the newest entry).
    Back(i64),
}

fn small_step() -> impl Strategy<Value = SmallStep> {
    prop_oneof![
        6 => (0..18u8, prop_oneof![2 => Just(0i64), 1 => 1..3i64, 1 => 100..20_000i64])
            .prop_map(|(r, dt)| SmallStep::Charge(r, dt)),
        2 => (0..3i64, 1..4i64).prop_map(|(dt, g)| SmallStep::Add(dt, g)),
        1 => (0..1_000_000i64).prop_map(SmallStep::Expire),
        1 => (1..50i64).prop_map(SmallStep::Back),
    ]
}

/// The request ids of [`new_charges_in_place_write_what_the_chunks_write`]:
/// those of [`request`], and long ones of their own (a few pass the byte
/// cap of the small form).
fn small_request(i: u8) -> Vec<u8> {
    match i % 6 {
        4 => vec![i; 100],
        5 => vec![i; MAX_REQUEST_ID],
        _ => request(i),
    }
}

/// The own bytes of a small form (empty for a log in chunks).
fn small_bytes(log: &CompactLog) -> Vec<u8> {
    match &log.repr {
        Repr::Small(b) => b.bytes().to_vec(),
        Repr::Large(_) => Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// A CHECK with an ID on a small log, held in its small form: the
    /// lookup and the count of charges read off the bytes, and a new
    /// charge of one unit written in place, answer and write exactly what
    /// the round trip through the chunks (decode, change, encode) answers
    /// and writes, byte for byte, whatever the log (no charge yet, ids of
    /// 1 to 128 bytes, binary ids, runs joined or not, the clock back,
    /// the byte cap, past `SMALL_CHARGES`); every log loads again.
    #[test]
    fn new_charges_in_place_write_what_the_chunks_write(
        steps in proptest::collection::vec(small_step(), 1..40),
    ) {
        let mut log = CompactLog::new();
        let mut hold = Hold::default();
        let mut now = 1_796_000_000_000i64;
        let mut top = 0i64;
        for step in steps {
            match step {
                SmallStep::Charge(r, dt) => {
                    now += dt;
                    let req = small_request(r);
                    let mut twin = log.clone();
                    let mut h = hold.on(&mut log);
                    h.expand();
                    let found = h.charge_of(&req);
                    prop_assert_eq!(found, twin.charge_of(&req));
                    prop_assert_eq!(h.charge_count(), twin.charge_count());
                    if found.is_some() {
                        hold.settle(&mut log);
                        continue;
                    }
                    let made = hold.on(&mut log).raise_charge(&req, now, 0, 1);
                    hold.settle(&mut log);
                    let want = twin.raise_charge(&req, now, 0, 1);
                    prop_assert_eq!(made, want);
                    if let Ok(Some(r)) = made {
                        top = top.max(r.first);
                    }
                    prop_assert_eq!(small_bytes(&log), small_bytes(&twin));
                    prop_assert_eq!(&log, &twin);
                    prop_assert_eq!(log.charges(), twin.charges());
                    prop_assert_eq!(log.encode(), twin.encode());
                }
                SmallStep::Add(dt, gap) => {
                    now += dt;
                    top += gap;
                    let mut h = hold.on(&mut log);
                    h.expand();
                    let _ = h.add_scored(now, top);
                    hold.settle(&mut log);
                }
                SmallStep::Expire(dt) => {
                    let mut h = hold.on(&mut log);
                    h.expand();
                    h.set_expiry(now + dt);
                    hold.settle(&mut log);
                }
                SmallStep::Back(dt) => now -= dt,
            }
            log.check().map_err(TestCaseError::fail)?;
            let again = CompactLog::decode(&log.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&again, &log);
            prop_assert_eq!(again.charges(), log.charges());
        }
    }
}

/// CHECK with an ID on a small log: the lookup, the count and a new
/// charge of one unit are made on the bytes (the log stays held in its
/// small form: no chunks), the first charge too (the version byte made
/// [`VERSION_SMALL_CHARGES`]); a charge it cannot make there (past
/// `SMALL_CHARGES`) goes through the chunks.
#[test]
fn a_new_charge_is_made_in_place() {
    let base = 1_796_000_000_000i64;
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    let req = |i: usize| format!("req-{i:012}").into_bytes();
    let rule = Rule::new(100, 60_000);
    for i in 0..SMALL_CHARGES {
        hold.on(&mut log).expand();
        let v = window::check_request(
            &mut hold.on(&mut log),
            base,
            &rule,
            Want::default(),
            Some(&req(i)),
        )
        .unwrap();
        assert!(v.allowed && !v.repeated);
        assert!(hold.small.is_some(), "charge {i} held in place");
        hold.settle(&mut log);
        log.check().unwrap();
        assert!(small_has_charges(match &log.repr {
            Repr::Small(b) => b,
            Repr::Large(_) => panic!("chunks after charge {i}"),
        }));
    }
    assert_eq!(log.charge_count(), SMALL_CHARGES);
    assert_eq!(log.charge_of(&req(1)), Some((base, 1)));
    // A repeat: found in place, nothing changed.
    let before = small_bytes(&log);
    hold.on(&mut log).expand();
    let v = window::check_request(
        &mut hold.on(&mut log),
        base + 9,
        &rule,
        Want::default(),
        Some(&req(2)),
    )
    .unwrap();
    assert!(v.allowed && v.repeated);
    assert!(hold.small.is_some());
    hold.settle(&mut log);
    assert_eq!(small_bytes(&log), before);
    // One more: through the chunks.
    hold.on(&mut log).expand();
    window::check_request(
        &mut hold.on(&mut log),
        base + 10,
        &rule,
        Want::default(),
        Some(&req(99)),
    )
    .unwrap();
    assert!(hold.small.is_none());
    hold.settle(&mut log);
    log.check().unwrap();
    assert_eq!(log.charge_count(), SMALL_CHARGES + 1);
}
