//! Short real runs on CPU 1 (never CPU 0, which belongs to the environment):
//! sample accounting, stop handling, the spike tap, advance, noise and
//! determinism, each 1-2 s.

use cpushield_measure::determinism::{self, DeterminismConfig, Work};
use cpushield_measure::latency::{self, LatencyConfig, Length};
use cpushield_measure::noise::{self, NoiseConfig};
use cpushield_measure::{json, CpuSet, Period, SpikeTap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// This machine: these tests measure it for real (nothing shielded, so the
/// state store is an empty one in memory).
fn host() -> cpushield_kernel::Host {
    cpushield_kernel::Host::new(
        std::sync::Arc::new(cpushield_kernel::RealKernel),
        std::sync::Arc::new(cpushield_kernel::store::MemoryStore::new()),
    )
}

const CPU: usize = 1;

fn cpu1() -> CpuSet {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = CpuSet::parse_list(online.trim()).unwrap();
    assert!(
        online.contains(CPU),
        "these tests need CPU 1 online (online: {online})"
    );
    CpuSet::from_cpus([CPU])
}

#[test]
fn every_period_of_the_run_is_either_a_sample_or_a_missed_period() {
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_rate(2048);
    config.length = Length::Duration(Duration::from_millis(1500));
    let stop = AtomicBool::new(false);
    let mut ticks = 0;
    let report = latency::run(&host(), &config, &stop, &mut |_| ticks += 1).unwrap();
    let cpu = &report.cpus[0];
    assert_eq!(cpu.cpu, CPU);
    assert_eq!(cpu.samples + cpu.missed_periods, 3072, "2048 Hz x 1.5 s");
    assert!(
        cpu.samples > 3072 / 2,
        "most periods measured: {}",
        cpu.samples
    );
    assert_eq!(cpu.latency.summary.count, cpu.samples);
    assert!(cpu.latency.summary.min_ns > 0);
    assert!(!report.run.interrupted);
    assert!(ticks >= 10, "progress was reported ({ticks} ticks)");
    let back: latency::LatencyReport = json::from_str(&json::to_string(&report)).unwrap();
    assert_eq!(back.cpus[0].samples, cpu.samples);
}

#[test]
fn setting_the_stop_flag_ends_the_run_and_keeps_what_was_measured() {
    let mut config = LatencyConfig::new(cpu1());
    config.length = Length::Duration(Duration::from_secs(60));
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let report = latency::run(&host(), &config, &stop, &mut |p| {
        if p.elapsed > Duration::from_millis(300) {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(report.run.interrupted);
    assert!(report.cpus[0].samples > 100, "{}", report.cpus[0].samples);
}

#[test]
fn samples_above_the_threshold_reach_the_spike_channel() {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_interval(Duration::from_millis(1));
    config.length = Length::Samples(500);
    config.spikes = Some(SpikeTap {
        threshold: Duration::ZERO,
        sender: tx,
    });
    let report = latency::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let spikes: Vec<_> = rx.try_iter().collect();
    assert_eq!(report.cpus[0].samples, 500);
    assert_eq!(
        spikes.len() as u64 + report.spikes_dropped,
        500,
        "every sample is above 0 ns"
    );
    for s in &spikes {
        assert_eq!(s.cpu, CPU);
        assert_eq!(s.actual_ns - s.intended_ns, s.latency_ns());
    }
    let max = spikes.iter().map(|s| s.latency_ns()).max().unwrap();
    assert_eq!(max, report.cpus[0].latency.summary.max_ns);
}

#[test]
fn with_an_advance_the_work_starts_within_a_clock_read_of_the_deadline() {
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_interval(Duration::from_millis(1));
    config.length = Length::Duration(Duration::from_secs(1));
    config.advance = Some(Duration::from_micros(200));
    let report = latency::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let cpu = &report.cpus[0];
    let adv = cpu.advance.as_ref().expect("advance stats");
    assert_eq!(adv.spin.summary.count + adv.late_wakeups, cpu.samples);
    assert!(adv.spin.summary.count > 0);
    // spin = reached - woke, woke >= deadline - advance: a spin longer than the
    // advance means the spinner was preempted, which shows as deviation too
    assert!(adv.spin.summary.max_ns <= 200_000 + cpu.latency.summary.max_ns);
    assert!(
        cpu.latency.summary.min_ns < 2_000,
        "min deviation {} ns",
        cpu.latency.summary.min_ns
    );
    assert_eq!(report.settings.advance_ns, Some(200_000));
}

#[test]
fn an_advance_not_shorter_than_the_period_is_refused_before_measuring() {
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_interval(Duration::from_millis(1));
    config.advance = Some(Duration::from_millis(1));
    let err = latency::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap_err();
    assert!(
        err.to_string().contains("not shorter than the period"),
        "{err}"
    );
}

#[test]
fn the_noise_loop_accounts_for_its_gaps_and_stolen_time() {
    let mut config = NoiseConfig::new(cpu1());
    config.duration = Duration::from_secs(1);
    let report = noise::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let cpu = &report.cpus[0];
    assert!(
        cpu.gaps.summary.count > 100_000,
        "{} loops",
        cpu.gaps.summary.count
    );
    assert!(cpu.elapsed_ns >= 1_000_000_000);
    assert!(cpu.stolen_ns <= cpu.elapsed_ns);
    let at_or_above: u64 = cpu.gaps.top.iter().filter(|t| t.value_ns >= 1_000).count() as u64;
    assert!(cpu.interruptions >= at_or_above.min(10));
    assert!(cpu.gaps.summary.max_ns >= cpu.gaps.summary.percentiles.p99_ns);
}

#[test]
fn determinism_times_each_run_of_the_calibrated_loop() {
    let mut config = DeterminismConfig::new(cpu1());
    config.work = Work::Duration(Duration::from_millis(20));
    config.runs = 5;
    config.rest = Duration::from_millis(10);
    let report = determinism::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let cpu = &report.cpus[0];
    assert!(report.settings.iterations > 0);
    assert_eq!(cpu.runs_ns.len(), 5);
    assert_eq!(cpu.ideal_ns, *cpu.runs_ns.iter().min().unwrap());
    assert_eq!(cpu.jitter_ns, cpu.max_ns - cpu.ideal_ns);
    // same workload again, by iteration count
    config.work = Work::Iterations(report.settings.iterations);
    config.runs = 1;
    let again = determinism::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert_eq!(again.settings.iterations, report.settings.iterations);
    assert_eq!(again.settings.work_ns, None);
}

/// When [`pin_and_note`] placed a thread, in order.
static PLACED: Mutex<Vec<Instant>> = Mutex::new(Vec::new());

/// A placer that notes when it was called and pins the calling thread.
fn pin_and_note(_tid: i32, cpus: &CpuSet) -> std::io::Result<()> {
    PLACED.lock().unwrap().push(Instant::now());
    cpushield_rt::sched::pin(0, cpus)
}

#[test]
fn determinism_elapsed_covers_the_measured_runs_not_the_calibration() {
    let mut config = DeterminismConfig::new(cpu1());
    config.work = Work::Duration(Duration::from_millis(20));
    config.runs = 2;
    config.rest = Duration::ZERO;
    config.tick = Duration::from_millis(1);
    config.placer = Some(cpushield_rt::sched::PlaceFn::new(pin_and_note));
    let report = determinism::run(&host(), &config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let returned = Instant::now();
    let placed = PLACED.lock().unwrap().clone();
    assert_eq!(
        placed.len(),
        2,
        "the placer places the calibrating thread, then the measuring thread"
    );
    // The calibration (a 20 ms loop grown and then timed three times) runs
    // between the two placements. Measured from after it, elapsed is shorter
    // than the time from the calibration's midpoint to the return; measured
    // from before it, elapsed would be longer.
    let (calibrating, measuring) = (placed[0], placed[1]);
    let midpoint = calibrating + (measuring - calibrating) / 2;
    let elapsed = Duration::from_nanos(report.run.elapsed_ns);
    assert!(
        elapsed < returned - midpoint,
        "elapsed {elapsed:?} includes the calibration ({:?} between placements)",
        measuring - calibrating
    );
    let runs: u64 = report.cpus[0].runs_ns.iter().sum();
    assert_eq!(report.cpus[0].runs_ns.len(), 2);
    assert!(
        report.run.elapsed_ns >= runs,
        "elapsed {elapsed:?} is shorter than the runs ({runs} ns)"
    );
}

#[test]
fn the_fastest_accepted_rate_runs_no_longer_than_twice_its_duration() {
    // 100 kHz is the highest rate validate() accepts. At SCHED_OTHER many
    // wakeups come late; the periods they skip are counted, not stepped
    // through, so the run still ends on time.
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_rate(100_000);
    config.priority = None;
    let length = Duration::from_millis(300);
    config.length = Length::Duration(length);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let report = latency::run(&host(), &config, &stop, &mut |_| {}).unwrap();
    let wall = started.elapsed();
    assert!(wall < 2 * length, "ran {wall:?} for a {length:?} run");
    let cpu = &report.cpus[0];
    assert_eq!(cpu.samples + cpu.missed_periods, 30_000, "100 kHz x 0.3 s");
}

#[test]
fn a_rate_above_what_a_timer_can_keep_is_refused_before_running() {
    let mut config = LatencyConfig::new(cpu1());
    config.period = Period::from_rate(4_000_000_000);
    config.length = Length::Duration(Duration::from_secs(1));
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let err = latency::run(&host(), &config, &stop, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("--rate"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(500));
}
