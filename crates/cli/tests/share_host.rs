//! Sharing a shielded CPU's idle time (the Hyades paper's ARTiS sharing) on
//! this host, on CPU 1 only, with short durations: `run --share` gives the
//! job SCHED_IDLE at nice 19, and `compare --scenarios
//! shielded,shielded+shared --verbose`, inside `unshare --pid --fork
//! --mount-proc`, prints the Table 2 block with a batch job that got a share of the CPU.
//! Run under the host-test lock:
//!   flock /tmp/cpushield-hosttest.lock cargo test --release -p cpushield --test share_host

mod support;

use std::process::Command;
use support::{bin, can_shield_here, skip, system_state};

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn share_with_a_realtime_policy_is_one_line_exit_1_and_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    for flag in [&["--fifo", "80"][..], &["--rr", "5"][..]] {
        let out = Command::new(bin())
            .args(["run", "--share", "--cpus", "1"])
            .args(flag)
            .args(["--", "touch", marker.to_str().unwrap()])
            .env("CPUSHIELD_STATE_DIR", tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--share with {}", flag[0])) && err.contains("SCHED_IDLE"),
            "{err}"
        );
        assert!(!marker.exists(), "the command must not run");
    }
}

#[test]
fn a_shared_job_runs_at_sched_idle_nice_19_on_its_cpu() {
    if let Err(why) = can_shield_here(&["chrt"]) {
        skip(&why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["run", "--share", "--cpus", "1", "--allow-unshielded", "--"])
        .args([
            "sh",
            "-c",
            "chrt -p $$; grep Cpus_allowed_list /proc/$$/status; cut -d' ' -f19 /proc/$$/stat",
        ])
        .env("CPUSHIELD_STATE_DIR", tmp.path().join("state"))
        .env("CPUSHIELD_RESERVE_DIR", tmp.path().join("reserve"))
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("current scheduling policy: SCHED_IDLE"), "{t}");
    assert!(t.contains("Cpus_allowed_list:\t1\n"), "{t}");
    assert!(t.lines().any(|l| l.trim() == "19"), "nice 19: {t}");
}

#[test]
fn compare_shielded_shared_prints_table_2_and_the_batch_job_gets_a_share_of_the_cpu() {
    if let Err(why) = can_shield_here(&["unshare"]) {
        skip(&why);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("report");
    let before = system_state();
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", bin(), "compare"])
        .args(["--cpus", "1", "--scenarios", "shielded,shielded+shared"])
        .args(["--duration", "3s", "--runs", "2", "--work", "50ms"])
        .args(["--load", "fpu", "--no-anchor", "--verbose"])
        .args(["--dir", tmp.path().to_str().unwrap()])
        .args(["--out", out_dir.to_str().unwrap()])
        .env("CPUSHIELD_STATE_DIR", tmp.path())
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("sharing the shielded CPU's idle time (the Hyades paper's Table 2, ARTiS): real-time task on CPU 1"),
        "{t}"
    );
    assert!(
        t.contains("configuration        99.999%   maximum  batch ops/s  batch CPU"),
        "{t}"
    );
    assert!(
        t.contains("SHARING KEEPS THE LATENCY") || t.contains("SHARING COSTS LATENCY"),
        "{t}"
    );
    let (report, names) = support::compare_report(&out_dir);
    assert_eq!(report["schema"], "cpushield.compare/5");
    assert_eq!(names, ["shielded", "shielded+shared"]);
    let shared = &report["scenarios"][1];
    let batch = &shared["batch"];
    assert_eq!(batch["policy"], "SCHED_IDLE (nice 19)", "{shared}");
    assert!(batch["ops"].as_u64().unwrap() > 0, "{batch}");
    assert!(batch["cpu_share_pct"].as_f64().unwrap() > 0.0, "{batch}");
    assert!(report["scenarios"][0]["batch"].is_null());
    let sharing = &report["sharing"];
    assert_eq!(sharing["rows"].as_array().unwrap().len(), 2, "{sharing}");
    assert!(sharing["rows"][1]["batch_cpu_share_pct"].as_f64().unwrap() > 0.0);
    assert!(
        sharing["max_with_over_without"].as_f64().is_some(),
        "{sharing}"
    );
    assert!(
        sharing["rows"][0]["max_ns"].as_u64().unwrap() > 0
            && sharing["rows"][1]["p99999_ns"].as_u64().unwrap() > 0
    );
    // The verdict never reads the shared scenario.
    assert!(
        !report["verdict"]["line"]
            .as_str()
            .unwrap()
            .contains("shared"),
        "{}",
        report["verdict"]
    );
    assert_eq!(before, system_state(), "IRQ masks or sysctls differ");
    support::assert_no_shield_cgroups();
    assert!(!tmp.path().join("state.json").exists(), "shield state left");
}
