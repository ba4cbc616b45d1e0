//! `cpushield agent`: a long-running loop that keeps the shield true and
//! serves what reaches the shielded CPUs as Prometheus metrics.
//!
//! Every interval it reads the saved shield (the state `shield` and `apply`
//! keep), the IRQ masks, and check's counters of the shielded CPUs. An IRQ
//! whose mask moved onto a shielded CPU (irqbalance, a new device) is drift:
//! the agent re-applies the shield through `cpushield_shield::shield_in`, the
//! same code path, state and journal as `cpushield shield`, so `reset` stays
//! exact, and logs one line per IRQ with the cause. The same holds for a CPU
//! that comes online and for a task outside the shield whose affinity was
//! widened onto a shielded CPU (the re-applied shield keeps the widened mask
//! as the task's request, Brosky's rule, and sets it back to housekeeping).

pub mod access;
pub mod client;
pub mod drift;
pub mod findings;
pub mod metrics;
pub mod probe;
pub mod sample;
pub mod server;
pub mod socket;
pub mod start;
pub mod status;
pub mod vcpus;

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel};
use cpushield_shield::snapshot::is_kubepods;
use cpushield_shield::state;
use cpushield_shield::{snapshot, Options, ShieldMasks};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to do with the shield when the agent stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStop {
    /// Leave the shield up.
    Keep,
    /// Reset it (exactly, as `cpushield reset`).
    Reset,
}

/// The agent's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often it looks.
    pub interval: Duration,
    /// One look, then stop (no server).
    pub once: bool,
    /// What to do with the shield on SIGTERM / SIGINT.
    pub on_stop: OnStop,
    /// Shield options (root).
    pub options: Options,
    /// Run check's analysis every this many looks.
    pub check_every: u32,
    /// Read every task every this many looks ([`Agent::scan_every`]).
    pub scan_every: u32,
    /// The low-duty latency probe, if the config names a CPU.
    pub probe: Option<probe::ProbeSettings>,
    /// `--on-threshold CMD`: run (by `sh -c`) once when the latency exceeds
    /// the limit or a finding breaks the shield; again only after it cleared.
    pub on_threshold: Option<String>,
    /// `--textfile PATH`: node_exporter textfile, rewritten every look.
    pub textfile: Option<PathBuf>,
    /// Hidden `--fast-forward N`: N looks without sleeping, printing the
    /// resident memory after one minute's worth and after all of them.
    pub fast_forward: Option<u64>,
}

impl Settings {
    /// Defaults: 1 s looks, forever, shield kept, no probe, no hooks.
    pub fn new(options: Options) -> Self {
        Self {
            interval: Duration::from_secs(1),
            once: false,
            on_stop: OnStop::Keep,
            options,
            check_every: 10,
            scan_every: SCAN_EVERY,
            probe: None,
            on_threshold: None,
            textfile: None,
            fast_forward: None,
        }
    }
}

/// How often a look reads every task by default ([`Settings::scan_every`]): with
/// the default interval of 1 s, a task that reached a shielded CPU from a
/// cgroup whose CPUs exclude them is found within 10 s.
pub const SCAN_EVERY: u32 = 10;

/// Which tasks a look reads. Every task at the first look and at every
/// `every`th after; between, only the tasks of the cgroups that can reach
/// a shielded CPU (`snapshot::read_tasks_reaching`): on a shielded machine
/// nearly every task is in the housekeeping cpuset, whose CPUs the kernel
/// keeps its tasks to (a task there cannot ask for a shielded CPU), so a
/// look reads the root's kernel threads and the shield's tasks instead of
/// 100,000 threads. The full reads find what the kernel's cpuset checks do
/// not stop: a kernel thread the kernel itself gives shielded CPUs.
struct TaskScan {
    every: u32,
    /// Looks since the last read of every task; `None` before the first.
    since_full: Option<u32>,
    /// The process of each thread read, so that a look finds a thread's
    /// /proc directory from the cgroup lists' thread IDs.
    tgids: std::collections::HashMap<i32, i32>,
}

impl TaskScan {
    fn new(every: u32) -> Self {
        Self {
            every: every.max(1),
            since_full: None,
            tgids: Default::default(),
        }
    }

    /// Whether this look reads every task.
    fn full_due(&self) -> bool {
        self.since_full.is_none_or(|n| n + 1 >= self.every)
    }

