//! `compare --smt`: Brosky & Rotolo's Figure 4 (hyperthreading on vs off) on
//! a stock kernel. One CPU is shielded (processes, IRQs, local timer, not its
//! sibling) and measured — wakeup latency and execution determinism — three
//! times: with its SMT sibling thread busy (a spinning thread on it), idle,
//! and offline (`/sys/devices/system/cpu/cpuN/online` = 0, written back on
//! every way out).
//!
//! Where no CPU shares its core with another thread, the run is refused in
//! one line before anything changes.

use crate::experiment::{CompareConfig, CompareError, Progress};
use crate::idle::{self, IdleMode};
use crate::lab::Lab;
use crate::runner::{At, Experiment, Plan};
use crate::scenario::Scenario;
use crate::summary::{host_line, rfc3339_now};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_report::{CompareReport, Verdict, SCHEMA};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the measured CPU's SMT sibling does during one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiblingState {
    /// A thread spins on the sibling: the core's execution units are shared.
    Busy,
    /// The sibling is online and idle.
    Idle,
    /// The sibling is offline: the core runs one thread, as with SMT off.
    Offline,
}

impl SiblingState {
    /// Every state, in the order they run (offline last: the sibling comes
    /// back before the shield goes down).
    pub const ALL: [SiblingState; 3] = [
        SiblingState::Busy,
        SiblingState::Idle,
        SiblingState::Offline,
    ];

    /// The scenario name in the report.
    pub fn name(self) -> &'static str {
        match self {
            SiblingState::Busy => "smt-busy",
            SiblingState::Idle => "smt-idle",
            SiblingState::Offline => "smt-offline",
        }
    }

    fn description(self) -> &'static str {
        match self {
            SiblingState::Busy => "shielded CPU, its SMT sibling running a spinning thread",
            SiblingState::Idle => "shielded CPU, its SMT sibling online and idle",
            SiblingState::Offline => "shielded CPU, its SMT sibling offline (SMT off for the core)",
        }
    }
}

/// Picks the CPU to measure and its SMT siblings, without I/O: `asked` (one
/// CPU) or the highest online CPU that shares its core. CPU 0 and a core
/// holding CPU 0 are never used (CPU 0 keeps the machine running and cannot
/// go offline). Err: one line saying why, with the remedy.
pub fn choose(
    online: &CpuSet,
    siblings_of: &dyn Fn(usize) -> CpuSet,
    asked: Option<&CpuSet>,
) -> Result<(usize, CpuSet), String> {
    let others = |cpu: usize| {
        siblings_of(cpu)
            .difference(&CpuSet::from_cpus([cpu]))
            .intersection(online)
    };
    if let Some(asked) = asked {
        let cpu = match (asked.len(), asked.first()) {
            (1, Some(cpu)) => cpu,
            _ => {
                return Err(format!(
                    "--cpus {asked}: --smt measures one CPU against its sibling; give one CPU, e.g. --cpus {}",
                    online.last().unwrap_or(1)
                ))
            }
        };
        let sibs = others(cpu);
        if sibs.is_empty() {
            return Err(format!(
                "CPU {cpu} has no online SMT sibling (topology/thread_siblings_list): pick a CPU that shares its core, or leave --cpus out"
            ));
        }
        if cpu == 0 || sibs.contains(0) {
            return Err(format!(
                "CPU {cpu} shares its core with CPU 0, which runs the machine and cannot go offline: pick a CPU on another core"
            ));
        }
        return Ok((cpu, sibs));
    }
    let mut had_smt = false;
    for cpu in online.iter().collect::<Vec<_>>().into_iter().rev() {
        let sibs = others(cpu);
        if sibs.is_empty() {
            continue;
        }
        had_smt = true;
        if cpu != 0 && !sibs.contains(0) {
            return Ok((cpu, sibs));
        }
    }
    Err(if had_smt {
        "every SMT core here holds CPU 0, which runs the machine and cannot go offline: compare --smt needs a second core with two threads".to_string()
    } else {
        "no SMT here: no online CPU shares its core with another thread (topology/thread_siblings_list), so there is no sibling to make busy, idle or offline; run compare --smt on a machine with SMT on (or a VM with -smp N,threads=2)".to_string()
    })
}

