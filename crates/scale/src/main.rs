//! `cpushield-scale`: how `shield`, `reset`, `show`, `check` and the agent's
//! look grow with the machine, on a fake machine of 512 CPUs, 4,096 IRQs and
//! 100,000 threads ([`cpushield_shield::fake_machine::big_machine`]) and
//! multiples of it. dev/bench/scale.sh runs it; its header says how.
//!
//! Each step runs in a child process of its own (`step STEP FACTOR`), which
//! builds the machine, sets up what the step starts from (a shield for all
//! but `shield`), then times the step: wall time, CPU time (getrusage), the
//! most heap the step held above what was held before it (a counting
//! allocator: the fake machine's own memory is not the step's), and the
//! child's maxrss for context. The parent (`table`, `ci`) collects the
//! children's lines, fits each step's growth exponent (least squares of
//! log time against log size) and prints a markdown table or checks budgets.

mod alloc;

use anyhow::{bail, Context};
use cpushield_agent::{Agent, Shared};
use cpushield_check::{render::render_text, run_check, CheckOptions, CpuSource, ShieldInForce};
use cpushield_kernel::store::MemoryStore;
use cpushield_kernel::{FakeKernel, Host};
use cpushield_shield::fake_machine::{big_machine, MachineSize};
use cpushield_shield::{render, state, status, Options, ShieldMasks};
use serde::{Deserialize, Serialize};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static COUNTING: alloc::Counting = alloc::Counting;

const ROOT: Options = Options {
    is_root: true,
    whole_cores: false,
};

/// The steps measured, in table order.
const STEPS: [&str; 7] = [
    "shield",
    "reset",
    "show",
    "check",
    "look",
    "look+scan",
    "look+check",
];

/// The targets at 1x (issue "Big machines", section Scale): shield and reset
/// each within 1 s and 200 MB; a look within 50 ms of CPU and a /metrics
/// body under 1 MB.
const SHIELD_WALL: Duration = Duration::from_secs(1);
const SHIELD_HEAP_MB: f64 = 200.0;
const LOOK_CPU: Duration = Duration::from_millis(50);
const METRICS_BYTES: usize = 1 << 20;

/// One step measured at one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Measured {
    step: String,
    factor: f64,
    cpus: usize,
    irqs: usize,
    threads: usize,
    /// Fastest of the repetitions.
    wall_ms: f64,
    /// Least of the repetitions.
    cpu_ms: f64,
    /// Most heap held above the start of the step.
    heap_mb: f64,
    /// The child's peak resident memory, fake machine included.
    maxrss_mb: f64,
    /// What the step printed or served (bytes): the text of show and
    /// check, the /metrics body of a look.
    out_bytes: usize,
    /// Its lines.
    out_lines: usize,
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn maxrss_mb() -> f64 {
    // SAFETY: as in cpu_time.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    usage.ru_maxrss as f64 / 1024.0
}

/// The fake machine at `factor` with its state store.
struct Machine {
    kernel: FakeKernel,
    store: MemoryStore,
    size: MachineSize,
}

impl Machine {
    fn new(factor: f64) -> Self {
        let size = MachineSize::BIG.scaled(factor);
        Self {
            kernel: big_machine(size),
            store: MemoryStore::new(),
            size,
        }
    }

    fn host(&self) -> Host {
        Host::fake(&self.kernel, &self.store)
    }

    /// One socket shielded from everything: half the CPUs, most IRQs moved
    /// off them, every user thread but the pinned ones moved.
    fn masks(&self) -> ShieldMasks {
        ShieldMasks::all(&self.size.second_socket())
    }

    fn shield(&self) -> anyhow::Result<String> {
        let report = cpushield_shield::shield(&self.host(), &self.masks(), ROOT)?;
        Ok(render::render_report(&report, "shielded"))
    }

    fn reset(&self) -> anyhow::Result<String> {
        let report = cpushield_shield::reset(&self.host(), ROOT)?;
        Ok(render::render_report(&report, "reset"))
    }
}