    /// Every task was read: `tasks`.
    fn read_all(&mut self, tasks: &[snapshot::TaskInfo]) {
        self.since_full = Some(0);
        self.tgids = tasks.iter().map(|t| (t.tid, t.tgid)).collect();
    }

    /// Some tasks were read: `tasks`.
    fn read_some(&mut self, tasks: &[snapshot::TaskInfo]) {
        self.since_full = self.since_full.map(|n| n + 1);
        self.tgids.extend(tasks.iter().map(|t| (t.tid, t.tgid)));
    }
}

/// The state shared between the loop and the HTTP server.
pub struct Shared {
    /// The metrics.
    pub metrics: Mutex<metrics::Metrics>,
    /// The `/status` conditions.
    pub conditions: Mutex<status::Conditions>,
    /// The worst probe latency (ns) of the last burst when above the limit; 0: none.
    pub latency_over: AtomicU64,
}

impl Shared {
    /// Fresh metrics and no conditions yet.
    pub fn new(version: &str) -> Arc<Self> {
        Arc::new(Self {
            metrics: Mutex::new(metrics::Metrics::new(version, cpushield_kernel::user_hz())),
            conditions: Mutex::new(status::Conditions::default()),
            latency_over: AtomicU64::new(0),
        })
    }
}

/// The agent's loop state.
pub struct Agent<'a> {
    host: &'a Host,
    watch: drift::Watch,
    tasks: drift::TaskWatch,
    scan: TaskScan,
    online: drift::OnlineWatch,
    shared: Arc<Shared>,
    options: Options,
    checker: findings::Checker,
    vcpus: vcpus::Vcpus,
    /// The first finding of the last analysis that breaks the shield.
    breaks: Option<String>,
    /// The saved state, decoded again only when its file changes.
    saved: state::LoadCache,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'a> Agent<'a> {
    /// An agent over `host` (its kernel and the shield's state).
    pub fn new(host: &'a Host, shared: Arc<Shared>, options: Options) -> Self {
        Self {
            host,
            watch: drift::Watch::new(),
            tasks: drift::TaskWatch::new(),
            scan: TaskScan::new(SCAN_EVERY),
            online: drift::OnlineWatch::default(),
            shared,
            options,
            checker: findings::Checker::new(10),
            vcpus: vcpus::Vcpus::new(),
            breaks: None,
            saved: state::LoadCache::default(),
        }
    }

    /// For one look only (`--once`): the VMs' vCPUs are all found in it.
    pub fn one_shot(mut self) -> Self {
        self.vcpus = vcpus::Vcpus::one_shot();
        self
    }

    /// Runs check's analysis every `every` looks.
    pub fn check_every(mut self, every: u32) -> Self {
        self.checker = findings::Checker::new(every);
        self
    }

    /// Reads every task at the first look and every `every` looks after
    /// (1: at every look); the looks between read only the tasks that can
    /// reach a shielded CPU ([`TaskScan`]). Default [`SCAN_EVERY`].
    pub fn scan_every(mut self, every: u32) -> Self {
        self.scan = TaskScan::new(every);
        self
    }

    /// What crosses a limit now: the latency above it, or a finding that
    /// breaks the shield (one line), if any.
    pub fn crossed(&self) -> Option<String> {
        let over = self.shared.latency_over.load(Ordering::SeqCst);
        if over > 0 {
            return Some(format!(
                "the probe saw a latency of {} us, above the limit",
                over / 1000
            ));
        }
        self.breaks
            .as_ref()
            .map(|t| format!("a finding breaks the shield: {t}"))
    }

    /// One look: correct drift, update metrics and conditions. Returns the
    /// log lines (one per correction, and one per failure).
    pub fn tick(&mut self) -> io::Result<Vec<String>> {
        let mut log = Vec::new();
        let loaded = self.saved.load(self.host.store())?;
        let masks = loaded.as_ref().map(|s| s.masks.clone()).unwrap_or_default();
        let online = cpushield_kernel::online_cpus(self.host.kernel())?;
        let came_online = self.online.observe(&online);
        let shielded_irqs = masks.irqs.intersection(&online);
        let shielded_procs = masks.procs.intersection(&online);
        let watched = masks.any().intersection(&online);
        // One reading of /proc/interrupts a look, for the names here and the
        // counters at the end (the counters were read after any correction
        // before; a correction changes masks, not counts).
        let interrupts = sample::Interrupts::read(self.host.kernel(), &watched);
        let irqs = snapshot::read_irqs_named(self.host.kernel(), &interrupts.names());
        let drifts = self.watch.observe(&irqs, &shielded_irqs);
        let task_drifts = self.look_at_tasks(loaded.as_deref(), &shielded_procs, &mut log);
        let now = status::now();
        let drifted = !drifts.is_empty() || !task_drifts.is_empty() || !came_online.is_empty();
        let corrected = if drifted && !masks.is_empty() {
            let found = Drifted {
                loaded: loaded.as_deref(),
                online: &online,
                came_online: &came_online,
                irqs: &drifts,
                tasks: &task_drifts,
            };
            self.correct(&masks, &found, &mut log)
        } else {
            None
        };
        self.look_for_findings(loaded.as_deref(), &watched);
        self.update_metrics(&masks, &watched, &interrupts, &mut log);
        self.set_conditions(&masks, corrected, &now);
        Ok(log)
    }

    /// The tasks on the shielded CPUs: the drifts to correct; Kubernetes
    /// pods' tasks are logged and counted, never corrected.
    fn look_at_tasks(
        &mut self,
        loaded: Option<&state::SavedState>,
        shielded_procs: &CpuSet,
        log: &mut Vec<String>,
    ) -> Vec<drift::TaskDrift> {
        let (tasks, all) = match loaded {
            Some(s) if !shielded_procs.is_empty() => self.read_tasks(s, shielded_procs, log),
            _ => (Vec::new(), true),
        };
        let drift::TaskLook { drifts, pods } = if all {
            self.tasks.observe(&tasks, shielded_procs)
        } else {
            self.tasks.observe_some(&tasks, shielded_procs)
        };
        log.extend(pods.iter().map(pod_line));
        // A look that read some tasks read every one that can be on a
        // shielded CPU: the count is the same as a full read's.
        lock(&self.shared.metrics).set_pod_tasks_on_shield(
            tasks
                .iter()
                .filter(|t| is_kubepods(&t.cgroup) && t.affinity.intersects(shielded_procs))
                .count(),
        );
        drifts
    }

    /// The tasks this look reads ([`TaskScan`]), and whether they are all of
    /// them. A read that failed is logged and counts as having read none, so
    /// that what was seen before is kept (and the full read is tried again
    /// at the next look).
    fn read_tasks(
        &mut self,
        saved: &state::SavedState,
        shielded_procs: &CpuSet,
        log: &mut Vec<String>,
    ) -> (Vec<snapshot::TaskInfo>, bool) {
        let kernel = self.host.kernel();
        if !self.scan.full_due() {
            match snapshot::read_tasks_reaching(
                kernel,
                &saved.layout,
                shielded_procs,
                &self.scan.tgids,
            ) {
                Ok(snapshot::Reaching::Tasks(tasks)) => {
                    self.scan.read_some(&tasks);
                    return (tasks, false);
                }
                // Only a read of every task is sure to find it.
                Ok(snapshot::Reaching::Unplaced(_)) => {}
                Err(e) => {
                    log.push(format!("reading the tasks failed: {e}"));
                    return (Vec::new(), false);
                }
            }
        }
        match snapshot::read_tasks(kernel, &saved.layout) {
            Ok(tasks) => {
                self.scan.read_all(&tasks);
                (tasks, true)
            }
            Err(e) => {
                log.push(format!("reading the tasks failed: {e}"));
                (Vec::new(), false)
            }
        }
    }

    /// Re-applies the shield and logs each drift it corrected (or could
    /// not); the cause of the first correction.
    fn correct(
        &mut self,
        masks: &ShieldMasks,
        found: &Drifted<'_>,
        log: &mut Vec<String>,
    ) -> Option<&'static str> {
        let applied = cpushield_shield::shield(self.host, masks, self.options)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let after = snapshot::read_irqs(self.host.kernel());
        let mut corrected = None;
        let mut count = |cause: drift::Cause| {
            lock(&self.shared.metrics).correction(cause.label());
            corrected.get_or_insert(cause.label());
        };
        if !found.came_online.is_empty() {
            log.push(online_line(found.came_online, found.online, &applied));
            count(drift::Cause::CpuOnline);
        }
        for d in found.irqs {
            let now_text = after
                .iter()
                .find(|i| i.irq == d.irq)
                .map(|i| i.mask_text.clone())
                .unwrap_or_default();
            let (line, is_correction) = irq_drift_line(d, &now_text, &applied);
            log.push(line);
            if is_correction {
                count(d.cause);
            }
        }
        // What the shield wrote (or could not change) is the new baseline.
        self.watch.remember(&after);
        if found.tasks.is_empty() {
            return corrected;
        }
        let tasks_after = found
            .loaded
            .and_then(|s| snapshot::read_tasks(self.host.kernel(), &s.layout).ok());
        if let Some(all) = &tasks_after {
            self.scan.read_all(all);
        }
        let tasks_after = tasks_after.unwrap_or_default();
        for d in found.tasks {
            let Some(now_aff) = tasks_after.iter().find(|t| t.tid == d.tid) else {
                continue;
            };
            let (line, is_correction) = task_drift_line(d, &now_aff.affinity, &applied);
            log.push(line);
            if is_correction {
                lock(&self.shared.metrics).correction(d.cause.label());
                corrected.get_or_insert(d.cause.label());
            }
        }
        self.tasks.remember(&tasks_after);
        corrected
    }

    /// check's findings on the watched CPUs, every so many looks.
    fn look_for_findings(&mut self, loaded: Option<&state::SavedState>, watched: &CpuSet) {
        let shield = || loaded.map(cpushield_check::ShieldInForce::from_saved);
        if let Some(outcome) = self.checker.look(self.host.kernel(), watched, shield) {
            lock(&self.shared.metrics)
                .set_findings(outcome.counts.iter().map(|(s, n)| (severity_label(*s), *n)));
            self.breaks = outcome.breaks;
        } else if watched.is_empty() {
            self.breaks = None;
        }
    }

    /// The counters of the watched CPUs and the vCPUs, into the metrics.
    fn update_metrics(
        &mut self,
        masks: &ShieldMasks,
        watched: &CpuSet,
        interrupts: &sample::Interrupts,
        log: &mut Vec<String>,
    ) {
        let sample = sample::read_with(self.host.kernel(), watched, interrupts);
        let (vcpu_samples, vcpu_log) = self.vcpus.look(self.host.kernel());
        log.extend(vcpu_log);
        let mut m = lock(&self.shared.metrics);
        m.set_shield(masks);
        m.update_vcpus(vcpu_samples);
        match sample {
            Ok(s) => m.update(s),
            Err(e) => log.push(format!("reading the counters failed: {e}")),
        }
    }

    /// The ShieldUp and Corrected conditions after this look.
    fn set_conditions(&self, masks: &ShieldMasks, corrected: Option<&str>, now: &str) {
        let mut c = lock(&self.shared.conditions);
        c.set(
            "ShieldUp",
            !masks.is_empty(),
            if masks.is_empty() {
                "NoShield"
            } else {
                "Shielded"
            },
            describe(masks),
            now,
        );
        c.set(
            "Corrected",
            corrected.is_some(),
            if corrected.is_some() {
                "DriftCorrected"
            } else {
                "NoDrift"
            },
            corrected_message(corrected),
            now,
        );
    }
}