/// [`choose`] on the machine `kernel` reads.
pub fn choose_on(
    kernel: &dyn Kernel,
    asked: Option<&CpuSet>,
) -> Result<(usize, CpuSet), CompareError> {
    let online = cpushield_kernel::online_cpus(kernel)?;
    let siblings = |cpu: usize| {
        cpushield_kernel::thread_siblings(kernel, cpu).unwrap_or_else(|_| CpuSet::from_cpus([cpu]))
    };
    choose(&online, &siblings, asked).map_err(CompareError::Refused)
}

fn online_file(cpu: usize) -> PathBuf {
    cpushield_kernel::paths::cpu_online(cpu)
}

/// Sibling CPUs taken offline; written back online when dropped.
struct Offline<'a> {
    kernel: &'a dyn Kernel,
    cpus: Vec<usize>,
}

impl<'a> Offline<'a> {
    fn take(kernel: &'a dyn Kernel, sibs: &CpuSet) -> Result<Self, CompareError> {
        let mut done = Offline {
            kernel,
            cpus: Vec::new(),
        };
        for cpu in sibs.iter() {
            let path = online_file(cpu);
            kernel.write(&path, "0").map_err(|e| {
                CompareError::Refused(format!(
                    "{}: cannot take SMT sibling CPU {cpu} offline: {e}; CPU hotplug must be available (root, CONFIG_HOTPLUG_CPU)",
                    path.display()
                ))
            })?;
            done.cpus.push(cpu);
        }
        Ok(done)
    }
}

impl Drop for Offline<'_> {
    fn drop(&mut self) {
        for cpu in &self.cpus {
            let path = online_file(*cpu);
            if let Err(e) = self.kernel.write(&path, "1") {
                eprintln!(
                    "cpushield: error: bringing CPU {cpu} back online failed: {e}; run `echo 1 > {}`",
                    path.display()
                );
            }
        }
    }
}

