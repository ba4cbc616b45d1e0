//! The scenario runner end to end on a fake machine (FakeKernel, the shield's
//! state in memory): the real phases in their real order — the load started
//! before the first loaded scenario, the shield raised before the first
//! shielded one and the probes placed into it, the idle calibration, the
//! advance chosen from the shielded scenario, the anchor, the batch job, the
//! check — and the machine restored, shield first, then the load, at the end
//! and when a phase fails. The probes, the load, the anchor and the batch
//! job are fakes that note what the machine looked like when they ran.

use cpushield_compare::anchor::{AnchorRun, RtlaRun};
use cpushield_compare::batch::BatchRun;
use cpushield_compare::idle::IdleMode;
use cpushield_compare::lab::{BatchJob, LoadRun};
use cpushield_compare::{CompareConfig, CompareError, Lab, Runs, Scenario, Scope, ShieldAudit};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{FakeKernel, Host, Kernel};
use cpushield_load::{LoadError, LoadSpec, Workload};
use cpushield_measure::determinism::{
    CpuDeterminism, DeterminismConfig, DeterminismReport, DeterminismSettings,
};
use cpushield_measure::latency::{
    CpuLatency, LatencyConfig, LatencyReport, LatencySettings, Length,
};
use cpushield_measure::recorder::Recorder;
use cpushield_measure::{AppliedPolicy, MeasureError, Period, RunInfo, SchedPolicy};
use cpushield_report::{Anchor, BatchWork, CheckFinding, CompareReport};
use cpushield_shield::fake_machine::{v1_machine, V1_ROOT};
use cpushield_shield::state::MemoryStore;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The scenario's probe length; calibration runs are shorter.
const DURATION: Duration = Duration::from_secs(12);

/// Worst latency the fake probe reports: high without the shield, low with it.
const UNSHIELDED_MAX_NS: u64 = 900_000;
const SHIELDED_MAX_NS: u64 = 30_000;

