//! The SPSC queue under two threads on two CPUs with millions of items: every
//! item arrives, once, in order, and what was left in the queue is dropped.
//!
//! The spinning side runs on CPU 1. The other side runs on CPU 0 and never
//! spins: when it cannot proceed it sleeps (CPU 0 belongs to the environment).

use cpushield_cpuset::CpuSet;
use cpushield_rt::{sched, spsc};
use std::time::Duration;

const ITEMS: u64 = 2_000_000;

/// The tests all spin on CPU 1: one at a time, so none waits on another's spin.
static CPU1: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    CPU1.lock().unwrap_or_else(|e| e.into_inner())
}

fn pin(cpu: usize) {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    if CpuSet::parse_list(online.trim()).unwrap().contains(cpu) {
        sched::pin(0, &CpuSet::from_cpus([cpu])).unwrap();
    }
}

/// Pushes 0..ITEMS; `spin` decides whether a full queue is waited out by
/// spinning or by sleeping.
fn produce(mut tx: spsc::Producer<u64>, spin: bool) {
    for i in 0..ITEMS {
        let mut item = i;
        while let Err(back) = tx.push(item) {
            item = back;
            if spin {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

/// Pops ITEMS items, checking each is the next in sequence.
fn consume(mut rx: spsc::Consumer<u64>, spin: bool) {
    let mut expected = 0u64;
    while expected < ITEMS {
        match rx.pop() {
            Some(v) => {
                assert_eq!(v, expected, "item out of order or lost");
                expected += 1;
            }
            None if spin => std::hint::spin_loop(),
            None => std::thread::sleep(Duration::from_micros(20)),
        }
    }
    assert_eq!(rx.pop(), None, "no item beyond the last one sent");
}

#[test]
fn millions_of_items_cross_cpus_in_order_with_a_slow_consumer() {
    let _cpu1 = one_at_a_time();
    let (tx, rx) = spsc::channel::<u64>(4096).unwrap();
    let producer = std::thread::spawn(move || {
        pin(1);
        produce(tx, true);
    });
    let consumer = std::thread::spawn(move || {
        pin(0);
        consume(rx, false);
    });
    producer.join().unwrap();
    consumer.join().unwrap();
}

#[test]
fn millions_of_items_cross_cpus_in_order_with_a_slow_producer() {
    let _cpu1 = one_at_a_time();
    let (tx, rx) = spsc::channel::<u64>(4096).unwrap();
    let producer = std::thread::spawn(move || {
        pin(0);
        produce(tx, false);
    });
    let consumer = std::thread::spawn(move || {
        pin(1);
        consume(rx, true);
    });
    producer.join().unwrap();
    consumer.join().unwrap();
}

#[test]
fn heap_items_are_neither_lost_nor_doubled() {
    // Boxed items: a lost item leaks, a doubled one is a double free that
    // the allocator reports; the sum proves each value arrived once.
    let _cpu1 = one_at_a_time();
    const N: u64 = 1_000_000;
    let (mut tx, mut rx) = spsc::channel::<Box<u64>>(256).unwrap();
    let producer = std::thread::spawn(move || {
        pin(1);
        for i in 0..N {
            let mut item = Box::new(i);
            while let Err(back) = tx.push(item) {
                item = back;
                std::thread::yield_now();
            }
        }
    });
    pin(1);
    let (mut count, mut sum) = (0u64, 0u64);
    while count < N {
        match rx.pop() {
            Some(b) => {
                count += 1;
                sum += *b;
            }
            None => std::thread::yield_now(),
        }
    }
    producer.join().unwrap();
    assert_eq!(sum, N * (N - 1) / 2);
}