/// A thread spinning on the sibling CPUs until dropped.
struct Spinner {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn start(kernel: Arc<dyn Kernel>, sibs: &CpuSet) -> Result<Self, CompareError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (flag, cpus) = (stop.clone(), sibs.clone());
        let handle = std::thread::Builder::new()
            .name("smt-sibling".into())
            .spawn(move || {
                let placed = kernel.set_affinity(0, &cpus);
                let ok = placed.is_ok();
                let _ = tx.send(placed);
                let mut x = 1u64;
                while ok && !flag.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                }
            })
            .map_err(|e| CompareError::Refused(format!("cannot start the sibling spinner: {e}")))?;
        let spinner = Spinner {
            stop,
            handle: Some(handle),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(spinner),
            Ok(Err(e)) => Err(CompareError::Refused(format!(
                "cannot put the spinner on sibling CPU(s) {sibs}: {e}"
            ))),
            Err(_) => Err(CompareError::Refused(
                "the sibling spinner ended at once".into(),
            )),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs the three measurements of `compare --smt` (see the module): the
/// runner's shielded scenario, phase by phase, once per state of the
/// sibling, with no load, anchor, trace or check beside it, the CPU idling
/// as asked (halting unless polling is asked for).
pub fn run(
    lab: &Lab,
    config: &CompareConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<CompareReport, CompareError> {
    let kernel = lab.host.kernel();
    let (cpu, sibs) = choose_on(kernel, config.cpus.as_ref())?;
    let measured = CpuSet::from_cpus([cpu]);
    let online = cpushield_kernel::online_cpus(kernel)?;
    let config = CompareConfig {
        idle: match config.idle {
            IdleMode::Poll => IdleMode::Poll,
            _ => IdleMode::Halt,
        },
        attribute: false,
        anchor: false,
        audit: None,
        ..config.clone()
    };
    let total = SiblingState::ALL.len();
    let plan = Plan {
        shielded_cpus: measured.clone(),
        online: online.clone(),
        // The process may run anywhere, the sibling included: it goes
        // offline in one state.
        housekeeping: None,
        total,
    };
    let mut experiment = Experiment::new(lab, &config, stop, progress, plan);
    let mut results = Vec::new();
    for (index, state) in SiblingState::ALL.into_iter().enumerate() {
        if experiment.stopped() {
            break;
        }
        let at = At {
            scenario: Scenario::Shielded,
            index,
            total,
        };
        experiment.tell(at.progress(state.name(), 0.0, 0));
        // The shield first, then the sibling's state beside it.
        experiment.bring_up(at)?;
        let spinner = match state {
            SiblingState::Busy => Some(Spinner::start(lab.host.shared_kernel(), &sibs)?),
            _ => None,
        };
        let offline = match state {
            SiblingState::Offline => Some(Offline::take(kernel, &sibs)?),
            _ => None,
        };
        let result = experiment.scenario(at, &measured);
        // The sibling back before anything else (the shield comes down last).
        drop(offline);
        drop(spinner);
        let mut result = result?;
        result.name = state.name().into();
        result.description = state.description().into();
        result
            .notes
            .push(format!("SMT sibling CPU(s) {sibs} of CPU {cpu}"));
        results.push(result);
    }
    experiment.restore()?;
    drop(experiment);
    if let (Some(busy), Some(off)) = (
        results.iter().find(|r| r.name == SiblingState::Busy.name()),
        results
            .iter()
            .find(|r| r.name == SiblingState::Offline.name()),
    ) {
        let (b, o) = (busy.latency.max_ns, off.latency.max_ns);
        let line = format!(
            "Brosky & Rotolo Figure 4: worst latency with the sibling busy {b} ns, offline {o} ns ({:.1}x)",
            b as f64 / o.max(1) as f64
        );
        if let Some(first) = results.first_mut() {
            first.notes.push(line);
        }
    }
    let idle_choice = idle::fixed(config.idle);
    let mut report = CompareReport {
        schema: SCHEMA.into(),
        created: rfc3339_now(),
        host: host_line(kernel, &online),
        scope: "smt (one shielded CPU; its SMT sibling busy, idle, offline)".into(),
        load_profile: "smt sibling spinner".into(),
        duration_s: config.duration.as_secs_f64(),
        idle_poll: idle_choice.policy == "poll",
        idle_mode: idle_choice.policy.clone(),
        interval_ns: config.period.nominal_ns(),
        scenarios: results,
        verdict: Verdict::default(),
        sharing: None,
    };
    report.judge();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> CpuSet {
        CpuSet::parse_list(text).unwrap()
    }

    /// 4 CPUs, two cores: {0,2} and {1,3}.
    fn paired(cpu: usize) -> CpuSet {
        set(if cpu.is_multiple_of(2) { "0,2" } else { "1,3" })
    }

    #[test]
    fn the_highest_cpu_off_cpu0s_core_is_chosen_with_its_sibling() {
        assert_eq!(choose(&set("0-3"), &paired, None), Ok((3, set("1"))));
        assert_eq!(
            choose(&set("0-3"), &paired, Some(&set("1"))),
            Ok((1, set("3")))
        );
    }

    #[test]
    fn no_smt_is_refused_in_one_line_saying_so() {
        let alone = |cpu: usize| CpuSet::from_cpus([cpu]);
        let e = choose(&set("0-1"), &alone, None).unwrap_err();
        assert!(e.starts_with("no SMT here"), "{e}");
        assert!(!e.contains('\n'));
        let e = choose(&set("0-1"), &alone, Some(&set("1"))).unwrap_err();
        assert!(e.contains("CPU 1 has no online SMT sibling"), "{e}");
    }

    #[test]
    fn cpu0_and_its_core_and_several_cpus_are_refused_naming_the_remedy() {
        let e = choose(&set("0-3"), &paired, Some(&set("2"))).unwrap_err();
        assert!(e.contains("shares its core with CPU 0"), "{e}");
        let e = choose(&set("0-3"), &paired, Some(&set("1,3"))).unwrap_err();
        assert!(e.contains("give one CPU"), "{e}");
        let only_cpu0_core = |cpu: usize| if cpu < 2 { set("0-1") } else { set("2") };
        let e = choose(&set("0-2"), &only_cpu0_core, None).unwrap_err();
        assert!(e.contains("holds CPU 0"), "{e}");
    }
}
