//! Periodic-loop benchmark: the worst deviation of `Periodic::wait_next` from
//! its deadline on one CPU, without and with advance (Sherer §5.1-5.3).
//!
//! `cargo bench -p cpushield-rt --bench periodic -- [--cpu 1] [--period-us 1000]
//!  [--cycles 5000] [--advance-us 50] [--fifo 80]`
//!
//! Runs on `--cpu` (never 0 on this host) at SCHED_FIFO `--fifo` (falls back
//! to SCHED_OTHER with a warning when not permitted), memory locked if allowed.
//! dev/bench/rt-periodic.sh runs this and cyclictest side by side.

use cpushield_cpuset::CpuSet;
use cpushield_rt::periodic::Periodic;
use cpushield_rt::sched::{self, Policy};
use hdrhistogram::Histogram;
use std::time::Duration;

struct Options {
    cpu: usize,
    period_us: u64,
    cycles: u64,
    advance_us: u64,
    fifo: u8,
}

fn options() -> Options {
    let mut o = Options {
        cpu: 1,
        period_us: 1000,
        cycles: 5000,
        advance_us: 50,
        fifo: 80,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || -> u64 {
            args.get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", args[i]))
        };
        match args[i].as_str() {
            "--cpu" => o.cpu = value() as usize,
            "--period-us" => o.period_us = value(),
            "--cycles" => o.cycles = value(),
            "--advance-us" => o.advance_us = value(),
            "--fifo" => o.fifo = value() as u8,
            _ => {
                i += 1; // cargo bench passes --bench
                continue;
            }
        }
        i += 2;
    }
    assert!(o.cpu != 0, "CPU 0 belongs to the environment: use --cpu 1");
    o
}

fn run(o: &Options, advance_us: u64) -> (Histogram<u64>, u64, u64) {
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut lp = Periodic::new(Duration::from_micros(o.period_us))
        .with_advance(Duration::from_micros(advance_us));
    for _ in 0..o.cycles {
        let tick = lp.wait_next();
        hist.record(tick.deviation_ns.max(1)).unwrap();
    }
    let st = lp.stats();
    (hist, st.overruns, st.worst_sleep_latency_ns)
}

fn main() {
    let o = options();
    sched::pin(0, &CpuSet::from_cpus([o.cpu])).expect("pin to the benchmark CPU");
    let policy = match sched::set_policy(0, Policy::Fifo(o.fifo)) {
        Ok(()) => format!("SCHED_FIFO {}", o.fifo),
        Err(e) => {
            eprintln!(
                "warning: {}; measuring at SCHED_OTHER",
                sched::describe_policy_error(&Policy::Fifo(o.fifo), &e)
            );
            "SCHED_OTHER".to_string()
        }
    };
    let locked = sched::lock_memory().is_ok();
    sched::prefault_stack(256 * 1024);
    println!(
        "periodic loop: CPU {}, {policy}, period {} us, {} cycles per row, memory {}",
        o.cpu,
        o.period_us,
        o.cycles,
        if locked { "locked" } else { "NOT locked" }
    );
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>16}",
        "advance", "mean ns", "p99 ns", "p99.9 ns", "max ns", "overruns", "worst sleep ns"
    );
    for advance in [0, o.advance_us] {
        let (h, overruns, sleep) = run(&o, advance);
        println!(
            "{:<16} {:>9.0} {:>9} {:>9} {:>9} {:>9} {:>16}",
            format!("{advance} us"),
            h.mean(),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.max(),
            overruns,
            sleep
        );
    }
}
