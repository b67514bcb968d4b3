//! Unit tests of `summary.rs`: exact counts, the Space-Saving guarantees on a
//! Zipf stream, eviction against a naive model, rotation, reset.
use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

fn key(i: usize) -> Vec<u8> {
    format!("sms:limit:{i}").into_bytes()
}

fn as_map(hitters: &[Hitter]) -> HashMap<Vec<u8>, (u64, u64)> {
    hitters
        .iter()
        .map(|h| (h.key.clone(), (h.count, h.error)))
        .collect()
}

#[test]
fn counts_are_exact_below_capacity() {
    let mut top = Top::new(16, 60_000);
    for i in 0..10 {
        for _ in 0..=i {
            top.record(1_000, Outcome::Denied, &key(i));
        }
    }
    top.record(1_000, Outcome::Allowed, &key(3));
    let got = top.top(1_500, Outcome::Denied, 3);
    assert_eq!(
        got,
        [9, 8, 7]
            .map(|i| Hitter {
                key: key(i),
                count: i as u64 + 1,
                error: 0
            })
            .to_vec()
    );
    assert_eq!(top.top(1_500, Outcome::Denied, 100).len(), 10);
    let allowed = top.top(1_500, Outcome::Allowed, 10);
    assert_eq!(allowed.len(), 1);
    assert_eq!(allowed[0].count, 1);
    assert_eq!(top.tracked_keys(), 11);
}

/// Draws from a Zipf(s = 1.1) distribution over `n` keys.
fn zipf(rng: &mut StdRng, cumulative: &[f64]) -> usize {
    let total = cumulative.last().copied().unwrap_or(1.0);
    let x = rng.random::<f64>() * total;
    cumulative
        .partition_point(|&c| c < x)
        .min(cumulative.len() - 1)
}

#[test]
fn heavy_hitters_are_listed_within_their_error_on_a_zipf_stream() {
    let n_keys = 5_000;
    let capacity = 64usize;
    let cumulative: Vec<f64> = (1..=n_keys)
        .scan(0.0, |acc, k| {
            *acc += 1.0 / (k as f64).powf(1.1);
            Some(*acc)
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    let mut top = Top::new(capacity as i64, 600_000);
    let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
    let records = 100_000u64;
    for _ in 0..records {
        let k = key(zipf(&mut rng, &cumulative));
        top.record(10_000, Outcome::Denied, &k);
        *truth.entry(k).or_default() += 1;
    }
    assert!(truth.len() > capacity * 10, "far more keys than slots");
    let got = as_map(&top.top(10_000, Outcome::Denied, capacity));
    assert_eq!(got.len(), capacity);
    // Every key seen more than N / capacity times is listed...
    let threshold = records / capacity as u64;
    let heavy: Vec<&Vec<u8>> = truth
        .iter()
        .filter(|(_, &c)| c > threshold)
        .map(|(k, _)| k)
        .collect();
    assert!(heavy.len() >= 3, "the stream has heavy hitters");
    for k in heavy {
        assert!(
            got.contains_key(k),
            "{:?} missing",
            String::from_utf8_lossy(k)
        );
    }
    // ...and every listed count is within its error of the truth.
    for (k, (count, error)) in &got {
        let t = truth.get(k).copied().unwrap_or(0);
        assert!(
            count - error <= t && t <= *count,
            "{k:?}: {t} vs {count}±{error}"
        );
        assert!(*error <= threshold, "error {error} above N/capacity");
    }
}

#[test]
fn eviction_keeps_the_bounds_against_a_naive_model() {
    let mut rng = StdRng::seed_from_u64(11);
    for capacity in [1usize, 2, 5, 8] {
        let mut top = Top::new(capacity as i64, 600_000);
        let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
        for step in 0..3_000u64 {
            let k = key(rng.random_range(0..20));
            top.record(1, Outcome::Allowed, &k);
            *truth.entry(k).or_default() += 1;
            if step % 97 == 0 {
                let got = top.top(1, Outcome::Allowed, capacity);
                assert!(got.len() <= capacity);
                let sum: u64 = got.iter().map(|h| h.count).sum();
                assert_eq!(sum, step + 1, "counts add up to the records");
                for h in &got {
                    let t = truth.get(&h.key).copied().unwrap_or(0);
                    assert!(h.count - h.error <= t && t <= h.count);
                }
            }
        }
    }
}

#[test]
fn epochs_rotate_and_old_waves_fade_out() {
    // Period 400 ms: four epochs of 100 ms.
    let mut top = Top::new(8, 400);
    for _ in 0..5 {
        top.record(1_000, Outcome::Denied, b"wave:1");
    }
    top.record(1_250, Outcome::Denied, b"wave:2");
    let got = as_map(&top.top(1_250, Outcome::Denied, 10));
    assert_eq!(got.get(b"wave:1".as_slice()), Some(&(5, 0)));
    assert_eq!(got.get(b"wave:2".as_slice()), Some(&(1, 0)));
    // At 1_399 the epoch of 1_000 is still one of the last four.
    assert_eq!(top.top(1_399, Outcome::Denied, 10).len(), 2);
    // From 1_400 on it has left the period; wave 2 stays until 1_600.
    let got = top.top(1_400, Outcome::Denied, 10);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].key, b"wave:2");
    assert!(top.top(1_600, Outcome::Denied, 10).is_empty());
    // A record four epochs later reuses the old slot, clearing it first.
    top.record(1_400, Outcome::Denied, b"wave:3");
    let got = top.top(1_400, Outcome::Denied, 10);
    assert_eq!(got.len(), 2);
}

