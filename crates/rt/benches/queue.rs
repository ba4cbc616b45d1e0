//! Queue benchmark: cpushield-rt's SPSC queue against the two wait-free SPSC
//! rings of the Rust real-time world (rtrb and ringbuf), crossbeam's
//! ArrayQueue and std's bounded mpsc (sync_channel): same capacity, same item
//! type, same harness, same thread placement, each through its own
//! non-blocking single-item API.
//!
//! `cargo bench -p cpushield-rt --bench queue -- [--items N] [--producer-cpu P] [--consumer-cpu C]`
//!
//! - throughput: a producer thread sends N u64s to a consumer thread, which
//!   checks order; a full or empty queue makes the waiting side yield.
//!   Both threads default to CPU 1 (on this 2-CPU host nothing may spin on
//!   CPU 0), so they take turns on one CPU: give two spare CPUs on a larger
//!   machine for the cross-core figure.
//! - per-operation latency: one thread on the producer CPU times every single
//!   push and pop with the TSC (minus the cost of reading it), 64 items in
//!   flight, and reports percentiles in ns.

use cpushield_cpuset::CpuSet;
use cpushield_rt::sched::Policy;
use cpushield_rt::{clock, sched, spsc};
use crossbeam_queue::ArrayQueue;
use hdrhistogram::Histogram;
use ringbuf::traits::{Consumer as _, Producer as _, Split as _};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

const CAPACITY: usize = 1024;

/// One queue implementation, split into its two sides.
trait Queue {
    const NAME: &'static str;
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    fn push(tx: &mut Self::Tx, v: u64) -> bool;
    fn pop(rx: &mut Self::Rx) -> Option<u64>;
}

struct Ours;
impl Queue for Ours {
    const NAME: &'static str = "cpushield_rt::spsc";
    type Tx = spsc::Producer<u64>;
    type Rx = spsc::Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        spsc::channel(capacity).expect("capacity")
    }
    #[inline]
    fn push(tx: &mut Self::Tx, v: u64) -> bool {
        tx.push(v).is_ok()
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<u64> {
        rx.pop()
    }
}

struct Rtrb;
impl Queue for Rtrb {
    const NAME: &'static str = "rtrb RingBuffer";
    type Tx = rtrb::Producer<u64>;
    type Rx = rtrb::Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, v: u64) -> bool {
        tx.push(v).is_ok()
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<u64> {
        rx.pop().ok()
    }
}

struct Ringbuf;
impl Queue for Ringbuf {
    const NAME: &'static str = "ringbuf HeapRb";
    type Tx = ringbuf::HeapProd<u64>;
    type Rx = ringbuf::HeapCons<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        ringbuf::HeapRb::new(capacity).split()
    }
    #[inline]
    fn push(tx: &mut Self::Tx, v: u64) -> bool {
        tx.try_push(v).is_ok()
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_pop()
    }
}

struct Crossbeam;
impl Queue for Crossbeam {
    const NAME: &'static str = "crossbeam ArrayQueue";
    type Tx = Arc<ArrayQueue<u64>>;
    type Rx = Arc<ArrayQueue<u64>>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, v: u64) -> bool {
        tx.push(v).is_ok()
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<u64> {
        rx.pop()
    }
}

