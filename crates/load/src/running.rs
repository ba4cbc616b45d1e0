//! The caller's side of a load: start it (everything validated first), read
//! its counters live, check it is healthy, stop it and get the report.

use crate::catalog::Workload;
use crate::error::LoadError;
use crate::plan::{LoadSpec, Plan};
use crate::preflight;
use crate::procs;
use crate::report::{summarize, Entry, LoadReport};
use crate::shm::{Shared, SLOT_EXITED, SLOT_FAILED, SLOT_RUNNING, SUP_FAILED};
use crate::supervisor::{self, Job, STRESS_NG_SLOTS};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a load may take to get every worker running.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Entry point: starts loads.
pub struct Load;

/// A load that is running. Stop it with [`RunningLoad::stop`]; dropping it
/// stops it too (without a report).
///
/// The workers die with the supervisor, and the supervisor with the thread
/// that called [`Load::start`] (PR_SET_PDEATHSIG follows the forking
/// thread): start a load from a thread that outlives it, e.g. the main one.
pub struct RunningLoad {
    /// The kernel door the supervisor's end is watched through.
    kernel: Arc<dyn Kernel>,
    shared: Shared,
    supervisor: libc::pid_t,
    run_dir: PathBuf,
    /// (name, unit) per instance slot.
    labels: Vec<(String, String)>,
    stress_ng: bool,
    cpus: Option<CpuSet>,
    scale: u32,
    started: Instant,
    stopped: bool,
}

/// How [`RunningLoad::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The duration passed.
    Elapsed,
    /// The stop flag was raised.
    Interrupted,
}

impl Load {
    /// Checks everything `spec` needs (names, CPUs, directory, free space
    /// against the size caps, tools, stress-ng's acceptance of its
    /// arguments) without starting anything.
    pub fn validate(kernel: &dyn Kernel, spec: &LoadSpec) -> Result<(), LoadError> {
        preflight::validate(kernel, spec).map(|_| ())
    }

    /// Validates `spec`, then starts the load and waits until every worker
    /// is set up and counting. On any failure nothing is left running and
    /// no file is left behind.
    pub fn start(kernel: Arc<dyn Kernel>, spec: &LoadSpec) -> Result<RunningLoad, LoadError> {
        let plan = preflight::validate(kernel.as_ref(), spec)?;
        let run_dir = unique_run_dir(&spec.dir);
        let extra = if plan.stress_ng.is_some() {
            STRESS_NG_SLOTS
        } else {
            0
        };
        let shared = Shared::new(plan.instances.len() + extra)
            .map_err(|e| LoadError::io("mapping the shared counters", e))?;
        let labels = labels(&plan);
        for (i, (name, _)) in labels.iter().enumerate() {
            shared.slot(i).set_name(name);
        }
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let job = Job {
            kernel: kernel.as_ref(),
            plan: &plan,
            run_dir: &run_dir,
            size_cap: spec.size_cap,
            shared: &shared,
            parent,
            remote: spec.remote,
            supervisor_cpus: spec.supervisor_cpus.as_ref(),
        };
        let supervisor = procs::fork_child(|| supervisor::supervise(&job))
            .map_err(|e| LoadError::io("forking the load supervisor", e))?;
        let mut load = RunningLoad {
            kernel,
            shared,
            supervisor,
            run_dir,
            labels,
            stress_ng: plan.stress_ng.is_some(),
            cpus: spec.cpus.clone(),
            scale: spec.scale,
            started: Instant::now(),
            stopped: false,
        };
        if let Err(e) = load.wait_until_running(&plan) {
            load.finish();
            return Err(e);
        }
        load.started = Instant::now();
        Ok(load)
    }
}

/// `cpushield-load-TAG-PID-N`: TAG is the started process's PID on the
/// machine ([`cpushield_kernel::namespace::run_tag`]), so that the process a
/// user started in a private namespace can find what its killed run left, and
/// two runs in two namespaces (each its own PID 1) never share a directory.
fn unique_run_dir(dir: &Path) -> PathBuf {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(
        "cpushield-load-{}-{}-{n}",
        cpushield_kernel::namespace::run_tag(),
        std::process::id()
    ))
}

fn labels(plan: &Plan) -> Vec<(String, String)> {
    plan.instances
        .iter()
        .map(|i| {
            (
                i.name().to_string(),
                i.workload.map_or("bogo ops", Workload::unit).to_string(),
            )
        })
        .collect()
}

