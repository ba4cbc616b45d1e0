//! `tune` on the real machine: preflight, the load, the shield, debugfs
//! where the preemption model lives, the probe, and the [`Bench`] the
//! session measures through. Everything is taken down on every way out
//! (normal end, error, Ctrl-C): the session restores each knob, the
//! shield's reset restores whatever the journal still holds.

use crate::knob::{self, catalog, KnobId, Machine};
use crate::render::{self, TuneReport};
use crate::schedule::Planner;
use crate::session::{self, Bench, ProbeSetup, Progress, SessionConfig};
use crate::TrialSample;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel};
use cpushield_load::{Load, LoadSpec, Workload};
use cpushield_measure::latency::{self, LatencyConfig, Length};
use cpushield_measure::Period;
use cpushield_shield::runtime::MountedDebugfs;
use cpushield_shield::{HeldShield, Options, ShieldMasks};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Setup before the first trial: the shield, the load and its warm-up.
const SETUP: Duration = Duration::from_secs(6);
/// The load's time to reach its steady state.
const WARM_UP: Duration = Duration::from_secs(2);

/// What a tune run is asked to do.
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// The CPUs to shield and measure.
    pub cpus: CpuSet,
    /// The load's workloads (empty: none).
    pub load: Vec<Workload>,
    /// Its name as the user gave it.
    pub load_name: String,
    /// Where the load's files go.
    pub load_dir: PathBuf,
    /// The whole run's budget.
    pub budget: Duration,
    /// The probe's period.
    pub period: Period,
    /// The probe's priority at the starting point.
    pub priority: u8,
    /// The knobs to measure (`None`: all).
    pub knobs: Option<Vec<KnobId>>,
}

/// The knobs a `--knobs` list names, each once, in the order given; an
/// unknown or empty list is refused naming the knobs there are.
pub fn parse_knobs(text: &str) -> Result<Vec<KnobId>, String> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(id) = KnobId::from_name(name) else {
            let all: Vec<&str> = KnobId::ALL.iter().map(|k| k.name()).collect();
            return Err(format!(
                "--knobs: no knob {name:?}; name some of {}",
                all.join(", ")
            ));
        };
        if !out.contains(&id) {
            out.push(id);
        }
    }
    if out.is_empty() {
        return Err(
            "--knobs names no knob: name some, e.g. --knobs timer-migration,preempt".into(),
        );
    }
    Ok(out)
}

/// Why a tune run could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Bad input or an unusable machine, with the remedy; nothing changed.
    #[error("{0}")]
    Refused(String),
    /// The load failed.
    #[error("load: {0}")]
    Load(cpushield_load::LoadError),
    /// Shielding failed.
    #[error("shield: {0}")]
    Shield(cpushield_shield::ShieldError),
    /// A trial failed.
    #[error("measuring: {0}")]
    Measure(String),
    /// Reading the system failed.
    #[error("{0}")]
    Io(io::Error),
}

// Each variant's message holds its cause's already: the cause is not also
// the error's source, which a chain printer (`{:#}`) would print again.
impl From<cpushield_load::LoadError> for TuneError {
    fn from(e: cpushield_load::LoadError) -> Self {
        TuneError::Load(e)
    }
}
impl From<cpushield_shield::ShieldError> for TuneError {
    fn from(e: cpushield_shield::ShieldError) -> Self {
        TuneError::Shield(e)
    }
}
impl From<io::Error> for TuneError {
    fn from(e: io::Error) -> Self {
        TuneError::Io(e)
    }
}

fn root() -> Options {
    Options {
        is_root: true,
        whole_cores: false,
    }
}

/// Checks everything that can be checked before the first change.
pub fn preflight(host: &Host, config: &TuneConfig) -> Result<(), TuneError> {
    let kernel = host.kernel();
    let online = cpushield_kernel::online_cpus(kernel)?;
    let cpus = &config.cpus;
    if cpus.is_empty() || !cpus.is_subset(&online) {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus}: not all online (online CPUs: {online}); pick CPUs from that list"
        )));
    }
    if cpus.contains(0) {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus} names CPU 0, which runs the machine's own services: tune never measures or changes it; pick other CPUs"
        )));
    }
    if online.difference(cpus).is_empty() {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus} covers every online CPU: leave at least one for the rest of the system"
        )));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(TuneError::Refused(
            "tune shields CPUs and changes kernel settings: run as root (sudo cpushield tune ...)"
                .into(),
        ));
    }
    if cpushield_shield::state::is_shielded(host.store()) {
        return Err(TuneError::Refused(format!(
            "a shield is already up ({}): run `cpushield reset` first, so tune starts from the machine as found",
            host.store()
                .dir()
                .join(cpushield_shield::state::STATE_FILE)
                .display()
        )));
    }
    if cpushield_shield::layout::detect(kernel).is_none() {
        return Err(cpushield_shield::ShieldError::NoCpuset.into());
    }
    config.period.validate().map_err(TuneError::Refused)?;
    if !config.load.is_empty() {
        Load::validate(host.kernel(), &load_spec(config))?;
    }
    let found = Machine::read(kernel, &config.cpus);
    let knobs = budgeted_knobs(config.knobs.as_deref(), &found, config);
    let minimum = Planner::minimum_budget(knobs, SETUP);
    if config.budget < minimum {
        return Err(TuneError::Refused(format!(
            "--budget {}s is too short for {knobs} knobs: give at least --budget {}s, or fewer knobs with --knobs",
            config.budget.as_secs(),
            minimum.as_secs() + 1
        )));
    }
    Ok(())
}

