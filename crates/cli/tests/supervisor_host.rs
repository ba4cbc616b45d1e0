//! A supervisor stops `tune` and `compare` the way supervisors stop things
//! (`kill PID`, `timeout`, systemd's stop, a CI runner's cancel, SIGKILL):
//! SIGINT, SIGTERM and SIGKILL, each sent at a random moment to each of the
//! run's two processes, the one started and its PID namespace's init (the
//! work). After each, every IRQ mask, the local-timer sysctls, the knobs'
//! sysctls, the workqueue mask, the cpuset tree and the load's files are as
//! found, with at most one command run: the one the run printed.
//!
//! Root; it shields CPU 1 for real, inside the private PID namespace each run
//! makes: run the test binary itself inside `unshare --pid --fork
//! --mount-proc` under `flock /tmp/cpushield-hosttest.lock`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{bin, skip};

/// The files under `dir`, by path.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            out.push(e.path().display().to_string());
            if e.path().is_dir() {
                dirs.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A moment in `range`, different on each call.
fn random_moment(range: std::ops::Range<u64>) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let seed = nanos ^ (nanos >> 7).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ std::process::id() as u64;
    Duration::from_millis(range.start + seed % (range.end - range.start))
}

/// The namespace's init: the started process's child in another PID
/// namespace (a check the run makes before, such as a tool's `--version`,
/// is a child too, in the same namespace).
fn init_of(pid: u32) -> Option<u32> {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    let own = ns(&pid.to_string())?;
    // The run checks the machine before it forks (the load's tools, the
    // budget): seconds on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for c in children.split_whitespace() {
            if ns(c).is_some_and(|n| n != own) {
                return c.parse().ok();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// On a failed assertion, ends the run and restores what its state records
/// before the state's temporary directory is removed (a shield whose state
/// is gone can only be undone to the kernel's defaults).
struct Cleanup<'a> {
    started: u32,
    init: u32,
    state: &'a Path,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for pid in [self.init, self.started] {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ended(self.init) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new(bin())
            .args(["reset", "--namespace-gone"])
            .env("CPUSHIELD_STATE_DIR", self.state)
            .status();
    }
}

/// Whether `pid` has ended (gone, or a zombie nobody reaps: the test may be
/// PID 1 of its namespace).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .unwrap_or(true)
}

#[derive(Clone, Copy, Debug)]
enum Target {
    Started,
    Init,
}

