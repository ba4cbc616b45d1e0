//! What `cpushield compare` and `cpushield demo` do around the runner and
//! say besides the report: the checks of what they were asked, a load
//! refused with the remedies that command has, the progress line, the
//! signals that end a run early, the host side's blame, the answer on
//! stdout, the report written, and the shielded scenarios over
//! `--max-latency`.

use crate::experiment::{CompareConfig, CompareError, Progress};
use crate::{runner, Lab};
use cpushield_cpuset::fmt_ns;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_load::LoadError;
use cpushield_report::table;
use cpushield_report::CompareReport;
use cpushield_rt::reserve::{CpuUse, ReserveDir};
use cpushield_vm::blame::HostSide;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Checks what `compare` or `demo` was asked besides `config`'s load, before
/// any work: the host side's port (`--host-channel`: an existing port or
/// `none`), the probe's period, and the report directory (`out`, else
/// ./cpushield-report-<time>/), which must be writable, since a run whose
/// report cannot be written is lost. Returns the report directory.
pub fn check_request(
    config: &CompareConfig,
    out: Option<PathBuf>,
    host_channel: Option<&Path>,
) -> Result<PathBuf, CompareError> {
    if let Some(p) = host_channel {
        cpushield_vm::blame::check_channel_arg(p).map_err(CompareError::Refused)?;
    }
    config.period.validate().map_err(CompareError::Refused)?;
    let out = out.unwrap_or_else(|| cpushield_report::output::default_dir("cpushield-report"));
    cpushield_report::output::check_dir(&out, "--out")
        .map_err(|e| CompareError::Refused(e.to_string()))?;
    Ok(out)
}

/// The demo's first words, wrapped to `width`: what it runs, for how long
/// each, and that nothing outside its private PID namespace is moved.
pub fn demo_intro(config: &CompareConfig, width: Option<usize>) -> Vec<String> {
    table::wrap(
        &format!(
            "cpushield demo: idle, loaded and shielded scenarios, {} s each, inside a private PID namespace (nothing outside it is moved; IRQs are moved and restored)",
            config.duration.as_secs()
        ),
        width,
        "",
        "  ",
    )
}

/// The experiment of `config` on `host` from start to end, as `compare` and
/// `demo` run it (in the process that may be a private namespace's init):
/// SIGINT and SIGTERM end it early with what was measured; the host side
/// is asked over `host_channel` (see [`run_with_host_side`]); `answer` is
/// given the report and what the host side said, to print before the
/// report is written to `out`; then what [`conclude`] says.
pub fn run_to_end(
    host: &Host,
    config: &CompareConfig,
    out: &Path,
    max_latency: Option<Duration>,
    host_channel: Option<&Path>,
    progress: &mut dyn FnMut(Progress),
    answer: &mut dyn FnMut(&CompareReport, &[String]),
) -> Result<Conclusion, CompareError> {
    let stop = cpushield_measure::signal::stop_on_signals()
        .map_err(|e| CompareError::Refused(format!("installing signal handlers: {e}")))?;
    let (report, host_lines) = run_with_host_side(host, config, host_channel, stop, progress)?;
    answer(&report, &host_lines);
    let interrupted = stop.load(Ordering::Relaxed);
    Ok(conclude(&report, out, max_latency, interrupted))
}

/// What `command` (`compare` or `demo`) does on `host` before the experiment
/// of `config`: the preflight (a load that cannot start is refused with the
/// remedies the command has), the reservation check of the measured CPUs in
/// `reserved`, and this process moved off them, so that the one that runs
/// the experiment (forked from it) and everything they start keep off them;
/// the probes' threads place themselves there (not being able to move only
/// costs some noise). `say` is told the default load's name when it lacks
/// `compile`. Returns the measured CPUs.
pub fn prepare(
    host: &Host,
    config: &CompareConfig,
    command: &str,
    reserved: &ReserveDir,
    say: &mut dyn FnMut(&str),
) -> Result<CpuSet, CompareError> {
    let cpus = match runner::preflight(&Lab::real(host), config) {
        Ok(cpus) => cpus,
        Err(CompareError::Load(e)) => {
            return Err(CompareError::Refused(load_refusal(
                command,
                &config.load_name,
                &e,
            )))
        }
        Err(e) => return Err(e),
    };
    if config.load_name.contains("no C compiler") && config.scenarios.iter().any(|s| s.loaded()) {
        say(&format!("the default load: {}", config.load_name));
    }
    let pid = std::process::id() as i32;
    if let Err(e) = reserved.guard(&cpus, pid, CpuUse::Place) {
        return Err(CompareError::Refused(format!("{command}: {e}")));
    }
    if let Ok(Some(housekeeping)) = runner::housekeeping(host.kernel(), config, &cpus) {
        let _ = host.kernel().set_affinity(0, &housekeeping);
    }
    Ok(cpus)
}