/// What one timed run of a step gives.
struct Run {
    wall: Duration,
    cpu: Duration,
    heap: usize,
    out: String,
}

fn timed(f: impl FnOnce() -> anyhow::Result<String>) -> anyhow::Result<Run> {
    let base = alloc::reset_peak();
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let out = f()?;
    let (wall, cpu) = (t0.elapsed(), cpu_time() - cpu0);
    Ok(Run {
        wall,
        cpu,
        heap: alloc::peak().saturating_sub(base),
        out,
    })
}

/// Runs every step in [`STEPS`] order on one machine at `factor` (shield,
/// then show, check and the looks on the shielded machine, then reset),
/// `repeat` times, and prints one JSON line per step: the least time and the
/// most heap of the repetitions.
fn run_steps(factor: f64, repeat: u32) -> anyhow::Result<()> {
    let m = Machine::new(factor);
    let mut runs: Vec<(&str, Vec<Run>)> = STEPS.iter().map(|s| (*s, Vec::new())).collect();
    let mut record = |step: &str, run: Run| {
        if let Some((_, v)) = runs.iter_mut().find(|(s, _)| *s == step) {
            v.push(run);
        }
    };
    for _ in 0..repeat.max(1) {
        record("shield", timed(|| m.shield())?);
        let host = m.host();
        record(
            "show",
            timed(|| Ok(render::render_status(&status::status(&host)?)))?,
        );
        let saved = state::load_from(&m.store)?
            .context("no state after shield")?
            .state;
        let shield = ShieldInForce::from_saved(&saved);
        let cpus = m.masks().any();
        // No sampling between the two snapshots: the step is one check's
        // reading and analysis, not its waiting.
        let opts = CheckOptions {
            interval: Duration::from_millis(1),
            sample_every: Duration::from_millis(1),
        };
        record(
            "check",
            timed(|| {
                let report = run_check(
                    &m.kernel,
                    &cpus,
                    CpuSource::ShieldState,
                    Some(&shield),
                    opts,
                )?;
                Ok(render_text(&report, false))
            })?,
        );
        for (step, check, scan) in [
            ("look", u32::MAX, u32::MAX),
            ("look+scan", u32::MAX, 1),
            ("look+check", 1, u32::MAX),
        ] {
            // A look without check's analysis that reads only the tasks
            // that can reach a shielded CPU, as most looks do; (look+scan)
            // the look that reads every task (every tenth, by default);
            // (look+check) the look that runs check's analysis too (every
            // tenth, by default). The first look sets the baselines, reads
            // every task and corrects what it finds at start; the second is
            // a steady one, and a scrape of /metrics after it.
            let shared = Shared::new("scale");
            let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT)
                .check_every(check)
                .scan_every(scan);
            agent.tick()?;
            record(
                step,
                timed(|| {
                    agent.tick()?;
                    Ok(shared.metrics.lock().expect("metrics lock").render())
                })?,
            );
        }
        record("reset", timed(|| m.reset())?);
    }
    print_measured(&m, factor, repeat, &runs)
}

