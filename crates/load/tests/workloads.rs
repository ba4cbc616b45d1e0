//! Every workload, run for real for a short while through the library API:
//! it does measurable work, stays on its CPUs, and leaves no file and no
//! process behind. Loads run on CPU 1 only (CPU 0 belongs to the machine).

use cpushield_cpuset::CpuSet;
use cpushield_load::{Load, LoadError, LoadSpec, Workload};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The running kernel: these tests start real loads.
fn machine() -> Arc<dyn cpushield_kernel::Kernel> {
    Arc::new(cpushield_kernel::RealKernel)
}

/// How long a workload runs at least: long enough for a worker that fails
/// soon after its start to be seen failed.
const RUN: Duration = Duration::from_millis(500);

/// How long a workload may take to count its first operation (a compile on
/// a busy machine takes seconds).
const FIRST_OP_WITHIN: Duration = Duration::from_secs(30);

fn spec(workloads: Vec<Workload>, dir: &Path) -> LoadSpec {
    let mut spec = LoadSpec::new(workloads);
    spec.cpus = Some(CpuSet::from_cpus([1]));
    spec.dir = dir.to_path_buf();
    spec.size_cap = 8 << 20;
    spec
}

/// (pid, ppid, pgrp) of every process.
fn processes() -> Vec<(i32, i32, i32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|t| {
            let rest = &t[t.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let pid = t.split_whitespace().next()?.parse().ok()?;
            Some((pid, f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?))
        })
        .collect()
}

/// Panics if any of `pids` (supervisor first, then workers) or any member
/// of the workers' process groups still exists.
fn assert_all_gone(pids: &[i32]) {
    let ours: HashSet<i32> = pids.iter().copied().collect();
    let groups: HashSet<i32> = pids[1..].iter().copied().collect();
    let left: Vec<_> = processes()
        .into_iter()
        .filter(|(pid, _, pgrp)| ours.contains(pid) || groups.contains(pgrp))
        .collect();
    if !left.is_empty() {
        for p in &left {
            // SAFETY: these are the load's own processes; end them before failing.
            unsafe { libc::kill(p.0, libc::SIGKILL) };
        }
        panic!("processes left behind: {left:?}");
    }
}

fn cpus_allowed(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("")
        .trim()
        .to_string()
}

