//! The queue's index protocol under loom's model checker, which runs every
//! interleaving (and every weak-memory outcome loom models) of a producer and
//! a consumer. Build with the loom cfg:
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p cpushield-rt --test loom_spsc --release`
#![cfg(loom)]

use cpushield_rt::spsc;
use loom::thread;

#[test]
fn every_interleaving_delivers_items_in_order_through_a_full_queue() {
    loom::model(|| {
        // Capacity 2, three items: the producer must see "full" in some
        // interleavings and the consumer "empty" in others.
        let (mut tx, mut rx) = spsc::channel::<u32>(2).unwrap();
        let producer = thread::spawn(move || {
            for i in 0..3 {
                let mut item = i;
                while let Err(back) = tx.push(item) {
                    item = back;
                    thread::yield_now();
                }
            }
        });
        let mut expected = 0;
        while expected < 3 {
            match rx.pop() {
                Some(v) => {
                    assert_eq!(v, expected);
                    expected += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(rx.pop(), None);
    });
}

#[test]
fn items_left_behind_are_dropped_exactly_once() {
    loom::model(|| {
        let (mut tx, mut rx) = spsc::channel::<loom::sync::Arc<()>>(2).unwrap();
        let token = loom::sync::Arc::new(());
        let t2 = token.clone();
        let producer = thread::spawn(move || {
            let _ = tx.push(t2);
        });
        let _ = rx.pop();
        producer.join().unwrap();
        drop(rx);
        assert_eq!(loom::sync::Arc::strong_count(&token), 1);
    });
}
