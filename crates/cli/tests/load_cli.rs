//! `cpushield load` end to end: refusals exit 1 with one clear line and
//! change nothing; a run reports ops in text and JSON; SIGINT, SIGTERM and
//! SIGKILL of the cpushield process all leave no file and no process.
//! Loads run on CPU 1 (CPU 0 belongs to the machine).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cpushield");

/// A scratch directory under /tmp, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "cpushield-load-cli-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).unwrap();
        Scratch(path)
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load(args: &[&str]) -> Output {
    Command::new(BIN).arg("load").args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_refused(args: &[&str], expect: &[&str]) {
    let out = load(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.starts_with("cpushield: error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for e in expect {
        assert!(err.contains(e), "{args:?}: expected '{e}' in: {err}");
    }
}

#[test]
fn list_names_every_profile_and_workload() {
    let out = load(&["--list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "stress-kernel",
        "disk",
        "find-launch-move",
        "artis",
        "all",
        "compile",
        "ttcp",
        "fifos-mmap",
        "fpu",
        "fs",
        "crashme",
        "disknoise",
        "launch",
        "find",
        "filemove",
        "netflood",
        "ioctl",
        "iodisk",
        "compute",
    ] {
        assert!(text.contains(name), "--list lacks {name}");
    }
}

#[test]
fn list_names_the_papers_not_seed_numbers_nor_the_old_profile_name() {
    let out = load(&["--list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for paper in [
        "Brosky & Rotolo",
        "Brosky 2004",
        "Webber",
        "the Hyades paper",
    ] {
        assert!(text.contains(paper), "--list lacks {paper}:\n{text}");
    }
    assert!(!text.to_lowercase().contains("seed"), "{text}");
}

#[test]
fn an_unknown_workload_is_refused_by_name() {
    let dir = Scratch::new();
    let d = dir.path().to_str().unwrap();
    assert_refused(
        &["fpu", "frobnicate", "--dir", d],
        &["'frobnicate'", "--list"],
    );
    assert!(dir.entries().is_empty());
}

#[test]
fn a_zero_duration_is_refused() {
    assert_refused(&["fpu", "--duration", "0s"], &["--duration 0s", "positive"]);
}

#[test]
fn an_unwritable_dir_is_refused() {
    assert_refused(
        &["fpu", "--dir", "/proc"],
        &["--dir /proc", "writable directory"],
    );
    assert_refused(
        &["fpu", "--dir", "/nonexistent/cpushield"],
        &["does not exist"],
    );
}

#[test]
fn not_enough_space_is_refused_before_anything_is_made() {
    let dir = Scratch::new();
    let d = dir.path().to_str().unwrap();
    assert_refused(
        &["disk", "--size", "1P", "--dir", d, "--cpus", "1"],
        &["MiB are free", "lower --size"],
    );
    assert!(dir.entries().is_empty());
}

#[test]
fn bad_scale_and_offline_cpus_are_refused() {
    assert_refused(&["fpu", "--scale", "0"], &["--scale 0", "1 to 64"]);
    assert_refused(&["fpu", "--cpus", "4095"], &["--cpus 4095", "not online"]);
}

#[test]
fn stress_ng_and_workload_names_do_not_mix() {
    assert_refused(
        &["fpu", "--stress-ng", "--cpu 1"],
        &["--stress-ng", "drop 'fpu'"],
    );
}

#[test]
fn a_short_run_reports_ops_in_text_and_json_and_leaves_nothing() {
    let dir = Scratch::new();
    let json = std::env::temp_dir().join(format!("cpushield-load-cli-{}.json", std::process::id()));
    let out = load(&[
        "fpu",
        "ttcp",
        "--duration",
        "1s",
        "--cpus",
        "1",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.starts_with("ttcp")), "{table}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    assert_eq!(report["cpus"], "1");
    let workloads = report["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 2);
    for w in workloads {
        assert!(w["ops"].as_u64().unwrap() > 0, "{w}");
        assert!(w["ops_per_s"].as_f64().unwrap() > 0.0, "{w}");
    }
    assert!(dir.entries().is_empty(), "left: {:?}", dir.entries());
}

/// (pid, ppid, pgrp, state) of every process.
fn processes() -> Vec<(i32, i32, i32, char)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|t| {
            let rest = &t[t.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((
                t.split_whitespace().next()?.parse().ok()?,
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.first()?.chars().next()?,
            ))
        })
        .collect()
}

/// A running `cpushield load` with its supervisor and workers.
struct Running {
    child: Child,
    supervisor: i32,
    workers: Vec<i32>,
}

/// Starts the stress-kernel profile on CPU 1 for a minute and waits for its
/// "load running" line.
fn start_stress_kernel(dir: &Scratch) -> Running {
    let mut child = Command::new(BIN)
        .args([
            "load",
            "stress-kernel",
            "--cpus",
            "1",
            "--duration",
            "60s",
            "--dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("no 'load running' line");
    assert!(line.contains("load running"), "{line}");
    let supervisor: i32 = line
        .split("supervisor pid ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no supervisor pid in: {line}"));
    let workers: Vec<i32> = processes()
        .into_iter()
        .filter(|p| p.1 == supervisor && p.0 == p.2) // children leading their own group
        .map(|p| p.0)
        .collect();
    assert_eq!(workers.len(), 6, "one worker per stress-kernel workload");
    assert!(
        !dir.entries().is_empty(),
        "the run directory exists while running"
    );
    Running {
        child,
        supervisor,
        workers,
    }
}

/// Polls until nothing of the load is left (files, supervisor, any member
/// of the workers' process groups); panics after 20 s.
fn assert_nothing_left(dir: &Scratch, run: &Running) {
    let groups: HashSet<i32> = run.workers.iter().copied().collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left: Vec<_> = processes()
            .into_iter()
            .filter(|p| p.0 == run.supervisor || groups.contains(&p.2))
            .collect();
        let files = dir.entries();
        if left.is_empty() && files.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for p in &left {
                // SAFETY: these are the load's own processes; end them before failing.
                unsafe { libc::kill(p.0, libc::SIGKILL) };
            }
            panic!("left behind: processes {left:?}, files {files:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_with_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("cpushield load did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigint_and_sigterm_stop_the_load_report_and_leave_nothing() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = Scratch::new();
        let mut run = start_stress_kernel(&dir);
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: signalling the process we spawned.
        unsafe { libc::kill(run.child.id() as i32, signal) };
        let status = wait_with_timeout(&mut run.child, Duration::from_secs(30));
        assert!(status.success(), "signal {signal}: {status:?}");
        let mut table = String::new();
        std::io::Read::read_to_string(run.child.stdout.as_mut().unwrap(), &mut table).unwrap();
        assert!(table.lines().any(|l| l.starts_with("crashme")), "{table}");
        assert_nothing_left(&dir, &run);
    }
}

#[test]
fn sigkill_of_cpushield_leaves_no_file_and_no_process() {
    let dir = Scratch::new();
    let mut run = start_stress_kernel(&dir);
    std::thread::sleep(Duration::from_millis(500));
    run.child.kill().unwrap(); // SIGKILL: no handler runs in cpushield itself
    run.child.wait().unwrap();
    assert_nothing_left(&dir, &run);
}