/// What the fakes saw, one line per call, and what they were told to do.
#[derive(Default)]
struct Seen {
    log: Mutex<Vec<String>>,
    load_running: AtomicBool,
    load_ops: AtomicU64,
    /// Fail the main latency probe of this scenario's first CPU while the
    /// shield is up.
    fail_shielded_latency: AtomicBool,
    /// Put what the kernel would trace in CPU 3's trace pipe while each
    /// probe and anchor runs (the machine has a tracefs, [`with_tracefs`]).
    traced: AtomicBool,
    /// How long a softirq keeps the shielded anchor from its CPU, us.
    anchor_shielded_softirq_us: AtomicU64,
    /// The runner's own thread's affinity (thread 0 of the fake) when each
    /// probe ran, and the load's CPUs and its supervisor's.
    own: Mutex<Vec<String>>,
    /// The runner's own thread's nice value when the load started and when
    /// each probe ran, with whether the load ran then.
    nice: Mutex<Vec<(&'static str, bool, i32)>>,
}

impl Seen {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

struct FakeRuns {
    kernel: Arc<FakeKernel>,
    seen: Arc<Seen>,
}

impl FakeRuns {
    fn shield_up(&self) -> bool {
        self.kernel.has_dir(format!("{V1_ROOT}/cpushield-shield"))
    }
}

fn fifo() -> AppliedPolicy {
    AppliedPolicy {
        policy: SchedPolicy::Fifo,
        priority: 80,
    }
}

fn run_info() -> RunInfo {
    RunInfo {
        started_unix_ns: 0,
        elapsed_ns: 1,
        interrupted: false,
        kernel_release: "fake".into(),
        warnings: Vec::new(),
    }
}

fn never_placed(_tid: i32, _cpus: &CpuSet) -> std::io::Result<()> {
    panic!("the fake probes run no thread to place")
}

impl Runs for FakeRuns {
    fn latency(
        &self,
        config: &LatencyConfig,
        _stop: &AtomicBool,
        _progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<LatencyReport, MeasureError> {
        let Length::Duration(length) = config.length else {
            panic!("compare probes for a time");
        };
        let kind = if length == DURATION {
            "latency"
        } else {
            "calibrate"
        };
        let shield = self.shield_up();
        if let Ok(sched) = self.kernel.get_sched(0) {
            let load = self.seen.load_running.load(Ordering::SeqCst);
            self.seen
                .nice
                .lock()
                .unwrap()
                .push((kind, load, sched.nice));
        }
        if let Ok(own) = self.kernel.get_affinity(0) {
            self.seen
                .own
                .lock()
                .unwrap()
                .push(format!("{kind} cpus={} own={own}", config.cpus));
        }
        self.seen.note(format!(
            "{kind} cpus={} shield={shield} placed={} load={} poll={} advance={}",
            config.cpus,
            config.placer.is_some(),
            self.seen.load_running.load(Ordering::SeqCst),
            config.idle_poll,
            config.advance.is_some(),
        ));
        if kind == "latency" && shield && self.seen.fail_shielded_latency.load(Ordering::SeqCst) {
            return Err(MeasureError::Thread("the fake probe fails".into()));
        }
        let max = if shield && config.cpus.contains(3) {
            SHIELDED_MAX_NS
        } else {
            UNSHIELDED_MAX_NS
        };
        if let (Some(tap), true) = (&config.spikes, self.seen.traced.load(Ordering::SeqCst)) {
            // The probe's worst sample above the threshold, and what the
            // kernel recorded around it on CPU 3.
            let t0 = now_us();
            let (events, late_us) = if shield {
                (probe_delayed_by_softirq(t0, 100), 110)
            } else {
                (probe_delayed_by_load_task(t0, 2_000), 2_010)
            };
            feed(&self.kernel, &events);
            tap.sender
                .send(cpushield_trace::Spike {
                    seq: 0,
                    cpu: 3,
                    tid: PROBE_TID,
                    intended_ns: t0,
                    actual_ns: t0 + late_us * 1000,
                })
                .unwrap();
        }
        let cpus = config
            .cpus
            .iter()
            .map(|cpu| {
                let mut rec = Recorder::new();
                rec.record_many(5_000, 10_000);
                rec.record_many(max, 1);
                CpuLatency {
                    cpu,
                    applied: fifo(),
                    samples: 10_001,
                    missed_periods: 0,
                    latency: rec.finish(),
                    advance: None,
                    irq_latency: None,
                }
            })
            .collect();
        Ok(LatencyReport {
            settings: LatencySettings {
                cpus: config.cpus.clone(),
                period: config.period,
                period_ns: config.period.nominal_ns(),
                rate_hz: 1e9 / config.period.nominal_ns() as f64,
                duration_ns: Some(length.as_nanos() as u64),
                samples: None,
                priority: config.priority,
                advance_ns: config.advance.map(|a| a.as_nanos() as u64),
                spike_threshold_ns: None,
                idle_poll: config.idle_poll,
                source: Default::default(),
            },
            run: run_info(),
            cpus,
            spikes_dropped: 0,
        })
    }

    fn determinism(
        &self,
        config: &DeterminismConfig,
        _stop: &AtomicBool,
        _progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<DeterminismReport, MeasureError> {
        self.seen.note(format!(
            "determinism cpus={} shield={} placed={}",
            config.cpus,
            self.shield_up(),
            config.placer.is_some(),
        ));
        Ok(DeterminismReport {
            settings: DeterminismSettings {
                cpus: config.cpus.clone(),
                work_ns: None,
                iterations: 1_000,
                runs: config.runs,
                priority: config.priority,
                rest_ns: 0,
            },
            run: run_info(),
            cpus: config
                .cpus
                .iter()
                .map(|cpu| CpuDeterminism::from_runs(cpu, fifo(), vec![1_000_000, 1_010_000]))
                .collect(),
        })
    }

    fn shield_placement(&self) -> cpushield_rt::sched::PlaceFn {
        cpushield_rt::sched::PlaceFn::new(never_placed)
    }

    fn start_load(&self, spec: &LoadSpec) -> Result<Box<dyn LoadRun>, LoadError> {
        if let Ok(sched) = self.kernel.get_sched(0) {
            self.seen
                .nice
                .lock()
                .unwrap()
                .push(("load", false, sched.nice));
        }
        self.seen.own.lock().unwrap().push(format!(
            "load cpus={:?} supervisor={:?}",
            spec.cpus.as_ref().map(|c| c.to_list()),
            spec.supervisor_cpus.as_ref().map(|c| c.to_list())
        ));
        self.seen.note(format!(
            "load start shield={} workloads={}",
            self.shield_up(),
            spec.workloads.len()
        ));
        self.seen.load_running.store(true, Ordering::SeqCst);
        Ok(Box::new(FakeLoad {
            kernel: Arc::clone(&self.kernel),
            seen: Arc::clone(&self.seen),
        }))
    }

    fn cyclictest(&self) -> Option<PathBuf> {
        Some(PathBuf::from("/usr/bin/cyclictest"))
    }

    fn run_anchor(&self, run: &AnchorRun) -> Result<Anchor, String> {
        self.seen.note(format!(
            "anchor cpu={} shield={} shielded={}",
            run.cpu,
            self.shield_up(),
            run.shielded
        ));
        let mut max_ns = 40_000;
        if self.seen.traced.load(Ordering::SeqCst) {
            // cyclictest's thread kept from its CPU: by a load task while
            // loaded, by a softirq while shielded.
            let t0 = now_us();
            let (events, late_us) = if self.shield_up() {
                let us = self.seen.anchor_shielded_softirq_us.load(Ordering::SeqCst);
                (cyclictest_delayed_by_softirq(t0, us), us + 10)
            } else {
                (cyclictest_delayed_by_load_task(t0, 600), 600)
            };
            feed(&self.kernel, &events);
            max_ns = late_us * 1000 + 3_000_000;
        }
        Ok(Anchor {
            tool: "cyclictest".into(),
            command: run.command().join(" "),
            duration_s: run.duration.as_secs_f64(),
            samples: 100,
            max_ns,
            avg_ns: 4_000,
            ..Anchor::default()
        })
    }

    fn rtla(&self, _notes: &mut Vec<String>) -> Option<PathBuf> {
        Some(PathBuf::from("/usr/bin/rtla"))
    }

    fn run_rtla(
        &self,
        run: &RtlaRun,
        poll: Option<Option<cpushield_compare::lab::PlaceFn>>,
    ) -> Result<Anchor, String> {
        self.seen.note(format!(
            "rtla cpu={} shield={} poll={}",
            run.cpu,
            self.shield_up(),
            poll.is_some()
        ));
        Ok(Anchor {
            tool: "rtla timerlat".into(),
            command: String::new(),
            duration_s: run.duration.as_secs_f64(),
            samples: 100,
            max_ns: 30_000,
            avg_ns: 3_000,
            irq_max_ns: Some(10_000),
            ..Anchor::default()
        })
    }

    fn cpushield_exe(&self) -> Option<PathBuf> {
        Some(PathBuf::from("/usr/bin/cpushield"))
    }

    fn start_batch(&self, run: &BatchRun) -> Result<Box<dyn BatchJob>, String> {
        self.seen.note(format!(
            "batch start cpus={} shield={}",
            run.cpus,
            self.shield_up()
        ));
        Ok(Box::new(FakeBatch {
            seen: Arc::clone(&self.seen),
        }))
    }
}

struct FakeLoad {
    kernel: Arc<FakeKernel>,
    seen: Arc<Seen>,
}

impl LoadRun for FakeLoad {
    fn counters(&self) -> Vec<(String, u64)> {
        let ops = self.seen.load_ops.fetch_add(500, Ordering::SeqCst) + 500;
        vec![("compute".into(), ops)]
    }
    fn stop(self: Box<Self>) {}
}

impl Drop for FakeLoad {
    fn drop(&mut self) {
        let shield = self.kernel.has_dir(format!("{V1_ROOT}/cpushield-shield"));
        self.seen.note(format!("load stop shield={shield}"));
        self.seen.load_running.store(false, Ordering::SeqCst);
    }
}

struct FakeBatch {
    seen: Arc<Seen>,
}

impl BatchJob for FakeBatch {
    fn finish(self: Box<Self>) -> Result<BatchWork, String> {
        self.seen.note("batch finish".into());
        Ok(BatchWork {
            workload: "compute".into(),
            command: "cpushield run --share".into(),
            policy: "SCHED_IDLE".into(),
            seconds: 1.0,
            ops: 10,
            ops_per_s: 10.0,
            cpu_share_pct: 50.0,
        })
    }
}

/// A check that finds one thing on every CPU it watches.
#[derive(Debug)]
struct FakeAudit;

impl ShieldAudit for FakeAudit {
    fn findings_until(
        &self,
        cpus: &CpuSet,
        _interval: Duration,
        _done: &dyn Fn() -> bool,
    ) -> Vec<CheckFinding> {
        vec![CheckFinding {
            severity: "warn".into(),
            title: format!("IRQ 10 (fake) may be delivered to CPU {cpus}"),
            remedies: vec!["cpushield shield --irqs 3".into()],
            runtime_fix: true,
            topic: "irq".into(),
        }]
    }
}

/// A 4-CPU machine with two tasks and two IRQs that reach every CPU.
fn machine() -> Arc<FakeKernel> {
    let k = v1_machine("0-3", &[(100, "0-3"), (101, "0-3")]);
    for irq in [10, 11] {
        k.set_file(format!("/proc/irq/{irq}/smp_affinity"), "f\n");
    }
    k.set_file("/proc/interrupts", "CPU0 CPU1 CPU2 CPU3\n");
    Arc::new(k)
}

/// Every file's text as the kernel shows it (a written value reads back
/// with its newline), and every task's affinity.
fn machine_state(k: &FakeKernel) -> (BTreeMap<PathBuf, String>, BTreeMap<i32, CpuSet>) {
    let files = k
        .files()
        .into_iter()
        .map(|(path, text)| (path, text.trim_end().to_string()))
        .collect();
    (files, k.affinities())
}

fn lab(kernel: &Arc<FakeKernel>, seen: &Arc<Seen>) -> Lab {
    Lab {
        host: Host::new(
            Arc::clone(kernel) as Arc<dyn Kernel>,
            Arc::new(MemoryStore::new()),
        ),
        is_root: true,
        runs: Box::new(FakeRuns {
            kernel: Arc::clone(kernel),
            seen: Arc::clone(seen),
        }),
    }
}

fn config(dir: &Path, scenarios: Vec<Scenario>) -> CompareConfig {
    CompareConfig {
        cpus: None,
        scenarios,
        load: vec![Workload::Compute],
        load_name: "compute".into(),
        load_dir: dir.to_path_buf(),
        duration: DURATION,
        period: Period::Interval { ns: 1_000_000 },
        priority: 80,
        advance: None,
        determinism_runs: 2,
        determinism_work: Duration::from_millis(1),
        scope: Scope::Namespace,
        idle: IdleMode::Auto,
        attribute: false,
        attribute_above: None,
        anchor: true,
        audit: Some(Arc::new(FakeAudit)),
        trace_context: Default::default(),
        smt: false,
    }
}

const EVERY_SCENARIO: [Scenario; 6] = [
    Scenario::Idle,
    Scenario::Loaded,
    Scenario::Shielded,
    Scenario::ShieldedShared,
    Scenario::ShieldedAdvance,
    Scenario::UnshieldedCpu,
];

fn run(lab: &Lab, config: &CompareConfig) -> Result<CompareReport, CompareError> {
    cpushield_compare::run(lab, config, &AtomicBool::new(false), &mut |_| {})
}

#[test]
fn cpushield_keeps_its_own_threads_and_the_load_supervisor_off_every_measured_cpu_and_gives_its_affinity_back(
) {
    let kernel = machine();
    // The runner's calling thread, as the fake kernel knows it.
    kernel.set_thread_affinity(0, CpuSet::parse_list("0-3").unwrap());
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let scenarios = vec![
        Scenario::Idle,
        Scenario::Loaded,
        Scenario::Shielded,
        Scenario::UnshieldedCpu,
    ];
    run(&lab, &config(dir.path(), scenarios)).unwrap();

    // CPU 3 is shielded and measured, CPU 2 is measured by unshielded-cpu:
    // the runner's own thread (and so what it starts) keeps to CPUs 0-1
    // through every probe, the load runs everywhere but its supervisor.
    let own = seen.own.lock().unwrap().clone();
    assert!(!own.is_empty());
    for line in &own {
        assert!(
            line.ends_with("own=0-1") || line == "load cpus=Some(\"0-3\") supervisor=Some(\"0-1\")",
            "{own:#?}"
        );
    }
    assert!(own.iter().any(|l| l.starts_with("load ")), "{own:#?}");
    assert!(
        own.iter().any(|l| l.starts_with("latency cpus=2 ")),
        "{own:#?}"
    );
    assert_eq!(
        kernel.get_affinity(0).unwrap(),
        CpuSet::parse_list("0-3").unwrap(),
        "the runner's thread gets its affinity back"
    );
}

#[test]
fn the_runners_thread_outranks_the_load_only_while_the_load_runs_which_starts_at_the_nice_it_was_given(
) {
    let kernel = machine();
    // The runner's calling thread, as the fake kernel knows it: SCHED_OTHER, nice 0.
    kernel.set_thread_affinity(0, CpuSet::parse_list("0-3").unwrap());
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let scenarios = vec![Scenario::Idle, Scenario::Loaded, Scenario::Shielded];
    run(&lab, &config(dir.path(), scenarios)).unwrap();

    let nice = seen.nice.lock().unwrap().clone();
    assert_eq!(
        nice.iter()
            .filter(|(kind, ..)| *kind == "load")
            .collect::<Vec<_>>(),
        vec![&("load", false, 0)],
        "the load starts once, from the thread at its own nice: {nice:?}"
    );
    let probes: Vec<_> = nice
        .iter()
        .filter(|(kind, ..)| *kind == "latency")
        .collect();
    assert_eq!(probes.len(), 3, "{nice:?}");
    for (_, load, n) in &probes {
        let want = if *load {
            cpushield_compare::ORCHESTRATION_NICE
        } else {
            0
        };
        assert_eq!(*n, want, "{nice:?}");
    }
    assert!(probes.iter().any(|(_, load, _)| *load), "{nice:?}");
    assert_eq!(
        kernel.get_sched(0).unwrap().nice,
        0,
        "the runner's thread gets its nice value back"
    );
}

#[test]
fn every_phase_runs_in_order_with_the_machine_as_each_scenario_needs_it_and_is_restored() {
    let kernel = machine();
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let before = machine_state(&kernel);

    let report = run(&lab, &config(dir.path(), EVERY_SCENARIO.to_vec())).unwrap();

    // Unshielded probes run by affinity on CPU 3 (the highest, CPU 0 kept);
    // once the shield is up every probe is placed into it, and the
    // unshielded-cpu scenario measures CPU 2.
    let calibrate = |cpus: &str, shield: bool, load: bool| {
        [false, true].map(|poll| {
            format!("calibrate cpus={cpus} shield={shield} placed={shield} load={load} poll={poll} advance=false")
        })
    };
    let latency = |cpus: &str, shield: bool, load: bool, advance: bool| {
        format!("latency cpus={cpus} shield={shield} placed={shield} load={load} poll=false advance={advance}")
    };
    let determinism = |cpus: &str, shield: bool| {
        format!("determinism cpus={cpus} shield={shield} placed={shield}")
    };
    let mut expected: Vec<String> = Vec::new();
    // idle
    expected.extend(calibrate("3", false, false));
    expected.push(latency("3", false, false, false));
    expected.push(determinism("3", false));
    // loaded: the load first, then the anchor after the latency probe
    expected.push("load start shield=false workloads=1".into());
    expected.extend(calibrate("3", false, true));
    expected.push(latency("3", false, true, false));
    expected.push("anchor cpu=3 shield=false shielded=false".into());
    expected.push("rtla cpu=3 shield=false poll=false".into());
    expected.push(determinism("3", false));
    // shielded: the shield is up from here on
    expected.extend(calibrate("3", true, true));
    expected.push(latency("3", true, true, false));
    expected.push("anchor cpu=3 shield=true shielded=true".into());
    expected.push("rtla cpu=3 shield=true poll=false".into());
    expected.push(determinism("3", true));
    // shielded+shared: no calibration, the batch job around the probes
    expected.push("batch start cpus=3 shield=true".into());
    expected.push(latency("3", true, true, false));
    expected.push(determinism("3", true));
    expected.push("batch finish".into());
    // shielded+advance
    expected.extend(calibrate("3", true, true));
    expected.push(latency("3", true, true, true));
    expected.push(determinism("3", true));
    // unshielded-cpu
    expected.extend(calibrate("2", true, true));
    expected.push(latency("2", true, true, false));
    expected.push(determinism("2", true));
    // the load stops while the shield is still up: a forking load would
    // race reset's moves
    expected.push("load stop shield=true".into());
    assert_eq!(seen.lines(), expected);

    // Exactly the machine from before: cgroups, IRQ masks, settings, affinities.
    assert_eq!(machine_state(&kernel), before);

    let names: Vec<&str> = report.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        EVERY_SCENARIO.map(|s| s.name()).to_vec(),
        "one result per scenario, in order"
    );
    for s in &report.scenarios {
        let shielded = !matches!(s.name.as_str(), "idle" | "loaded" | "unshielded-cpu");
        assert_eq!(s.shielded, shielded, "{}", s.name);
        assert!(s.determinism.is_some(), "{}: determinism", s.name);
        assert_eq!(
            s.findings.is_empty(),
            !shielded,
            "{}: the check watches the shielded CPUs only",
            s.name
        );
        assert_eq!(
            s.anchor.is_some(),
            matches!(s.name.as_str(), "loaded" | "shielded"),
            "{}: the anchor",
            s.name
        );
        assert_eq!(
            s.rtla.is_some(),
            matches!(s.name.as_str(), "loaded" | "shielded"),
            "{}: the kernel's timerlat anchor",
            s.name
        );
        assert_eq!(
            s.load.is_empty(),
            s.name == "idle",
            "{}: the load's work counted where it ran",
            s.name
        );
        assert!(s.idle.is_some(), "{}: how the CPUs idled", s.name);
    }
    let advance = &report.scenarios[4];
    assert_eq!(
        advance.advance_ns,
        Some(SHIELDED_MAX_NS),
        "the shielded scenario's p99.999 (of 10,001 samples, its worst)"
    );
    assert!(advance
        .notes
        .iter()
        .any(|n| n.contains("chosen by measurement")));
    assert!(report.scenarios[3].batch.is_some(), "the batch job's work");
    assert_eq!(report.scenarios[2].latency.max_ns, SHIELDED_MAX_NS);
    assert_eq!(report.scenarios[1].latency.max_ns, UNSHIELDED_MAX_NS);
}

#[test]
fn a_phase_that_fails_with_the_shield_up_stops_the_load_then_takes_the_shield_down() {
    let kernel = machine();
    let seen = Arc::new(Seen::default());
    seen.fail_shielded_latency.store(true, Ordering::SeqCst);
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let before = machine_state(&kernel);

    let err = run(&lab, &config(dir.path(), EVERY_SCENARIO.to_vec())).unwrap_err();

    assert!(err.to_string().contains("the fake probe fails"), "{err}");
    let lines = seen.lines();
    let failed = lines
        .iter()
        .position(|l| l.starts_with("latency") && l.contains("shield=true"))
        .expect("the shielded latency probe ran");
    assert_eq!(
        &lines[failed + 1..],
        ["load stop shield=true"],
        "nothing runs after the failure but the restore, the load first"
    );
    assert_eq!(machine_state(&kernel), before);
}

#[test]
fn a_shield_already_up_is_refused_before_anything_changes() {
    let kernel = machine();
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    cpushield_shield::shield(
        &lab.host,
        &cpushield_shield::ShieldMasks::all(&CpuSet::from_cpus([2])),
        cpushield_shield::Options {
            is_root: true,
            whole_cores: false,
        },
    )
    .unwrap();
    let before = machine_state(&kernel);
    let dir = tempfile::tempdir().unwrap();

    let err = run(&lab, &config(dir.path(), EVERY_SCENARIO.to_vec())).unwrap_err();

    assert!(err.to_string().contains("a shield is already up"), "{err}");
    assert!(seen.lines().is_empty(), "no probe, no load");
    assert_eq!(machine_state(&kernel), before);
}

#[test]
fn attribution_without_a_threshold_takes_it_from_a_baseline_on_the_idle_machine_and_traces_the_probe(
) {
    let _turn = TRACING.lock().unwrap_or_else(|e| e.into_inner());
    let kernel = machine();
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let before = machine_state(&kernel);
    let mut config = config(dir.path(), vec![Scenario::Idle]);
    config.attribute = true;

    let report = run(&lab, &config).unwrap();

    let baseline = "calibrate cpus=3 shield=false placed=false load=false poll=false advance=false";
    let lines = seen.lines();
    assert_eq!(
        lines.len(),
        5,
        "baseline, two calibrations, latency, determinism: {lines:#?}"
    );
    assert_eq!(
        lines[0], baseline,
        "the baseline runs first, on the idle machine"
    );
    // The fake machine has no tracefs: the latency probe tried to trace and
    // the scenario says why it could not.
    let notes = &report.scenarios[0].notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("not traced:") && n.contains("tracefs")),
        "{notes:?}"
    );
    assert_eq!(machine_state(&kernel), before);
}

#[test]
fn a_shield_that_does_not_come_down_at_the_end_fails_the_run_and_says_why() {
    let kernel = machine();
    // Reset moves every task back to the root cpuset; here the kernel refuses.
    kernel.refuse_writes(format!("{V1_ROOT}/tasks"));
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();

    let err = run(&lab, &config(dir.path(), vec![Scenario::Shielded])).unwrap_err();

    assert!(err.to_string().contains("cpushield-system"), "{err}");
    assert_eq!(
        seen.lines().last().map(String::as_str),
        Some("load stop shield=true"),
        "the load stopped before the reset was tried"
    );
}

/// The probe's thread ID in the fake traces.
const PROBE_TID: i32 = 50;

/// Now on CLOCK_MONOTONIC in whole microseconds (the text trace's
/// resolution), ns.
fn now_us() -> u64 {
    cpushield_kernel::clock::now_ns() / 1000 * 1000
}

/// `t0 + us` as the text trace writes a time.
fn ts(t0: u64, us: u64) -> String {
    let ns = t0 + us * 1000;
    format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1000)
}