/// What one look found drifted.
struct Drifted<'x> {
    loaded: Option<&'x state::SavedState>,
    online: &'x CpuSet,
    came_online: &'x CpuSet,
    irqs: &'x [drift::Drift],
    tasks: &'x [drift::TaskDrift],
}

/// How re-applying the shield went, ending a correction's line.
fn outcome(applied: &Result<(), String>, what: String) -> String {
    match applied {
        Ok(()) => format!("re-applied the shield, {what}"),
        Err(e) => format!("re-applying the shield failed: {e}"),
    }
}

/// The log line of a pod's task the agent leaves on a shielded CPU.
fn pod_line(p: &drift::PodTask) -> String {
    format!(
        "task {} ({}) of a Kubernetes pod (cgroup {}) has affinity {} on shielded CPU {}: pods belong to the kubelet's CPU manager, so the agent leaves it there and re-applies nothing; keep pods off the shielded CPUs (kubelet reservedSystemCPUs, docs/fleet.md)",
        p.tid,
        p.comm,
        p.cgroup,
        p.affinity.to_list(),
        p.on.to_list()
    )
}

/// A correction's log line: what reached the shielded CPUs, why, and how
/// re-applying the shield went.
fn correction_line(what: String, cause: drift::Cause, outcome: String) -> String {
    format!(
        "correction: {what}: {} [cause {}]; {outcome}",
        cause.describe(),
        cause.label()
    )
}

