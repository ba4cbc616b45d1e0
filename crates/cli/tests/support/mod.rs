//! What the host tests that shield this machine for real share: the binary,
//! the CI-aware skip, the preconditions, and the machine-wide state a test
//! must leave as it found it.

#![allow(dead_code)] // each test binary uses its own subset

use std::process::Command;

/// One shield on this machine at a time: the tests of a file run on threads
/// of one process, and two shields at once move the same IRQs and cpusets
/// (the second finds the first's cgroups without its state, or one test's
/// "after" reads the other's shield). Each test that shields holds this.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The cpushield binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_cpushield")
}

/// Prints why a test cannot run here; in CI (CI=true) that is a failure.
pub fn skip(why: &str) {
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "cannot run in CI: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Root, the `tools` on PATH, and a second CPU to shield: or why not.
pub fn can_shield_here(tools: &[&str]) -> Result<(), String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        .unwrap_or(false);
    if !root {
        return Err("not root".into());
    }
    for tool in tools {
        if Command::new(tool).arg("--help").output().is_err() {
            return Err(format!("{tool} missing (scripts/setup.sh installs it)"));
        }
    }
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if online.trim() == "0" {
        return Err("needs 2 CPUs".into());
    }
    Ok(())
}

/// Every machine-wide file a shield writes, as the exact text the kernel
/// shows (masks as mask text, not CPU lists): every IRQ's `smp_affinity`,
/// the default mask, the unbound workqueue mask, the sysctls of the
/// local-timer shield; and the cpuset hierarchy's top-level directories.
pub fn system_state() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity");
        if let Ok(t) = std::fs::read_to_string(&p) {
            out.push((p.display().to_string(), t));
        }
    }
    for p in [
        cpushield_shield::snapshot::DEFAULT_IRQ_AFFINITY,
        cpushield_shield::snapshot::WORKQUEUE_CPUMASK,
    ]
    .into_iter()
    .chain(cpushield_shield::snapshot::LTMR_SYSCTLS)
    {
        out.push((p.into(), std::fs::read_to_string(p).unwrap_or_default()));
    }
    if let Some(layout) = cpushield_shield::layout::detect(&cpushield_kernel::RealKernel) {
        for e in std::fs::read_dir(layout.root()).unwrap().flatten() {
            if e.path().is_dir() {
                out.push((e.path().display().to_string(), "directory".into()));
            }
        }
    }
    out.sort();
    out
}

