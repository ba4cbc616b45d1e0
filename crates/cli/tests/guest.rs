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
//! The tests chosen (by the filter) are planned into boots before any starts:
//! - scenarios marked `# guest-boot: shared`, which leave the machine as they found it,
//!   share one boot with others of the same kernel and boot headers (`dev/guest/run.sh
//!   A,B,C`), up to about `GUEST_BATCH_COST` seconds of `# guest-cost` a boot (default 90;
//!   0 boots every scenario alone). Each is still its own test, passed or failed by its own
//!   part of the console. A scenario the batch did not reach (the guest died, or the one
//!   before left the machine changed) is booted again with the rest, so none is hidden;
//! - every other scenario boots alone.
//!
//! Boots run side by side, `--test-threads` at once (else `GUEST_JOBS`, else one per host
//! CPU: two on the 2-CPU CI machine), the costliest first, so that the long ones do not
//! finish last. A scenario with `# guest-exclusive: WHY` (timing it measures, or the host
//! pinning or stalling QEMU's threads) boots with no other guest beside it: such boots run
//! first, one at a time. Each guest is its own QEMU with its own console log; nothing is
//! shared between two at once but the read-only kernels and initramfs.
//!
//! Without `qemu-system-x86_64` or when the kernel package cannot be downloaded the tests
//! print `skipped: ...` and are reported as ignored, unless `CPUSHIELD_GUEST=1` (set by CI) makes that a
//! failure. `CPUSHIELD_GUEST=0` reports them as ignored without booting anything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Condvar, Mutex, OnceLock};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Where a scenario without a `# guest-cost:` header is placed in the order: among the
/// short ones, which most scenarios are.
const DEFAULT_COST_SECONDS: u64 = 30;

/// How many seconds of `# guest-cost` one shared boot takes at most, unless
/// `GUEST_BATCH_COST` says otherwise: a boot saved is some 5 s, and boots of a minute or so
/// keep two guests at once busy to the end.
const DEFAULT_BATCH_COST_SECONDS: u64 = 90;

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
    /// Why it boots with no other guest beside it (`# guest-exclusive:`).
    exclusive: Option<String>,
    /// The boot headers of a scenario that may share its boot (`# guest-boot: shared`):
    /// those of one kernel with the same key share one.
    boot: Option<String>,
    /// Shares a boot only as its last scenario (`# guest-boot: shared-last`): it leaves
    /// what it set up itself (an IRQ it moved, a cgroup it made), which would end the boot
    /// anywhere else.
    last: bool,
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

/// The cgroup hierarchy a scenario's guest mounts: its last `GUEST_CGROUP=` line (run-v1.sh
/// sources run.sh's scenario, then sets v1), else v2, as dev/guest/run.sh reads it.
fn cgroup_of(text: &str) -> &str {
    text.lines()
        .filter_map(|line| line.strip_prefix("GUEST_CGROUP="))
        .next_back()
        .map_or("v2", str::trim)
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
        let exclusive = header(&text, "guest-exclusive").map(String::from);
        if exclusive.as_deref() == Some("") {
            return Err(format!(
                "{}: guest-exclusive: say why it must boot alone",
                path.display()
            ));
        }
        let (shared, last) = match header(&text, "guest-boot") {
            None | Some("own") => (false, false),
            Some("shared") => (true, false),
            Some("shared-last") => (true, true),
            Some(other) => {
                return Err(format!(
                    "{}: guest-boot: shared, shared-last or own, got '{other}'",
                    path.display()
                ))
            }
        };
        // What shapes the boot: scenarios share one only when all of it is the same. The
        // host taking part (net, stall) or a runner of its own keeps a scenario alone.
        let boot = (shared
            && runner == "run.sh"
            && exclusive.is_none()
            && header(&text, "guest-net").is_none()
            && header(&text, "guest-stall").is_none())
        .then(|| {
            let mut key: Vec<String> = [
                "guest-mem",
                "guest-smp",
                "guest-cpu",
                "guest-tcg",
                "guest-append",
            ]
            .iter()
            .map(|k| format!("{k}={}", header(&text, k).unwrap_or("")))
            .collect();
            key.push(format!("cgroup={}", cgroup_of(&text)));
            key.join(" ")
        });
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
                exclusive: exclusive.clone(),
                boot: boot.clone(),
                last,
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

/// One boot (or, for a runner of its own, one run of it): the tests it runs.
#[derive(Debug)]
struct Unit {
    /// Indices into the plan's tests, in the order the guest runs them.
    members: Vec<usize>,
    /// The sum of the members' costs.
    cost: u64,
    /// Boots with no other guest beside it.
    exclusive: bool,
}

/// What each test's trial waits for: its outcome, once its boot has ended.
type Outcome = Result<(), String>;

/// A test a boot did not reach, and why.
type NotRun<'a> = (&'a GuestTest, String);

