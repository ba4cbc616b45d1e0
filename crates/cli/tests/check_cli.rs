//! `cpushield check` end to end on this machine (read-only, 1 s runs).

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::TestQemu;

fn cpushield(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .args(args)
        .output()
        .expect("cpushield runs")
}

fn cpu1_online() -> bool {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let ok = cpushield_cpuset::CpuSet::parse_list(online.trim()).is_ok_and(|s| s.contains(1));
    if !ok {
        skipped("CPU 1 is not online");
    }
    ok
}

/// A process that runs on CPU 1 alone for a moment, then allows itself CPUs
/// 0-1 and sleeps there: a movable task that ran on CPU 1, which breaks a
/// shield of CPU 1 whatever else the machine does. Its busy part is on CPU 1
/// only (CPU 0 belongs to the environment), and widening the affinity of a
/// running task does not move it, so its last CPU stays 1.
const MOVABLE_ON_CPU_1: &str = "
import os, time
os.sched_setaffinity(0, {1})
time.sleep(0.3)
end = time.monotonic() + 0.2
while time.monotonic() < end:
    pass
os.sched_setaffinity(0, {0, 1})
time.sleep(3)
";

#[test]
fn a_movable_task_on_the_cpu_breaks_the_shield_and_exits_3_with_the_json_report() {
    if !cpu1_online() {
        return;
    }
    let mut task = Command::new("python3")
        .args(["-c", MOVABLE_ON_CPU_1])
        .spawn()
        .expect("python3 runs");
    let out = cpushield(&["check", "--cpus", "1", "--interval", "1s", "--json"]);
    let _ = task.kill();
    let _ = task.wait();
    let code = out.status.code();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let pid = task.id();
    let titles: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "breaks-shield")
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    assert!(
        titles
            .iter()
            .any(|t| t.contains(&format!("(pid {pid}) ran on CPU 1"))
                && t.contains("may run on other CPUs")),
        "the movable task {pid} is not a finding that breaks the shield: {titles:?}"
    );
    assert_eq!(code, Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(v["breaks_shield"], true);
    assert_eq!(v["cpus"], "1");
    assert_eq!(v["cpus_source"], "argument");
    assert!((v["interval_s"].as_f64().unwrap() - 1.0).abs() < 0.2);
    assert!(v["verdict"].as_str().unwrap().contains("CPU 1"));
    assert_eq!(v["activity"][0]["cpu"], 1);
    // Every finding has a severity, evidence, and remedies with their kind.
    for f in v["findings"].as_array().unwrap() {
        assert!(["info", "warn", "breaks-shield"].contains(&f["severity"].as_str().unwrap()));
        assert!(!f["evidence"].as_str().unwrap().is_empty());
        for r in f["remedies"].as_array().unwrap() {
            assert!(r["action"].is_string() && r["kind"].is_string());
        }
    }
    // The local timer ticks on an ordinary CPU 1: counted and explained.
    let loc = v["activity"][0]["interrupts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "LOC");
    assert!(loc.is_some_and(|c| c["count"].as_u64().unwrap() > 0));
}

#[test]
fn human_output_leads_with_the_verdict_and_answers_in_at_most_15_lines() {
    if !cpu1_online() {
        return;
    }
    let out = cpushield(&["check", "--cpus", "1", "--interval", "300ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("Verdict: CPU 1"), "{text}");
    assert!(lines.len() <= 15, "{text}");
    assert!(
        lines
            .last()
            .unwrap()
            .ends_with("cpushield check --cpus 1 --verbose"),
        "{text}"
    );
    assert!(!text.contains("Findings ("), "{text}");
    let out = cpushield(&["check", "--cpus", "1", "--interval", "300ms", "--verbose"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Verdict: CPU 1"), "{text}");
    assert!(text.contains("Findings ("), "{text}");
}

#[test]
fn an_offline_cpu_is_an_error_naming_it() {
    let out = cpushield(&["check", "--cpus", "4095", "--interval", "100ms"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CPU 4095 is not online"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_arguments_exit_1_with_a_message() {
    let out = cpushield(&["check", "--cpus", "1", "--interval", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval 0"));
    let out = cpushield(&["check", "--cpus", "one"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cpus"));
}

#[test]
fn without_a_shield_the_cpus_must_be_given() {
    if Path::new("/run/cpushield/state.json").exists() {
        skipped("a shield is up");
        return;
    }
    let out = cpushield(&["check", "--interval", "100ms"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass the CPUs to check with --cpus"));
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

fn pin(tid: i32, cpus: &str) {
    let st = Command::new("taskset")
        .args(["-pc", cpus, &tid.to_string()])
        .output()
        .expect("taskset runs");
    assert!(st.status.success(), "taskset -pc {cpus} {tid}: {st:?}");
}

fn vm_findings(json: &serde_json::Value) -> Vec<serde_json::Value> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["topic"] == "vm")
        .cloned()
        .collect()
}

fn check_json(args: &[&str]) -> serde_json::Value {
    let out = cpushield(args);
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "check: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("check --json prints JSON")
}

#[test]
fn on_a_vms_host_check_names_an_unpinned_vcpu_thread_and_the_emulator_threads_on_the_checked_cpu_each_with_its_fix(
) {
    if !cpu1_online() {
        return;
    }
    let qemu = TestQemu::start("cpushield-check-test");
    let pid = qemu.pid();
    let (vcpu0, vcpu1) = (
        qemu.thread("CPU 0/TCG").unwrap(),
        qemu.thread("CPU 1/TCG").unwrap(),
    );
    let args = ["check", "--cpus", "1", "--interval", "300ms", "--json"];
    let json = check_json(&args);
    let vm = vm_findings(&json);
    let titled = |text: &str| {
        vm.iter()
            .find(|f| f["title"].as_str().unwrap().contains(text))
            .unwrap_or_else(|| panic!("no vm finding with '{text}' in {vm:#?}"))
            .clone()
    };
    let prefix = format!("(pid {pid}): vCPU ");
    let unpinned = titled(&format!("{prefix}0 (thread {vcpu0}) is not pinned"));
    assert_eq!(
        unpinned["remedies"][0]["action"],
        format!("taskset -pc 1 {vcpu0}")
    );
    // The one checked CPU is promised to vCPU 0: vCPU 1 is named with no CPU left.
    let second = titled(&format!("{prefix}1 (thread {vcpu1}) is not pinned"));
    assert!(
        second["evidence"]
            .as_str()
            .unwrap()
            .contains("already holds a vCPU"),
        "{second:#?}"
    );
    let emulator = titled("emulator and I/O threads may run on checked CPU 1");
    let action = emulator["remedies"][0]["action"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        action.contains(&format!(" {pid} ")) && action.ends_with("taskset -pc 0 $t; done"),
        "{emulator:#?}"
    );

    // As the fixes say (taskset here: no shield on this host).
    pin(vcpu1, "1");
    pin(vcpu0, "0");
    for t in qemu.others() {
        pin(t, "0");
    }
    let vm = vm_findings(&check_json(&args));
    assert!(vm.is_empty(), "after pinning: {vm:#?}");
}
