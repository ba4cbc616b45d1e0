//! The same queue for items of a size known only at run time (the C API's
//! `cps_spsc_*`): every item is `item_size` bytes, copied in and out.

use super::ring::{self, ConsumerCursor, Indices, ProducerCursor};
use std::cell::UnsafeCell;
use std::sync::Arc;

struct Shared {
    idx: Indices,
    item_size: usize,
    /// `capacity * item_size` bytes; slot `i` is bytes `i*item_size..(i+1)*item_size`.
    buf: Box<[UnsafeCell<u8>]>,
}

// SAFETY: as for the typed queue: a slot's bytes are written only by the
// producer while free and read only by the consumer once published.
unsafe impl Sync for Shared {}

impl Shared {
    /// A pointer to slot `pos` with the provenance of the whole buffer.
    #[inline]
    fn slot(&self, pos: usize) -> *mut u8 {
        // SAFETY: pos < capacity, so the offset is inside the buffer.
        UnsafeCell::raw_get(unsafe { self.buf.as_ptr().add(pos * self.item_size) })
    }
}

/// The sending half of a byte queue.
pub struct ByteProducer {
    shared: Arc<Shared>,
    cursor: ProducerCursor,
}

/// The receiving half of a byte queue.
pub struct ByteConsumer {
    shared: Arc<Shared>,
    cursor: ConsumerCursor,
}

/// Creates a queue of at least `capacity` items (rounded up to a power of two)
/// of `item_size` bytes each. Returns `None` if either is 0 or the buffer
/// would not fit in memory's address range.
pub fn channel(capacity: usize, item_size: usize) -> Option<(ByteProducer, ByteConsumer)> {
    let slots = ring::slot_count(capacity)?;
    if item_size == 0 {
        return None;
    }
    let bytes = slots.checked_mul(item_size)?;
    if bytes > isize::MAX as usize {
        return None;
    }
    let shared = Arc::new(Shared {
        idx: Indices::new(slots),
        item_size,
        buf: (0..bytes).map(|_| UnsafeCell::new(0)).collect(),
    });
    let (pc, cc) = (
        ProducerCursor::new(&shared.idx),
        ConsumerCursor::new(&shared.idx),
    );
    Some((
        ByteProducer {
            shared: shared.clone(),
            cursor: pc,
        },
        ByteConsumer { shared, cursor: cc },
    ))
}

impl ByteProducer {
    /// Copies one item in; returns false if the queue is full. Wait-free.
    ///
    /// # Panics
    /// If `item` is not exactly `item_size` bytes.
    #[inline]
    pub fn push(&mut self, item: &[u8]) -> bool {
        let shared = &*self.shared;
        assert_eq!(item.len(), shared.item_size, "item size");
        match self.cursor.claim(&shared.idx) {
            Some(pos) => {
                // SAFETY: the slot is free and only this producer writes slots.
                unsafe {
                    std::ptr::copy_nonoverlapping(item.as_ptr(), shared.slot(pos), item.len())
                };
                self.cursor.publish(&shared.idx);
                true
            }
            None => false,
        }
    }

    /// Bytes per item.
    pub fn item_size(&self) -> usize {
        self.shared.item_size
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.idx.capacity()
    }
}

impl ByteConsumer {
    /// Copies the oldest item into `out`; returns false if the queue is empty.
    /// Wait-free.
    ///
    /// # Panics
    /// If `out` is not exactly `item_size` bytes.
    #[inline]
    pub fn pop(&mut self, out: &mut [u8]) -> bool {
        let shared = &*self.shared;
        assert_eq!(out.len(), shared.item_size, "item size");
        match self.cursor.peek(&shared.idx) {
            Some(pos) => {
                // SAFETY: the slot was published (Acquire in peek) and only this
                // consumer reads it.
                unsafe {
                    std::ptr::copy_nonoverlapping(shared.slot(pos), out.as_mut_ptr(), out.len())
                };
                self.cursor.release(&shared.idx);
                true
            }
            None => false,
        }
    }

    /// Bytes per item.
    pub fn item_size(&self) -> usize {
        self.shared.item_size
    }

    /// Items waiting at some moment during the call.
    pub fn len(&self) -> usize {
        self.shared.idx.len()
    }

    /// Whether no item was waiting at some moment during the call.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_items_round_trip_in_order() {
        let (mut tx, mut rx) = channel(2, 3).unwrap();
        assert!(tx.push(b"abc"));
        assert!(tx.push(b"def"));
        assert!(!tx.push(b"ghi"), "full at two items");
        let mut out = [0u8; 3];
        assert!(rx.pop(&mut out));
        assert_eq!(&out, b"abc");
        assert!(tx.push(b"ghi"));
        assert!(rx.pop(&mut out));
        assert_eq!(&out, b"def");
        assert!(rx.pop(&mut out));
        assert_eq!(&out, b"ghi");
        assert!(!rx.pop(&mut out));
    }

    #[test]
    fn zero_sized_items_and_zero_capacity_are_refused() {
        assert!(channel(4, 0).is_none());
        assert!(channel(0, 4).is_none());
        assert!(channel(1 << 30, usize::MAX / 2).is_none());
    }

    #[test]
    fn two_threads_pass_byte_items_in_order() {
        let n: u32 = if cfg!(miri) { 100 } else { 50_000 };
        let (mut tx, mut rx) = channel(8, 4).unwrap();
        super::super::tests::stay_on_cpu1();
        let producer = std::thread::spawn(move || {
            super::super::tests::stay_on_cpu1();
            for i in 0..n {
                while !tx.push(&i.to_le_bytes()) {
                    std::thread::yield_now();
                }
            }
        });
        let mut out = [0u8; 4];
        for i in 0..n {
            while !rx.pop(&mut out) {
                std::thread::yield_now();
            }
            assert_eq!(u32::from_le_bytes(out), i);
        }
        producer.join().unwrap();
    }
}
