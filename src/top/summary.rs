//! Who is being limited: the heavy hitters among the keys of recent
//! decisions, in fixed memory. Pure: no Redis types; the clock is an
//! argument.
//!
//! Each outcome (denied, allowed) keeps [`EPOCHS`] rotating epochs of
//! `period_ms / EPOCHS` each, and each epoch a Space-Saving summary
//! (Metwally, Agrawal, El Abbadi, 2005) of `capacity` keys: a key already
//! tracked counts up; a new key takes a free slot, or replaces the key with
//! the smallest count `m` and starts at `m + 1` with error `m`. So every
//! tracked key's true count lies in `[count - error, count]`, a key seen
//! more than `N / capacity` times in an epoch of `N` records is tracked,
//! and while an epoch has met fewer keys than `capacity` its counts are
//! exact. A query merges the epochs still inside the period; an epoch
//! older than the period is cleared when its slot comes round again, so a
//! wave fades out on its own.
//!
//! Recording costs one hash of the key (at most [`MAX_KEY_BYTES`] of it),
//! a probe of an open-addressing table and a sift in a heap of `capacity`:
//! O(log capacity), no allocation once an epoch's slots have been used.

/// Epochs per period: the counts cover between 3/4 of the period and the
/// whole of it.
pub const EPOCHS: usize = 4;
/// Longer keys are tracked by their first this-many bytes (reported with
/// `...` appended), which bounds the memory of a slot.
pub const MAX_KEY_BYTES: usize = 256;
/// Default of `slidewin.top-capacity`.
pub const DEFAULT_CAPACITY: i64 = 128;
/// Largest `slidewin.top-capacity`.
pub const MAX_CAPACITY: i64 = 100_000;
/// Default of `slidewin.top-period-ms`: five minutes.
pub const DEFAULT_PERIOD_MS: i64 = 300_000;
/// Smallest and largest `slidewin.top-period-ms`.
pub const MIN_PERIOD_MS: i64 = 100;
pub const MAX_PERIOD_MS: i64 = 86_400_000;

const EMPTY: u32 = u32::MAX;

/// Which decisions a summary counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Denied,
    Allowed,
}

/// One tracked key. Its count lives in the heap, next to its neighbours'
/// counts, so that a sift reads one contiguous array.
#[derive(Debug, Clone)]
struct Slot {
    key: Vec<u8>,
    /// Whether `key` was cut to `MAX_KEY_BYTES`.
    truncated: bool,
    hash: u64,
    error: u64,
}

/// One heap entry: a slot and its count.
#[derive(Debug, Clone, Copy)]
struct Counted {
    count: u64,
    slot: u32,
}

/// A Space-Saving summary of at most `capacity` keys. Laid out for the
/// hot path, where most records are keys not tracked yet (each evicts the
/// minimum): the table holds each entry's hash fingerprint beside its slot,
/// so probes and deletions never touch a slot; the heap holds the counts.
#[derive(Debug, Clone, Default)]
struct SpaceSaving {
    capacity: usize,
    slots: Vec<Slot>,
    /// Min-heap on count.
    heap: Vec<Counted>,
    /// Where each slot is in the heap.
    heap_pos: Vec<u32>,
    /// Open addressing (linear probing): (slot, low 32 bits of its hash);
    /// a power of two at least twice the capacity.
    table: Vec<(u32, u32)>,
}