/// Appends trace lines to CPU 3's trace pipe.
fn feed(k: &FakeKernel, lines: &[String]) {
    let pipe = format!("{TRACEFS}/per_cpu/cpu3/trace_pipe");
    let mut text = k.file(&pipe).unwrap_or_default();
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    k.set_file(&pipe, text);
}

/// The probe woken on time at `t0` by its timer, then kept waiting `us` by
/// a load task in a system call.
fn probe_delayed_by_load_task(t0: u64, us: u64) -> Vec<String> {
    vec![
        format!("            load-70      [003] d.h..  {}: local_timer_entry: vector=236", ts(t0, 0)),
        format!("            load-70      [003] dNh..  {}: local_timer_exit: vector=236", ts(t0, 4)),
        format!("            load-70      [003] d..2.  {}: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid={PROBE_TID} next_prio=4", ts(t0, us)),
    ]
}

/// The probe woken on an idle CPU at `t0`, then kept waiting by the disk's
/// softirq for about `us`.
fn probe_delayed_by_softirq(t0: u64, us: u64) -> Vec<String> {
    vec![
        format!("          <idle>-0       [003] d.h1.  {}: local_timer_entry: vector=236", ts(t0, 0)),
        format!("          <idle>-0       [003] dNh1.  {}: local_timer_exit: vector=236", ts(t0, 4)),
        format!("          <idle>-0       [003] .Ns1.  {}: softirq_entry: vec=4 [action=BLOCK]", ts(t0, 5)),
        format!("          <idle>-0       [003] .Ns1.  {}: softirq_exit: vec=4 [action=BLOCK]", ts(t0, 5 + us)),
        format!("          <idle>-0       [003] d..2.  {}: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid={PROBE_TID} next_prio=4", ts(t0, 6 + us)),
    ]
}