/// How many of the knobs asked (`None`: all) the smallest budget counts:
/// those the machine as `found` has ([`catalog`]), since a knob it lacks is
/// never measured and so lengthens no run (cpufreq's on a VM without it,
/// SMT's without SMT, ...). Two depend on what the run sets up, and are
/// judged by what does not change: the memory placement, which needs the
/// shield's cpuset, counts on a machine of several memory nodes; the
/// preemption model also counts where the kernel can switch it
/// (PREEMPT_DYNAMIC) but its file is not there yet, as tune reaches it by
/// mounting debugfs once the run starts.
fn budgeted_knobs(asked: Option<&[KnobId]>, found: &Machine, config: &TuneConfig) -> usize {
    let asked = asked.unwrap_or(&KnobId::ALL);
    let several_nodes = cpushield_kernel::numa::several_memory_nodes(&found.memory.nodes);
    let preempt_later = found.preempt.is_none() && found.kernel_version.contains("PREEMPT_DYNAMIC");
    catalog(found, &config.cpus, config.priority)
        .into_iter()
        .filter(|k| asked.contains(&k.id))
        .filter(|k| match k.id {
            KnobId::Mems => several_nodes,
            KnobId::Preempt => k.change.is_ok() || preempt_later,
            _ => k.change.is_ok(),
        })
        .count()
}

fn load_spec(config: &TuneConfig) -> LoadSpec {
    let mut spec = LoadSpec::new(config.load.clone());
    spec.dir = config.load_dir.clone();
    spec
}

/// Mounts debugfs (inside tune's private mount namespace) when the kernel
/// can switch its preemption model and the file is not there; the problem,
/// when it cannot.
fn reach_debugfs(host: &Host) -> (Option<MountedDebugfs>, Option<String>) {
    let kernel = host.kernel();
    let version = cpushield_kernel::kernel_version(kernel).unwrap_or_default();
    if !version.contains("PREEMPT_DYNAMIC") || kernel.exists(Path::new(knob::PREEMPT_FILE)) {
        return (None, None);
    }
    match MountedDebugfs::mount(host.shared_kernel()) {
        Ok(mounted) if kernel.exists(Path::new(knob::PREEMPT_FILE)) => (Some(mounted), None),
        Ok(mounted) => (
            Some(mounted),
            Some("debugfs has no sched/preempt (kernel built without it)".into()),
        ),
        Err(e) => (None, Some(format!("mounting debugfs: {e}"))),
    }
}

/// Gives the shield of `cpus` the memory nodes `nodes` through a shield
/// pass: it writes the shield cgroup's `cpuset.mems` as `shield --mems`
/// does (on cgroup v1 the shield's `cpuset.memory_migrate` moves its tasks'
/// pages; cgroup v2 moves them always since Linux 5.15), and the cgroup is the shield's,
/// which a reset removes.
fn give_shield_mems(host: &Host, cpus: &CpuSet, nodes: &CpuSet) -> io::Result<()> {
    cpushield_shield::shield_with(host, &ShieldMasks::all(cpus), Some(nodes), root())
        .map(|_| ())
        .map_err(io::Error::other)
}

struct RealBench<'a> {
    host: &'a Host,
    cpus: CpuSet,
    period: Period,
    stop: &'a AtomicBool,
    started: Instant,
}

