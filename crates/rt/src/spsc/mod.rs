//! A bounded single-producer, single-consumer queue for passing data between a
//! real-time thread and the rest of the program without locks (the Hyades paper's
//! asymmetric RT / non-RT communication).
//!
//! - wait-free on both sides: `push` and `pop` take a bounded number of steps
//!   and never block, spin or retry;
//! - no allocation after [`channel`] returns: the slots are allocated once;
//! - the two indices live on separate cache lines, and each side caches the
//!   other's index, so an uncontended operation touches one shared line;
//! - each handle keeps the slot array's address and the index mask itself, so
//!   an operation reads no shared read-only line either and needs no bounds
//!   check (a masked position is always inside the array).
//!
//! ```
//! let (mut tx, mut rx) = cpushield_rt::spsc::channel::<u64>(1024).unwrap();
//! tx.push(7).unwrap();
//! assert_eq!(rx.pop(), Some(7));
//! assert_eq!(rx.pop(), None);
//! ```

mod ring;

#[cfg(not(loom))]
pub mod bytes;

pub use ring::MAX_CAPACITY;

use crate::sync::{Arc, UnsafeCell};
use ring::{ConsumerCursor, Indices, ProducerCursor};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

struct Shared<T> {
    idx: Indices,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot is written only by the producer while it is free and read
// only by the consumer after the Release store of `tail` that published it
// (and vice versa for `head`), so no slot is accessed from two threads at once.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: sending the shared ring moves only its `T`s' ownership with it
// (T: Send); access after the move follows the Sync argument above.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let positions: Vec<usize> = self.idx.occupied().collect();
        for pos in positions {
            // SAFETY: both handles are gone; these slots hold initialised items.
            self.slots[pos].with_mut(|p| unsafe { (*p).assume_init_drop() });
        }
    }
}

/// A slot of the queue.
type Slot<T> = UnsafeCell<MaybeUninit<T>>;

/// The sending half. Only one exists per queue; move it to the producing thread.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// The first of `shared.slots`, which stay where they are while `shared` lives.
    slots: NonNull<Slot<T>>,
    cursor: ProducerCursor,
}

/// The receiving half. Only one exists per queue; move it to the consuming thread.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// The first of `shared.slots`, which stay where they are while `shared` lives.
    slots: NonNull<Slot<T>>,
    cursor: ConsumerCursor,
}

// SAFETY: the handle owns one side of the queue; `slots` points into the
// `Shared` that its `Arc` keeps alive, and a slot is touched only by the side
// the index protocol gives it to, so sending a handle to another thread is as
// safe as sending the `Arc<Shared<T>>` it holds. Shared access (`&Producer`)
// reads only the atomic indices.
unsafe impl<T: Send> Send for Producer<T> {}
// SAFETY: as for `Send`: `&self` methods read only the atomic indices.
unsafe impl<T: Send> Sync for Producer<T> {}
// SAFETY: as for the producer.
unsafe impl<T: Send> Send for Consumer<T> {}
// SAFETY: as for the producer.
unsafe impl<T: Send> Sync for Consumer<T> {}

/// The slot at `pos` of the array starting at `first`.
///
/// # Safety
/// `pos` is below the queue's slot count (true of every position a cursor
/// returns), and the `Arc<Shared<T>>` the array belongs to is alive for `'a`.
#[inline(always)]
unsafe fn slot<'a, T>(first: NonNull<Slot<T>>, pos: usize) -> &'a Slot<T> {
    // SAFETY: pos is inside the array (the caller's promise), which lives for 'a.
    unsafe { first.add(pos).as_ref() }
}

/// Creates a queue holding at least `capacity` items (rounded up to a power of
/// two). Returns `None` for a capacity of 0 or above [`MAX_CAPACITY`].
pub fn channel<T: Send>(capacity: usize) -> Option<(Producer<T>, Consumer<T>)> {
    let slots = ring::slot_count(capacity)?;
    let shared = Arc::new(Shared {
        idx: Indices::new(slots),
        slots: (0..slots)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect(),
    });
    // From the whole slice, so the pointer may reach every slot.
    let first = NonNull::from(&*shared.slots).cast::<Slot<T>>();
    Some((
        Producer {
            shared: shared.clone(),
            slots: first,
            cursor: ProducerCursor::new(&shared.idx),
        },
        Consumer {
            slots: first,
            cursor: ConsumerCursor::new(&shared.idx),
            shared,
        },
    ))
}