/// cyclictest's thread (812) arms its timer for `t0 + 100 us`, sleeps, and
/// is switched in `us` after it expired, a load task in the way.
fn cyclictest_delayed_by_load_task(t0: u64, us: u64) -> Vec<String> {
    let expires = t0 + 100_000;
    vec![
        format!("      cyclictest-812     [003] d..1.  {}: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires={expires} softexpires={expires} mode=ABS", ts(t0, 1)),
        format!("      cyclictest-812     [003] d..2.  {}: sched_switch: prev_comm=cyclictest prev_pid=812 prev_prio=4 prev_state=S ==> next_comm=load next_pid=70 next_prio=120", ts(t0, 2)),
        format!("            load-70      [003] d.h..  {}: local_timer_entry: vector=236", ts(t0, 100)),
        format!("            load-70      [003] dNh..  {}: local_timer_exit: vector=236", ts(t0, 104)),
        format!("            load-70      [003] d..2.  {}: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=cyclictest next_pid=812 next_prio=4", ts(t0, 100 + us)),
    ]
}

/// cyclictest's thread (812) woken on an idle CPU, then kept waiting by the
/// disk's softirq for `us`.
fn cyclictest_delayed_by_softirq(t0: u64, us: u64) -> Vec<String> {
    let expires = t0 + 100_000;
    vec![
        format!("      cyclictest-812     [003] d..1.  {}: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires={expires} softexpires={expires} mode=ABS", ts(t0, 1)),
        format!("      cyclictest-812     [003] d..2.  {}: sched_switch: prev_comm=cyclictest prev_pid=812 prev_prio=4 prev_state=S ==> next_comm=swapper/3 next_pid=0 next_prio=120", ts(t0, 2)),
        format!("          <idle>-0       [003] d.h1.  {}: local_timer_entry: vector=236", ts(t0, 100)),
        format!("          <idle>-0       [003] dNh1.  {}: local_timer_exit: vector=236", ts(t0, 104)),
        format!("          <idle>-0       [003] .Ns1.  {}: softirq_entry: vec=4 [action=BLOCK]", ts(t0, 105)),
        format!("          <idle>-0       [003] .Ns1.  {}: softirq_exit: vec=4 [action=BLOCK]", ts(t0, 105 + us)),
        format!("          <idle>-0       [003] d..2.  {}: sched_switch: prev_comm=swapper/3 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cyclictest next_pid=812 next_prio=4", ts(t0, 100 + us + 10)),
    ]
}