/// The boots of the chosen tests and their progress, shared by the trials and the guest
/// slots that run the boots.
struct Plan {
    tests: Vec<GuestTest>,
    /// How many guests at once.
    jobs: usize,
    state: Mutex<Progress>,
    changed: Condvar,
}

struct Progress {
    /// Boots not started, in the order they start: the exclusive ones, then the costliest.
    queue: Vec<Unit>,
    running: usize,
    exclusive_running: bool,
    /// By test name.
    outcomes: HashMap<String, Outcome>,
}

/// Groups the chosen tests into boots: the shared ones by kernel and boot headers, in
/// boots of up to `batch_cost` seconds (0: none shared), every other test alone.
fn plan_units(tests: &[GuestTest], chosen: &[usize], batch_cost: u64) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut groups: Vec<((String, String), Vec<usize>)> = Vec::new();
    for &i in chosen {
        let test = &tests[i];
        match &test.boot {
            Some(key) if batch_cost > 0 => {
                let key = (test.kernel.clone(), key.clone());
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((key, vec![i])),
                }
            }
            _ => units.push(Unit {
                members: vec![i],
                cost: test.cost,
                exclusive: test.exclusive.is_some(),
            }),
        }
    }
    for (_, members) in groups {
        let (lasts, members): (Vec<usize>, Vec<usize>) =
            members.into_iter().partition(|&i| tests[i].last);
        let mut batches: Vec<Unit> = Vec::new();
        // `chosen` is costliest first: each boot takes the costliest left, then fills up
        // with the cheapest that fit, so that boots come out of about the same length.
        let mut left: std::collections::VecDeque<usize> = members.into();
        while let Some(first) = left.pop_front() {
            let mut unit = Unit {
                members: vec![first],
                cost: tests[first].cost,
                exclusive: false,
            };
            while let Some(&next) = left.back() {
                if unit.cost + tests[next].cost > batch_cost {
                    break;
                }
                unit.cost += tests[next].cost;
                unit.members.push(next);
                left.pop_back();
            }
            batches.push(unit);
        }
        // Each boot takes at most one scenario that must come last: the costliest to the
        // shortest boot.
        let mut ended = vec![false; batches.len()];
        for i in lasts {
            let shortest = (0..batches.len())
                .filter(|&b| !ended[b] && batches[b].cost + tests[i].cost <= batch_cost * 3 / 2)
                .min_by_key(|&b| batches[b].cost);
            match shortest {
                Some(b) => {
                    batches[b].members.push(i);
                    batches[b].cost += tests[i].cost;
                    ended[b] = true;
                }
                None => {
                    batches.push(Unit {
                        members: vec![i],
                        cost: tests[i].cost,
                        exclusive: false,
                    });
                    ended.push(true);
                }
            }
        }
        units.extend(batches);
    }
    units.sort_by(|a, b| {
        b.exclusive
            .cmp(&a.exclusive)
            .then(b.cost.cmp(&a.cost))
            .then_with(|| tests[a.members[0]].name.cmp(&tests[b.members[0]].name))
    });
    units
}

/// The plan, made in main before the trials run.
static PLAN: OnceLock<Plan> = OnceLock::new();

/// Starts `jobs` guest slots, once: each takes the next boot the queue allows and runs it.
fn start_slots(plan: &'static Plan) {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        for _ in 0..plan.jobs {
            std::thread::spawn(move || {
                while let Some(unit) = next_unit(plan) {
                    let exclusive = unit.exclusive;
                    // A panic here would leave the unit's trials waiting for ever.
                    let outcomes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_unit(&plan.tests, &unit)
                    }))
                    .unwrap_or_else(|_| {
                        unit.members
                            .iter()
                            .map(|&i| {
                                (
                                    plan.tests[i].name.clone(),
                                    Err("the guest slot running its boot panicked".to_string()),
                                )
                            })
                            .collect()
                    });
                    let mut state = plan.state.lock().expect("plan lock");
                    state.running -= 1;
                    if exclusive {
                        state.exclusive_running = false;
                    }
                    state.outcomes.extend(outcomes);
                    plan.changed.notify_all();
                }
            });
        }
    });
}

