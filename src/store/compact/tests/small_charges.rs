//! Charges made with an ID on a log held in its small form: kept there
//! through commands, the byte cap, the records builder, and changes made
//! in place against the chunks' very bytes.

use proptest::prelude::*;

use super::super::bounds::*;
use super::super::charge::*;
use super::super::codec::*;
use super::super::form_codec::{is_form, CHARGES, FORM};
use super::super::log::*;
use super::super::small::has_charges as small_has_charges;
use super::charges::request;
use super::support::*;
use crate::window::WindowLog;
use crate::window::{self, Rule, Want};

/// A log of a few charges stays in its small form (one block: the form
/// of `form_codec.rs` in memory, the records' scores those of their
/// units) through what commands do to it: charges made, a
/// SETTLE raise and lower, UNDO ID, a query, a trim; past
/// [`SMALL_CHARGES`] it is chunks, and small again below. What leaves the
/// process is version 2, the chunks' very bytes, and loads back small.
#[test]
fn a_few_charges_keep_the_small_form() {
    let base = 1_796_000_000_000i64;
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    fn small(log: &CompactLog) -> bool {
        matches!(&log.repr, Repr::Small(b) if small_has_charges(b))
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
        DecodeError::Version(own[0])
    );
    assert!(is_form(own[0]) && own[0] & CHARGES != 0, "{own:?}");
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
    // and the small form is one without charges again.
    command(&mut log, &mut hold, |h| h.add_scored(base + 10, 1_000)).unwrap();
    let trimmed = command(&mut log, &mut hold, |h| h.trim(base));
    assert_eq!(trimmed, Ok(SMALL_CHARGES as u64));
    assert_eq!(log.charge_count(), 0);
    assert_eq!(log.encode()[0], VERSION);
    assert!(matches!(&log.repr, Repr::Small(b) if b.bytes().first() == Some(&FORM)));
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
