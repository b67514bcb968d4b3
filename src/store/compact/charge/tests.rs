//! The records against a plain model, and the two forms at their boundary.

use super::super::bounds::{Bound, MAX_CHARGES, MAX_CHARGE_SPANS, MAX_REQUEST_ID};
use super::build::RecordsBuilder;
use super::table::{Record, Records, Span, SMALL_CHARGES};

/// A plain model of the records: (request, score, spans), by request.
type Model = Vec<(Vec<u8>, i64, Vec<Span>)>;

fn model_of(r: &Records) -> Model {
    r.iter()
        .map(|r| (r.request.to_vec(), r.score, r.spans))
        .collect()
}

fn units(spans: &[Span]) -> u64 {
    spans.iter().map(|s| s.count).sum()
}

/// A small xorshift: the same sequence every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Ids a client might pick to hurt: one byte, the longest, the same
/// bytes at two lengths, prefixes of each other, all 0xff, all 0.
fn hostile_ids() -> Vec<Vec<u8>> {
    let mut ids = vec![
        vec![0u8],
        vec![0u8; 2],
        vec![0u8; MAX_REQUEST_ID],
        vec![0xffu8; MAX_REQUEST_ID],
        vec![0xffu8],
        b"a".to_vec(),
        b"ab".to_vec(),
        b"abc".to_vec(),
        vec![b'x'; 127],
        vec![b'x'; 128],
    ];
    for i in 0..14u8 {
        ids.push(vec![b'k', i, 0, i]);
    }
    ids
}

#[test]
fn small_and_large_forms_meet_at_the_boundary() {
    let mut r = Records::default();
    let mut next = 1i64;
    for i in 0..=SMALL_CHARGES {
        let id = [b'r', i as u8];
        r.add_span(
            &id,
            10 + i as i64,
            Span {
                first: next,
                count: 2,
            },
        )
        .unwrap();
        next += 2;
        r.check().unwrap();
        // No index up to SMALL_CHARGES charges, one past it.
        assert_eq!(
            r.index.is_some(),
            r.len() > SMALL_CHARGES,
            "{} charges",
            r.len()
        );
    }
    // Back down: the index stays above half, goes at half.
    let mut left = r.len();
    let mut i = 0u8;
    while left > 0 {
        let id = [b'r', i];
        assert_eq!(r.cut(&id, 0).len(), 1);
        left -= 1;
        i += 1;
        if left == 0 {
            assert!(r.is_empty());
            break;
        }
        r.check().unwrap();
        assert_eq!(
            r.index.is_some(),
            left > SMALL_CHARGES / 2,
            "{left} charges"
        );
        // Every member of the charges left is held, none of the gone.
        for m in 1..next {
            let owner = (m - 1) / 2;
            assert_eq!(r.holds(m), owner >= i64::from(i), "member {m}");
        }
    }
    // A table made at the boundary by the loader takes the same form.
    for n in [SMALL_CHARGES, SMALL_CHARGES + 1] {
        let mut b = RecordsBuilder::default();
        for i in 0..n {
            b.push(Record {
                request: vec![b'r', i as u8].into(),
                score: 5,
                spans: vec![Span {
                    first: 3 * i as i64,
                    count: 2,
                }],
            })
            .unwrap();
        }
        let r = b.finish().unwrap();
        r.check().unwrap();
        assert_eq!(r.index.is_some(), n > SMALL_CHARGES);
    }
}

#[test]
fn a_few_charges_take_two_blocks() {
    let mut r = Records::default();
    for i in 0..SMALL_CHARGES {
        let mut id = [7u8; 16];
        id[0] = i as u8;
        r.add_span(
            &id,
            i as i64,
            Span {
                first: 2 * i as i64,
                count: 1,
            },
        )
        .unwrap();
    }
    let mut blocks = Vec::new();
    r.heap_blocks(&mut blocks);
    // The slots and the ids: no index, no further spans.
    assert_eq!(blocks.len(), 2);
    assert_eq!(r.slots.capacity(), r.len());
    assert_eq!(r.ids.len(), 17 * SMALL_CHARGES);
}