/// The log line of CPUs that came online.
fn online_line(came_online: &CpuSet, online: &CpuSet, applied: &Result<(), String>) -> String {
    correction_line(
        format!("CPU {} came online", came_online.to_list()),
        drift::Cause::CpuOnline,
        outcome(applied, format!("online CPUs now {}", online.to_list())),
    )
}

/// The log line of an IRQ that drifted, and whether it was corrected: an
/// applied shield that left its mask as it was wrote nothing new (the
/// kernel keeps the IRQ where it is, or its owner asked for it).
fn irq_drift_line(
    d: &drift::Drift,
    now_text: &str,
    applied: &Result<(), String>,
) -> (String, bool) {
    let name = if d.name.is_empty() { "?" } else { &d.name };
    if applied.is_ok() && now_text == d.mask_text {
        return (
            format!(
                "IRQ {} ({name}) stays on shielded CPU {}: either its owner asked for shielded CPUs only (Brosky's rule keeps such a request) or the kernel keeps it there (kernel-managed; fix at boot: isolcpus=managed_irq,{})",
                d.irq,
                d.on.to_list(),
                d.on.to_list()
            ),
            false,
        );
    }
    (
        correction_line(
            format!(
                "IRQ {} ({name}) mask {} reached shielded CPU {}",
                d.irq,
                d.mask_text,
                d.on.to_list()
            ),
            d.cause,
            outcome(applied, format!("mask now {now_text}")),
        ),
        true,
    )
}