/// Prints one JSON line per step of `runs` on machine `m` (the least time
/// and the most heap of its repetitions), then the reference work's line.
fn print_measured(
    m: &Machine,
    factor: f64,
    repeat: u32,
    runs: &[(&str, Vec<Run>)],
) -> anyhow::Result<()> {
    for (step, runs) in runs {
        let best = |f: fn(&Run) -> Duration| runs.iter().map(f).min().unwrap_or_default();
        let out = runs.first().map(|r| r.out.as_str()).unwrap_or("");
        let measured = Measured {
            step: step.to_string(),
            factor,
            cpus: m.size.cpus,
            irqs: m.size.irqs,
            threads: m.size.threads,
            wall_ms: best(|r| r.wall).as_secs_f64() * 1e3,
            cpu_ms: best(|r| r.cpu).as_secs_f64() * 1e3,
            heap_mb: runs.iter().map(|r| r.heap).max().unwrap_or(0) as f64 / 1048576.0,
            maxrss_mb: maxrss_mb(),
            out_bytes: out.len(),
            out_lines: out.lines().count(),
        };
        println!("{}", serde_json::to_string(&measured)?);
    }
    let reference = (0..repeat.max(1))
        .map(|_| timed(|| Ok(reference_work().to_string())).map(|r| r.cpu))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reference = Measured {
        step: REFERENCE.into(),
        factor,
        cpus: m.size.cpus,
        irqs: m.size.irqs,
        threads: m.size.threads,
        wall_ms: 0.0,
        cpu_ms: reference
            .iter()
            .min()
            .copied()
            .unwrap_or_default()
            .as_secs_f64()
            * 1e3,
        heap_mb: 0.0,
        maxrss_mb: maxrss_mb(),
        out_bytes: 0,
        out_lines: 0,
    };
    println!("{}", serde_json::to_string(&reference)?);
    Ok(())
}

/// The pseudo-step that times [`reference_work`] in each child.
const REFERENCE: &str = "reference";

/// A fixed piece of work of the same kind as the steps' (path-keyed maps,
/// strings, allocation), for CI's ceilings: this project's CI host is a
/// shared virtual machine whose speed was seen to vary twofold between
/// hours, so a step's CPU time is judged in units of this work's, timed in
/// the same child a moment later.
fn reference_work() -> u64 {
    let mut map = std::collections::BTreeMap::new();
    for i in 0..200_000u64 {
        // Not a read: strings shaped like /proc paths, as the fixed work CPU time is judged by.
        map.insert(format!("/proc/{}/task/{}/stat", i * 7919 % 200_003, i), i);
    }
    let mut sum = 0u64;
    for i in 0..200_000u64 {
        sum = sum.wrapping_add(
            // Not a read: the same keys, looked up.
            *map.get(&format!("/proc/{}/task/{}/stat", i * 7919 % 200_003, i))
                .unwrap_or(&0),
        );
    }
    sum
}