/// What `tune`, `compare` and the supervisor's restore may change, read from
/// the machine: the IRQ masks and the
/// local-timer sysctls (`system_state`), the sysctls of its knobs, the workqueue
/// mask, the cpuset tree, and the idle, frequency and online files of CPU 1.
pub fn tunable_state() -> Vec<(String, String)> {
    let mut out = system_state();
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"));
    for p in [
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/proc/sys/kernel/timer_migration",
        "/sys/devices/virtual/workqueue/cpumask",
        "/sys/devices/system/cpu/online",
        "/sys/kernel/debug/sched/preempt",
        "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
    ] {
        out.push((p.into(), read(p)));
    }
    let mut dirs = vec![std::path::PathBuf::from("/sys/fs/cgroup")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() && path.components().count() < 7 {
                out.push((path.display().to_string(), "dir".into()));
                dirs.push(path);
            } else if name.starts_with("cpuset.cpus") || name == "cpuset.cpus.partition" {
                out.push((
                    path.display().to_string(),
                    read(&path.display().to_string()),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Where this machine's cpuset hierarchy is mounted (cgroup v1 or v2, from
/// /proc/self/mountinfo, as the shield finds it). Scripts get it as
/// `$CPUSET_ROOT`.
pub fn cpuset_root() -> std::path::PathBuf {
    shield_layout().root().to_path_buf()
}

fn shield_layout() -> cpushield_shield::layout::CgroupLayout {
    cpushield_shield::layout::detect(&cpushield_kernel::RealKernel)
        .expect("no cpuset hierarchy is mounted")
}

/// Asserts that neither cgroup a shield creates exists, where this machine's
/// cpuset hierarchy really is.
pub fn assert_no_shield_cgroups() {
    let layout = shield_layout();
    for dir in [layout.shield_dir(), layout.system_dir()] {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

/// Runs `script` with bash in a private PID namespace (`unshare --pid --fork
/// --mount-proc`) with `CS` set to the binary, the `envs` given and
/// `CPUSHIELD_STATE_DIR` set to `state`, and returns its stdout and stderr.
/// A script that did not print `SCENARIO-DONE` is taken to have stopped half
/// way: its namespace is gone, so `reset --namespace-gone` puts its cgroups,
/// IRQs and settings back from the same state dir.
pub fn run_scenario_in_pid_namespace(
    script: &str,
    envs: &[(&str, &std::ffi::OsStr)],
    state: &std::path::Path,
) -> String {
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "bash", "-c", script])
        .env("CS", bin())
        .env("CPUSET_ROOT", cpuset_root())
        .envs(envs.iter().copied())
        .env("CPUSHIELD_STATE_DIR", state)
        .output()
        .expect("run unshare");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !text.contains("SCENARIO-DONE") {
        let _ = Command::new(bin())
            .args(["reset", "--namespace-gone"])
            .env("CPUSHIELD_STATE_DIR", state)
            .output();
    }
    text
}

/// The report `compare` or `demo` wrote to `dir/report.json`, and the names of
/// its scenarios in order.
pub fn compare_report(dir: &std::path::Path) -> (serde_json::Value, Vec<String>) {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json written");
    let report: serde_json::Value = serde_json::from_str(&text).expect("report.json is JSON");
    let names = report["scenarios"]
        .as_array()
        .expect("a list of scenarios")
        .iter()
        .map(|s| s["name"].as_str().expect("a scenario name").to_string())
        .collect();
    (report, names)
}

/// A QEMU whose threads exist as on any VM's host (vCPU threads named by
/// `debug-threads=on`): by [`TestQemu::start`], two vCPUs stopped before
/// their first instruction (`-S`), so nothing spins; by [`TestQemu::launch`],
/// what its arguments make it. Killed on drop.
pub struct TestQemu(std::process::Child);

impl TestQemu {
    /// Starts one named `name` (`-name NAME,debug-threads=on`), stopped.
    pub fn start(name: &str) -> Self {
        Self::launch(name, 2, &["-m", "64", "-S"])
    }

    /// Starts QEMU named `name` with `smp` vCPUs and `args` besides the
    /// common ones (no devices, no display), and waits until its last
    /// vCPU's thread exists.
    pub fn launch(name: &str, smp: u32, args: &[&str]) -> Self {
        let child = std::process::Command::new("qemu-system-x86_64")
            .args(["-accel", "tcg,thread=multi", "-smp", &smp.to_string()])
            .args(args)
            .args(["-nodefaults", "-display", "none", "-monitor", "none"])
            .args(["-serial", "none", "-name"])
            .arg(format!("{name},debug-threads=on"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 runs (scripts/dev-setup.sh installs it)");
        let qemu = TestQemu(child);
        let last = format!("CPU {}/TCG", smp - 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while qemu.thread(&last).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "QEMU made no '{last}' thread"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        qemu
    }

    /// Its process ID.
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    /// Its threads: (id, name).
    pub fn threads(&self) -> Vec<(i32, String)> {
        std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .map(|dir| {
                dir.flatten()
                    .filter_map(|t| {
                        let tid = t.file_name().to_str()?.parse().ok()?;
                        let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                        Some((tid, comm.trim_end().to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The id of its thread named `comm`.
    pub fn thread(&self, comm: &str) -> Option<i32> {
        self.threads()
            .into_iter()
            .find(|(_, c)| c == comm)
            .map(|(tid, _)| tid)
    }

    /// Every thread id but the vCPUs'.
    pub fn others(&self) -> Vec<i32> {
        self.threads()
            .into_iter()
            .filter(|(_, c)| !c.starts_with("CPU "))
            .map(|(tid, _)| tid)
            .collect()
    }
}

impl Drop for TestQemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