#[test]
fn reset_off_and_long_keys() {
    let mut top = Top::new(4, 60_000);
    let long = vec![b'k'; MAX_KEY_BYTES + 10];
    top.record(5, Outcome::Denied, &long);
    top.record(5, Outcome::Denied, &long);
    let got = top.top(5, Outcome::Denied, 1);
    assert_eq!(got[0].count, 2);
    assert_eq!(got[0].key.len(), MAX_KEY_BYTES + 3);
    assert!(got[0].key.ends_with(b"k..."));
    top.reset();
    assert!(top.top(5, Outcome::Denied, 10).is_empty());
    assert_eq!(top.tracked_keys(), 0);

    let mut off = Top::new(0, 60_000);
    off.record(5, Outcome::Denied, b"x");
    assert!(!off.enabled());
    assert!(off.top(5, Outcome::Denied, 10).is_empty());
    assert!(off.has_settings(0, 60_000));
    assert!(!off.has_settings(1, 60_000));
}

#[test]
fn memory_is_bounded_by_the_capacity() {
    let mut top = Top::new(128, 300_000);
    for i in 0..100_000 {
        top.record(1, Outcome::Denied, &key(i));
        top.record(1, Outcome::Allowed, &key(i));
    }
    let full = top.memory_bytes();
    for i in 0..100_000 {
        top.record(2, Outcome::Denied, &key(i + 1_000_000));
    }
    assert_eq!(
        top.memory_bytes(),
        full,
        "no growth once the slots are used"
    );
    assert!(full < 128 * 2 * EPOCHS * 200, "{full} bytes");
}

#[test]
fn the_hash_spreads_similar_keys_over_the_table() {
    // Keys differing in one byte, anywhere, land in different buckets
    // nearly always (the table index is the low bits).
    let mut buckets = std::collections::HashSet::new();
    for i in 0..256u32 {
        buckets.insert(hash(format!("sms:limit:10.0.0.{i}").as_bytes()) & 511);
    }
    // 256 random draws over 512 buckets fill about 201 of them.
    assert!(buckets.len() > 180, "{} buckets of 256 keys", buckets.len());
    assert_ne!(hash(b"abcdefgh"), hash(b"abcdefgi"));
    assert_ne!(hash(b""), hash(b"\0"), "the length counts");
}