/// The log line of a task that drifted, and whether it was corrected (an
/// applied shield that left its affinity as it was cannot move it).
fn task_drift_line(
    d: &drift::TaskDrift,
    now_aff: &CpuSet,
    applied: &Result<(), String>,
) -> (String, bool) {
    if applied.is_ok() && *now_aff == d.affinity {
        return (
            format!(
                "task {} ({}) stays on shielded CPU {}: the shield cannot move it (it asked for shielded CPUs only, or the kernel keeps it there)",
                d.tid,
                d.comm,
                d.on.to_list()
            ),
            false,
        );
    }
    (
        correction_line(
            format!(
                "task {} ({}) affinity {} reached shielded CPU {}",
                d.tid,
                d.comm,
                d.affinity.to_list(),
                d.on.to_list()
            ),
            d.cause,
            outcome(
                applied,
                format!(
                    "affinity now {} (the widened mask is kept as its request, Brosky's rule)",
                    now_aff.to_list()
                ),
            ),
        ),
        true,
    )
}

/// The Corrected condition's message.
fn corrected_message(corrected: Option<&str>) -> String {
    match corrected {
        Some(cause) => format!("the last look found drift ({cause}) and re-applied the shield"),
        None => "the last look found no IRQ, task or CPU to correct".into(),
    }
}

fn severity_label(s: cpushield_check::Severity) -> &'static str {
    match s {
        cpushield_check::Severity::Info => "info",
        cpushield_check::Severity::Warn => "warn",
        cpushield_check::Severity::BreaksShield => "breaks-shield",
    }
}

/// `--on-threshold`: runs the command once per crossing (a crossing ends
/// when a look finds nothing over the limit).
#[derive(Debug, Default)]
pub struct OnThreshold {
    command: Option<String>,
    firing: bool,
}

impl OnThreshold {
    /// Runs `command` (from the command line only) on crossings.
    pub fn new(command: Option<String>) -> Self {
        Self {
            command,
            firing: false,
        }
    }

    /// Sees what crossed now; starts the command (`sh -c`, reason in
    /// `CPUSHIELD_REASON`) at a new crossing. Returns the log line.
    pub fn see(&mut self, crossed: Option<String>) -> Option<String> {
        let Some(why) = crossed else {
            self.firing = false;
            return None;
        };
        if self.firing {
            return None;
        }
        self.firing = true;
        let command = self.command.as_ref()?;
        let started = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .env("CPUSHIELD_REASON", &why)
            .stdin(std::process::Stdio::null())
            .spawn();
        Some(match started {
            Ok(mut child) => {
                let pid = child.id();
                // Reap it without waiting here.
                std::thread::spawn(move || child.wait());
                format!("threshold crossed ({why}): started --on-threshold command, pid {pid}")
            }
            Err(e) => {
                format!("threshold crossed ({why}): --on-threshold command failed to start: {e}")
            }
        })
    }
}