impl RunningLoad {
    fn wait_until_running(&mut self, plan: &Plan) -> Result<(), LoadError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check()?;
            // A worker marks itself running, possibly before the supervisor
            // has recorded its PID: wait for both.
            let up = (0..plan.instances.len()).all(|i| {
                let slot = self.shared.slot(i);
                match slot.state() {
                    SLOT_RUNNING => slot.pid() > 0,
                    SLOT_EXITED => true,
                    _ => false,
                }
            });
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                let slow: Vec<String> = (0..plan.instances.len())
                    .filter(|&i| self.shared.slot(i).state() != SLOT_RUNNING)
                    .map(|i| format!("{}#{}", plan.instances[i].name(), plan.instances[i].index))
                    .collect();
                return Err(LoadError::Start(format!(
                    "{} not running after {} s; the machine may be overloaded, try a lower --scale",
                    slow.join(", "),
                    START_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Ops so far per workload (instances summed), in catalogue order. For
    /// stress-ng, only known after the stop: it reads `("stress-ng", 0)`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        summarize(&self.entries(), 1.0)
            .into_iter()
            .map(|s| (s.name, s.ops))
            .collect()
    }

    fn entries(&self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, (name, unit))| (name.clone(), unit.clone(), self.shared.slot(i).ops()))
            .collect();
        if self.stress_ng {
            let first = self.labels.len();
            let stressors: Vec<Entry> = (first..self.shared.len())
                .map(|i| self.shared.slot(i))
                .filter(|s| s.state() == SLOT_EXITED)
                .map(|s| (s.name(), "bogo ops".to_string(), s.ops()))
                .collect();
            if !stressors.is_empty() {
                entries = stressors;
            }
        }
        entries
    }

    /// Fails if a worker has failed or the supervisor is gone.
    pub fn check(&self) -> Result<(), LoadError> {
        let header = self.shared.header();
        if header.state() == SUP_FAILED {
            return Err(LoadError::Start(header.message()));
        }
        for (i, (name, _)) in self.labels.iter().enumerate() {
            let slot = self.shared.slot(i);
            if slot.state() == SLOT_FAILED {
                return Err(LoadError::WorkerFailed {
                    name: format!("{name}#{}", self.instance_index(i)),
                    message: slot.message(),
                });
            }
        }
        if !self.stopped && process_gone(self.kernel.as_ref(), self.supervisor) {
            return Err(LoadError::Start(
                "the load supervisor ended unexpectedly".to_string(),
            ));
        }
        Ok(())
    }

    fn instance_index(&self, slot: usize) -> usize {
        let name = &self.labels[slot].0;
        self.labels[..slot]
            .iter()
            .filter(|(n, _)| n == name)
            .count()
    }

    /// Sleeps until `duration` has passed since the start, or `stop` is
    /// raised (e.g. by a SIGINT handler); fails as soon as a worker fails.
    pub fn wait(&self, duration: Duration, stop: &AtomicBool) -> Result<Waited, LoadError> {
        let end = self.started + duration;
        loop {
            self.check()?;
            if stop.load(Ordering::Relaxed) {
                return Ok(Waited::Interrupted);
            }
            let now = Instant::now();
            if now >= end {
                return Ok(Waited::Elapsed);
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
    }

    /// The supervisor's and the workers' pids (descendants of the workers
    /// are in the workers' process groups).
    pub fn pids(&self) -> Vec<i32> {
        let mut pids = vec![self.supervisor];
        pids.extend(
            (0..self.labels.len())
                .map(|i| self.shared.slot(i).pid())
                .filter(|&p| p > 0),
        );
        pids
    }

    /// The per-run directory (removed by the stop).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Time since every worker was running.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops the load: every process ended, every file removed; then
    /// reports what each workload did.
    pub fn stop(mut self) -> LoadReport {
        let seconds = self.started.elapsed().as_secs_f64();
        self.finish();
        let mut failures: Vec<String> = Vec::new();
        for (i, (name, _)) in self.labels.iter().enumerate() {
            let slot = self.shared.slot(i);
            if slot.state() == SLOT_FAILED {
                failures.push(format!(
                    "{name}#{}: {}",
                    self.instance_index(i),
                    slot.message()
                ));
            }
        }
        if self.shared.header().state() == SUP_FAILED {
            failures.push(format!("supervisor: {}", self.shared.header().message()));
        }
        LoadReport {
            source: if self.stress_ng {
                "stress-ng"
            } else {
                "builtin"
            }
            .to_string(),
            seconds,
            cpus: self.cpus.clone(),
            scale: self.scale,
            workloads: summarize(&self.entries(), seconds),
            failures,
        }
    }

    /// Ends the supervisor (which ends and reaps everything and removes the
    /// run directory), waits for it, and removes the directory itself if the
    /// supervisor could not.
    fn finish(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.supervisor, libc::SIGTERM) };
        if procs::wait(self.supervisor).is_err() {
            // Someone else reaped it (SIGCHLD ignored?): wait for it to vanish.
            let deadline = Instant::now() + Duration::from_secs(30);
            while !process_gone(self.kernel.as_ref(), self.supervisor) && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if self.run_dir.exists() {
            let _ = std::fs::remove_dir_all(&self.run_dir);
        }
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether our child `pid` has ended (zombie or reaped).
fn process_gone(kernel: &dyn Kernel, pid: libc::pid_t) -> bool {
    procs::stat_of(kernel, pid).is_none_or(|s| s.state == 'Z')
}
