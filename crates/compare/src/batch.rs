//! The batch job of `shielded+shared` (the Hyades paper's ARTiS sharing):
//! the `compute` workload on the shielded CPUs, started through
//! `cpushield run --share` exactly as a user's best-effort job would be
//! (placed in the shield, SCHED_IDLE at nice 19), counted for throughput and
//! for the share of the CPUs' time it got.
//!
//! The job is `cpushield run --share --cpus N -- cpushield load compute
//! --cpus N --json -`; it is stopped with SIGINT to the load (which then
//! reports its ops as JSON on standard output), and killed if it does not
//! stop. Its CPU share is the run time of its threads (schedstat, in ns, of
//! `cpushield run` and every descendant) over the measured CPUs' wall time
//! between the moment it counted and the stop.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, Procfs};
use cpushield_parse::schedstat::parse_schedstat_runtime;
use cpushield_report::BatchWork;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The workload the batch job runs.
pub const WORKLOAD: &str = "compute";
/// Longest the batch job may take to start counting.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest it may take to stop after SIGINT before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One batch job's settings.
#[derive(Debug, Clone)]
pub struct BatchRun {
    /// The `cpushield` binary (`cpushield run --share`, `cpushield load`).
    pub cpushield: PathBuf,
    /// The shielded CPUs it shares.
    pub cpus: CpuSet,
    /// Directory for the load's (empty) run directory.
    pub dir: PathBuf,
    /// Its own time limit, should the stop never come.
    pub limit: Duration,
}

impl BatchRun {
    /// The whole command line, as run.
    pub fn command(&self) -> Vec<String> {
        let exe = self.cpushield.display().to_string();
        let cpus = self.cpus.to_list();
        vec![
            exe.clone(),
            "run".into(),
            "--share".into(),
            "--cpus".into(),
            cpus.clone(),
            "--".into(),
            exe,
            "load".into(),
            WORKLOAD.into(),
            "--cpus".into(),
            cpus,
            "--duration".into(),
            format!("{}s", self.limit.as_secs().max(1)),
            "--dir".into(),
            self.dir.display().to_string(),
            "--json".into(),
            "-".into(),
        ]
    }

    /// Starts the job and waits until it counts; its processes' run time is
    /// read through `kernel`.
    pub fn start(&self, kernel: Arc<dyn Kernel>) -> Result<Batch, String> {
        let cmd = self.command();
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: cannot start: {e}", cmd[0]))?;
        let stdout = drain(child.stdout.take());
        let stderr = Arc::new(Mutex::new(Vec::<String>::new()));
        if let Some(err) = child.stderr.take() {
            let lines = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    lines.lock().expect("batch stderr").push(line);
                }
            });
        }
        let mut batch = Batch {
            kernel,
            child,
            stdout: Some(stdout),
            stderr,
            command: shell_words(&cmd),
            cpus: self.cpus.clone(),
            before: BTreeMap::new(),
            since: Instant::now(),
            stopped: false,
        };
        let started = Instant::now();
        loop {
            if batch.stderr_text().contains("load running") {
                break;
            }
            if let Ok(Some(status)) = batch.child.try_wait() {
                batch.stopped = true;
                return Err(format!(
                    "the batch job ended before it ran ({status}): {}",
                    batch.stderr_text().trim()
                ));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "the batch job did not start within {} s: {}",
                    START_TIMEOUT.as_secs(),
                    batch.stderr_text().trim()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        batch.before = tree_runtime(batch.kernel.as_ref(), batch.child.id() as i32);
        batch.since = Instant::now();
        Ok(batch)
    }
}

/// Reads a pipe to its end on a thread.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    })
}

fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            Path::new(w)
                .file_name()
                .filter(|_| w.starts_with('/') && w.ends_with("cpushield"))
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| w.clone())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run time (ns, from schedstat) of every thread of process `pid` and of
/// its descendants, by thread ID.
pub fn tree_runtime(kernel: &dyn Kernel, pid: i32) -> BTreeMap<i32, u64> {
    let proc = Procfs::new(kernel);
    let mut out = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        if !seen.insert(p) {
            continue;
        }
        let Ok(Some(tids)) = proc.threads(p) else {
            continue;
        };
        for tid in tids {
            if let Some(ns) = proc
                .thread_file(p, tid, "schedstat")
                .ok()
                .flatten()
                .and_then(|t| parse_schedstat_runtime(&t))
            {
                out.insert(tid, ns);
            }
            if let Ok(Some(children)) = proc.thread_file(p, tid, "children") {
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}

/// The share of `cpus` CPUs' time over `elapsed` that the threads ran
/// between two [`tree_runtime`] snapshots (threads in both), %, at most 100.
pub fn run_share_pct(
    before: &BTreeMap<i32, u64>,
    after: &BTreeMap<i32, u64>,
    elapsed: Duration,
    cpus: usize,
) -> f64 {
    let ran: u64 = after
        .iter()
        .filter_map(|(tid, a)| Some(a.saturating_sub(*before.get(tid)?)))
        .sum();
    let available = elapsed.as_nanos() as f64 * cpus as f64;
    if available <= 0.0 {
        0.0
    } else {
        (ran as f64 * 100.0 / available).min(100.0)
    }
}

/// Reads the batch job's ops from `cpushield load --json -` output.
pub fn parse_ops(json: &str) -> Result<(u64, f64, f64), String> {
    let report: cpushield_load::LoadReport = serde_json::from_str(json.trim())
        .map_err(|e| format!("the batch job's report is not JSON ({e})"))?;
    let w = report
        .workloads
        .iter()
        .find(|w| w.name == WORKLOAD)
        .ok_or_else(|| format!("the batch job's report has no {WORKLOAD} workload"))?;
    Ok((w.ops, w.ops_per_s, report.seconds))
}

/// A running batch job; stopped by [`Batch::finish`], killed when dropped.
pub struct Batch {
    kernel: Arc<dyn Kernel>,
    child: Child,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Arc<Mutex<Vec<String>>>,
    command: String,
    cpus: CpuSet,
    before: BTreeMap<i32, u64>,
    since: Instant,
    stopped: bool,
}

impl Batch {
    fn stderr_text(&self) -> String {
        self.stderr.lock().expect("batch stderr").join("\n")
    }

    /// The `cpushield load` process under `cpushield run` (its only child).
    fn load_pid(&self) -> Option<i32> {
        let pid = self.child.id() as i32;
        Procfs::new(self.kernel.as_ref())
            .thread_file(pid, pid, "children")
            .ok()??
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Asks the load to stop (it then reports), waits; kills what is left
    /// after [`STOP_TIMEOUT`]. Returns whether it ended by itself.
    fn stop(&mut self) -> bool {
        if self.stopped {
            return true;
        }
        self.stopped = true;
        let load = self.load_pid();
        if let Some(pid) = load {
            // SAFETY: kill takes integers only; `pid` is the child of our own child.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(pid) = load {
            // SAFETY: as above; the load did not stop on SIGINT.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// Stops the job and reports what it did.
    pub fn finish(mut self) -> Result<BatchWork, String> {
        let after = tree_runtime(self.kernel.as_ref(), self.child.id() as i32);
        let share = run_share_pct(
            &self.before,
            &after,
            self.since.elapsed(),
            self.cpus.len().max(1),
        );
        if !self.stop() {
            return Err(format!(
                "the batch job did not stop within {} s of SIGINT and was killed",
                STOP_TIMEOUT.as_secs()
            ));
        }
        let out = self
            .stdout
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let (ops, ops_per_s, seconds) = parse_ops(&out)
            .map_err(|e| format!("{e}; its errors: {}", self.stderr_text().trim()))?;
        Ok(BatchWork {
            workload: WORKLOAD.into(),
            command: self.command.clone(),
            policy: cpushield_rt::run::SHARE_POLICY.to_string(),
            seconds,
            ops,
            ops_per_s,
            cpu_share_pct: share,
        })
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_job_runs_through_cpushield_run_share() {
        let run = BatchRun {
            cpushield: "/usr/local/bin/cpushield".into(),
            cpus: CpuSet::from_cpus([1]),
            dir: "/var/tmp".into(),
            limit: Duration::from_secs(300),
        };
        assert_eq!(
            shell_words(&run.command()),
            "cpushield run --share --cpus 1 -- cpushield load compute --cpus 1 --duration 300s --dir /var/tmp --json -"
        );
    }

    #[test]
    fn the_cpu_share_is_the_run_time_of_the_job_and_its_descendants_over_wall_time() {
        let k = cpushield_kernel::FakeKernel::new();
        k.add_dir("/proc/10/task/10");
        k.set_file("/proc/10/task/10/schedstat", "1000 5 1\n");
        k.set_file("/proc/10/task/10/children", "11\n");
        k.add_dir("/proc/11/task/11");
        k.add_dir("/proc/11/task/12");
        k.set_file("/proc/11/task/11/schedstat", "2000 5 1\n");
        k.set_file("/proc/11/task/12/schedstat", "500000000 5 1\n");
        let before = tree_runtime(&k, 10);
        assert_eq!(
            before,
            BTreeMap::from([(10, 1000), (11, 2000), (12, 500_000_000)])
        );
        k.set_file("/proc/11/task/12/schedstat", "1400000000 5 1\n");
        let after = tree_runtime(&k, 10);
        let share = run_share_pct(&before, &after, Duration::from_secs(1), 1);
        assert!((share - 90.0).abs() < 1e-9, "{share}");
        assert_eq!(
            run_share_pct(&before, &after, Duration::from_secs(2), 1),
            45.0
        );
        assert_eq!(run_share_pct(&before, &after, Duration::ZERO, 1), 0.0);
        assert_eq!(
            run_share_pct(&BTreeMap::new(), &after, Duration::from_secs(1), 1),
            0.0
        );
    }

    #[test]
    fn the_ops_come_from_the_loads_json_report() {
        let json = r#"{"source":"built-in","seconds":4.0,"cpus":"1","scale":1,
            "workloads":[{"name":"compute","unit":"2^20-iteration loops","instances":1,"ops":800,"ops_per_s":200.0}],
            "failures":[]}"#;
        assert_eq!(parse_ops(json).unwrap(), (800, 200.0, 4.0));
        assert!(parse_ops("").unwrap_err().contains("not JSON"));
        let other = json.replace("\"compute\"", "\"fpu\"");
        assert!(parse_ops(&other).unwrap_err().contains("no compute"));
    }
}
