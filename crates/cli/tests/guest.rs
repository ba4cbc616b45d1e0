//! Real-kernel tests: each test boots a Debian kernel under QEMU (software emulation) with
//! the `cpushield` of this build and one scenario of `dev/guest/scenarios` as `/init`, and
//! passes when the guest reports no failed check (see docs/TESTING.md).
//!
//! The tests are the scenario files themselves: a file with the header
//! `# guest-test: NAME` is the test `guest_NAME::on_KERNEL`, once for each kernel it runs on
//! (its `# guest-kernels:` header, default every kernel of dev/guest/kernels.sh), e.g.
//! `guest_cgroup_v2_shield_follows_rule_enforces_and_resets_exactly::on_6_12_rt`. Adding a
//! scenario file with that header adds its tests; nothing here names a scenario.
//!
//! Guests boot side by side, as many at once as test threads (`--test-threads`, else
//! `GUEST_JOBS`, else one per host CPU), the costliest first (`# guest-cost:`, the seconds a
//! scenario takes alone), so that the long ones do not finish last. Each guest is its own
//! QEMU with its own console log; nothing is shared between two at once but the read-only
//! kernels and initramfs (dev/guest/README.md says how they are packed).
//!
//! Without `qemu-system-x86_64` or when the kernel package cannot be downloaded the tests
//! print `skipped: ...` and are reported as ignored, unless `CPUSHIELD_GUEST=1` (set by CI) makes that a
//! failure. `CPUSHIELD_GUEST=0` reports them as ignored without booting anything.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Where a scenario without a `# guest-cost:` header is placed in the order: among the
/// short ones, which most scenarios are.
const DEFAULT_COST_SECONDS: u64 = 30;

/// The repository root (two levels above this crate).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

/// One guest test: a scenario booted on one kernel by its runner script.
#[derive(Clone, Debug)]
struct GuestTest {
    /// `guest_NAME::on_KERNEL`.
    name: String,
    /// The scenario file's name without `.sh`.
    scenario: String,
    /// A kernel name of dev/guest/kernels.sh.
    kernel: String,
    /// The script of dev/guest that boots it: `run.sh SCENARIO`, or a script of its own
    /// (`# guest-runner:`) run without arguments.
    runner: String,
    /// About how many seconds it takes alone (`# guest-cost:`).
    cost: u64,
}

/// The value of the first `# KEY: value` line of a scenario file.
fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        line.strip_prefix("# ")
            .and_then(|rest| rest.strip_prefix(key))
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// The kernels of dev/guest/kernels.sh (its `GUEST_KERNELS="..."` line).
fn all_kernels(root: &Path) -> Result<Vec<String>, String> {
    let path = root.join("dev/guest/kernels.sh");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("GUEST_KERNELS="))
        .map(|list| {
            list.trim_matches('"')
                .split_whitespace()
                .map(String::from)
                .collect()
        })
        .ok_or_else(|| format!("{}: no GUEST_KERNELS= line", path.display()))
}

/// `6.12-rt` → `on_6_12_rt`.
fn kernel_test_name(kernel: &str) -> String {
    format!("on_{}", kernel.replace(['.', '-'], "_"))
}

/// Every guest test the scenario files declare, costliest first (then by name, so that
/// the order is the same on every run).
fn discover(root: &Path) -> Result<Vec<GuestTest>, String> {
    let kernels = all_kernels(root)?;
    let dir = root.join("dev/guest/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "sh"))
        .collect();
    files.sort();
    let mut tests = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let Some(test) = header(&text, "guest-test") else {
            continue;
        };
        let scenario = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| format!("{}: not a UTF-8 name", path.display()))?
            .to_string();
        if test.is_empty() || !test.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{}: guest-test: a Rust-style test name (letters, digits, _), got '{test}'",
                path.display()
            ));
        }
        let on: Vec<String> = match header(&text, "guest-kernels") {
            Some(list) => list.split_whitespace().map(String::from).collect(),
            None => kernels.clone(),
        };
        if let Some(unknown) = on.iter().find(|k| !kernels.contains(k)) {
            return Err(format!(
                "{}: guest-kernels names '{unknown}', not a kernel of dev/guest/kernels.sh ({})",
                path.display(),
                kernels.join(" ")
            ));
        }
        let cost = match header(&text, "guest-cost") {
            Some(value) => value.parse().map_err(|_| {
                format!(
                    "{}: guest-cost: whole seconds, got '{value}'",
                    path.display()
                )
            })?,
            None => DEFAULT_COST_SECONDS,
        };
        let runner = header(&text, "guest-runner")
            .unwrap_or("run.sh")
            .to_string();
        if !root.join("dev/guest").join(&runner).is_file() {
            return Err(format!(
                "{}: guest-runner: no script dev/guest/{runner}",
                path.display()
            ));
        }
        for kernel in on {
            tests.push(GuestTest {
                name: format!("guest_{test}::{}", kernel_test_name(&kernel)),
                scenario: scenario.clone(),
                kernel,
                runner: runner.clone(),
                cost,
            });
        }
    }
    tests.sort_by(|a, b| b.cost.cmp(&a.cost).then_with(|| a.name.cmp(&b.name)));
    Ok(tests)
}