impl Bench for RealBench<'_> {
    fn kernel(&self) -> &dyn Kernel {
        self.host.kernel()
    }

    fn journal(&mut self, files: &[(PathBuf, String)]) -> io::Result<()> {
        cpushield_shield::state::record_runtime_in(self.host.store(), files)
    }

    fn irq_shield(&mut self, cpus: &CpuSet, on: bool) -> io::Result<()> {
        let masks = ShieldMasks {
            irqs: cpus.clone(),
            ..Default::default()
        };
        let done = if on {
            cpushield_shield::shield(self.host, &masks, root())
        } else {
            cpushield_shield::unshield(self.host, &masks, root())
        };
        done.map(|_| ()).map_err(io::Error::other)
    }

    fn shield_mems(&mut self, nodes: &CpuSet) -> io::Result<()> {
        give_shield_mems(self.host, &self.cpus, nodes)
    }

    fn trial(&mut self, length: Duration, probe: &ProbeSetup) -> Result<TrialSample, String> {
        let mut lat = LatencyConfig::new(self.cpus.clone());
        lat.period = self.period;
        lat.length = Length::Duration(length);
        lat.priority = Some(probe.priority);
        lat.idle_poll = probe.idle_poll;
        lat.hold_dma_latency = probe.hold_dma_latency;
        // The probe's thread into the shield, alone: the rest of tune (its
        // main thread, the load's supervisor) stays on the housekeeping CPUs.
        lat.placer = Some(cpushield_shield::placement::own_thread_placer(self.host));
        let report =
            latency::run(self.host, &lat, self.stop, &mut |_| {}).map_err(|e| e.to_string())?;
        let max = |f: fn(&cpushield_measure::Summary) -> u64| {
            report
                .cpus
                .iter()
                .map(|c| f(&c.latency.summary))
                .max()
                .unwrap_or(0)
        };
        Ok(TrialSample {
            max_ns: max(|s| s.max_ns),
            p99_99_ns: max(|s| s.percentiles.p99_99_ns),
            samples: report.cpus.iter().map(|c| c.samples).sum(),
        })
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs tune: the load, the shield, every knob, the winning set together;
/// everything taken down after. `progress` gets each trial as it starts and
/// the time since the start.
pub fn run(
    host: &Host,
    config: &TuneConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress, Duration),
) -> Result<TuneReport, TuneError> {
    let started = Instant::now();
    let (debugfs, debugfs_problem) = reach_debugfs(host);
    let load = if config.load.is_empty() {
        None
    } else {
        let load = Load::start(host.shared_kernel(), &load_spec(config))?;
        std::thread::sleep(WARM_UP);
        Some(load)
    };
    let kernel = host.kernel();
    let shield = HeldShield::raise(host, &ShieldMasks::all(&config.cpus), root())?;
    // A run killed from here on leaves the load's files to reset.
    if let Some(load) = &load {
        let _ = cpushield_shield::state::record_load_dir_in(host.store(), load.run_dir());
    }
    // On cgroup v2 the probe's thread joins the shield alone only from the
    // root cgroup (placement::enter_root_cgroup); back where it was after.
    let own_cgroup = cpushield_shield::layout::detect(kernel).and_then(|layout| {
        cpushield_shield::placement::enter_root_cgroup(kernel, &layout)
            .ok()
            .flatten()
            .map(|cgroup| (layout, cgroup))
    });
    let mut machine = Machine::read(kernel, &config.cpus);
    machine.debugfs_problem = machine.debugfs_problem.take().or(debugfs_problem);
    let mut knobs = catalog(&machine, &config.cpus, config.priority);
    if let Some(only) = &config.knobs {
        knobs.retain(|k| only.contains(&k.id));
    }
    let mut bench = RealBench {
        host,
        cpus: config.cpus.clone(),
        period: config.period,
        stop,
        started,
    };
    let session_config = SessionConfig {
        cpus: config.cpus.clone(),
        budget: config.budget,
        priority: config.priority,
    };
    let result = session::run(&mut bench, &session_config, knobs, &mut |p| {
        progress(p, started.elapsed())
    });
    // The load stops first: one still forking while reset moves its tasks
    // back would race it. A shield that does not come down is the run's error.
    if let Some(load) = load {
        load.stop();
    }
    let lowered = shield.lower();
    if let Some((layout, cgroup)) = own_cgroup {
        let _ = cpushield_shield::placement::leave_root_cgroup(kernel, &layout, &cgroup);
    }
    drop(debugfs);
    lowered?;
    let session = result.map_err(TuneError::Measure)?;
    Ok(render::build(
        session,
        &machine,
        config.budget.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        if config.load.is_empty() {
            "none"
        } else {
            &config.load_name
        },
        config.period.hz(),
        config.priority,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Arm;
    use crate::knob::Change;
    use cpushield_kernel::store::MemoryStore;
    use cpushield_kernel::FakeKernel;
    use cpushield_shield::fake_machine::{self, V1_ROOT};
    use std::collections::BTreeMap;

    fn set(text: &str) -> CpuSet {
        CpuSet::parse_list(text).unwrap()
    }

    /// A bench over a fake machine with the real shield: the mems knob's
    /// switches are `tune`'s own (a shield pass), and each trial records
    /// the shield cgroup's `cpuset.mems` as it finds it. Remote memory is
    /// made slower, as it is on a two-socket machine.
    struct MemsBench<'a> {
        host: &'a Host,
        kernel: &'a FakeKernel,
        cpus: CpuSet,
        mems_file: PathBuf,
        seen: Vec<String>,
        clock: Duration,
    }

    impl Bench for MemsBench<'_> {
        fn kernel(&self) -> &dyn Kernel {
            self.host.kernel()
        }
        fn journal(&mut self, files: &[(PathBuf, String)]) -> io::Result<()> {
            cpushield_shield::state::record_runtime_in(self.host.store(), files)
        }
        fn irq_shield(&mut self, _: &CpuSet, _: bool) -> io::Result<()> {
            Ok(())
        }
        fn shield_mems(&mut self, nodes: &CpuSet) -> io::Result<()> {
            give_shield_mems(self.host, &self.cpus, nodes)
        }
        fn trial(&mut self, length: Duration, _: &ProbeSetup) -> Result<TrialSample, String> {
            self.clock += length + Duration::from_millis(100);
            let mems = self.kernel.file(&self.mems_file).unwrap_or_default();
            let us = if mems.trim() == "1" { 1000 } else { 1600 } + self.seen.len() as u64 % 7;
            self.seen.push(mems);
            Ok(TrialSample {
                max_ns: us * 1000,
                p99_99_ns: us * 250,
                samples: 1000,
            })
        }
        fn elapsed(&self) -> Duration {
            self.clock
        }
        fn stopped(&self) -> bool {
            false
        }
    }

    /// CPUs 0-1 on node 0 and 2-3 on node 1, each node with memory, cgroup v1.
    fn two_nodes_v1() -> FakeKernel {
        let k = fake_machine::v1_machine("0-3", &[(100, "0-3"), (101, "3")]);
        fake_machine::add_nodes(&k, &["0-1", "2-3"]);
        k
    }

    /// The same machine on cgroup v2 (the cpuset controller enabled at
    /// /sys/fs/cgroup, its tasks in the root cgroup).
    fn two_nodes_v2() -> FakeKernel {
        let k = two_nodes_v1();
        let root = "/sys/fs/cgroup";
        k.set_file(
            "/proc/self/mountinfo",
            format!("30 1 0:26 / {root} rw - cgroup2 cgroup2 rw\n"),
        );
        k.set_file(format!("{root}/cgroup.controllers"), "cpuset cpu\n");
        k.set_file(format!("{root}/cgroup.subtree_control"), "cpuset\n");
        k.set_file(format!("{root}/cgroup.procs"), "100\n101\n");
        k.set_file(format!("{root}/cgroup.threads"), "100\n101\n");
        k.set_file(format!("{root}/cpuset.cpus.effective"), "0-3\n");
        k.set_file(format!("{root}/cpuset.mems.effective"), "0-1\n");
        // What a child cgroup is made with (the fake copies them on mkdir).
        for file in [
            "cpuset.cpus",
            "cpuset.mems",
            "cgroup.type",
            "cpuset.cpus.partition",
        ] {
            k.set_file(format!("{root}/{file}"), "");
        }
        for tid in [100, 101] {
            k.set_file(format!("/proc/{tid}/task/{tid}/cgroup"), "0::/\n");
        }
        k
    }

    fn trimmed(files: cpushield_kernel::FakeFiles) -> BTreeMap<PathBuf, String> {
        files
            .into_iter()
            .map(|(p, t)| (p, t.trim_end().to_string()))
            .collect()
    }

    /// Raises the shield of CPU 2-3 on `k`, measures the mems knob alone
    /// through a session, lowers the shield; checks each step against the
    /// shield cgroup's `cpuset.mems` under `cgroup_root`.
    fn mems_knob_round_trip(k: &FakeKernel, cgroup_root: &str) {
        let before = trimmed(k.files());
        let store = MemoryStore::new();
        let host = Host::fake(k, &store);
        let cpus = set("2-3");
        let held = HeldShield::raise(&host, &ShieldMasks::all(&cpus), root()).unwrap();
        let mems_file = PathBuf::from(format!("{cgroup_root}/cpushield-shield/cpuset.mems"));
        let raised = k.file(&mems_file).unwrap();
        assert_eq!(raised.trim(), "1", "the shield starts on its CPUs' node");
        let machine = Machine::read(k, &cpus);
        let knob = catalog(&machine, &cpus, 95)
            .into_iter()
            .find(|k| k.id == KnobId::Mems)
            .unwrap();
        assert_eq!(
            knob.change,
            Ok(Change::ShieldMems {
                nodes: set("0-1"),
                back: set("1")
            })
        );
        let mut bench = MemsBench {
            host: &host,
            kernel: k,
            cpus: cpus.clone(),
            mems_file: mems_file.clone(),
            seen: Vec::new(),
            clock: SETUP,
        };
        let config = SessionConfig {
            cpus: cpus.clone(),
            budget: Duration::from_secs(300),
            priority: 95,
        };
        let result = session::run(&mut bench, &config, vec![knob], &mut |_| {}).unwrap();
        let session::Outcome::Measured(c) = &result.knobs[0].outcome else {
            panic!("{:?}", result.knobs[0].outcome);
        };
        assert!(c.trials.len() >= 4, "{:?}", c.trials);
        for (trial, seen) in c.trials.iter().zip(&bench.seen) {
            let want = match trial.arm {
                Arm::Start => "1",
                Arm::Candidate => "0-1",
            };
            assert_eq!(seen.trim(), want, "{:?} trial", trial.arm);
        }
        assert!(result.problems.is_empty(), "{:?}", result.problems);
        assert!(!result.choice.knobs.contains(&KnobId::Mems));
        assert_eq!(k.file(&mems_file).unwrap(), raised, "given back exactly");
        held.lower().unwrap();
        assert_eq!(trimmed(k.files()), before, "reset restores every file");
    }

    #[test]
    fn the_smallest_budget_counts_the_knobs_the_machine_has_and_a_preemption_model_debugfs_will_show(
    ) {
        let config = |knobs: &[KnobId]| TuneConfig {
            cpus: set("3"),
            load: Vec::new(),
            load_name: "none".into(),
            load_dir: "/var/tmp".into(),
            budget: Duration::from_secs(600),
            period: Period::from_rate(2048),
            priority: 95,
            knobs: Some(knobs.to_vec()),
        };
        let asked = [KnobId::Mems, KnobId::Governor, KnobId::Preempt];
        let counted = |k: &FakeKernel| {
            let c = config(&asked);
            budgeted_knobs(c.knobs.as_deref(), &Machine::read(k, &c.cpus), &c)
        };
        // Two memory nodes, no cpufreq driver: the memory placement counts,
        // the governor does not; the preemption model counts on a dynamic
        // kernel whose debugfs is not mounted yet, and not on a fixed one.
        let k = two_nodes_v1();
        k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC @0\n");
        assert_eq!(counted(&k), 2);
        k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_RT @0\n");
        assert_eq!(counted(&k), 1);
        // One memory node: nothing to place.
        let k = fake_machine::v1_machine("0-3", &[(100, "0-3")]);
        k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC @0\n");
        assert_eq!(counted(&k), 1);
        // None asked means all: what the catalog offers (on one node, not
        // the memory placement) and the preemption model.
        let all = config(&KnobId::ALL);
        let found = Machine::read(&k, &all.cpus);
        let offered = catalog(&found, &all.cpus, 95)
            .iter()
            .filter(|k| k.change.is_ok())
            .count();
        assert!(
            offered < KnobId::ALL.len() - 2,
            "the fake lacks cpufreq and SMT"
        );
        assert_eq!(budgeted_knobs(None, &found, &all), offered + 1);
    }

    #[test]
    fn on_two_nodes_v1_the_mems_knob_gives_the_shield_every_node_in_its_trials_and_its_own_back() {
        mems_knob_round_trip(&two_nodes_v1(), V1_ROOT);
    }

    #[test]
    fn on_two_nodes_v2_the_mems_knob_gives_the_shield_every_node_in_its_trials_and_its_own_back() {
        mems_knob_round_trip(&two_nodes_v2(), "/sys/fs/cgroup");
    }

    #[test]
    fn a_knob_list_keeps_each_knob_once_and_refuses_unknown_or_no_names() {
        assert_eq!(
            parse_knobs("preempt, timer-migration,preempt").unwrap(),
            [
                KnobId::from_name("preempt").unwrap(),
                KnobId::from_name("timer-migration").unwrap()
            ]
        );
        let e = parse_knobs("preempt,turbo").unwrap_err();
        assert!(
            e.starts_with("--knobs: no knob \"turbo\"; name some of "),
            "{e}"
        );
        assert!(e.contains("timer-migration"), "{e}");
        assert!(parse_knobs(" , ")
            .unwrap_err()
            .starts_with("--knobs names no knob"));
    }
}