/// A multiply-rotate hash over 8 bytes at a time (the key's length mixed
/// in), finished so the low bits (the table index) depend on every byte.
/// Not keyed: attacker-chosen keys can only lengthen probes in a table of at
/// most `4 * capacity` entries.
fn hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = (key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(31);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        if let Some(dst) = w.get_mut(..rest.len()) {
            dst.copy_from_slice(rest);
        }
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(31);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

/// The tracked form of a key: at most `MAX_KEY_BYTES`, and whether it was cut.
fn tracked(key: &[u8]) -> (&[u8], bool) {
    match key.get(..MAX_KEY_BYTES) {
        Some(head) if key.len() > MAX_KEY_BYTES => (head, true),
        _ => (key, false),
    }
}

const FREE: (u32, u32) = (EMPTY, 0);

impl SpaceSaving {
    fn new(capacity: usize) -> Self {
        let table_len = capacity.saturating_mul(2).max(2).next_power_of_two();
        SpaceSaving {
            capacity,
            slots: Vec::new(),
            heap: Vec::new(),
            heap_pos: Vec::new(),
            table: vec![FREE; if capacity == 0 { 0 } else { table_len }],
        }
    }

    fn clear(&mut self) {
        // Keep the slots' key buffers for reuse; forget their contents.
        self.heap.clear();
        self.table.iter_mut().for_each(|t| *t = FREE);
    }

    fn mask(&self) -> usize {
        self.table.len().saturating_sub(1)
    }

    /// The first table position from `h`'s home whose entry satisfies
    /// `stop` (linear probing over the whole table at most).
    fn probe(&self, h: u64, stop: impl Fn((u32, u32)) -> bool) -> Option<usize> {
        let mask = self.mask();
        let mut i = (h as usize) & mask;
        for _ in 0..self.table.len() {
            if stop(*self.table.get(i)?) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The table position holding `key`, or the empty one where it would go.
    fn find(&self, key: &[u8], h: u64) -> Option<(usize, Option<usize>)> {
        let fingerprint = h as u32;
        let i = self.probe(h, |(at, fp)| {
            at == EMPTY
                || (fp == fingerprint && self.slots.get(at as usize).is_some_and(|s| s.key == key))
        })?;
        let at = self.table.get(i)?.0;
        Some((i, (at != EMPTY).then_some(at as usize)))
    }

    /// The table position of the tracked slot `slot` whose key hashes to
    /// `h`: a probe comparing slot numbers, no key bytes.
    fn position_of(&self, slot: u32, h: u64) -> Option<usize> {
        let i = self.probe(h, |(at, _)| at == slot || at == EMPTY)?;
        (self.table.get(i)?.0 == slot).then_some(i)
    }

    /// The first empty table position from `h`'s home, for a key known to
    /// be absent.
    fn vacancy(&self, h: u64) -> Option<usize> {
        self.probe(h, |(at, _)| at == EMPTY)
    }

    /// Removes the table entry at `i` (backward-shift deletion, so probes
    /// never need tombstones). The fingerprints give each entry's home.
    fn unlink(&mut self, mut i: usize) {
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let Some(&entry) = self.table.get(j) else {
                return;
            };
            if entry.0 == EMPTY {
                break;
            }
            let home = (entry.1 as usize) & mask;
            // Move the entry at j back to i unless its home lies in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                if let Some(t) = self.table.get_mut(i) {
                    *t = entry;
                }
                i = j;
            }
        }
        if let Some(t) = self.table.get_mut(i) {
            *t = FREE;
        }
    }

    fn count_at(&self, heap_index: usize) -> u64 {
        self.heap.get(heap_index).map_or(u64::MAX, |c| c.count)
    }

    fn place(&mut self, heap_index: usize) {
        if let Some(c) = self.heap.get(heap_index) {
            if let Some(p) = self.heap_pos.get_mut(c.slot as usize) {
                *p = heap_index as u32;
            }
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place(a);
        self.place(b);
    }

    /// Restores the heap below `i` after its count grew: children move up
    /// into the hole until the entry fits (one write per level).
    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let Some(&item) = self.heap.get(i) else {
            return;
        };
        loop {
            let l = 2 * i + 1;
            let (Some(&left), right) = (self.heap.get(l), self.heap.get(l + 1)) else {
                break;
            };
            let (c, child) = match right {
                Some(&r) if l + 1 < n && r.count < left.count => (l + 1, r),
                _ => (l, left),
            };
            if child.count >= item.count {
                break;
            }
            if let Some(h) = self.heap.get_mut(i) {
                *h = child;
            }
            self.place(i);
            i = c;
        }
        if let Some(h) = self.heap.get_mut(i) {
            *h = item;
        }
        self.place(i);
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.count_at(parent) <= self.count_at(i) {
                return;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    /// Counts one record of `key`.
    fn record(&mut self, key: &[u8]) {
        if self.capacity == 0 {
            return;
        }
        let (key, truncated) = tracked(key);
        let h = hash(key);
        let Some((pos, found)) = self.find(key, h) else {
            return;
        };
        if let Some(s) = found {
            let at = self.heap_pos.get(s).map_or(usize::MAX, |&p| p as usize);
            if let Some(c) = self.heap.get_mut(at) {
                c.count = c.count.saturating_add(1);
                self.sift_down(at);
            }
            return;
        }
        if self.heap.len() < self.capacity {
            // A free slot: reuse a cleared one's buffer or add one.
            let s = self.heap.len();
            match self.slots.get_mut(s) {
                Some(old) => {
                    old.key.clear();
                    old.key.extend_from_slice(key);
                    old.truncated = truncated;
                    old.hash = h;
                    old.error = 0;
                }
                None => {
                    self.slots.push(Slot {
                        key: key.to_vec(),
                        truncated,
                        hash: h,
                        error: 0,
                    });
                    self.heap_pos.push(0);
                }
            }
            self.heap.push(Counted {
                count: 1,
                slot: s as u32,
            });
            self.place(s);
            if let Some(t) = self.table.get_mut(pos) {
                *t = (s as u32, h as u32);
            }
            self.sift_up(s);
            return;
        }
        // Full: the key with the smallest count gives its slot up.
        let Some(&Counted {
            count: min,
            slot: victim,
        }) = self.heap.first()
        else {
            return;
        };
        let old_pos = self
            .slots
            .get(victim as usize)
            .and_then(|v| self.position_of(victim, v.hash));
        if let Some(old_pos) = old_pos {
            self.unlink(old_pos);
        }
        // The table may have shifted: find the new key's place again.
        let Some(pos) = self.vacancy(h) else {
            return;
        };
        if let Some(v) = self.slots.get_mut(victim as usize) {
            v.key.clear();
            v.key.extend_from_slice(key);
            v.truncated = truncated;
            v.hash = h;
            v.error = min;
        }
        if let Some(t) = self.table.get_mut(pos) {
            *t = (victim, h as u32);
        }
        if let Some(root) = self.heap.first_mut() {
            root.count = min.saturating_add(1);
        }
        self.sift_down(0);
    }

    /// The smallest count when every slot is taken: the most an untracked
    /// key can have been seen; 0 while there is room.
    fn floor(&self) -> u64 {
        if self.heap.len() < self.capacity {
            0
        } else {
            self.count_at(0)
        }
    }

    /// The tracked keys with their counts.
    fn tracked(&self) -> impl Iterator<Item = (&Slot, u64)> {
        self.heap
            .iter()
            .filter_map(|c| self.slots.get(c.slot as usize).map(|s| (s, c.count)))
    }

    /// The count of the slot `s`.
    fn count_of(&self, s: usize) -> u64 {
        self.heap_pos
            .get(s)
            .and_then(|&p| self.heap.get(p as usize))
            .map_or(0, |c| c.count)
    }

    fn bytes(&self) -> usize {
        let slots: usize = self
            .slots
            .iter()
            .map(|s| std::mem::size_of::<Slot>() + s.key.capacity())
            .sum();
        slots
            + self.heap.capacity() * std::mem::size_of::<Counted>()
            + self.heap_pos.capacity() * 4
            + self.table.capacity() * 8
    }
}

/// One epoch of one outcome.
#[derive(Debug, Clone, Default)]
struct Epoch {
    /// Which epoch (`now_ms / epoch_ms`) it holds, if any.
    number: Option<i64>,
    summary: SpaceSaving,
}

/// The heavy hitters of denied and of allowed decisions.
#[derive(Debug, Clone)]
pub struct Top {
    capacity: usize,
    period_ms: i64,
    denied: Vec<Epoch>,
    allowed: Vec<Epoch>,
    /// The epoch of the last record, `[start, end)` in ms, its number and
    /// slot: most records fall in it, and then need no division.
    current: Option<(i64, i64, i64, usize)>,
}

/// One reported key: its name, its count over the period (an upper bound)
/// and how far above the true count it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hitter {
    pub key: Vec<u8>,
    pub count: u64,
    pub error: u64,
}

impl Top {
    /// A summary of `capacity` keys per epoch (0: off) over `period_ms`.
    pub fn new(capacity: i64, period_ms: i64) -> Self {
        let capacity = usize::try_from(capacity.clamp(0, MAX_CAPACITY)).unwrap_or(0);
        let epochs = || {
            (0..EPOCHS)
                .map(|_| Epoch {
                    number: None,
                    summary: SpaceSaving::new(capacity),
                })
                .collect()
        };
        Top {
            capacity,
            period_ms: period_ms.clamp(MIN_PERIOD_MS, MAX_PERIOD_MS),
            denied: epochs(),
            allowed: epochs(),
            current: None,
        }
    }

    /// Whether this summary has the given settings.
    pub fn has_settings(&self, capacity: i64, period_ms: i64) -> bool {
        usize::try_from(capacity).ok() == Some(self.capacity)
            && period_ms.clamp(MIN_PERIOD_MS, MAX_PERIOD_MS) == self.period_ms
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    fn epoch_ms(&self) -> i64 {
        (self.period_ms / EPOCHS as i64).max(1)
    }

    fn epochs_mut(&mut self, outcome: Outcome) -> &mut Vec<Epoch> {
        match outcome {
            Outcome::Denied => &mut self.denied,
            Outcome::Allowed => &mut self.allowed,
        }
    }

    /// Counts one decision on `key` at `now_ms`.
    pub fn record(&mut self, now_ms: i64, outcome: Outcome, key: &[u8]) {
        if self.capacity == 0 {
            return;
        }
        let (number, slot) = match self.current {
            Some((start, end, number, slot)) if start <= now_ms && now_ms < end => (number, slot),
            _ => {
                let epoch_ms = self.epoch_ms();
                let number = now_ms.div_euclid(epoch_ms);
                let slot = number.rem_euclid(EPOCHS as i64) as usize;
                let start = number.saturating_mul(epoch_ms);
                self.current = Some((start, start.saturating_add(epoch_ms), number, slot));
                (number, slot)
            }
        };
        let Some(epoch) = self.epochs_mut(outcome).get_mut(slot) else {
            return;
        };
        if epoch.number != Some(number) {
            epoch.summary.clear();
            epoch.number = Some(number);
        }
        epoch.summary.record(key);
    }

    /// The `count` keys with the most decisions of `outcome` in the period
    /// up to `now_ms`, most first (ties by key).
    pub fn top(&self, now_ms: i64, outcome: Outcome, count: usize) -> Vec<Hitter> {
        let current = now_ms.div_euclid(self.epoch_ms());
        let epochs = match outcome {
            Outcome::Denied => &self.denied,
            Outcome::Allowed => &self.allowed,
        };
        let live: Vec<&SpaceSaving> = epochs
            .iter()
            .filter(|e| {
                e.number
                    .is_some_and(|n| n <= current && n > current - EPOCHS as i64)
            })
            .map(|e| &e.summary)
            .collect();
        let mut merged: std::collections::HashMap<(&[u8], bool), (u64, u64)> =
            std::collections::HashMap::new();
        for s in &live {
            for (slot, _) in s.tracked() {
                merged.entry((&slot.key, slot.truncated)).or_insert((0, 0));
            }
        }
        let mut out: Vec<Hitter> = merged
            .into_keys()
            .map(|(key, truncated)| {
                let (mut count, mut error) = (0u64, 0u64);
                let h = hash(key);
                for s in &live {
                    match s.find(key, h).and_then(|(_, found)| found) {
                        Some(i) => {
                            if let Some(slot) = s.slots.get(i) {
                                count = count.saturating_add(s.count_of(i));
                                error = error.saturating_add(slot.error);
                            }
                        }
                        None => {
                            let floor = s.floor();
                            count = count.saturating_add(floor);
                            error = error.saturating_add(floor);
                        }
                    }
                }
                let mut name = key.to_vec();
                if truncated {
                    name.extend_from_slice(b"...");
                }
                Hitter {
                    key: name,
                    count,
                    error,
                }
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        out.truncate(count);
        out
    }

    /// Forgets every count.
    pub fn reset(&mut self) {
        self.current = None;
        for e in self.denied.iter_mut().chain(self.allowed.iter_mut()) {
            e.summary.clear();
            e.number = None;
        }
    }

    /// Keys tracked now, over every epoch and both outcomes.
    pub fn tracked_keys(&self) -> usize {
        self.denied
            .iter()
            .chain(&self.allowed)
            .map(|e| e.summary.heap.len())
            .sum()
    }

    /// Bytes the summary holds (its structures and key buffers).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .denied
                .iter()
                .chain(&self.allowed)
                .map(|e| std::mem::size_of::<Epoch>() + e.summary.bytes())
                .sum::<usize>()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn period_ms(&self) -> i64 {
        self.period_ms
    }
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