/// The next boot to run, once it may start: an exclusive one when no other guest runs,
/// another when no exclusive one runs. None when every boot has started.
fn next_unit(plan: &Plan) -> Option<Unit> {
    let mut state = plan.state.lock().expect("plan lock");
    loop {
        let head = state.queue.first()?;
        let may = if head.exclusive {
            state.running == 0
        } else {
            !state.exclusive_running
        };
        if may {
            let unit = state.queue.remove(0);
            state.running += 1;
            state.exclusive_running = unit.exclusive;
            return Some(unit);
        }
        state = plan.changed.wait(state).expect("plan lock");
    }
}

/// Boots `unit` until each of its tests has an outcome: the scenarios a batch did not
/// reach are booted again, together, as long as each boot settles at least one.
fn run_unit(tests: &[GuestTest], unit: &Unit) -> Vec<(String, Outcome)> {
    let mut outcomes = Vec::new();
    let mut left: Vec<&GuestTest> = unit.members.iter().map(|&i| &tests[i]).collect();
    while !left.is_empty() {
        let (settled, not_run) = boot(&left);
        let progress = !settled.is_empty();
        outcomes.extend(settled);
        if !progress {
            for (test, why) in not_run {
                outcomes.push((
                    test.name.clone(),
                    Err(format!(
                        "guest scenario {} on {} was not run: {why}",
                        test.scenario, test.kernel
                    )),
                ));
            }
            break;
        }
        left = not_run.into_iter().map(|(test, _)| test).collect();
    }
    outcomes
}

/// Boots `tests` (one, or several sharing one boot) with their runner; returns the outcome
/// of each test the boot settled and, with why, those it did not run.
fn boot<'a>(tests: &[&'a GuestTest]) -> (Vec<(String, Outcome)>, Vec<NotRun<'a>>) {
    let first = tests[0];
    let root = repo_root();
    let script = root.join("dev/guest").join(&first.runner);
    let mut command = Command::new(&script);
    if first.runner == "run.sh" {
        let list: Vec<&str> = tests.iter().map(|t| t.scenario.as_str()).collect();
        command.arg(list.join(","));
    }
    let output = match command
        .env("GUEST_KERNEL", &first.kernel)
        .env("GUEST_NO_BUILD", "1")
        .env("GUEST_QUIET", "1")
        .env("GUEST_HOST_CPUSHIELD", env!("CARGO_BIN_EXE_cpushield"))
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            let why = format!("run {}: {e}", script.display());
            return (
                tests
                    .iter()
                    .map(|t| (t.name.clone(), Err(why.clone())))
                    .collect(),
                Vec::new(),
            );
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if first.runner != "run.sh" {
        // A runner of its own runs one test; its exit status is the verdict.
        let outcome = if output.status.success() {
            for line in stderr.lines().filter(|l| l.contains(": ok, ")) {
                eprintln!("{line}");
            }
            Ok(())
        } else {
            let failures: Vec<&str> = stdout
                .lines()
                .chain(stderr.lines())
                .filter(|line| line.contains("GUEST-FAIL") || line.starts_with("run"))
                .collect();
            Err(format!(
                "guest scenario {} on {} failed ({}):\n{}",
                first.scenario,
                first.kernel,
                output.status,
                failures.join("\n")
            ))
        };
        return (vec![(first.name.clone(), outcome)], Vec::new());
    }
    let mut settled = Vec::new();
    let mut not_run = Vec::new();
    for test in tests {
        match verdict(&stderr, &test.scenario, &test.kernel) {
            Some(Verdict::Ok(line)) => {
                eprintln!("{line}");
                settled.push((test.name.clone(), Ok(())));
            }
            Some(Verdict::Failed(lines)) => settled.push((
                test.name.clone(),
                Err(format!(
                    "guest scenario {} on {} failed ({}):\n{lines}",
                    test.scenario, test.kernel, output.status
                )),
            )),
            Some(Verdict::NotRun(why)) => {
                eprintln!(
                    "guest scenario {} on {}: not run in this boot, booted again: {why}",
                    test.scenario, test.kernel
                );
                not_run.push((*test, why));
            }
            None => {
                let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("run")).collect();
                settled.push((
                    test.name.clone(),
                    Err(format!(
                        "guest scenario {} on {}: dev/guest/run.sh said nothing of it ({}):\n{}",
                        test.scenario,
                        test.kernel,
                        output.status,
                        lines.join("\n")
                    )),
                ));
            }
        }
    }
    (settled, not_run)
}