/// One run of `program` (its arguments) stopped by `signal` sent to
/// `target` at a moment in `window` (ms) after the shield went up: the machine and the load's
/// directory as found afterwards, with at most the one printed command run.
fn stop_one(program: &[&str], window: std::ops::Range<u64>, signal: &str, target: Target) {
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let load = tempfile::tempdir().unwrap();
    let before = support::tunable_state();
    let child = Command::new(bin())
        .args(program)
        .arg("--out")
        .arg(out.path().join("report"))
        .arg("--dir")
        .arg(load.path())
        .env("CPUSHIELD_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = child.id();
    let Some(init) = init_of(started) else {
        let _ = Command::new("kill").arg(started.to_string()).status();
        let out = child.wait_with_output().unwrap();
        panic!(
            "{}: no namespace init: {}{}",
            program[0],
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let _cleanup = Cleanup {
        started,
        init,
        state: state.path(),
    };
    // A random moment once the shield is up (its state written): a stop
    // before it would leave nothing to restore.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !state.path().join("state.json").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let at = random_moment(window);
    std::thread::sleep(at);
    let to = match target {
        Target::Started => started,
        Target::Init => init,
    };
    let what = format!(
        "{} SIG{signal} to the {target:?} PID {to} at {at:?}",
        program[0]
    );
    assert!(
        Command::new("kill")
            .args([format!("-{signal}"), to.to_string()])
            .status()
            .unwrap()
            .success(),
        "{what}: kill failed"
    );
    // Both must end by themselves: the started one, and the init (which,
    // once its parent is gone, finishes its restore alone).
    let deadline = Instant::now() + Duration::from_secs(90);
    let run = child.wait_with_output().unwrap();
    while !ended(init) {
        assert!(Instant::now() < deadline, "{what}: the init never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    // The signal reached the work, which stopped early and restored (a run
    // left to its end would restore too, and prove nothing); or, its init
    // killed, the started process restored what the state records.
    let stopped = match (signal, target) {
        ("KILL", Target::Init) => "cpushield: the run was killed by SIGKILL",
        _ => "cpushield: interrupted",
    };
    assert!(text.contains(stopped), "{what}: no \"{stopped}\": {text}");
    // At most one command, the one printed: a reset (other advice a run
    // prints is not a restore, and is never run here).
    let commands: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once("run `").and_then(|(_, r)| r.split_once('`')))
        .map(|(c, _)| c)
        .filter(|c| c.contains("cpushield reset"))
        .collect();
    assert!(commands.len() <= 1, "{what}: more than one command: {text}");
    if let Some(command) = commands.first() {
        let words: Vec<&str> = command
            .split_whitespace()
            .skip_while(|w| w.contains('='))
            .collect();
        assert_eq!(words[0], "cpushield", "{what}: {text}");
        let done = Command::new(bin())
            .args(&words[1..])
            .env("CPUSHIELD_STATE_DIR", state.path())
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{what}: `{command}` failed: {done:?}"
        );
    }
    assert_eq!(before, support::tunable_state(), "{what}: {text}");
    assert!(
        !state.path().join("state.json").exists(),
        "{what}: a state is left: {text}"
    );
    assert_eq!(
        files_under(load.path()),
        Vec::<String>::new(),
        "{what}: the load's files are left: {text}"
    );
}

fn can_run_here() -> Result<(), String> {
    support::can_shield_here(&["unshare", "kill"])
}

const TUNE: &[&str] = &[
    "tune",
    "--cpus",
    "1",
    "--load",
    "fpu",
    "--knobs",
    "rt-throttling",
    "--budget",
    "22s",
];

/// The shielded scenario alone: its load starts first and the shield goes
/// up on it, so every stop (which comes once the shield is up) finds the
/// load, the shield and the moved IRQs to restore; a scenario before it would
/// only delay the shield.
const COMPARE: &[&str] = &[
    "compare",
    "--cpus",
    "1",
    "--load",
    "fpu",
    "--scenarios",
    "shielded",
    "--duration",
    "4s",
    "--runs",
    "0",
    "--idle",
    "halt",
    "--no-attribute",
    "--no-anchor",
];

fn every_stop(program: &[&str], window: std::ops::Range<u64>) {
    // One shield at a time: both tests shield CPU 1.
    let _serial = support::serial();
    if let Err(why) = can_run_here() {
        skip(&why);
        return;
    }
    for signal in ["INT", "TERM", "KILL"] {
        for target in [Target::Started, Target::Init] {
            stop_one(program, window.clone(), signal, target);
        }
    }
}

#[test]
fn tune_stopped_by_any_signal_to_either_pid_leaves_the_machine_and_its_files_as_found() {
    // tune at its smallest budget ends about 9 s after it starts.
    every_stop(TUNE, 200..3_000);
}

#[test]
fn compare_stopped_by_any_signal_to_either_pid_leaves_the_machine_and_its_files_as_found() {
    every_stop(COMPARE, 200..3_000);
}

#[test]
fn reset_namespace_gone_from_a_sibling_pid_namespace_is_refused_while_the_shielding_one_lives() {
    // One shield at a time: this test shields CPU 1 as the others do.
    let _serial = support::serial();
    if let Err(why) = can_run_here() {
        skip(&why);
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let load = tempfile::tempdir().unwrap();
    let before = support::tunable_state();
    // The shielding namespace: the one compare makes for itself, a child of
    // this test's.
    let child = Command::new(bin())
        .args([
            "compare",
            "--cpus",
            "1",
            "--load",
            "fpu",
            "--scenarios",
            "shielded",
            "--duration",
            "30s",
            "--runs",
            "0",
            "--idle",
            "halt",
            "--no-attribute",
            "--no-anchor",
        ])
        .arg("--out")
        .arg(out.path().join("report"))
        .arg("--dir")
        .arg(load.path())
        .env("CPUSHIELD_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = child.id();
    let init = init_of(started).expect("compare made no PID namespace");
    let _cleanup = Cleanup {
        started,
        init,
        state: state.path(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    // Up once the state no longer says it is being applied.
    while !std::fs::read_to_string(state.path().join("state.json"))
        .is_ok_and(|t| t.contains(r#""applying":false"#))
    {
        assert!(Instant::now() < deadline, "the shield never went up");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let layout = cpushield_shield::layout::detect(&cpushield_kernel::RealKernel).unwrap();
    let shielded = support::tunable_state();
    // Its sibling: another child of this test's namespace, which sees none
    // of the shielding namespace's tasks (nor, on cgroup v1, any trace of
    // them in the cgroups).
    let reset = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", bin()])
        .args(["reset", "--namespace-gone"])
        .env("CPUSHIELD_STATE_DIR", state.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&reset.stderr);
    assert_eq!(reset.status.code(), Some(1), "not refused: {reset:?}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("which still exists") && err.contains("holds its lock"),
        "{err}"
    );
    assert!(layout.shield_dir().is_dir() && layout.system_dir().is_dir());
    assert_eq!(
        shielded,
        support::tunable_state(),
        "the refused reset changed the machine"
    );
    let text = std::fs::read_to_string(state.path().join("state.json")).unwrap();
    assert!(
        !text.contains(r#""applying":true"#),
        "the state is marked as being applied: {text}"
    );
    // Then the run is stopped as a supervisor stops it, and restores.
    assert!(Command::new("kill")
        .args(["-INT", &started.to_string()])
        .status()
        .unwrap()
        .success());
    let run = child.wait_with_output().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ended(init) {
        assert!(Instant::now() < deadline, "the init never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        before,
        support::tunable_state(),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!state.path().join("state.json").exists());
}