/// Where the fake machine's tracefs is.
const TRACEFS: &str = "/sys/kernel/tracing";

/// Gives the fake machine a tracefs, as a kernel without the timerlat
/// tracer has it: the scheduler, IRQ and timer events, a pipe per CPU.
fn with_tracefs(k: &FakeKernel) {
    k.set_file(
        "/proc/self/mounts",
        format!("tracefs {TRACEFS} tracefs rw,nosuid,nodev,noexec 0 0\n"),
    );
    k.set_file(
        "/proc/stat",
        "cpu  0 0 0 0\ncpu0 1 0 1 10 0 0 0 0\ncpu1 1 0 1 10 0 0 0 0\ncpu2 1 0 1 10 0 0 0 0\ncpu3 1 0 1 10 0 0 0 0\n",
    );
    let f = |p: &str, v: &str| k.set_file(format!("{TRACEFS}/{p}"), v);
    // Already on the mono clock: a fake file keeps what is written to it
    // (the kernel moves the brackets), so the clock put back after one
    // session must still offer mono to the next.
    f("trace_clock", "local global counter [mono] mono_raw\n");
    f("tracing_on", "1\n");
    f("current_tracer", "nop\n");
    f("tracing_cpumask", "f\n");
    f("trace_marker", "");
    f("trace", "# tracer: nop\n");
    for cpu in 0..4 {
        f(&format!("per_cpu/cpu{cpu}/buffer_size_kb"), "1408\n");
        f(&format!("per_cpu/cpu{cpu}/trace_pipe"), "");
    }
    for ev in [
        "irq/irq_handler_entry",
        "irq/irq_handler_exit",
        "irq/softirq_entry",
        "irq/softirq_exit",
        "sched/sched_switch",
        "irq_vectors/local_timer_entry",
        "irq_vectors/local_timer_exit",
        "timer/hrtimer_start",
    ] {
        f(&format!("events/{ev}/enable"), "0\n");
        f(&format!("events/{ev}/filter"), "none\n");
    }
}