/// Runs every step at `factor` in a child process and reads its lines.
fn child(factor: f64, repeat: u32) -> anyhow::Result<Vec<Measured>> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .args(["steps", &factor.to_string(), &repeat.to_string()])
        .output()
        .with_context(|| format!("running the steps at {factor}x"))?;
    if !out.status.success() {
        bail!(
            "the steps at {factor}x failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).with_context(|| format!("step output {line}")))
        .collect()
}

/// The least-squares slope of log(y) against log(x): 1 is linear growth.
fn exponent(points: &[(f64, f64)]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

fn fmt_exp(e: Option<f64>) -> String {
    e.map(|e| format!("{e:.2}")).unwrap_or_else(|| "-".into())
}

/// The markdown table of every step at every size, then each step's
/// fitted exponents.
fn table(results: &[Measured], factors: &[f64]) -> String {
    let mut o = String::new();
    o.push_str("| step | size | CPUs | IRQs | threads | wall ms | CPU ms | heap MB | maxrss MB | output |\n");
    o.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for step in STEPS {
        for r in results.iter().filter(|r| r.step == step) {
            o.push_str(&format!(
                "| {} | {}x | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {} B, {} lines |\n",
                r.step,
                r.factor,
                r.cpus,
                r.irqs,
                r.threads,
                r.wall_ms,
                r.cpu_ms,
                r.heap_mb,
                r.maxrss_mb,
                r.out_bytes,
                r.out_lines
            ));
        }
    }
    o.push('\n');
    o.push_str(&format!(
        "Growth exponent per step, fitted over {} (1 = linear in CPUs + IRQs + threads, 2 = quadratic):\n\n",
        factors
            .iter()
            .map(|f| format!("{f}x"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    o.push_str(
        "| step | CPU time exponent | heap exponent | output exponent |\n|---|---:|---:|---:|\n",
    );
    for step in STEPS {
        let of = |f: fn(&Measured) -> f64| -> Vec<(f64, f64)> {
            results
                .iter()
                .filter(|r| r.step == step)
                .map(|r| (r.factor, f(r)))
                .collect()
        };
        o.push_str(&format!(
            "| {step} | {} | {} | {} |\n",
            fmt_exp(exponent(&of(|r| r.cpu_ms))),
            fmt_exp(exponent(&of(|r| r.heap_mb))),
            fmt_exp(exponent(&of(|r| r.out_bytes as f64)))
        ));
    }
    o
}

/// What misses a target at 1x (`at1`), each a line.
fn budget_misses(at1: &[Measured], margin: f64) -> Vec<String> {
    let mut misses = Vec::new();
    for r in at1 {
        match r.step.as_str() {
            "shield" | "reset" => {
                // CPU time, not wall: a shared machine's other load stretches
                // the wall time of a step that does not wait.
                let limit = SHIELD_WALL.as_secs_f64() * 1e3 * margin;
                if r.cpu_ms > limit {
                    misses.push(format!(
                        "{} took {:.0} ms of CPU at 1x, over its budget of {:.0} ms (1 s x {margin} margin)",
                        r.step, r.cpu_ms, limit
                    ));
                }
                if r.heap_mb > SHIELD_HEAP_MB {
                    misses.push(format!(
                        "{} held {:.0} MB at 1x, over its budget of {SHIELD_HEAP_MB} MB",
                        r.step, r.heap_mb
                    ));
                }
            }
            "look" => {
                let limit = LOOK_CPU.as_secs_f64() * 1e3 * margin;
                if r.cpu_ms > limit {
                    misses.push(format!(
                        "a look took {:.0} ms of CPU at 1x, over its budget of {:.0} ms (50 ms x {margin} margin)",
                        r.cpu_ms, limit
                    ));
                }
                if r.out_bytes >= METRICS_BYTES {
                    misses.push(format!(
                        "the /metrics body is {} bytes at 1x, over its budget of 1 MB",
                        r.out_bytes
                    ));
                }
            }
            _ => {}
        }
    }
    misses
}

fn parse_factors(text: &str) -> anyhow::Result<Vec<f64>> {
    text.split(',')
        .map(|f| {
            f.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| *f > 0.0)
                .with_context(|| {
                    format!("--factors: '{f}' is not a positive number; give e.g. 1,4,16")
                })
        })
        .collect()
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cpushield-scale: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn usage() -> anyhow::Error {
    anyhow::anyhow!(
        "usage: cpushield-scale table [FACTORS [REPEAT]] | ci [REPEAT] | steps FACTOR [REPEAT] (dev/bench/scale.sh says more)"
    )
}

fn run() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match arg(0) {
        Some("steps") => {
            let factor: f64 = arg(1).ok_or_else(usage)?.parse().map_err(|_| usage())?;
            let repeat: u32 = arg(2).unwrap_or("1").parse().map_err(|_| usage())?;
            run_steps(factor, repeat)?;
            Ok(ExitCode::SUCCESS)
        }
        Some("table") => {
            let factors = parse_factors(arg(1).unwrap_or("0.25,1,4"))?;
            let repeat: u32 = arg(2).unwrap_or("3").parse().map_err(|_| usage())?;
            let mut results = Vec::new();
            for &factor in &factors {
                for r in child(factor, repeat)? {
                    eprintln!(
                        "cpushield-scale: {} at {factor}x: {:.0} ms wall, {:.0} ms CPU, {:.1} MB heap",
                        r.step, r.wall_ms, r.cpu_ms, r.heap_mb
                    );
                    results.push(r);
                }
            }
            print!("{}", table(&results, &factors));
            let at1: Vec<Measured> = results
                .iter()
                .filter(|r| r.factor == 1.0)
                .cloned()
                .collect();
            for miss in budget_misses(&at1, 1.0) {
                println!("\nMISSES ITS TARGET: {miss}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("ci") => ci(arg(1).unwrap_or("2").parse().map_err(|_| usage())?),
        _ => Err(usage()),
    }
}

/// CI's check: every step at a quarter of the size and at 1x, in the same
/// run. A step whose CPU time or heap grows more than its ratio limit from
/// the quarter to 1x grows faster than allowed (linear is 4x, quadratic 16x);
/// a step over its 1x budget times [`CI_MARGIN`] fails too. A run that fails
/// is measured once more, and only a second failure fails: on this shared
/// host another tenant's burst once tripled one step's time at 1x and not at
/// the quarter (show x10.9 where a quiet run gives x3.5), while a step that
/// really grows too fast fails both runs.
fn ci(repeat: u32) -> anyhow::Result<ExitCode> {
    let first = ci_once(repeat)?;
    if first.is_empty() {
        eprintln!("cpushield-scale ci: every step within its budget and growth limit");
        return Ok(ExitCode::SUCCESS);
    }
    for f in &first {
        eprintln!("cpushield-scale ci: over its limit in the first run: {f}");
    }
    eprintln!("cpushield-scale ci: measuring every step once more");
    let second = ci_once(repeat)?;
    if second.is_empty() {
        eprintln!(
            "cpushield-scale ci: every step within its budget and growth limit in the second run"
        );
        return Ok(ExitCode::SUCCESS);
    }
    for f in &second {
        eprintln!("cpushield-scale ci: FAILED: {f}");
    }
    Ok(ExitCode::from(1))
}

/// One run of CI's check; returns what failed, each a line.
fn ci_once(repeat: u32) -> anyhow::Result<Vec<String>> {
    let small = child(SMALL, repeat)?;
    let big = child(1.0, repeat)?;
    let reference_ms = |runs: &[Measured]| {
        runs.iter()
            .find(|r| r.step == REFERENCE)
            .map(|r| r.cpu_ms)
            .filter(|ms| *ms > 0.0)
            .context("the reference work's time missing from a child's output")
    };
    let (small_unit, unit) = (reference_ms(&small)?, reference_ms(&big)?);
    eprintln!(
        "cpushield-scale ci: the reference work took {small_unit:.0} ms and {unit:.0} ms of CPU beside the quarter and the whole (the ceilings' unit)"
    );
    let mut failures = Vec::new();
    for step in STEPS {
        let (Some(s), Some(b)) = (
            small.iter().find(|r| r.step == step),
            big.iter().find(|r| r.step == step),
        ) else {
            bail!("step {step} missing from the children's output");
        };
        // In units of each child's reference work: the host's speed, which
        // drifts between the two children, cancels out.
        let cpu_ratio = (b.cpu_ms / unit) / (s.cpu_ms.max(1.0) / small_unit);
        let heap_ratio = b.heap_mb / s.heap_mb.max(0.5);
        eprintln!(
            "cpushield-scale ci: {step}: {:.0} -> {:.0} ms CPU ({:.1} -> {:.1} reference units, x{cpu_ratio:.1}), {:.1} -> {:.1} MB heap (x{heap_ratio:.1}) from {SMALL}x to 1x",
            s.cpu_ms, b.cpu_ms, s.cpu_ms / small_unit, b.cpu_ms / unit, s.heap_mb, b.heap_mb
        );
        for (what, ratio) in [("CPU time", cpu_ratio), ("heap", heap_ratio)] {
            let (limit, why) = ratio_limit(step, what);
            if ratio > limit {
                failures.push(format!(
                    "{step}: its {what} grew x{ratio:.1} from a quarter of the machine to the whole, over its limit of x{limit} (linear is x4, quadratic x16){why}"
                ));
            }
        }
    }
    failures.extend(over_ceiling(&big, unit));
    for miss in budget_misses(&big, CI_MARGIN) {
        match known_miss(&big, &miss, unit) {
            Some(ceiling) => eprintln!(
                "cpushield-scale ci: known miss, not failing (its ceiling is {ceiling:.0} ms of CPU): {miss}"
            ),
            None => failures.push(miss),
        }
    }
    Ok(failures)
}

/// Growth from a quarter of the machine to all of it above which a step
/// fails CI, and why where it is not [`CI_RATIO`].
fn ratio_limit(step: &str, what: &str) -> (f64, &'static str) {
    match (step, what) {
        // Each task's affinity is a bitmap of every CPU, and /proc/interrupts
        // is parsed into a count per CPU and IRQ: heap of CPUs x (tasks +
        // IRQs); x8.4 measured.
        ("show" | "look" | "look+scan" | "check" | "look+check", "heap") => (
            12.0,
            " (affinity bitmaps and /proc/interrupts counts are CPUs x (tasks + IRQs))",
        ),
        // A look that reads only the tasks that can reach the shield is
        // mostly /proc/interrupts, CPUs x IRQs of text (16x from the quarter
        // to the whole): x7.5 measured, where the CI host's noise adds up to
        // a third.
        ("look", "CPU time") => (
            12.0,
            " (most of a look is /proc/interrupts, CPUs x IRQs of text)",
        ),
        _ => (CI_RATIO, ""),
    }
}

/// Targets the code misses today, each with the CPU-time ceiling CI still
/// holds its step to at 1x, so that it cannot get worse unseen: shield and
/// reset take about 1.2-1.4 s of CPU at 1x on the fake kernel on a quiet
/// host (target 1 s; reading 100,000 threads and moving them through the
/// fake's files is most of it), and the agent's look about 150 ms (target
/// 50 ms; it reads and parses all of /proc/interrupts, CPUs x IRQs of
/// text, and every IRQ's mask). The ceilings are [`CPU_CEILINGS`]'.
const KNOWN_MISSES: [(&str, &str); 3] = [
    ("shield took", "shield"),
    ("reset took", "reset"),
    ("a look took", "look"),
];

/// The most CPU time each step may take at 1x in CI, in units of the
/// [`reference_work`]'s time in the same run: about twice the most each took
/// in eight runs on this project's 2-CPU host on 2026-11-29 (17:20-18:05
/// UTC, shared and quiet, its speed varying by 1.5x within minutes: shield
/// 4.1-6.8 units, reset 3.5-6.3, show 2.2-4.2, check 4.3-8.2, look 1.3-2.4,
/// look and check 4.2-7.7). A step that takes more than twice its worst
/// seen fails. The look and the look that reads every task: three runs on
/// 2026-11-29 (21:15 UTC, shared, load 7-9), once a look read only the
/// tasks that can reach a shielded CPU: look 0.37-0.57 units, look+scan
/// 1.2-1.7. The look again, seven runs on 2026-11-30 (00:34-00:38 UTC,
/// quiet), once it parsed only the watched CPUs' columns of
/// /proc/interrupts: 0.10-0.17 units.
const CPU_CEILINGS: [(&str, f64); 7] = [
    ("shield", 15.0),
    ("reset", 14.0),
    ("show", 9.0),
    ("check", 18.0),
    ("look", 0.4),
    ("look+scan", 3.5),
    ("look+check", 17.0),
];

/// The steps over their CPU ceiling at 1x ([`CPU_CEILINGS`] times `unit`,
/// the reference work's ms), each a line.
fn over_ceiling(at1: &[Measured], unit: f64) -> Vec<String> {
    at1.iter()
        .filter_map(|r| {
            let (_, units) = CPU_CEILINGS.iter().find(|(s, _)| *s == r.step)?;
            let ceiling = units * unit;
            (r.cpu_ms > ceiling).then(|| {
                format!(
                    "{} took {:.0} ms of CPU at 1x, over its CI ceiling of {ceiling:.0} ms ({units} times the reference work's {unit:.0} ms)",
                    r.step, r.cpu_ms
                )
            })
        })
        .collect()
}

/// The known miss `miss` is, if its step stays under its ceiling (ms).
fn known_miss(at1: &[Measured], miss: &str, unit: f64) -> Option<f64> {
    let (_, step) = KNOWN_MISSES.iter().find(|(m, _)| miss.starts_with(m))?;
    let (_, units) = CPU_CEILINGS.iter().find(|(s, _)| s == step)?;
    at1.iter()
        .find(|r| r.step == *step)
        .filter(|r| r.cpu_ms <= units * unit)
        .map(|_| units * unit)
}

/// The small machine CI compares the full one with, as a fraction of it.
const SMALL: f64 = 0.25;

/// Growth from [`SMALL`] to the whole machine above which a step counts as
/// superlinear: linear is x4, quadratic x16. This project's CI host, a
/// shared virtual machine, was seen to vary a step's CPU time twofold within
/// one run (growth of x9.5 for steps whose quiet growth is x5-7): x10 leaves
/// that room, and a quadratic step still fails.
const CI_RATIO: f64 = 10.0;

/// How far over its 1x time budget a step may go in CI before it fails: the
/// budgets are for a quiet machine, and CI's is shared.
const CI_MARGIN: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fitted_exponent_of_linear_and_quadratic_growth_is_one_and_two() {
        let linear = [(1.0, 10.0), (4.0, 40.0), (16.0, 160.0)];
        let quadratic = [(1.0, 10.0), (4.0, 160.0), (16.0, 2560.0)];
        assert!((exponent(&linear).unwrap() - 1.0).abs() < 1e-9);
        assert!((exponent(&quadratic).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(exponent(&[(1.0, 5.0)]), None);
    }

    #[test]
    fn a_step_over_its_ci_ceiling_at_1x_fails_and_one_under_it_does_not() {
        let m = |step: &str, cpu_ms: f64| Measured {
            step: step.into(),
            factor: 1.0,
            cpus: 512,
            irqs: 4096,
            threads: 100_000,
            wall_ms: cpu_ms,
            cpu_ms,
            heap_mb: 1.0,
            maxrss_mb: 0.0,
            out_bytes: 0,
            out_lines: 0,
        };
        assert!(over_ceiling(&[m("check", 1800.0), m("show", 800.0)], 100.0).is_empty());
        // A host half as fast takes twice as long for the steps and the reference alike.
        assert!(over_ceiling(&[m("check", 3600.0), m("show", 1600.0)], 200.0).is_empty());
        let over = over_ceiling(
            &[m("check", 4000.0), m("show", 800.0), m("look", 2000.0)],
            100.0,
        );
        assert_eq!(over.len(), 2, "{over:?}");
        assert!(over[0].starts_with("check took 4000 ms"), "{over:?}");
        // Every step has a ceiling.
        for step in STEPS {
            assert!(CPU_CEILINGS.iter().any(|(s, _)| *s == step), "{step}");
        }
    }

    #[test]
    fn a_step_over_its_budget_at_1x_is_named() {
        let m = |step: &str, cpu_ms: f64, heap_mb: f64, out_bytes: usize| Measured {
            step: step.into(),
            factor: 1.0,
            cpus: 512,
            irqs: 4096,
            threads: 100_000,
            wall_ms: cpu_ms,
            cpu_ms,
            heap_mb,
            maxrss_mb: 0.0,
            out_bytes,
            out_lines: 0,
        };
        assert!(budget_misses(
            &[m("shield", 900.0, 150.0, 0), m("look", 40.0, 1.0, 1000)],
            1.0
        )
        .is_empty());
        let misses = budget_misses(
            &[m("reset", 1200.0, 250.0, 0), m("look", 60.0, 1.0, 2 << 20)],
            1.0,
        );
        assert_eq!(misses.len(), 4, "{misses:?}");
        assert!(budget_misses(&[m("reset", 1200.0, 150.0, 0)], 3.0).is_empty());
    }
}
