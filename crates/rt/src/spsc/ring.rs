//! The index protocol shared by the typed and the byte queue: two monotonically
//! increasing counters, each written by one side only, on their own cache lines,
//! and a private cursor per side that caches the other side's counter (and
//! keeps its own copy of the index mask) so the common case touches no shared
//! line it does not own: not even a read-only one.
//!
//! Every operation is a bounded number of steps (no retry loop): wait-free on
//! both sides.

use crate::sync::{AtomicUsize, CachePadded, Ordering};

/// The largest capacity accepted (slots, after rounding up to a power of two).
pub const MAX_CAPACITY: usize = 1 << 30;

/// The shared counters. `head` is the next slot to read (written by the
/// consumer); `tail` is the next slot to write (written by the producer).
#[derive(Debug)]
pub(crate) struct Indices {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    mask: usize,
}

/// Rounds a requested capacity up to a power of two, or refuses it.
pub(crate) fn slot_count(capacity: usize) -> Option<usize> {
    if capacity == 0 || capacity > MAX_CAPACITY {
        return None;
    }
    Some(capacity.next_power_of_two())
}

impl Indices {
    /// Counters for `slots` slots (a power of two).
    pub(crate) fn new(slots: usize) -> Self {
        debug_assert!(slots.is_power_of_two());
        Self {
            head: CachePadded(AtomicUsize::new(0)),
            tail: CachePadded(AtomicUsize::new(0)),
            mask: slots - 1,
        }
    }

    /// The number of slots.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Items in the queue at some moment during the call.
    pub(crate) fn len(&self) -> usize {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Acquire);
        tail.wrapping_sub(head)
    }

    /// The slot positions still holding items, for dropping them once neither
    /// side exists any more.
    pub(crate) fn occupied(&mut self) -> impl Iterator<Item = usize> {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Acquire);
        let mask = self.mask;
        (0..tail.wrapping_sub(head)).map(move |i| head.wrapping_add(i) & mask)
    }
}

/// The producer's private state: its own tail, the last head it saw and a
/// copy of the mask.
#[derive(Debug)]
pub(crate) struct ProducerCursor {
    tail: usize,
    cached_head: usize,
    mask: usize,
}

impl ProducerCursor {
    /// The cursor of a new queue's producer.
    pub(crate) fn new(idx: &Indices) -> Self {
        Self {
            tail: 0,
            cached_head: 0,
            mask: idx.mask,
        }
    }

    /// The slot to write next, or `None` if the queue is full. The position
    /// returned is always below the queue's slot count.
    #[inline]
    pub(crate) fn claim(&mut self, idx: &Indices) -> Option<usize> {
        let capacity = self.mask + 1;
        if self.tail.wrapping_sub(self.cached_head) == capacity {
            self.cached_head = idx.head.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) == capacity {
                return None;
            }
        }
        Some(self.tail & self.mask)
    }

    /// Makes the slot returned by `claim` visible to the consumer.
    #[inline]
    pub(crate) fn publish(&mut self, idx: &Indices) {
        self.tail = self.tail.wrapping_add(1);
        idx.tail.store(self.tail, Ordering::Release);
    }
}

/// The consumer's private state: its own head, the last tail it saw and a
/// copy of the mask.
#[derive(Debug)]
pub(crate) struct ConsumerCursor {
    head: usize,
    cached_tail: usize,
    mask: usize,
}

impl ConsumerCursor {
    /// The cursor of a new queue's consumer.
    pub(crate) fn new(idx: &Indices) -> Self {
        Self {
            head: 0,
            cached_tail: 0,
            mask: idx.mask,
        }
    }

    /// The slot to read next, or `None` if the queue is empty. The position
    /// returned is always below the queue's slot count.
    #[inline]
    pub(crate) fn peek(&mut self, idx: &Indices) -> Option<usize> {
        if self.head == self.cached_tail {
            self.cached_tail = idx.tail.load(Ordering::Acquire);
            if self.head == self.cached_tail {
                return None;
            }
        }
        Some(self.head & self.mask)
    }

    /// Hands the slot returned by `peek` back to the producer.
    #[inline]
    pub(crate) fn release(&mut self, idx: &Indices) {
        self.head = self.head.wrapping_add(1);
        idx.head.store(self.head, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacities_round_up_to_a_power_of_two_and_zero_is_refused() {
        assert_eq!(slot_count(0), None);
        assert_eq!(slot_count(1), Some(1));
        assert_eq!(slot_count(3), Some(4));
        assert_eq!(slot_count(1024), Some(1024));
        assert_eq!(slot_count(MAX_CAPACITY + 1), None);
    }

    #[test]
    fn cursors_report_full_and_empty_across_counter_wraparound() {
        let idx = Indices::new(2);
        // Start both sides just below usize::MAX so the counters wrap.
        let start = usize::MAX - 1;
        idx.head.store(start, Ordering::Relaxed);
        idx.tail.store(start, Ordering::Relaxed);
        let mut p = ProducerCursor {
            tail: start,
            cached_head: start,
            ..ProducerCursor::new(&idx)
        };
        let mut c = ConsumerCursor {
            head: start,
            cached_tail: start,
            ..ConsumerCursor::new(&idx)
        };
        assert_eq!(c.peek(&idx), None);
        for _ in 0..2 {
            assert!(p.claim(&idx).is_some());
            p.publish(&idx);
        }
        assert_eq!(p.claim(&idx), None, "two slots, two items: full");
        assert_eq!(idx.len(), 2);
        assert!(c.peek(&idx).is_some());
        c.release(&idx);
        assert!(p.claim(&idx).is_some(), "one slot freed");
    }
}