/// What the preparation step found: ready to boot, or why the tests must be skipped.
enum Setup {
    Ready,
    Unavailable(String),
}

fn guest_required() -> bool {
    std::env::var("CPUSHIELD_GUEST").is_ok_and(|v| v == "1")
}

fn guest_disabled() -> bool {
    std::env::var("CPUSHIELD_GUEST").is_ok_and(|v| v == "0")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Fetches the kernels and packs this build's binary into the initramfs, once per run:
/// the first test to start does it while the others wait.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        if !on_path("qemu-system-x86_64") {
            return Setup::Unavailable(
                "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)".into(),
            );
        }
        let root = repo_root();
        let kernel = Command::new(root.join("dev/guest/fetch-kernel.sh"))
            .arg("--all")
            .output()
            .expect("run dev/guest/fetch-kernel.sh");
        if !kernel.status.success() {
            return Setup::Unavailable(format!(
                "the guest kernel could not be fetched: {}",
                String::from_utf8_lossy(&kernel.stderr).trim()
            ));
        }
        // The binary cargo built for these tests, so that no second build is needed. A
        // failure to pack it is a real failure, not a reason to skip.
        let initramfs = Command::new(root.join("dev/guest/build-initramfs.sh"))
            .env("GUEST_CPUSHIELD", env!("CARGO_BIN_EXE_cpushield"))
            .output()
            .expect("run dev/guest/build-initramfs.sh");
        assert!(
            initramfs.status.success(),
            "dev/guest/build-initramfs.sh failed:\n{}",
            String::from_utf8_lossy(&initramfs.stderr)
        );
        Setup::Ready
    })
}

/// Boots `test` and fails with the guest's failed checks, or is ignored, saying why, when
/// this machine cannot boot guests and CPUSHIELD_GUEST=1 does not require them.
fn run_guest(test: &GuestTest) -> Result<Completion, Failed> {
    match setup() {
        Setup::Unavailable(why) if guest_required() => {
            return Err(format!(
                "guest test {} cannot run and CPUSHIELD_GUEST=1: {why}",
                test.name
            )
            .into())
        }
        Setup::Unavailable(why) => {
            eprintln!("skipped: guest test {}: {why}", test.name);
            return Ok(Completion::ignored_with(why.clone()));
        }
        Setup::Ready => {}
    }
    let root = repo_root();
    let script = root.join("dev/guest").join(&test.runner);
    let mut command = Command::new(&script);
    if test.runner == "run.sh" {
        command.arg(&test.scenario);
    }
    let output = command
        .env("GUEST_KERNEL", &test.kernel)
        .env("GUEST_NO_BUILD", "1")
        .env("GUEST_QUIET", "1")
        .env("GUEST_HOST_CPUSHIELD", env!("CARGO_BIN_EXE_cpushield"))
        .output()
        .map_err(|e| format!("run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        // The runner's closing line per boot: wall and host CPU time, for the packing.
        for line in stderr.lines().filter(|l| l.contains(": ok, ")) {
            eprintln!("{line}");
        }
        return Ok(Completion::Completed);
    }
    let failures: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|line| line.contains("GUEST-FAIL") || line.starts_with("run"))
        .collect();
    Err(format!(
        "guest scenario {} on {} failed ({}):\n{}",
        test.scenario,
        test.kernel,
        output.status,
        failures.join("\n")
    )
    .into())
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = std::env::var("GUEST_JOBS")
            .ok()
            .and_then(|v| v.parse().ok());
    }
    let tests = match discover(&repo_root()) {
        Ok(tests) => tests,
        Err(why) => {
            eprintln!("guest tests: {why}");
            return ExitCode::FAILURE;
        }
    };
    // CPUSHIELD_GUEST=0: listed as ignored, so that a run that leaves them out says so.
    let disabled = guest_disabled();
    let trials = tests
        .into_iter()
        .map(|test| {
            Trial::ignorable_test(test.name.clone(), move || run_guest(&test))
                .with_ignored_flag(disabled)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
