//! Drives the tracer without `measure`: a periodic SCHED_FIFO wakeup loop
//! (clock_nanosleep, like cyclictest) on one CPU that marks every sample above
//! a threshold, then prints the attribution of the spikes. Also `hold`, which
//! only keeps tracing on (for measuring the tracer's overhead with cyclictest).
//!
//! ```text
//! trace_spikes probe --cpu 1 [--interval-us 1000] [--duration 20] [--threshold-us 1000]
//!                    [--priority 95] [--trace-dir DIR] [--no-trace] [--json FILE]
//! trace_spikes hold --cpus 1 [--duration 25]
//! ```

use cpushield_cpuset::CpuSet;
use cpushield_rt::clock::{now_ns, sleep_until_ns};
use cpushield_rt::sched::{lock_memory, pin, prefault_stack, set_policy, Policy};
use cpushield_trace::{render_summary, Spike, TraceOptions, TraceSession};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn usage() -> ! {
    eprintln!("usage: trace_spikes probe --cpu N [--interval-us U] [--duration S] [--threshold-us U] [--priority P] [--trace-dir DIR] [--no-trace] [--json FILE]\n       trace_spikes hold --cpus LIST [--duration S]");
    std::process::exit(1)
}

fn parse_args(args: &[String]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        let k = args[i].trim_start_matches("--").to_string();
        if k == "no-trace" {
            m.insert(k, "1".into());
            i += 1;
        } else if i + 1 < args.len() {
            m.insert(k, args[i + 1].clone());
            i += 2;
        } else {
            usage();
        }
    }
    m
}

fn get<T: std::str::FromStr>(m: &HashMap<String, String>, k: &str, default: T) -> T {
    match m.get(k) {
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("trace_spikes: --{k} '{v}' is not valid");
            std::process::exit(1)
        }),
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mode) = args.first() else { usage() };
    let m = parse_args(&args[1..]);
    match mode.as_str() {
        "probe" => probe(&m),
        "hold" => hold(&m),
        _ => usage(),
    }
}

fn start(cpus: &CpuSet, trace_dir: Option<PathBuf>) -> TraceSession {
    let opts = TraceOptions {
        trace_dir,
        kernel: cpushield_check::trace_context(&cpushield_kernel::RealKernel, cpus),
        ..Default::default()
    };
    TraceSession::start(Arc::new(cpushield_kernel::RealKernel), cpus, opts).unwrap_or_else(|e| {
        eprintln!("trace_spikes: {e}");
        std::process::exit(1)
    })
}

fn hold(m: &HashMap<String, String>) {
    let cpus = CpuSet::parse_list(m.get("cpus").map(String::as_str).unwrap_or("1"))
        .unwrap_or_else(|_| usage());
    let secs: f64 = get(m, "duration", 25.0);
    let session = start(&cpus, None);
    println!(
        "tracing CPU {} in {}",
        cpus.to_list(),
        session.dir().display()
    );
    std::thread::sleep(Duration::from_secs_f64(secs));
    let s = session.finish();
    println!(
        "events read: {}, lost: {}, errors: {:?}",
        s.events, s.lost_events, s.errors
    );
}

fn probe(m: &HashMap<String, String>) {
    let cpu: usize = get(m, "cpu", 1);
    if cpu == 0 {
        eprintln!("trace_spikes: CPU 0 belongs to the environment here: use --cpu 1");
        std::process::exit(1);
    }
    let interval_ns: u64 = get::<u64>(m, "interval-us", 1000) * 1000;
    let secs: f64 = get(m, "duration", 20.0);
    let threshold_ns: u64 = get::<u64>(m, "threshold-us", 1000) * 1000;
    let prio: u8 = get(m, "priority", 95);
    let trace = !m.contains_key("no-trace");
    let cpus = CpuSet::from_cpus([cpu]);
    let session = trace.then(|| start(&cpus, m.get("trace-dir").map(PathBuf::from)));
    let marker = session.as_ref().map(|s| s.marker());
    let total = (secs * 1e9) as u64 / interval_ns;
    let handle = std::thread::spawn(move || {
        pin(0, &CpuSet::from_cpus([cpu])).expect("pin to the measured CPU");
        let _ = lock_memory();
        prefault_stack(256 * 1024);
        if let Err(e) = set_policy(0, Policy::Fifo(prio)) {
            eprintln!("trace_spikes: SCHED_FIFO {prio}: {e} (running as SCHED_OTHER)");
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let mut lat = Vec::with_capacity(total as usize);
        let mut next = now_ns() + interval_ns;
        let mut seq = 0;
        let mut missed = 0u64;
        for _ in 0..total {
            sleep_until_ns(next, true);
            let now = now_ns();
            let l = now.saturating_sub(next);
            lat.push(l);
            if l > threshold_ns {
                seq += 1;
                if let Some(mk) = &marker {
                    mk.mark(&Spike {
                        seq,
                        cpu,
                        tid,
                        intended_ns: next,
                        actual_ns: now,
                    });
                }
            }
            next += interval_ns;
            if next <= now {
                let skip = (now - next) / interval_ns + 1;
                missed += skip;
                next += skip * interval_ns;
            }
        }
        (lat, missed)
    });
    let (mut lat, missed) = handle.join().expect("probe thread");
    lat.sort_unstable();
    let n = lat.len().max(1);
    let pct = |p: f64| lat[((n as f64 * p) as usize).min(n - 1)];
    let avg = lat.iter().sum::<u64>() / n as u64;
    println!(
        "probe CPU {cpu}: {} samples, {missed} missed periods, min {} us, avg {} us, p99 {} us, p99.9 {} us, max {} us, above {} us: {}",
        lat.len(),
        lat[0] / 1000,
        avg / 1000,
        pct(0.99) / 1000,
        pct(0.999) / 1000,
        lat[n - 1] / 1000,
        threshold_ns / 1000,
        lat.iter().filter(|&&l| l > threshold_ns).count()
    );
    if let Some(s) = session {
        let summary = s.finish();
        print!("{}", render_summary(&summary, 12, 3));
        if let Some(path) = m.get("json") {
            std::fs::write(path, serde_json::to_string_pretty(&summary).expect("json"))
                .expect("write json");
        }
    }
}
