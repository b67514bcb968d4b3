//! `by_score`, the index's min-heap of slots by (score, slot).

use super::table::{grow, Slot};

/// `heap` (slots by score) ordered at `a` before `b`.
pub(super) fn before(slots: &[Slot], a: u32, b: u32) -> bool {
    let key = |s: u32| (slots.get(s as usize).map_or(i64::MAX, |x| x.score), s);
    key(a) < key(b)
}

fn heap_up(heap: &mut [u32], slots: &[Slot], mut i: usize) {
    while i > 0 {
        let parent = (i - 1) / 2;
        match (heap.get(i), heap.get(parent)) {
            (Some(&c), Some(&p)) if before(slots, c, p) => heap.swap(i, parent),
            _ => return,
        }
        i = parent;
    }
}

fn heap_down(heap: &mut [u32], slots: &[Slot], mut i: usize) {
    loop {
        let l = i.saturating_mul(2).saturating_add(1);
        let r = l.saturating_add(1);
        let mut m = i;
        for c in [l, r] {
            if let (Some(&x), Some(&y)) = (heap.get(c), heap.get(m)) {
                if before(slots, x, y) {
                    m = c;
                }
            }
        }
        if m == i {
            return;
        }
        heap.swap(i, m);
        i = m;
    }
}

pub(super) fn heap_push(heap: &mut Vec<u32>, slots: &[Slot], s: u32) {
    grow(heap, 1);
    heap.push(s);
    let at = heap.len() - 1;
    heap_up(heap, slots, at);
}

pub(super) fn heap_pop(heap: &mut Vec<u32>, slots: &[Slot]) -> Option<u32> {
    let last = heap.len().checked_sub(1)?;
    heap.swap(0, last);
    let top = heap.pop();
    heap_down(heap, slots, 0);
    top
}

pub(super) fn heapify(heap: &mut [u32], slots: &[Slot]) {
    for i in (0..heap.len() / 2).rev() {
        heap_down(heap, slots, i);
    }
}