impl<T> Producer<T> {
    /// Appends `value`, or gives it back if the queue is full. Wait-free.
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let idx = &self.shared.idx;
        match self.cursor.claim(idx) {
            Some(pos) => {
                // SAFETY: claim's positions are below the slot count, and
                // `self.shared` keeps the array alive.
                let slot = unsafe { slot(self.slots, pos) };
                // SAFETY: the slot is free (claim saw head past it) and only
                // this producer writes slots.
                slot.with_mut(|p| unsafe { (*p).write(value) });
                self.cursor.publish(idx);
                Ok(())
            }
            None => Err(value),
        }
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.idx.capacity()
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

impl<T> Consumer<T> {
    /// Takes the oldest item, or `None` if the queue is empty. Wait-free.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let idx = &self.shared.idx;
        let pos = self.cursor.peek(idx)?;
        // SAFETY: peek's positions are below the slot count, and `self.shared`
        // keeps the array alive.
        let slot = unsafe { slot(self.slots, pos) };
        // SAFETY: the slot was published by the producer's Release store of
        // `tail`, seen by peek's Acquire load; only this consumer reads it.
        let value = slot.with(|p| unsafe { (*p).assume_init_read() });
        self.cursor.release(idx);
        Some(value)
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.idx.capacity()
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};

    /// Pins the calling thread to CPU 1 where the machine has one (Miri cannot pin).
    pub(crate) fn stay_on_cpu1() {
        if !cfg!(miri) {
            let _ = crate::sched::pin(0, &cpushield_cpuset::CpuSet::from_cpus([1]));
        }
    }

    #[test]
    fn items_come_out_in_the_order_they_went_in() {
        let (mut tx, mut rx) = channel(4).unwrap();
        for i in 0..3 {
            tx.push(i).unwrap();
        }
        assert_eq!(rx.pop(), Some(0));
        tx.push(3).unwrap();
        tx.push(4).unwrap();
        assert_eq!(
            (1..5).map(|_| rx.pop().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn a_full_queue_gives_the_value_back() {
        let (mut tx, mut rx) = channel(2).unwrap();
        tx.push("a").unwrap();
        tx.push("b").unwrap();
        assert_eq!(tx.push("c"), Err("c"));
        assert_eq!(tx.len(), 2);
        assert_eq!(rx.pop(), Some("a"));
        tx.push("c").unwrap();
    }

    #[test]
    fn handles_of_send_items_can_be_sent_and_shared_between_threads() {
        // Compile-time: the handles hold a raw slot pointer, so Send and Sync
        // come from explicit impls; this fails to build if they go missing.
        fn send_and_sync<X: Send + Sync>() {}
        send_and_sync::<Producer<String>>();
        send_and_sync::<Consumer<String>>();
    }

    #[test]
    fn zero_capacity_is_refused() {
        assert!(channel::<u8>(0).is_none());
    }

    #[test]
    fn items_left_in_the_queue_are_dropped_with_it() {
        static DROPS: StdAtomicUsize = StdAtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, StdOrdering::SeqCst);
            }
        }
        let (mut tx, mut rx) = channel(8).unwrap();
        for _ in 0..5 {
            assert!(tx.push(Counted).is_ok());
        }
        drop(rx.pop());
        drop(tx);
        drop(rx);
        assert_eq!(DROPS.load(StdOrdering::SeqCst), 5);
    }

    #[test]
    fn two_threads_pass_items_in_order_without_loss() {
        // Small enough for Miri (`cargo +nightly miri test -p cpushield-rt --lib spsc`);
        // the millions-of-items stress run is tests/spsc_stress.rs.
        // Both threads stay on CPU 1: nothing here may spin on CPU 0.
        let n: u64 = if cfg!(miri) { 200 } else { 100_000 };
        let (mut tx, mut rx) = channel::<u64>(16).unwrap();
        stay_on_cpu1();
        let producer = std::thread::spawn(move || {
            stay_on_cpu1();
            for i in 0..n {
                let mut item = i;
                while let Err(back) = tx.push(item) {
                    item = back;
                    std::thread::yield_now();
                }
            }
        });
        let mut expected = 0;
        while expected < n {
            match rx.pop() {
                Some(v) => {
                    assert_eq!(v, expected);
                    expected += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(rx.pop(), None);
    }
}
