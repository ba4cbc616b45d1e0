//! `cpushield compare` end to end on this host, inside its private PID
//! namespace: short scenarios produce the report, and an interrupted run still
//! resets the shield, stops the load and restores every IRQ.

mod support;
use support::serial;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cpushield")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

fn assert_machine_restored(before: &[(String, String)], state: &Path) {
    assert_eq!(
        before,
        support::system_state().as_slice(),
        "IRQ masks or settings differ"
    );
    support::assert_no_shield_cgroups();
    assert!(
        !state.join("state.json").exists(),
        "shield state left behind"
    );
}

/// A short `compare` of the shielded scenario alone on CPU 1 (no load worth
/// the name, no calibration, tracing or anchor) with `extra` arguments.
fn short_shielded_compare(extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["compare", "--cpus", "1", "--scenarios", "shielded"])
        .args(["--duration", "1s", "--runs", "0", "--load", "fpu"])
        .args(["--idle", "halt", "--no-attribute", "--no-anchor"])
        .args(["--dir", tmp.path().to_str().unwrap()])
        .args(["--out", tmp.path().join("r").to_str().unwrap()])
        .args(extra)
        .env("CPUSHIELD_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    (out, tmp)
}

#[test]
fn max_latency_exceeded_in_the_shielded_scenario_exits_2_and_not_exceeded_exits_0() {
    let _serial = serial();
    if !is_root() {
        skipped("compare needs root");
        return;
    }
    let before = support::system_state();
    let (out, tmp) = short_shielded_compare(&["--max-latency", "1ns"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--max-latency 1 ns exceeded in shielded ("),
        "{err}"
    );
    assert!(tmp.path().join("r/report.json").exists(), "no report");
    assert_machine_restored(&before, tmp.path());

    let (out, tmp) = short_shielded_compare(&["--max-latency", "1h"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("exceeded"), "{err}");
    assert_machine_restored(&before, tmp.path());
}

#[test]
fn demo_runs_every_scenario_writes_the_report_and_restores_the_machine() {
    let _serial = serial();
    if !is_root() {
        skipped("demo needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("report");
    let before = support::system_state();
    let out = Command::new(bin())
        .args(["demo", "--cpus", "1", "--duration", "1s"])
        .args(["--out", out_dir.to_str().unwrap()])
        .env("CPUSHIELD_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with("cpushield demo: "), "{text}");
    let (report, names) = support::compare_report(&out_dir);
    // unshielded-cpu needs an unshielded CPU other than CPU 0 (3 CPUs or more).
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = cpushield_cpuset::CpuSet::parse_list(online.trim()).unwrap();
    if online.iter().any(|c| c != 0 && c != 1) {
        assert_eq!(
            names,
            [
                "idle",
                "loaded",
                "shielded",
                "shielded+advance",
                "unshielded-cpu"
            ]
        );
    } else {
        assert_eq!(names, ["idle", "loaded", "shielded", "shielded+advance"]);
        assert!(
            report.to_string().contains(
                "unshielded-cpu skipped: the only unshielded CPU is CPU 0, which runs the machine's own services"
            ),
            "the report does not say why unshielded-cpu was skipped"
        );
    }
    for s in report["scenarios"].as_array().unwrap() {
        assert!(
            s["latency"]["samples"].as_u64().unwrap() > 0,
            "{}",
            s["name"]
        );
    }
    assert!(report["verdict"].is_object(), "no verdict");
    assert_machine_restored(&before, tmp.path());
}

#[test]
fn compare_run_from_a_nested_pid_namespace_blames_no_task_outside_it_as_a_leak() {
    let _serial = serial();
    if !is_root() {
        skipped("compare needs root");
        return;
    }
    // cpushield itself runs in a nested PID namespace with its own /proc (a
    // container's view): the tasks the trace names by their global IDs are
    // the machine's (its kernel threads, other work), which that /proc cannot
    // look up. With --system every one of them used to be judged a task the
    // shield should have moved.
    let tmp = tempfile::tempdir().unwrap();
    let before = support::system_state();
    let script = r#"
$CS compare --system --cpus 1 --scenarios loaded,shielded --duration 1s --runs 0 \
    --load fpu --idle halt --no-anchor --attribute-above 30us \
    --dir "$CPUSHIELD_STATE_DIR" --out "$CPUSHIELD_STATE_DIR/r"
echo "compare-exit $?"
echo SCENARIO-DONE
"#;
    let text = support::run_scenario_in_pid_namespace(script, &[], tmp.path());
    assert!(text.contains("compare-exit 0"), "{text}");
    let (report, _) = support::compare_report(&tmp.path().join("r"));
    let verdict = &report["verdict"];
    let task_leaks: Vec<&str> = verdict["remaining"]
        .as_array()
        .expect("a list of what remains")
        .iter()
        .filter_map(|r| r.as_str())
        .filter(|r| r.starts_with("task "))
        .collect();
    assert!(task_leaks.is_empty(), "{task_leaks:#?}\n{text}");
    assert!(
        !verdict["line"]
            .as_str()
            .unwrap()
            .starts_with("SHIELD LEAKS"),
        "{text}"
    );
    let said = report
        .to_string()
        .matches("cpushield runs in a nested PID namespace")
        .count();
    assert_eq!(said, 1, "the nested namespace's limit is said once: {text}");
    assert_machine_restored(&before, tmp.path());
}

/// Each thread seen able to run on the measured CPU: when first and last
/// seen so, and what it was.
type Seen = std::collections::BTreeMap<i32, (Instant, Instant, String)>;

/// Which of cpushield's own threads could run on CPU 1 while `child` ran,
/// sampled every 0.2 s until it ended: each such thread with the span it was
/// seen so. A thread may for a moment between its fork and its placement; a
/// misplaced one stays so for the whole scenario.
fn threads_on_cpu_1_until_exit(child: &mut std::process::Child) -> (usize, Seen) {
    let mut seen = Seen::default();
    let mut samples = 0;
    while child.try_wait().unwrap().is_none() {
        let now = Instant::now();
        for (tid, comm, allowed) in own_threads() {
            samples += 1;
            let cpus: Vec<usize> = allowed
                .split(',')
                .flat_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    a.parse().unwrap_or(0)..=b.parse().unwrap_or(0)
                })
                .collect();
            if cpus.contains(&1) {
                seen.entry(tid).and_modify(|e| e.1 = now).or_insert((
                    now,
                    now,
                    format!("{comm} ({tid}) allowed {allowed}"),
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    (samples, seen)
}

/// One run of the idle, loaded and shielded scenarios, measured on CPU 1,
/// proves both: the report of a whole compare, and cpushield's own threads
/// kept off the measured CPU in every scenario (each a compare of some 25 s
/// on the 2-CPU CI machine, so one run rather than two).
#[test]
fn short_scenarios_write_the_report_and_keep_cpushields_own_threads_off_the_measured_cpu() {
    let _serial = serial();
    if !is_root() {
        skipped("compare needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("report");
    let irqs = support::system_state();
    let mut child = Command::new(bin())
        .args(["compare", "--cpus", "1", "--duration", "2s", "--runs", "2"])
        .args(["--work", "20ms", "--scenarios", "idle,loaded,shielded"])
        .args(["--load", "fpu,ttcp"])
        .args([
            "--dir",
            tmp.path().to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .env("CPUSHIELD_STATE_DIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (samples, seen) = threads_on_cpu_1_until_exit(&mut child);
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(samples > 0, "no thread of cpushield seen while it ran");
    let stayed: Vec<&String> = seen
        .values()
        .filter(|(first, last, _)| *last - *first >= Duration::from_millis(500))
        .map(|(_, _, what)| what)
        .collect();
    assert!(
        stayed.is_empty(),
        "cpushield's own threads could run on the measured CPU 1: {stayed:?}"
    );
    for blamed in ["cpushield (", "cpushield-trace (", "cpushield-load ("] {
        assert!(!text.contains(blamed), "{blamed}: {text}");
    }
    let (report, names) = support::compare_report(&out_dir);
    assert_eq!(report["schema"], "cpushield.compare/5");
    assert_eq!(names, ["idle", "loaded", "shielded"]);
    for s in report["scenarios"].as_array().unwrap() {
        assert!(
            s["latency"]["samples"].as_u64().unwrap() > 1000,
            "{}",
            s["name"]
        );
        assert!(s["determinism"]["runs"].as_u64().unwrap() == 2);
        if s["name"] != "idle" {
            let ops: u64 = s["load"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["ops"].as_u64().unwrap())
                .sum();
            assert!(ops > 0, "{} carried no load", s["name"]);
        }
    }
    assert_eq!(report["scenarios"][2]["shielded"], true);
    // Every scenario chose its idle policy by calibration and was traced;
    // the loaded and shielded ones carry the cyclictest anchor.
    for s in report["scenarios"].as_array().unwrap() {
        let idle = &s["idle"];
        assert_eq!(idle["how"], "calibrated", "{}", s["name"]);
        assert!(idle["halt_max_ns"].as_u64().unwrap() > 0);
        assert!(idle["poll_max_ns"].as_u64().unwrap() > 0);
        let a = &s["attribution"];
        assert!(
            a["threshold_ns"].as_u64().unwrap() >= 20_000,
            "{}",
            s["name"]
        );
        assert!(
            a["explained"].as_u64().unwrap() + a["lost"].as_u64().unwrap()
                == a["samples_above"].as_u64().unwrap(),
            "{a}"
        );
        assert!(a["guest_worst_ns"].as_u64().unwrap() <= s["latency"]["max_ns"].as_u64().unwrap());
        let det = &s["determinism"];
        assert_eq!(
            det["run_outside_s"].as_array().unwrap().len(),
            2,
            "{}",
            s["name"]
        );
        if s["name"] != "idle" {
            assert_eq!(s["anchor"]["tool"], "cyclictest", "{}", s["name"]);
            assert!(s["anchor"]["samples"].as_u64().unwrap() > 0);
            // Its wakeups seen in the trace, and split as the probe's are.
            assert!(
                s["anchor"]["traced_wakeups"].as_u64().unwrap_or(0) > 0,
                "{}: {}",
                s["name"],
                s["notes"]
            );
            assert!(
                s["anchor"]["attribution"]["guest_worst_ns"]
                    .as_u64()
                    .is_some(),
                "{}",
                s["anchor"]
            );
        }
    }
    let v = &report["verdict"];
    assert!(v["guest_loaded_over_shielded"].as_f64().is_some(), "{v}");
    assert!(v["anchor_loaded_over_shielded"].as_f64().is_some(), "{v}");
    assert!(!v["category"].as_str().unwrap().is_empty(), "{v}");
    let cyclictest = &v["anchors"][0];
    assert_eq!(cyclictest["tool"], "cyclictest", "{v}");
    assert_eq!(cyclictest["terms"], "in the guest", "{v}");
    // The answer first: at most 15 lines before the report line, the
    // verdict among them; the tables only with --verbose.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let before_report: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.starts_with("report: "))
        .collect();
    assert!(
        before_report.len() <= 15 && before_report.len() < stdout.lines().count(),
        "{} lines before the report line:\n{stdout}",
        before_report.len()
    );
    assert_eq!(before_report[0], v["line"].as_str().unwrap(), "{stdout}");
    assert!(
        stdout.contains("caused in the guest") && stdout.contains("cyclictest"),
        "{stdout}"
    );
    assert!(!stdout.contains("guest vs outside"), "{stdout}");
    for f in [
        "report.html",
        "latency.svg",
        "latency.png",
        "determinism.svg",
        "determinism.png",
    ] {
        assert!(out_dir.join(f).exists(), "{f} missing");
    }
    assert_machine_restored(&irqs, tmp.path());
}

#[test]
fn sigint_in_the_shielded_scenario_restores_everything() {
    let _serial = serial();
    if !is_root() {
        skipped("compare needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let irqs = support::system_state();
    let mut child = Command::new(bin())
        .args([
            "compare",
            "--duration",
            "30s",
            "--runs",
            "0",
            "--scenarios",
            "shielded",
            "--load",
            "fpu",
        ])
        .args([
            "--dir",
            tmp.path().to_str().unwrap(),
            "--out",
            tmp.path().join("r").to_str().unwrap(),
        ])
        .env("CPUSHIELD_STATE_DIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    // Wait until the shield is up, then interrupt the whole group as a terminal would.
    let start = Instant::now();
    while !tmp.path().join("state.json").exists() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        tmp.path().join("state.json").exists(),
        "the shield never came up"
    );
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: kill takes integers only; the group is our own child's (spawned with
    // process_group(0)), so the signal reaches nothing else.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "compare did not stop after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{text}");
    assert!(text.contains("interrupted"), "{text}");
    assert_machine_restored(&irqs, tmp.path());
}

#[test]
fn bad_compare_input_exits_1_before_changing_anything() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["compare", "--scenarios", "bogus"],
        vec!["compare", "--cpus", "0-1"],
        vec!["compare", "--cpus", "77"],
        vec!["compare", "--load", "nosuchload"],
        vec!["compare", "--duration", "0s"],
    ] {
        let out = Command::new(bin())
            .args(&args)
            .env("CPUSHIELD_STATE_DIR", tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(!tmp.path().join("state.json").exists());
    }
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

/// This binary's threads named cpushield* that are not a probe's measuring
/// thread (cpushield-cpuN) or idle poller (cpushield-pollN), with their
/// affinity: every process of /proc whose executable is this test's
/// `cpushield`, in any PID namespace.
fn own_threads() -> Vec<(i32, String, String)> {
    let ours = std::fs::canonicalize(bin()).unwrap();
    let mut found = Vec::new();
    for proc_entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe.as_deref() != Some(ours.as_path()) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let dir = task.path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            let comm = comm.trim().to_string();
            if !comm.starts_with("cpushield")
                || comm.starts_with("cpushield-cpu")
                || comm.starts_with("cpushield-poll")
            {
                continue;
            }
            let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
            let Some(allowed) = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            else {
                continue;
            };
            let tid = task.file_name().to_string_lossy().parse().unwrap_or(0);
            found.push((tid, comm, allowed.trim().to_string()));
        }
    }
    found
}