/// One trace session per process at a time: the tests that trace take turns.
static TRACING: Mutex<()> = Mutex::new(());

/// A traced compare of the loaded and shielded scenarios on the fake
/// machine, the shielded cyclictest kept from its CPU `softirq_us` by the
/// disk's softirq.
fn traced_run(softirq_us: u64) -> CompareReport {
    let kernel = machine();
    with_tracefs(&kernel);
    let seen = Arc::new(Seen::default());
    seen.traced.store(true, Ordering::SeqCst);
    seen.anchor_shielded_softirq_us
        .store(softirq_us, Ordering::SeqCst);
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), vec![Scenario::Loaded, Scenario::Shielded]);
    config.attribute = true;
    config.attribute_above = Some(Duration::from_micros(50));
    run(&lab, &config).unwrap()
}

#[test]
fn a_traced_anchor_that_sees_no_effect_in_the_guest_refutes_works_and_the_report_says_so() {
    let _turn = TRACING.lock().unwrap_or_else(|e| e.into_inner());
    // The probe: 2 ms by a load task loaded, 0.1 ms by the disk's softirq
    // shielded (a boot parameter's business): the shield works. cyclictest,
    // traced in the same scenarios: 0.6 ms loaded, 0.5 ms shielded.
    let report = traced_run(500);
    let v = &report.verdict;
    assert_eq!(
        v.category,
        "works-with-remaining",
        "{}\n{:#?}",
        v.line,
        report
            .scenarios
            .iter()
            .map(|s| &s.notes)
            .collect::<Vec<_>>()
    );
    assert!(v.pass);
    let shielded = report.scenario("shielded").unwrap();
    let anchor = shielded.anchor.as_ref().unwrap();
    assert_eq!(anchor.traced_wakeups, Some(1), "{:?}", shielded.notes);
    let split = anchor.attribution.as_ref().unwrap();
    assert_eq!(split.causes[0].name, "softirq BLOCK", "{:#?}", split.causes);
    let cyclictest = v.anchors.iter().find(|a| a.tool == "cyclictest").unwrap();
    assert_eq!(cyclictest.terms, "in the guest");
    assert_eq!(cyclictest.agrees, Some(false), "{}", cyclictest.line);
    assert_eq!(v.anchor_agrees, Some(false));
    assert!(
        cyclictest.line.starts_with("in the guest 1.2x: DISAGREES"),
        "{}",
        cyclictest.line
    );
    assert!(
        v.notes
            .iter()
            .any(|n| n.starts_with("the verdict disagrees with its cyclictest anchor")),
        "{:?}",
        v.notes
    );
    let answer = cpushield_report::table::answer(&report, None, None);
    assert!(answer.contains("DISAGREES"), "{answer}");
}