/// What run.sh's closing lines say of one scenario.
enum Verdict {
    /// Its `ok` line.
    Ok(String),
    /// Its `FAILED` line and the lines run.sh printed after it (its failed checks, the
    /// console's last lines).
    Failed(String),
    /// Why it did not run.
    NotRun(String),
}

/// The verdict of `scenario` on `kernel` in run.sh's stderr (see dev/guest/run.sh).
fn verdict(stderr: &str, scenario: &str, kernel: &str) -> Option<Verdict> {
    let prefix = format!("run.sh: {scenario} on {kernel}: ");
    let mut lines = stderr.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        if rest.starts_with("ok, ") {
            return Some(Verdict::Ok(line.to_string()));
        }
        if let Some(why) = rest.strip_prefix("NOT RUN: ") {
            return Some(Verdict::NotRun(why.to_string()));
        }
        if rest.starts_with("FAILED") {
            // Up to the next scenario's verdict.
            let after = lines
                .take_while(|l| !is_verdict(l))
                .collect::<Vec<_>>()
                .join("\n");
            return Some(Verdict::Failed(format!("{line}\n{after}")));
        }
    }
    None
}

/// A closing line of run.sh: `run.sh: NAME on KERNEL: ok|FAILED|NOT RUN...`.
fn is_verdict(line: &str) -> bool {
    line.strip_prefix("run.sh: ")
        .and_then(|rest| rest.split_once(": "))
        .is_some_and(|(who, what)| {
            who.contains(" on ")
                && (what.starts_with("ok, ")
                    || what.starts_with("FAILED")
                    || what.starts_with("NOT RUN: "))
        })
}

/// Waits for `test`'s boot and fails with the guest's failed checks, or is ignored, saying
/// why, when this machine cannot boot guests and CPUSHIELD_GUEST=1 does not require them.
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
    let plan = PLAN.get().expect("the plan is made before the trials run");
    start_slots(plan);
    let mut state = plan.state.lock().expect("plan lock");
    loop {
        if let Some(outcome) = state.outcomes.remove(&test.name) {
            return outcome
                .map(|()| Completion::Completed)
                .map_err(Failed::from);
        }
        state = plan.changed.wait(state).expect("plan lock");
    }
}

/// A whole number from the environment, if set and one.
fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    let tests = match discover(&repo_root()) {
        Ok(tests) => tests,
        Err(why) => {
            eprintln!("guest tests: {why}");
            return ExitCode::FAILURE;
        }
    };
    // CPUSHIELD_GUEST=0: listed as ignored, so that a run that leaves them out says so.
    let disabled = guest_disabled();
    let trials: Vec<Trial> = tests
        .iter()
        .cloned()
        .map(|test| {
            Trial::ignorable_test(test.name.clone(), move || run_guest(&test))
                .with_ignored_flag(disabled)
        })
        .collect();
    // The tests this run will run: the plan boots those alone.
    let chosen: Vec<usize> = trials
        .iter()
        .enumerate()
        .filter(|(_, trial)| !args.is_filtered_out(trial) && !args.is_ignored(trial))
        .map(|(i, _)| i)
        .collect();
    let jobs = args
        .test_threads
        .or_else(|| env_number("GUEST_JOBS").map(|n| n as usize))
        .or_else(|| std::thread::available_parallelism().ok().map(Into::into))
        .unwrap_or(1)
        .max(1);
    let batch_cost = env_number("GUEST_BATCH_COST").unwrap_or(DEFAULT_BATCH_COST_SECONDS);
    let queue = plan_units(&tests, &chosen, batch_cost);
    if !args.list && !queue.is_empty() {
        eprintln!(
            "guest tests: {} tests in {} boots, {jobs} at once:",
            chosen.len(),
            queue.len()
        );
        for unit in &queue {
            let names: Vec<&str> = unit
                .members
                .iter()
                .map(|&i| tests[i].scenario.as_str())
                .collect();
            eprintln!(
                "  {} on {}, cost {} s{}",
                names.join(","),
                tests[unit.members[0]].kernel,
                unit.cost,
                if unit.exclusive { ", alone" } else { "" }
            );
        }
    }
    let _ = PLAN.set(Plan {
        tests,
        jobs,
        state: Mutex::new(Progress {
            queue,
            running: 0,
            exclusive_running: false,
            outcomes: HashMap::new(),
        }),
        changed: Condvar::new(),
    });
    // Every trial waits at once for its boot, which the guest slots above run: the number
    // of guests at once is theirs, not libtest's.
    args.test_threads = Some(chosen.len().max(1));
    libtest_mimic::run(&args, trials).exit_code()
}
