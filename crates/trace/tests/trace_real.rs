//! The tracer on this kernel: tracefs must read exactly as before after a
//! session, after a session on an already-mounted tracefs, and after SIGINT.
//! Skipped (with a message) when not root or without tracefs or CPU 1.

use cpushield_cpuset::CpuSet;
use cpushield_trace::{SignalMode, Spike, TraceOptions, TraceSession};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ROOT: &str = "/sys/kernel/tracing";
static TURN: Mutex<()> = Mutex::new(());

fn usable() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let cpu1 = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| CpuSet::parse_list(s.trim()).ok())
        .is_some_and(|s| s.contains(1));
    let ok = root
        && cpu1
        && Path::new(ROOT).is_dir()
        && std::fs::read_to_string("/proc/filesystems")
            .unwrap_or_default()
            .contains("tracefs");
    if !ok {
        skipped("needs root, CPU 1 online and tracefs");
    }
    ok
}

fn mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.split_whitespace().nth(1) == Some(ROOT)
                && l.split_whitespace().nth(2) == Some("tracefs")
        })
}

/// Mount state and every top-level setting the tracer could touch.
fn snapshot() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("mounted".into(), mounted().to_string());
    if !mounted() {
        return m;
    }
    for f in [
        "tracing_on",
        "current_tracer",
        "trace_clock",
        "tracing_cpumask",
        "buffer_size_kb",
        "per_cpu/cpu1/buffer_size_kb",
        "set_event",
        "events/sched/sched_switch/enable",
        "events/sched/sched_switch/filter",
        "events/irq/irq_handler_entry/enable",
    ] {
        let v = std::fs::read_to_string(format!("{ROOT}/{f}")).unwrap_or_default();
        // A never-used buffer reads "7 (expanded: 1408)" at the top level and
        // "7" per CPU; what the kernel means, and what a restore gives, is 1408.
        let top = std::fs::read_to_string(format!("{ROOT}/buffer_size_kb")).unwrap_or_default();
        let expanded = top.trim().split_once("(expanded:").map(|(small, n)| {
            (
                small.trim().to_string(),
                n.trim_end_matches(')').trim().to_string(),
            )
        });
        let v = match (v.trim().split_once("(expanded:"), &expanded) {
            (Some((_, n)), _) => n.trim_end_matches(')').trim().to_string(),
            (None, Some((small, n))) if f.ends_with("buffer_size_kb") && v.trim() == small => {
                n.clone()
            }
            _ => v.trim().to_string(),
        };
        // Sizes are kept in whole pages: 1408 KB written reads 1410 KB, the
        // same pages the kernel's own first-use expansion gives.
        let v = match (f.ends_with("buffer_size_kb"), v.parse::<u64>()) {
            (true, Ok(kb)) => format!("~{}", kb / 16 * 16),
            _ => v,
        };
        m.insert(f.into(), v);
    }
    let mut inst: Vec<String> = std::fs::read_dir(format!("{ROOT}/instances"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    inst.sort();
    m.insert("instances".into(), inst.join(","));
    m
}

fn run_short_session(opts: TraceOptions) -> cpushield_trace::TraceSummary {
    let session = TraceSession::start(
        Arc::new(cpushield_kernel::RealKernel),
        &CpuSet::parse_list("1").unwrap(),
        opts,
    )
    .expect("trace session starts");
    std::thread::sleep(Duration::from_millis(200));
    let now = cpushield_kernel::clock::now_ns();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    session.mark(&Spike {
        seq: 1,
        cpu: 1,
        tid,
        intended_ns: now - 2_000_000,
        actual_ns: now,
    });
    std::thread::sleep(Duration::from_millis(100));
    session.finish()
}

#[test]
fn a_session_leaves_tracefs_as_it_found_it() {
    if !usable() {
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = snapshot();
    let state = tempfile::tempdir().unwrap();
    let s = run_short_session(TraceOptions {
        signals: SignalMode::None,
        state_dir: state.path().to_path_buf(),
        ..Default::default()
    });
    assert_eq!(snapshot(), before);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    // The users' lock and the mount marker go with the last user: only the
    // lock of starts and ends stays.
    let left: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [cpushield_trace::mount::SETUP_LOCK]);
    assert_eq!(s.attributions.len(), 1);
    let offset = s.clock_offset_ns.expect("clock sync marker found");
    assert!(
        offset.abs() < 5_000_000,
        "trace clock is {offset} ns off CLOCK_MONOTONIC"
    );
    assert!(s
        .events_enabled
        .iter()
        .any(|e| e.starts_with("sched/sched_switch")));
}

#[test]
fn a_top_level_session_on_a_mounted_tracefs_restores_each_setting() {
    if !usable() {
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let we_mount = !mounted();
    if we_mount {
        assert!(Command::new("mount")
            .args(["-t", "tracefs", "nodev", ROOT])
            .status()
            .unwrap()
            .success());
    }
    let before = snapshot();
    let state = tempfile::tempdir().unwrap();
    let s = run_short_session(TraceOptions {
        signals: SignalMode::None,
        instance: false,
        state_dir: state.path().to_path_buf(),
        ..Default::default()
    });
    let after = snapshot();
    if we_mount {
        let _ = Command::new("umount").arg(ROOT).status();
    }
    assert_eq!(after, before);
    assert!(s.instance.is_none());
    assert!(!s.mounted_tracefs);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}

#[test]
fn sigint_restores_tracefs_and_the_process_dies_of_it() {
    if !usable() {
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = snapshot();
    let state = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    // A test run started in the background of a shell inherits SIGINT ignored, and a
    // re-raised ignored signal ends nothing: the child starts with the default action,
    // as a program run from a terminal does.
    // SAFETY: signal(2) is async-signal-safe, the only call made between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command
        .args([
            "--exact",
            "sigint_child_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CPUSHIELD_TRACE_CHILD", "1")
        .env("CPUSHIELD_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let ready = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("TRACING"));
    assert!(ready, "child did not start tracing");
    assert_ne!(snapshot().get("mounted"), None);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    assert_eq!(snapshot(), before);
    let left: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        [cpushield_trace::mount::SETUP_LOCK],
        "the users' lock and marker go"
    );
}

/// Run by `sigint_restores_tracefs_and_the_process_dies_of_it` in a child process.
#[test]
#[ignore = "child process of the SIGINT test"]
fn sigint_child_process() {
    if std::env::var("CPUSHIELD_TRACE_CHILD").is_err() {
        return;
    }
    let _session = TraceSession::start(
        Arc::new(cpushield_kernel::RealKernel),
        &CpuSet::parse_list("1").unwrap(),
        TraceOptions::default(),
    )
    .expect("trace session starts");
    println!("TRACING");
    std::thread::sleep(Duration::from_secs(30));
    panic!("SIGINT did not end the process");
}

/// A test that cannot run here is skipped with a message, except in CI
/// (`CI=true`), whose machine is set up for every test: there it fails.
fn skipped(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "cannot run in CI: {why}"
    );
    eprintln!("skipped: {why}");
}