struct StdMpsc;
impl Queue for StdMpsc {
    const NAME: &'static str = "std mpsc::sync_channel";
    type Tx = mpsc::SyncSender<u64>;
    type Rx = mpsc::Receiver<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        mpsc::sync_channel(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, v: u64) -> bool {
        tx.try_send(v).is_ok()
    }
    #[inline]
    fn pop(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

struct Options {
    items: u64,
    producer_cpu: usize,
    consumer_cpu: usize,
    runs: usize,
}

fn options() -> Options {
    let mut o = Options {
        items: 5_000_000,
        producer_cpu: 1,
        consumer_cpu: 1,
        runs: 5,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse().ok());
        match args[i].as_str() {
            "--items" => o.items = value().expect("--items N"),
            "--producer-cpu" => o.producer_cpu = value().expect("--producer-cpu CPU") as usize,
            "--consumer-cpu" => o.consumer_cpu = value().expect("--consumer-cpu CPU") as usize,
            "--runs" => o.runs = value().expect("--runs N") as usize,
            _ => {
                i += 1; // cargo bench passes --bench; ignore what we do not know
                continue;
            }
        }
        i += 2;
    }
    assert!(
        o.producer_cpu != 0 && o.consumer_cpu != 0,
        "nothing may spin on CPU 0 of this host: choose other CPUs"
    );
    o
}

fn pin(cpu: usize) {
    sched::pin(0, &CpuSet::from_cpus([cpu])).expect("pin to the benchmark CPU");
}

/// Waits for the other side: yields when both threads share a CPU, spins otherwise.
#[inline]
fn back_off(shared_cpu: bool) {
    if shared_cpu {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Seconds to pass `o.items` items from one thread to another.
fn throughput_once<Q: Queue>(o: &Options) -> f64 {
    let (mut tx, mut rx) = Q::make(CAPACITY);
    let shared = o.producer_cpu == o.consumer_cpu;
    let (items, pcpu) = (o.items, o.producer_cpu);
    let start_gate = Arc::new(std::sync::Barrier::new(2));
    let gate = start_gate.clone();
    let producer = std::thread::spawn(move || {
        pin(pcpu);
        gate.wait();
        for i in 0..items {
            while !Q::push(&mut tx, i) {
                back_off(shared);
            }
        }
    });
    pin(o.consumer_cpu);
    start_gate.wait();
    let t0 = Instant::now();
    let mut expected = 0;
    while expected < items {
        match Q::pop(&mut rx) {
            Some(v) => {
                assert_eq!(v, expected, "{} delivered out of order", Q::NAME);
                expected += 1;
            }
            None => back_off(shared),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    producer.join().unwrap();
    secs
}

/// Ticks of the time-stamp counter (or ns where there is none).
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: lfence and rdtsc are baseline x86_64 instructions (SSE2 is part of the
    // x86_64 baseline); they read a counter and touch no memory.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
    #[cfg(not(target_arch = "x86_64"))]
    clock::now_ns()
}

/// Nanoseconds per tick, measured over 20 ms.
fn ns_per_tick() -> f64 {
    let (n0, t0) = (clock::now_ns(), ticks());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (n1, t1) = (clock::now_ns(), ticks());
    (n1 - n0) as f64 / (t1 - t0).max(1) as f64
}

/// The smallest cost of reading the TSC twice, subtracted from every sample.
fn tick_overhead() -> u64 {
    (0..10_000)
        .map(|_| {
            let a = ticks();
            let b = ticks();
            b - a
        })
        .min()
        .unwrap_or(0)
}

struct OpLatency {
    push: Histogram<u64>,
    pop: Histogram<u64>,
    /// Mean ns per push and per pop over whole batches of 64, timed as one
    /// (so the TSC read costs nothing per operation).
    push_mean: f64,
    pop_mean: f64,
}

/// Times every push and pop of `rounds` rounds of 64 pushes then 64 pops.
fn op_latency<Q: Queue>(rounds: usize, scale: f64, overhead: u64) -> OpLatency {
    let (mut tx, mut rx) = Q::make(CAPACITY);
    let mut push = Histogram::<u64>::new(3).unwrap();
    let mut pop = Histogram::<u64>::new(3).unwrap();
    let ns = |d: u64| ((d.saturating_sub(overhead)) as f64 * scale).round() as u64;
    let (mut push_ticks, mut pop_ticks) = (0u64, 0u64);
    for _ in 0..rounds {
        let a = ticks();
        for i in 0..64u64 {
            assert!(Q::push(&mut tx, std::hint::black_box(i)));
        }
        let b = ticks();
        for _ in 0..64 {
            assert!(std::hint::black_box(Q::pop(&mut rx)).is_some());
        }
        let c = ticks();
        push_ticks += b - a;
        pop_ticks += c - b;
    }
    let per_op = |t: u64| t as f64 * scale / (rounds * 64) as f64;
    let (push_mean, pop_mean) = (per_op(push_ticks), per_op(pop_ticks));
    for r in 0..rounds {
        for i in 0..64u64 {
            let a = ticks();
            let ok = Q::push(&mut tx, i);
            let b = ticks();
            assert!(ok);
            if r > 0 {
                push.record(ns(b - a)).unwrap();
            }
        }
        for _ in 0..64 {
            let a = ticks();
            let v = Q::pop(&mut rx);
            let b = ticks();
            assert!(v.is_some());
            if r > 0 {
                pop.record(ns(b - a)).unwrap();
            }
        }
    }
    OpLatency {
        push,
        pop,
        push_mean,
        pop_mean,
    }
}

fn report<Q: Queue>(o: &Options, scale: f64, overhead: u64) {
    let mut secs: Vec<f64> = (0..o.runs).map(|_| throughput_once::<Q>(o)).collect();
    secs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = secs[secs.len() / 2];
    pin(o.producer_cpu);
    // Timed ops at SCHED_FIFO (if permitted) so other tasks on the CPU do not
    // preempt them; back to SCHED_OTHER for the yielding throughput runs.
    let _ = sched::set_policy(0, Policy::Fifo(80));
    let lat = op_latency::<Q>(20_000, scale, overhead);
    let _ = sched::set_policy(0, Policy::Other { nice: 0 });

    let p = |mean: f64, h: &Histogram<u64>| {
        format!(
            "{:>5.1} {:>4} {:>4} {:>6} {:>8}",
            mean,
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.9999),
            h.max()
        )
    };
    println!(
        "{:<24} {:>9.1} {:>9.1}   {}   {}",
        Q::NAME,
        o.items as f64 / median / 1e6,
        o.items as f64 / secs[0] / 1e6,
        p(lat.push_mean, &lat.push),
        p(lat.pop_mean, &lat.pop)
    );
}

fn main() {
    let o = options();
    pin(o.producer_cpu);
    let scale = ns_per_tick();
    let overhead = tick_overhead();
    let fifo = sched::set_policy(0, Policy::Fifo(80)).is_ok();
    let _ = sched::set_policy(0, Policy::Other { nice: 0 });
    println!(
        "queue benchmark: {} items x {} runs, capacity {CAPACITY}, producer CPU {}, consumer CPU {}",
        o.items, o.runs, o.producer_cpu, o.consumer_cpu
    );
    println!(
        "throughput: median and best of the runs; per-op latency: one thread on CPU {}, {}, \
         each op timed with the TSC minus {overhead} ticks of timer cost; mean over batches of 64",
        o.producer_cpu,
        if fifo {
            "SCHED_FIFO 80"
        } else {
            "SCHED_OTHER (FIFO not permitted)"
        }
    );
    println!(
        "{:<24} {:>9} {:>9}   {:<31}   {:<31}",
        "", "Mitem/s", "Mitem/s", "push ns", "pop ns"
    );
    println!(
        "{:<24} {:>9} {:>9}   {:>5} {:>4} {:>4} {:>6} {:>8}   {:>5} {:>4} {:>4} {:>6} {:>8}",
        "queue",
        "median",
        "best",
        "mean",
        "p50",
        "p99",
        "p99.99",
        "max",
        "mean",
        "p50",
        "p99",
        "p99.99",
        "max"
    );
    report::<Ours>(&o, scale, overhead);
    report::<Rtrb>(&o, scale, overhead);
    report::<Ringbuf>(&o, scale, overhead);
    report::<Crossbeam>(&o, scale, overhead);
    report::<StdMpsc>(&o, scale, overhead);
}
