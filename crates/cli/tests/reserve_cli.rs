//! A CPU reserved by another process (`run --reserve`, `cps_reserve`) is
//! honoured by every command that places work or lifts a shield: each is
//! refused before it changes anything, in one line naming the holder and the
//! remedy, with exit code 1. This test process holds CPU 1 in a private
//! reservation directory; each command runs with its own empty shield state.
//! Run under /tmp/cpushield-hosttest.lock: a command that failed to refuse
//! would measure on CPU 1.

mod support;

use cpushield_rt::reserve::{Holder, ReserveDir};
use std::process::{Command, Output};

fn run_reserved(args: &[&str]) -> (Output, i32) {
    let dir = tempfile::tempdir().unwrap();
    let reserves = ReserveDir::new(dir.path().join("reserve"));
    let me = std::process::id() as i32;
    let _held = reserves
        .reserve(
            &cpushield_cpuset::CpuSet::from_cpus([1]),
            &Holder {
                pid: me,
                command: "reserve-test".into(),
            },
        )
        .unwrap();
    let out = Command::new(support::bin())
        .args(args)
        .env("CPUSHIELD_STATE_DIR", dir.path().join("state"))
        .env("CPUSHIELD_RESERVE_DIR", reserves.path())
        .output()
        .unwrap();
    (out, me)
}

/// Returns the refusal's one line.
fn assert_refused(args: &[&str], remedy: &str) -> String {
    let before = support::system_state();
    let (out, holder) = run_reserved(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line: {err}"
    );
    assert!(
        err.contains(&format!("CPU 1 is reserved by PID {holder} (reserve-test)")),
        "{args:?}: {err}"
    );
    assert!(err.contains(remedy), "{args:?}: {err}");
    assert_eq!(
        support::system_state(),
        before,
        "{args:?} changed the system"
    );
    err.into_owned()
}

#[test]
fn measure_latency_on_a_reserved_cpu_is_refused_naming_the_holder() {
    assert_refused(
        &["measure", "latency", "--cpus", "1", "--duration", "1s"],
        "choose another CPU",
    );
}

#[test]
fn measure_with_idle_poll_on_a_reserved_cpu_is_refused_naming_the_holder() {
    assert_refused(
        &[
            "measure",
            "latency",
            "--cpus",
            "1",
            "--duration",
            "1s",
            "--idle-poll",
        ],
        "choose another CPU",
    );
}

#[test]
fn measure_determinism_and_noise_on_a_reserved_cpu_are_refused() {
    assert_refused(
        &["measure", "determinism", "--cpus", "1"],
        "choose another CPU",
    );
    assert_refused(
        &["measure", "noise", "--cpus", "1", "--duration", "1s"],
        "choose another CPU",
    );
}

#[test]
fn compare_on_a_reserved_cpu_is_refused_naming_the_holder() {
    let err = assert_refused(
        &["compare", "--cpus", "1", "--duration", "1s"],
        "choose another CPU",
    );
    assert!(err.contains("compare: CPU 1 is reserved by PID"), "{err}");
}

#[test]
fn demo_on_a_reserved_cpu_is_refused_naming_itself_and_the_holder() {
    let err = assert_refused(
        &["demo", "--cpus", "1", "--duration", "1s"],
        "choose another CPU",
    );
    assert!(err.contains("demo: CPU 1 is reserved by PID"), "{err}");
}

#[test]
fn run_with_idle_poll_on_a_reserved_cpu_is_refused_naming_the_holder() {
    assert_refused(
        &[
            "run",
            "--cpus",
            "1",
            "--allow-unshielded",
            "--idle-poll",
            "--",
            "true",
        ],
        "choose another CPU",
    );
}

#[test]
fn unshield_of_a_reserved_cpu_is_refused_naming_the_holder_and_reset() {
    assert_refused(&["unshield", "--all", "1"], "cpushield reset");
}