#[test]
fn a_traced_anchor_that_sees_the_shield_work_in_the_guest_agrees() {
    let _turn = TRACING.lock().unwrap_or_else(|e| e.into_inner());
    // The shielded cyclictest is never kept from its CPU longer than the
    // threshold: its guest-caused worst case is at most that.
    let report = traced_run(20);
    let cyclictest = report
        .verdict
        .anchors
        .iter()
        .find(|a| a.tool == "cyclictest")
        .unwrap();
    assert_eq!(cyclictest.agrees, Some(true), "{}", cyclictest.line);
    assert_eq!(report.verdict.anchor_agrees, Some(true));
    // rtla's timerlat thread never woke in the fake trace: said, not judged.
    let rtla = report
        .verdict
        .anchors
        .iter()
        .find(|a| a.tool == "rtla timerlat");
    assert_eq!(rtla.map(|a| a.terms.as_str()), Some("raw"));
    assert!(report
        .scenario("loaded")
        .unwrap()
        .notes
        .iter()
        .any(|n| n.starts_with("rtla timerlat not traced: none of its wakeups")));
}

#[test]
fn smt_measures_the_shielded_cpu_once_per_sibling_state_with_no_load_or_anchor_and_brings_the_sibling_back(
) {
    let kernel = machine();
    // Two cores, {0,2} and {1,3}: CPU 3 is measured beside its sibling CPU 1.
    for cpu in 0..4 {
        let core = if cpu % 2 == 0 { "0,2" } else { "1,3" };
        kernel.set_file(
            format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
            format!("{core}\n"),
        );
    }
    kernel.set_file("/sys/devices/system/cpu/cpu1/online", "1\n");
    // The spinner's thread places itself (thread 0 to the fake).
    kernel.set_thread_affinity(0, CpuSet::parse_list("0-3").unwrap());
    let seen = Arc::new(Seen::default());
    let lab = lab(&kernel, &seen);
    let dir = tempfile::tempdir().unwrap();
    let (files_before, tasks_before) = machine_state(&kernel);
    let mut config = config(dir.path(), EVERY_SCENARIO.to_vec());
    config.smt = true;

    let report = run(&lab, &config).unwrap();

    let names: Vec<&str> = report.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["smt-busy", "smt-idle", "smt-offline"]);
    for s in &report.scenarios {
        assert!(
            s.shielded && s.determinism.is_some() && s.anchor.is_none(),
            "{s:#?}"
        );
        assert!(
            s.notes.iter().any(|n| n == "SMT sibling CPU(s) 1 of CPU 3"),
            "{:?}",
            s.notes
        );
    }
    assert!(report.scenarios[0]
        .notes
        .iter()
        .any(|n| n.starts_with("Brosky & Rotolo Figure 4")));
    // The runner's latency and determinism phases, in the shield, halting
    // (idle auto is halt here), no calibration, load, anchor or check.
    let state = [
        "latency cpus=3 shield=true placed=true load=false poll=false advance=false",
        "determinism cpus=3 shield=true placed=true",
    ];
    assert_eq!(seen.lines(), [state, state, state].concat());
    let (files_after, tasks_after) = machine_state(&kernel);
    assert_eq!(
        files_after, files_before,
        "the sibling online, the shield gone"
    );
    for task in [100, 101] {
        assert_eq!(tasks_after.get(&task), tasks_before.get(&task));
    }
}
