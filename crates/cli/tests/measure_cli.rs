//! `cpushield measure` end to end: short real runs on CPU 1 (never CPU 0), the
//! JSON's documented fields, the cyclictest histogram file, exit codes, signals,
//! guardrails, and bad arguments refused with exit 1 before anything runs.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cpushield");

fn cpushield(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run cpushield")
}

/// A directory of this test's own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("cpushield-measure-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("json written");
    serde_json::from_str(&text).expect("valid JSON")
}

fn field<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[part],
        };
        assert!(
            !cur.is_null(),
            "missing documented field {path} (at {part}) in {v}"
        );
    }
    cur
}

#[test]
fn a_short_latency_run_accounts_for_every_period_and_writes_the_documented_json() {
    let dir = TempDir::new("latency");
    let json = dir.path().join("lat.json");
    let hist = dir.path().join("lat.hist");
    let out = cpushield(&[
        "measure",
        "latency",
        "--cpus",
        "1",
        "--rate",
        "1000",
        "--duration",
        "1500ms",
        "--json",
        json.to_str().unwrap(),
        "--histogram",
        hist.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        stderr(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CPU 1:") && text.contains("samples <"),
        "{text}"
    );
    assert!(
        !stderr(&out).contains("samples, max"),
        "no progress bar when piped"
    );

    let v = read_json(&json);
    assert_eq!(field(&v, "schema"), "cpushield.measure");
    assert_eq!(field(&v, "version"), 1);
    assert_eq!(field(&v, "kind"), "latency");
    assert_eq!(field(&v, "settings.period_ns"), 1_000_000);
    assert_eq!(field(&v, "settings.cpus"), "1");
    assert_eq!(field(&v, "run.interrupted"), false);
    field(&v, "run.started_unix_ns");
    field(&v, "run.warnings");
    let cpu = field(&v, "cpus.0");
    assert_eq!(field(cpu, "cpu"), 1);
    assert_eq!(field(cpu, "applied.policy"), "fifo");
    let samples = field(cpu, "samples").as_u64().unwrap();
    let missed = field(cpu, "missed_periods").as_u64().unwrap();
    assert_eq!(
        samples + missed,
        1500,
        "1000 Hz for 1.5 s: each period a sample or missed"
    );
    assert!(samples > 750);
    assert_eq!(
        field(cpu, "latency.summary.count").as_u64().unwrap(),
        samples
    );
    assert!(field(cpu, "latency.summary.min_ns").as_u64().unwrap() > 0);
    for f in ["mean_ns", "stddev_ns", "max_ns"] {
        field(cpu, &format!("latency.summary.{f}"));
    }
    for p in [
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p99_9_ns",
        "p99_99_ns",
        "p99_999_ns",
        "p99_9999_ns",
    ] {
        field(cpu, &format!("latency.summary.percentiles.{p}"));
    }
    let bins = field(cpu, "latency.histogram").as_array().unwrap();
    let total: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(total, samples);
    assert!(bins[0]["low_ns"].is_u64() && bins[0]["high_ns"].is_u64());
    let top = field(cpu, "latency.top").as_array().unwrap();
    assert_eq!(top.len(), 10);
    assert_eq!(top[0]["value_ns"], *field(cpu, "latency.summary.max_ns"));
    assert!(top[0]["offset_ns"].is_u64() && top[0]["index"].is_u64());
    assert!(cpu["advance"].is_null());

    let h = std::fs::read_to_string(&hist).unwrap();
    assert!(h.starts_with("# Histogram\n000000 "), "{h}");
    let total_line = h.lines().find(|l| l.starts_with("# Total:")).unwrap();
    let overflow_line = h
        .lines()
        .find(|l| l.starts_with("# Histogram Overflows:"))
        .unwrap();
    let n = |l: &str| l.split_whitespace().last().unwrap().parse::<u64>().unwrap();
    assert_eq!(n(total_line) + n(overflow_line), samples);
}

#[test]
fn advance_reports_spin_time_and_late_wakeups() {
    let out = cpushield(&[
        "measure",
        "latency",
        "--cpus",
        "1",
        "--interval",
        "1ms",
        "--samples",
        "300",
        "--advance",
        "100us",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("stdout is only the JSON");
    assert_eq!(field(&v, "settings.advance_ns"), 100_000);
    let cpu = field(&v, "cpus.0");
    assert_eq!(field(cpu, "samples"), 300);
    let spun = field(cpu, "advance.spin.summary.count").as_u64().unwrap();
    let late = field(cpu, "advance.late_wakeups").as_u64().unwrap();
    assert_eq!(spun + late, 300);
}

#[test]
fn max_latency_exceeded_exits_with_code_2() {
    let out = cpushield(&[
        "measure",
        "latency",
        "--cpus",
        "1",
        "--interval",
        "1ms",
        "--samples",
        "50",
        "--max-latency",
        "1ns",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("above --max-latency"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sigterm_stops_the_run_and_reports_what_was_measured() {
    let dir = TempDir::new("sigterm");
    let json = dir.path().join("int.json");
    let child = Command::new(BIN)
        .args([
            "measure",
            "latency",
            "--cpus",
            "1",
            "--duration",
            "60s",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.status.success(), "{}", stderr(&out));
    let v = read_json(&json);
    assert_eq!(field(&v, "run.interrupted"), true);
    assert!(field(&v, "cpus.0.samples").as_u64().unwrap() > 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("interrupted"));
}

#[test]
fn noise_and_determinism_write_their_json_kinds() {
    let out = cpushield(&[
        "measure",
        "noise",
        "--cpus",
        "1",
        "--duration",
        "1s",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(field(&v, "kind"), "noise");
    assert_eq!(field(&v, "cpus.0.applied.policy"), "other");
    for f in [
        "elapsed_ns",
        "interruptions",
        "stolen_ns",
        "stolen_ns_per_s",
        "gaps.summary.max_ns",
    ] {
        field(&v, &format!("cpus.0.{f}"));
    }

    let out = cpushield(&[
        "measure",
        "determinism",
        "--cpus",
        "1",
        "--work",
        "20ms",
        "--runs",
        "3",
        "--rest",
        "10ms",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(field(&v, "kind"), "determinism");
    assert!(field(&v, "settings.iterations").as_u64().unwrap() > 0);
    assert_eq!(field(&v, "cpus.0.runs_ns").as_array().unwrap().len(), 3);
    for f in [
        "ideal_ns",
        "max_ns",
        "jitter_ns",
        "jitter_percent",
        "durations.summary.count",
    ] {
        field(&v, &format!("cpus.0.{f}"));
    }
}

#[test]
fn a_run_without_root_warns_and_still_measures() {
    let setpriv = Path::new("/usr/bin/setpriv");
    assert!(setpriv.exists(), "this test needs setpriv (util-linux)");
    // a copy nobody can reach, wherever the build tree is
    let dir = TempDir::new("nobody");
    let bin = dir.path().join("cpushield");
    std::fs::copy(BIN, &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [dir.path(), bin.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args([
            "measure",
            "latency",
            "--cpus",
            "1",
            "--interval",
            "1ms",
            "--samples",
            "100",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("warning: not running as root"), "{err}");
    assert!(err.contains("could not set SCHED_FIFO 95"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("SCHED_OTHER, 100 samples"));
}

fn refused(args: &[&str], expect: &[&str]) {
    let started = Instant::now();
    let out = cpushield(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    for e in expect {
        assert!(err.contains(e), "{args:?}: expected '{e}' in: {err}");
    }
    assert!(out.stdout.is_empty(), "nothing measured for {args:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_zero_rate_is_refused() {
    refused(
        &["measure", "latency", "--cpus", "1", "--rate", "0"],
        &["--rate 0", "at least 1 Hz"],
    );
}

#[test]
fn an_unknown_cpu_is_refused_naming_the_online_cpus() {
    refused(
        &["measure", "latency", "--cpus", "4000"],
        &["CPU 4000 is not online", "online CPUs"],
    );
    refused(
        &["measure", "noise", "--cpus", "4000"],
        &["CPU 4000 is not online"],
    );
}

#[test]
fn a_negative_advance_is_refused() {
    refused(
        &["measure", "latency", "--cpus", "1", "--advance", "-5us"],
        &["negative", "20us"],
    );
}

#[test]
fn an_advance_not_shorter_than_the_period_is_refused() {
    refused(
        &[
            "measure",
            "latency",
            "--cpus",
            "1",
            "--interval",
            "1ms",
            "--advance",
            "2ms",
        ],
        &["--advance 2ms is not shorter than the period (1ms)"],
    );
    refused(
        &[
            "measure",
            "latency",
            "--cpus",
            "1",
            "--rate",
            "2048",
            "--advance",
            "500us",
        ],
        &["not shorter than the period"],
    );
}

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// Every tracefs setting `--trace-above` may write (top level and the
/// measured CPU's buffer), every event's enable and filter, and the instances
/// other than cpushield's (another run may hold its own meanwhile): each as
/// `path:text`.
const TRACEFS_SETTINGS: &str = r#"
cd /sys/kernel/tracing || exit 1
grep -H '' tracing_on current_tracer trace_clock tracing_cpumask buffer_size_kb \
    per_cpu/cpu1/buffer_size_kb events/*/*/enable events/*/*/filter 2>/dev/null
ls instances | grep -v '^cpushield-'
"#;

#[test]
fn trace_above_attributes_spikes_and_leaves_tracefs_as_found() {
    if !std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    {
        skipped("tracing needs root");
        return;
    }
    let mounted_before = tracefs_mounted();
    let dir = tempfile::tempdir().unwrap();
    let trace_dir = dir.path().join("trace");
    // Where tracefs is not mounted, the run mounts it and unmounts it after:
    // the mount table must be as before. Then, in a private mount namespace
    // with tracefs mounted (so the settings can be read before and after),
    // every setting must read as before.
    // The tracefs locks go to a state directory of this test's own, not the
    // machine's /run/cpushield.
    let state = dir.path().join("state");
    let out = Command::new(BIN)
        .args(["measure", "latency", "--cpus", "1", "--duration", "1s"])
        .args(["--trace-above", "5us", "--trace-dir"])
        .arg(&trace_dir)
        .env("CPUSHIELD_STATE_DIR", &state)
        .output()
        .expect("run cpushield");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        tracefs_mounted(),
        mounted_before,
        "tracefs mount state changed"
    );
    let summary = read_json(&trace_dir.join("trace-summary.json"));
    assert_eq!(summary["errors"], serde_json::json!([]), "{summary}");
    let attributions = summary["attributions"].as_array().unwrap();
    // Under 5 us a timer wakeup does not happen on a virtual or loaded CPU.
    assert!(
        !attributions.is_empty(),
        "no spike above 5 us was attributed"
    );
    assert_eq!(
        summary["spikes_marked"].as_u64().unwrap(),
        attributions.len() as u64 + summary["spikes_dropped"].as_u64().unwrap(),
        "a marked spike is neither attributed nor counted as dropped"
    );
    let mut timer_charged = false;
    for a in attributions {
        let latency = a["latency_ns"].as_u64().unwrap();
        assert!(latency >= 5_000, "a spike under the threshold: {a}");
        let charged: u64 = a["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["ns"].as_u64().unwrap())
            .sum();
        assert_eq!(charged, latency, "every ns of the spike is charged: {a}");
        timer_charged |= a["causes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["kind"] == "vector" && c["name"] == "local timer interrupt");
    }
    assert!(
        timer_charged,
        "no spike names the local timer interrupt that woke the probe"
    );

    let script = format!(
        "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || exit 1
         settings() {{ {TRACEFS_SETTINGS} }}
         before=$(settings)
         \"$CS\" measure latency --cpus 1 --duration 1s --trace-above 5us --trace-dir \"$TD\" >/dev/null \
             || echo \"ASSERT-FAIL measure exit $?\"
         after=$(settings)
         [ \"$before\" = \"$after\" ] || {{ echo ASSERT-FAIL tracefs differs:; diff <(echo \"$before\") <(echo \"$after\") | head -n 20; }}
         inst=$(grep -o '\"instance\": \"[^\"]*\"' \"$TD/trace-summary.json\" | cut -d'\"' -f4)
         [ -n \"$inst\" ] || echo ASSERT-FAIL the run used no private instance
         [ -n \"$inst\" ] && [ -e \"$inst\" ] && echo \"ASSERT-FAIL instance $inst left behind\"
         echo SCENARIO-DONE"
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash", "-c", &script])
        .env("CS", env!("CARGO_BIN_EXE_cpushield"))
        .env("TD", dir.path().join("trace-in-namespace"))
        .env("CPUSHIELD_STATE_DIR", &state)
        .output()
        .expect("run unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
}

#[test]
fn a_zero_trace_threshold_is_refused() {
    refused(
        &[
            "measure",
            "latency",
            "--cpus",
            "1",
            "--duration",
            "1s",
            "--trace-above",
            "0us",
        ],
        &["--trace-above must be longer than 0"],
    );
}

#[test]
fn an_unwritable_json_path_is_refused_before_measuring() {
    refused(
        &[
            "measure",
            "latency",
            "--cpus",
            "1",
            "--json",
            "/nonexistent-dir/x.json",
        ],
        &["cannot write --json /nonexistent-dir/x.json"],
    );
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

#[test]
fn a_device_source_that_cannot_run_is_refused_naming_the_source_and_the_timer() {
    // Refused whether the device exists (two CPUs, one device) or not (absent).
    for source in ["rtc", "hpet"] {
        refused(
            &[
                "measure",
                "latency",
                "--source",
                source,
                "--cpus",
                "0-1",
                "--duration",
                "1s",
            ],
            &[&format!("--source {source}"), "--source timer"],
        );
    }
}

#[test]
fn the_timer_source_is_named_in_the_text_and_the_json() {
    let dir = TempDir::new("source-json");
    let json = dir.path().join("lat.json");
    let out = cpushield(&[
        "measure",
        "latency",
        "--source",
        "auto",
        "--cpus",
        "1",
        "--samples",
        "50",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("timer wakeup (clock_nanosleep)"), "{text}");
    assert!(!text.contains("realfeel"), "{text}");
    assert_eq!(field(&read_json(&json), "settings.source"), "timer");
}