fn run_one(workload: Workload) {
    let dir = tempfile::tempdir().unwrap();
    let load = Load::start(machine(), &spec(vec![workload], dir.path()))
        .unwrap_or_else(|e| panic!("{}: {e}", workload.name()));
    let pids = load.pids();
    let run_dir = load.run_dir().to_path_buf();
    assert!(run_dir.is_dir());
    for &pid in &pids[1..] {
        assert_eq!(cpus_allowed(pid), "1", "worker {pid} is not confined");
    }
    // At least RUN, and until it has counted work: the test waits for the
    // work, not for a time that a slow machine may not give it.
    let started = std::time::Instant::now();
    while started.elapsed() < RUN || load.counters()[0].1 == 0 {
        load.check()
            .unwrap_or_else(|e| panic!("{}: {e}", workload.name()));
        assert!(
            started.elapsed() < FIRST_OP_WITHIN,
            "{} did no work in {FIRST_OP_WITHIN:?}",
            workload.name()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    load.check()
        .unwrap_or_else(|e| panic!("{}: {e}", workload.name()));
    let live = load.counters();
    assert_eq!(live.len(), 1);
    let report = load.stop();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let ops = report.ops(workload.name()).unwrap();
    assert!(ops > 0, "{} did no work", workload.name());
    assert!(ops >= live[0].1, "final ops below live ops");
    assert!(report.seconds >= RUN.as_secs_f64());
    assert!(
        !run_dir.exists(),
        "{} left its run directory",
        workload.name()
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_all_gone(&pids);
}

macro_rules! workload_tests {
    ($($name:ident => $w:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_one($w);
            }
        )*
    };
}

workload_tests! {
    compile_builds_and_leaves_nothing => Workload::Compile,
    ttcp_moves_buffers_and_leaves_nothing => Workload::Ttcp,
    fifos_mmap_round_trips_and_leaves_nothing => Workload::FifosMmap,
    fpu_multiplies_and_leaves_nothing => Workload::Fpu,
    fs_abuses_files_and_leaves_nothing => Workload::Fs,
    crashme_crashes_children_and_leaves_nothing => Workload::Crashme,
    disknoise_concatenates_and_leaves_nothing => Workload::Disknoise,
    launch_launches_and_leaves_nothing => Workload::Launch,
    find_walks_and_leaves_nothing => Workload::Find,
    filemove_copies_and_leaves_nothing => Workload::Filemove,
    netflood_floods_and_leaves_nothing => Workload::Netflood,
    ioctl_locks_and_leaves_nothing => Workload::Ioctl,
    iodisk_reads_and_writes_and_leaves_nothing => Workload::Iodisk,
    compute_loops_and_leaves_nothing => Workload::Compute,
}

#[test]
fn compute_runs_one_pinned_instance_per_cpu_of_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(vec![Workload::Compute], dir.path());
    s.scale = 2;
    let load = Load::start(machine(), &s).unwrap();
    let pids = load.pids();
    assert_eq!(pids.len(), 3, "supervisor + 2 instances on CPU 1");
    let report = load.stop();
    assert_eq!(report.workloads[0].instances, 2);
    assert_all_gone(&pids);
}

#[test]
fn a_worker_that_dies_is_reported_and_the_rest_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let load = Load::start(
        machine(),
        &spec(vec![Workload::Fpu, Workload::Ioctl], dir.path()),
    )
    .unwrap();
    let pids = load.pids();
    // SAFETY: killing a worker of our own load.
    unsafe { libc::kill(pids[1], libc::SIGKILL) };
    let mut failed = None;
    for _ in 0..100 {
        if let Err(e) = load.check() {
            failed = Some(e);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = failed.expect("the dead worker was not noticed").to_string();
    assert!(err.contains("fpu#0") && err.contains("signal 9"), "{err}");
    let report = load.stop();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_all_gone(&pids);
}

#[test]
fn dropping_a_running_load_stops_and_cleans_it() {
    let dir = tempfile::tempdir().unwrap();
    let load = Load::start(
        machine(),
        &spec(vec![Workload::Disknoise, Workload::Ttcp], dir.path()),
    )
    .unwrap();
    let pids = load.pids();
    drop(load);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_all_gone(&pids);
}

#[test]
fn not_enough_space_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(vec![Workload::Fs], dir.path());
    s.size_cap = 1 << 60;
    let err = Load::start(machine(), &s)
        .err()
        .expect("a 1 EiB cap cannot fit");
    assert!(matches!(err, LoadError::NoSpace { .. }), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_unwritable_dir_is_refused() {
    let err = Load::start(machine(), &spec(vec![Workload::Fpu], Path::new("/proc")))
        .err()
        .expect("/proc cannot hold files");
    assert!(
        err.to_string().starts_with("--dir /proc: cannot create"),
        "{err}"
    );
}

#[test]
fn stress_ng_runs_in_the_run_dir_and_reports_bogo_ops() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(vec![], dir.path());
    s.stress_ng = Some(vec![
        "--hdd".into(),
        "1".into(),
        "--hdd-bytes".into(),
        "4m".into(),
    ]);
    let load = Load::start(machine(), &s).unwrap();
    let pids = load.pids();
    // stress-ng counts its bogo ops when a stressor ends: a fixed while.
    std::thread::sleep(Duration::from_millis(1500));
    let report = load.stop();
    assert_eq!(report.source, "stress-ng");
    assert!(report.ops("hdd").unwrap_or(0) > 0, "{report:?}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_all_gone(&pids);
}

#[test]
fn stress_ng_arguments_it_rejects_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(vec![], dir.path());
    s.stress_ng = Some(vec!["--no-such-stressor".into(), "1".into()]);
    let err = Load::start(machine(), &s)
        .err()
        .expect("stress-ng must reject it")
        .to_string();
    assert!(
        err.contains("--no-such-stressor") && err.contains("rejected"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