/// The resident memory of this process in kB (/proc/self/status VmRSS).
pub fn rss_kb(kernel: &dyn Kernel) -> Option<u64> {
    let status = cpushield_kernel::Procfs::new(kernel)
        .own_file("status")
        .ok()?;
    cpushield_parse::pid_status::field(&status, "VmRSS")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn describe(masks: &ShieldMasks) -> String {
    if masks.is_empty() {
        return "no shield is in force".into();
    }
    format!(
        "shielded CPUs: procs {:?}, irqs {:?}, ltmr {:?}",
        masks.procs.to_list(),
        masks.irqs.to_list(),
        masks.ltmr.to_list()
    )
}

/// Installs SIGINT and SIGTERM handlers that ask the loop to stop; a second
/// signal is caught too, so the loop still leaves or resets the shield.
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    cpushield_kernel::signal::stop_on_signals(cpushield_kernel::signal::SecondSignal::Caught)
}

/// Runs the loop until `stop` is set (or once), printing each log line, then
/// leaves or resets the shield as `settings.on_stop` says.
pub fn run(
    host: &Host,
    shared: Arc<Shared>,
    settings: &Settings,
    stop: &AtomicBool,
) -> io::Result<()> {
    let kernel = host.kernel();
    let mut agent = Agent::new(host, Arc::clone(&shared), settings.options)
        .check_every(settings.check_every)
        .scan_every(settings.scan_every);
    if settings.once {
        agent = agent.one_shot();
    }
    if let Some(n) = settings.fast_forward {
        return fast_forward(&mut agent, &shared, settings, kernel, n);
    }
    let probe_stop = Arc::new(AtomicBool::new(false));
    let probe = match (settings.probe, settings.once) {
        (Some(p), false) => Some(probe::spawn(
            host,
            p,
            Arc::clone(&shared),
            Arc::clone(&probe_stop),
        )),
        _ => None,
    };
    let mut hook = OnThreshold::new(settings.on_threshold.clone());
    let result = (|| loop {
        match agent.tick() {
            Ok(lines) => {
                for line in lines {
                    println!("cpushield agent: {line}");
                }
            }
            // One failed look (a state being rewritten, a vanished file) does
            // not end the daemon; `--once` reports it as an error.
            Err(e) if !settings.once => println!("cpushield agent: look failed: {e}"),
            Err(e) => return Err(e),
        }
        if let Some(line) = hook.see(agent.crossed()) {
            println!("cpushield agent: {line}");
        }
        if let Some(path) = &settings.textfile {
            let text = lock(&shared.metrics).render_textfile();
            if let Err(e) = cpushield_report::textfile::write(path, &text) {
                println!(
                    "cpushield agent: writing the textfile {} failed: {e}",
                    path.display()
                );
            }
        }
        if settings.once {
            return Ok(());
        }
        let next = Instant::now() + settings.interval;
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50).min(settings.interval));
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
    })();
    // The probe leaves the shield's cpuset before any reset.
    probe_stop.store(true, Ordering::SeqCst);
    if let Some(p) = probe {
        let _ = p.join();
    }
    result?;
    if !settings.once && settings.on_stop == OnStop::Reset {
        cpushield_shield::reset(host, settings.options).map_err(io::Error::other)?;
        println!("cpushield agent: stopped; shield reset (on_stop = \"reset\")");
    } else if !settings.once {
        println!("cpushield agent: stopped; shield left up (on_stop = \"keep\")");
    }
    Ok(())
}

/// `--fast-forward N`: N looks back to back (each one a scrape and, if set,
/// a textfile write too), the resident memory printed after one minute's
/// worth of looks at the interval and after all N.
fn fast_forward(
    agent: &mut Agent<'_>,
    shared: &Shared,
    settings: &Settings,
    kernel: &dyn Kernel,
    n: u64,
) -> io::Result<()> {
    let per_minute = (60_000 / settings.interval.as_millis().max(1) as u64).max(1);
    let worth = |i: u64| {
        humantime::format_duration(Duration::from_secs(
            (settings.interval.as_millis() as u64 * i) / 1000,
        ))
    };
    let mut lines = 0usize;
    for i in 1..=n {
        lines += agent.tick().map(|l| l.len()).unwrap_or(1);
        let text = lock(&shared.metrics).render();
        if let Some(path) = &settings.textfile {
            cpushield_report::textfile::write(
                path,
                &cpushield_report::textfile::to_textfile(&text),
            )?;
        }
        if i == per_minute || i == n {
            println!(
                "cpushield agent: fast-forward: {i} looks ({} at {}): RSS {} kB, {} log lines",
                worth(i),
                humantime::format_duration(settings.interval),
                rss_kb(kernel).unwrap_or(0),
                lines
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