/// A load that cannot start, in one line with a remedy that `command`
/// (`compare` or `demo`) has: `demo` has no --dir, and neither has --size
/// or --scale (`cpushield load`'s); both have --load. `load_name` is what
/// was asked for.
pub fn load_refusal(command: &str, load_name: &str, e: &LoadError) -> String {
    let demo = command == "demo";
    match e {
        LoadError::BadDir { dir, reason } => {
            let d = dir.display();
            if demo {
                format!(
                    "{d}: {reason}: the demo's load writes its files there; create it (mkdir -m 1777 {d}), or run `cpushield compare --dir DIR` with a writable DIR"
                )
            } else {
                let other = if dir == Path::new("/tmp") {
                    "/var/tmp"
                } else {
                    "/tmp"
                };
                format!(
                    "--dir {d}: {reason}; create it (mkdir -m 1777 {d}), or name another directory for the load's files, e.g. --dir {other}"
                )
            }
        }
        LoadError::NoSpace {
            dir,
            need_mib,
            free_mib,
        } => {
            let d = dir.display();
            if demo {
                format!(
                    "{d}: the demo's load needs {need_mib} MiB there but only {free_mib} MiB are free; free {} MiB in {d}, or run `cpushield compare --dir DIR` with a DIR that has {need_mib} MiB free, or a load that writes no files (e.g. --load ttcp,fpu,crashme)",
                    need_mib.saturating_sub(*free_mib)
                )
            } else {
                format!(
                    "--dir {d}: the load ({load_name}) needs {need_mib} MiB there but only {free_mib} MiB are free; free {} MiB in {d}, or name a directory with {need_mib} MiB free (--dir), or a load that writes no files (e.g. --load ttcp,fpu,crashme)",
                    need_mib.saturating_sub(*free_mib)
                )
            }
        }
        LoadError::ToolMissing { workload, tool, .. } => {
            let rest: Vec<&str> = cpushield_load::request::workload_names(load_name)
                .into_iter()
                .filter(|w| w != workload)
                .collect();
            if rest.is_empty() {
                format!("the load's workload '{workload}' needs {tool}, which is not in PATH: install it")
            } else {
                format!(
                    "--load {load_name}: its workload '{workload}' needs {tool}, which is not in PATH: install it, or run the others: --load {}",
                    rest.join(",")
                )
            }
        }
        other => format!("load: {other}"),
    }
}

impl Progress {
    /// What a progress bar says: the scenario, which of how many, the phase,
    /// and the worst latency so far.
    pub fn message(&self) -> String {
        format!(
            "scenario {}/{} {}: {}, max {}",
            self.index + 1,
            self.total,
            self.scenario,
            self.phase,
            fmt_ns(self.max_ns)
        )
    }

    /// How much of the whole experiment is done, 0 to 1: the scenarios
    /// finished and the fraction of the one under way.
    pub fn done(&self) -> f64 {
        (self.index as f64 + self.fraction) / self.total.max(1) as f64
    }
}

/// The shielded scenarios of `report` whose worst latency is above
/// `limit_ns`, as `shielded (41 us), ...`; None when none is.
pub fn over_limit(report: &CompareReport, limit_ns: u64) -> Option<String> {
    let over: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.shielded && s.latency.max_ns > limit_ns)
        .map(|s| format!("{} ({})", s.name, fmt_ns(s.latency.max_ns)))
        .collect();
    (!over.is_empty()).then(|| over.join(", "))
}

/// Runs the experiment of `config` on `host` while the host side (`cpushield
/// vm watch`, asked over `host_channel` or the port found) is collected:
/// one that dies halfway still leaves what it said before. Returns the
/// report with the host side's blame in it, and the lines it said.
pub fn run_with_host_side(
    host: &Host,
    config: &CompareConfig,
    host_channel: Option<&Path>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(CompareReport, Vec<String>), CompareError> {
    let host_side = HostSide::start(host.kernel(), host_channel);
    let mut report = runner::run(&Lab::real(host), config, stop, progress)?;
    let host_lines = host_side.blame(&mut report);
    Ok((report, host_lines))
}

/// How the answer is laid out on stdout.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// Every table after the answer.
    pub verbose: bool,
    /// The terminal's width; None when stdout is not a terminal: a pipe or
    /// a file gets each paragraph on one line, for grep, and a terminal
    /// showing it later wraps it itself.
    pub width: Option<usize>,
    /// Lines printed before the answer (the demo's first line).
    pub lines_before: usize,
}