/// Every change against the model, over hostile ids, repeated ids,
/// scores out of order, spans given back and taken again; the index
/// and the forms checked after each.
#[test]
fn agrees_with_a_plain_model() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let ids = hostile_ids();
        let mut r = Records::default();
        let mut model: Model = Vec::new();
        let mut next = 1i64;
        for step in 0..400 {
            let ctx = format!("seed {seed} step {step}");
            match rng.below(10) {
                0..=4 => {
                    let id = &ids[rng.below(ids.len() as u64) as usize];
                    let score = rng.below(100) as i64;
                    // Fresh ids, now and then right after the last.
                    let first = if rng.below(3) == 0 { next } else { next + 1 };
                    let span = Span {
                        first,
                        count: 1 + rng.below(3),
                    };
                    let at = model.iter().position(|m| &m.0 == id);
                    let expect = match at {
                        None if model.len() >= MAX_CHARGES => Err(Bound::Charges),
                        Some(i)
                            if model[i].2.len() >= MAX_CHARGE_SPANS
                                && model[i].2.last().unwrap().last() + 1 != first =>
                        {
                            Err(Bound::ChargeSpans)
                        }
                        _ => Ok(()),
                    };
                    assert_eq!(r.add_span(id, score, span), expect, "{ctx}");
                    if expect.is_ok() {
                        next = span.last() + 1;
                        match at {
                            None => {
                                model.push((id.clone(), score, vec![span]));
                                model.sort_by(|a, b| a.0.cmp(&b.0));
                            }
                            Some(i) => {
                                let spans = &mut model[i].2;
                                let l = spans.last_mut().unwrap();
                                if l.last() + 1 == span.first {
                                    l.count += span.count;
                                } else {
                                    spans.push(span);
                                }
                            }
                        }
                    }
                }
                5 | 6 => {
                    let id = &ids[rng.below(ids.len() as u64) as usize];
                    let at = model.iter().position(|m| &m.0 == id);
                    let keep = at.map_or(0, |i| rng.below(units(&model[i].2) + 1));
                    let gone = r.cut(id, keep);
                    let took: u64 = units(&gone);
                    if let Some(i) = at {
                        assert_eq!(took, units(&model[i].2) - keep, "{ctx}");
                        let mut left = keep;
                        let spans: Vec<Span> = model[i]
                            .2
                            .iter()
                            .filter_map(|s| {
                                let c = s.count.min(left);
                                left -= c;
                                (c > 0).then_some(Span {
                                    first: s.first,
                                    count: c,
                                })
                            })
                            .collect();
                        if spans.is_empty() {
                            model.remove(i);
                        } else {
                            model[i].2 = spans;
                        }
                    } else {
                        assert!(gone.is_empty(), "{ctx}");
                    }
                }
                7 => {
                    let cutoff = rng.below(60) as i64 - 10;
                    let before = model.len();
                    model.retain(|m| m.1 > cutoff);
                    assert_eq!(r.trim(cutoff), before - model.len(), "{ctx}");
                }
                _ => {
                    // A hundred new charges scored in order, then
                    // trimmed in order: the heap's order, kept.
                    if model.is_empty() && rng.below(4) == 0 {
                        for i in 0..40i64 {
                            let id = [b'o', i as u8];
                            r.add_span(
                                &id,
                                200 + i,
                                Span {
                                    first: next,
                                    count: 1,
                                },
                            )
                            .unwrap();
                            model.push((
                                id.to_vec(),
                                200 + i,
                                vec![Span {
                                    first: next,
                                    count: 1,
                                }],
                            ));
                            next += 1;
                        }
                        model.sort_by(|a, b| a.0.cmp(&b.0));
                        for cut in (200..240).step_by(7) {
                            let before = model.len();
                            model.retain(|m| m.1 > cut);
                            assert_eq!(r.trim(cut), before - model.len(), "{ctx}");
                            r.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        }
                    }
                }
            }
            if model.is_empty() {
                assert!(r.is_empty(), "{ctx}");
                r = Records::default();
                continue;
            }
            r.check().unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(model_of(&r), model, "{ctx}");
            for (id, score, spans) in &model {
                let got = r.get(id).unwrap();
                assert_eq!((got.score, got.units()), (*score, units(spans)), "{ctx}");
            }
            for _ in 0..8 {
                let m = rng.below(next as u64 + 2) as i64;
                let held = model
                    .iter()
                    .any(|(_, _, ss)| ss.iter().any(|s| s.first <= m && m <= s.last()));
                assert_eq!(r.holds(m), held, "{ctx}: member {m}");
            }
            // What the loader builds from the same records is the same.
            let mut b = RecordsBuilder::default();
            for rec in r.iter() {
                b.push(rec).unwrap();
            }
            let loaded = b.finish().unwrap();
            loaded.check().unwrap();
            assert_eq!(loaded, r, "{ctx}");
        }
    }
}
