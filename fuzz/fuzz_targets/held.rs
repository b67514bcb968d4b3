//! Whole commands with request ids on a log held for them (the small
//! form's in-place paths: a charge looked up, counted and made on the
//! block; the chunks' in-place SETTLE raise and UNDO ID) against the same
//! commands on a copy not held (every change through the chunks), from
//! the same log before each: the same replies, the same entries by score,
//! charges (id, score, units) and expiry; every log passes the oracle and
//! loads again. Between commands, effects a client sends (SLIDEWIN.APPLY
//! CHARGE, CUT, ADD at absolute times, before and after the entries) give
//! both logs the layouts no call makes (runs out of member order, entries
//! in the future).
//!
//! The input is read four bytes a step: an operation and three operands.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slidewin::fuzzing::compact::{CompactLog, Effect, Hold};
use slidewin::fuzzing::window::{self, Rule, SettleBounds, Want, WindowLog};

/// Request ids of every length class (1, 16, 100, 128 bytes, binary).
fn id(i: u8) -> Vec<u8> {
    match i % 8 {
        0 => vec![b'a' + i % 4],
        1 => format!("req-{:012}", i % 5).into_bytes(),
        2 => vec![i % 3; 100],
        3 => vec![i % 3 + 1; 128],
        4 => vec![0, 0xff, i % 4, 0x80],
        5 => format!("r{}", i % 6).into_bytes(),
        6 => vec![0x80 | (i % 3); 17],
        _ => vec![i % 2; 127],
    }
}

/// What a log holds but for its member ids ([`CompactLog::contents`]: the
/// entries by score, each charge's id, score and units), and the expiry.
type Shape = (Vec<(i64, u64)>, Vec<(Vec<u8>, i64, u64)>, Option<i64>);

fn shape(log: &CompactLog) -> Shape {
    let (scores, charges) = log.contents();
    (scores, charges, log.expire_at_ms())
}

/// The oracle: every invariant, and the encoding decodes to the same log
/// and charges. (Not `common::sound`, whose CHECK alone and held expects
/// the same member ids: a small log with charges whose greatest member a
/// trim takes is held as chunks, which keep that member as the greatest,
/// so a command gives its next entry a higher id than the copy decoded
/// anew does; either id is free and the effect carries the one given.)
fn loads_again(log: &CompactLog) {
    if let Err(e) = log.check() {
        panic!("an invariant fails: {e}");
    }
    let again = CompactLog::decode(&log.encode()).expect("the log loads again");
    assert!(again == *log, "reloaded");
    assert_eq!(again.charges(), log.charges(), "charges reloaded");
}

#[derive(Debug)]
enum Cmd {
    CheckId(Vec<u8>, u64),
    Check(u64),
    Settle(Vec<u8>, u64),
    UndoId(Vec<u8>),
    UndoMember(i64),
}

/// One command on `log`; its reply as text.
fn run<L: WindowLog>(log: &mut L, c: &Cmd, now: i64, rule: &Rule, expires: Option<i64>) -> String
where
    L::Error: std::fmt::Debug,
{
    let bounds = SettleBounds {
        max_added: 1_000,
        max_entries: 1_000,
    };
    let want = Want {
        detail: true,
        members: false,
    };
    match c {
        Cmd::CheckId(r, cost) => {
            let rule = Rule {
                cost: *cost,
                ..*rule
            };
            format!(
                "{:?}",
                window::check_request(log, now, &rule, want, Some(r))
            )
        }
        Cmd::Check(cost) => {
            let rule = Rule {
                cost: *cost,
                ..*rule
            };
            format!("{:?}", window::check_request(log, now, &rule, want, None))
        }
        Cmd::Settle(r, units) => {
            format!("{:?}", window::settle(log, r, *units, now, expires, bounds))
        }
        Cmd::UndoId(r) => format!("{:?}", window::undo_request(log, r, now, expires)),
        Cmd::UndoMember(_) => String::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b], steps)) = data.split_first_chunk::<2>() else {
        return;
    };
    let limit = 1 + u64::from(a % 12);
    let window_ms = [50i64, 1_000, 60_000][usize::from(b % 3)];
    let rule = Rule::new(limit, window_ms);
    let mut log = CompactLog::new();
    let mut hold = Hold::default();
    let mut now = 1_796_000_000_000i64;
    for step in steps.chunks_exact(4).take(64) {
        let &[op, x, y, z] = step else {
            return;
        };
        let dt = match z % 4 {
            0 => 0,
            1 => 1 + i64::from(z % 3),
            2 => 100 + 20 * i64::from(z),
            _ => 0,
        };
        let cost = [1u64, 1, 1, 2, 5, 9, 0, 3][usize::from(y % 8)];
        let cmd = match op % 8 {
            0 | 1 => {
                now += dt;
                Cmd::CheckId(id(x), cost)
            }
            2 => {
                now += dt;
                Cmd::Check(cost)
            }
            3 => Cmd::Settle(id(x), u64::from(y % 8)),
            4 => Cmd::UndoId(id(x)),
            5 => Cmd::UndoMember(i64::from(x % 6)),
            6 => {
                // The clock steps back or on.
                now += i64::from(x as i8) * 20;
                continue;
            }
            _ => {
                // A client's effect, on both logs alike (the replica's
                // path): a charge or entries at a time up to 2.5 s around
                // the clock, members near the top; or a CUT.
                let at = (now + i64::from(y as i8) * 20).to_string();
                let top = log.runs().iter().map(|r| r.last()).max().unwrap_or(0);
                let first = (top + i64::from(z % 8) - 3).max(1).to_string();
                let count = (1 + z / 64).to_string();
                let r = id(x);
                let units = (z % 3).to_string();
                let args: Vec<&[u8]> = match z % 3 {
                    0 => vec![
                        b"CHARGE",
                        &r,
                        at.as_bytes(),
                        first.as_bytes(),
                        count.as_bytes(),
                    ],
                    1 => vec![b"CUT", &r, units.as_bytes()],
                    _ => vec![b"ADD", at.as_bytes(), first.as_bytes(), count.as_bytes()],
                };
                if let Ok(e) = Effect::parse(&args) {
                    let before = log.clone();
                    if e.apply(&mut log).is_err() {
                        assert!(log == before, "a refused effect changed the log");
                    }
                }
                loads_again(&log);
                continue;
            }
        };
        let mut twin = log.clone();
        let expires = log.expire_at_ms();
        let (held, unheld) = if let Cmd::UndoMember(k) = cmd {
            let top = log.runs().iter().map(|r| r.last()).max().unwrap_or(0);
            let mut h = hold.on(&mut log);
            h.expand();
            let a = format!("{:?}", h.remove(top - k));
            hold.settle(&mut log);
            (a, format!("{:?}", twin.remove(top - k)))
        } else {
            let mut h = hold.on(&mut log);
            h.expand();
            let a = run(&mut h, &cmd, now, &rule, expires);
            hold.settle(&mut log);
            (a, run(&mut twin, &cmd, now, &rule, expires))
        };
        assert_eq!(held, unheld, "reply to {cmd:?}");
        assert_eq!(shape(&log), shape(&twin), "log after {cmd:?}");
        loads_again(&log);
    }
});