/// The answer to print once the experiment is done: the answer (every table
/// when verbose, else what fits the screen after `view.lines_before`), then
/// what the host side said.
pub fn answer(report: &CompareReport, host_lines: &[String], view: View) -> String {
    let mut out = if view.verbose {
        table::render(report, view.width)
    } else {
        let budget = table::ANSWER_LINES.saturating_sub(view.lines_before);
        table::answer(report, view.width, Some(budget))
    };
    for line in host_lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// How a finished experiment ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The report is written and nothing was over the limit.
    Done,
    /// The report could not be written.
    Failed,
    /// A shielded scenario was over `--max-latency`.
    OverLimit,
}

/// What a finished experiment says after its answer, and how it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    /// For stdout: where the report is.
    pub stdout: String,
    /// For stderr, one line each, without the program's name.
    pub stderr: Vec<String>,
    /// How it ends.
    pub ending: Ending,
}

/// Writes `report` to `out` and says where; says when the run was
/// `interrupted` and which shielded scenarios were over `max_latency`.
pub fn conclude(
    report: &CompareReport,
    out: &Path,
    max_latency: Option<Duration>,
    interrupted: bool,
) -> Conclusion {
    let mut c = Conclusion {
        stdout: String::new(),
        stderr: Vec::new(),
        ending: Ending::Done,
    };
    if let Err(e) = cpushield_report::write_all(report, out) {
        c.stderr.push(format!(
            "error: writing the report to {}: {e}",
            out.display()
        ));
        c.ending = Ending::Failed;
        return c;
    }
    let _ = writeln!(
        c.stdout,
        "report: {}/report.html (and report.json, latency.svg/png, determinism.svg/png)",
        out.display()
    );
    if interrupted {
        c.stderr.push("interrupted: the report holds what was measured; the shield was reset and the load stopped".into());
    }
    let limit_ns = max_latency.map(|l| l.as_nanos() as u64);
    if let Some((limit_ns, over)) =
        limit_ns.and_then(|l| over_limit(report, l).map(|over| (l, over)))
    {
        c.stderr.push(format!(
            "--max-latency {} exceeded in {over}",
            fmt_ns(limit_ns)
        ));
        c.ending = Ending::OverLimit;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    #[test]
    fn a_missing_load_directory_is_refused_without_suggesting_it_or_an_option_the_command_lacks() {
        let e = LoadError::BadDir {
            dir: "/var/tmp".into(),
            reason: "does not exist".into(),
        };
        let compare = load_refusal("compare", "stress-kernel", &e);
        assert!(!compare.contains("e.g. --dir /var/tmp"), "{compare}");
        assert!(compare.contains("e.g. --dir /tmp"), "{compare}");
        assert!(compare.contains("mkdir -m 1777 /var/tmp"), "{compare}");
        assert_eq!(compare.matches("does not exist").count(), 1, "{compare}");
        let demo = load_refusal("demo", "stress-kernel", &e);
        assert!(!demo.starts_with("--dir"), "{demo}");
        assert!(demo.contains("cpushield compare --dir DIR"), "{demo}");
        for m in [compare, demo] {
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn too_little_disk_is_refused_with_remedies_compare_and_demo_have() {
        let e = LoadError::NoSpace {
            dir: "/var/tmp".into(),
            need_mib: 1093,
            free_mib: 64,
        };
        for command in ["compare", "demo"] {
            let m = load_refusal(command, "stress-kernel", &e);
            for absent in ["--size", "--scale", "lower"] {
                assert!(!m.contains(absent), "{command}: {m}");
            }
            assert!(m.contains("1093 MiB") && m.contains("64 MiB"), "{m}");
            assert!(m.contains("free 1029 MiB in /var/tmp"), "{m}");
        }
        let demo = load_refusal("demo", "stress-kernel", &e);
        assert!(
            demo.contains("--load ttcp,fpu,crashme"),
            "demo takes --load: {demo}"
        );
    }

    #[test]
    fn a_missing_compiler_for_a_named_profile_offers_its_other_workloads_not_leaving_out() {
        let e = LoadError::ToolMissing {
            workload: "compile",
            tool: "a C compiler (cc, gcc or clang)",
            remedy: "install one (apt-get install gcc) or leave out 'compile'",
        };
        for command in ["compare", "demo"] {
            let m = load_refusal(command, "stress-kernel", &e);
            assert!(!m.contains("leave out"), "{command}: {m}");
            assert!(
                m.contains("--load ttcp,fifos-mmap,fpu,fs,crashme"),
                "{command}: {m}"
            );
        }
    }

    #[test]
    fn progress_names_the_scenario_and_which_of_how_many() {
        let p = Progress {
            scenario: Scenario::UnshieldedCpu,
            index: 4,
            total: 5,
            phase: "latency",
            fraction: 0.5,
            max_ns: 12_000,
        };
        let m = p.message();
        assert!(m.starts_with("scenario 5/5 unshielded-cpu: latency"), "{m}");
    }

    #[test]
    fn progress_done_counts_finished_scenarios_and_the_part_of_the_current() {
        let p = Progress {
            scenario: Scenario::Loaded,
            index: 1,
            total: 4,
            phase: "latency",
            fraction: 0.5,
            max_ns: 0,
        };
        assert_eq!(p.done(), 0.375);
        let none = Progress {
            total: 0,
            index: 0,
            fraction: 0.0,
            ..p
        };
        assert_eq!(none.done(), 0.0);
    }

    fn shielded_at(max_ns: u64) -> CompareReport {
        let mut shielded = cpushield_report::ScenarioResult {
            name: "shielded".into(),
            shielded: true,
            ..Default::default()
        };
        shielded.latency.max_ns = max_ns;
        CompareReport {
            scenarios: vec![shielded],
            ..Default::default()
        }
    }

    #[test]
    fn a_written_report_is_named_and_a_shielded_scenario_over_the_limit_ends_over_limit() {
        let dir = tempfile::tempdir().unwrap();
        let report = shielded_at(41_000);
        let within = conclude(&report, dir.path(), Some(Duration::from_micros(50)), false);
        assert_eq!(within.ending, Ending::Done);
        assert!(within.stdout.starts_with("report: "), "{}", within.stdout);
        assert!(within.stderr.is_empty(), "{:?}", within.stderr);
        assert!(dir.path().join("report.json").is_file());
        let over = conclude(&report, dir.path(), Some(Duration::from_micros(40)), true);
        assert_eq!(over.ending, Ending::OverLimit);
        assert!(
            over.stderr[0].starts_with("interrupted: "),
            "{:?}",
            over.stderr
        );
        assert!(
            over.stderr[1].starts_with("--max-latency ") && over.stderr[1].contains("shielded ("),
            "{:?}",
            over.stderr
        );
    }

    #[test]
    fn a_report_that_cannot_be_written_fails_naming_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let c = conclude(&shielded_at(1), &file, None, false);
        assert_eq!(c.ending, Ending::Failed);
        assert!(c.stdout.is_empty());
        assert!(c.stderr[0].contains("not-a-dir"), "{:?}", c.stderr);
    }

    fn fake_config() -> CompareConfig {
        let kernel = cpushield_kernel::FakeKernel::new();
        let store = cpushield_kernel::store::MemoryStore::default();
        CompareConfig::new(&Host::fake(&kernel, &store), Vec::new(), "none".into())
    }

    #[test]
    fn a_request_with_a_missing_port_a_zero_rate_or_an_unwritable_out_is_refused_naming_the_option()
    {
        let config = fake_config();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        assert_eq!(
            check_request(&config, Some(out.clone()), Some(Path::new("none"))).unwrap(),
            out
        );
        let e = check_request(&config, Some(out.clone()), Some(Path::new("/no/such/port")));
        assert!(e
            .unwrap_err()
            .to_string()
            .starts_with("--host-channel /no/such/port: no such port"));
        let mut zero = config.clone();
        zero.period = cpushield_measure::Period::from_rate(0);
        let e = check_request(&zero, Some(out), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--rate 0:"), "{e}");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = check_request(&config, Some(file), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--out") && e.contains("not a directory"), "{e}");
    }

    #[test]
    fn the_demo_intro_names_the_scenarios_length_and_wraps_to_the_terminal() {
        let config = fake_config();
        let one = demo_intro(&config, None);
        assert_eq!(one.len(), 1, "a pipe gets one line: {one:?}");
        assert!(
            one[0].starts_with("cpushield demo: idle, loaded and shielded scenarios, 15 s each")
        );
        let wrapped = demo_intro(&config, Some(40));
        assert!(
            wrapped.len() > 1 && wrapped.iter().all(|l| l.len() <= 40),
            "{wrapped:?}"
        );
        assert!(wrapped[1].starts_with("  "), "{wrapped:?}");
    }

    #[test]
    fn the_answer_ends_with_what_the_host_side_said() {
        let view = View {
            verbose: false,
            width: None,
            lines_before: 0,
        };
        let text = answer(&shielded_at(1), &["host: vCPU 1 waited".into()], view);
        assert!(text.ends_with("host: vCPU 1 waited\n"), "{text}");
    }
}
