//! What `tune` shows and writes: the table per knob (effect, interval,
//! decision), `tune.json`, `report.html` with a plot of each comparison's
//! trials, the winning set as a `cpushield.toml` for `apply`, and the
//! boot-time part as one kernel command line with a reason for each word.

use crate::decide::{Arm, Effect};
use crate::knob::{Knob, KnobId, Machine};
use crate::session::{Comparison, Outcome, SessionResult};
use crate::settings::settings_of;
use cpushield_cpuset::fmt_ns;
use cpushield_report::trials::{trials_svg, TrialPoint};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// The version of `tune.json`.
pub const SCHEMA: &str = "tune/1";

/// One word of the kernel command line and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootParam {
    /// The word (`nohz_full=1`).
    pub param: String,
    /// Why: measured here, or expected.
    pub reason: String,
}

/// Everything a tune run reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The budget, seconds.
    pub budget_s: f64,
    /// The time the run took, seconds.
    pub elapsed_s: f64,
    /// The load the trials ran under.
    pub load: String,
    /// The probe's rate, Hz.
    pub rate_hz: f64,
    /// The session.
    pub session: SessionResult,
    /// The winning set as a config file for `apply`.
    pub config: String,
    /// The boot-time part, one word each.
    pub kernel_cmdline: Vec<BootParam>,
    /// What the winning set asks of the real-time task itself.
    pub advice: Vec<String>,
}

fn ratio(e: &Effect) -> String {
    if e.coverage > 0.0 {
        format!("x{:.2} ({:.2}-{:.2})", e.ratio, e.low, e.high)
    } else {
        format!("x{:.2} (no interval)", e.ratio)
    }
}

fn effect_words(c: &Comparison) -> String {
    format!(
        "worst case {}, p99.99 {} ({:.0}% intervals, {} trials of {} per arm)",
        ratio(&c.verdict.max),
        ratio(&c.verdict.p99_99),
        c.verdict.max.coverage * 100.0,
        c.trials.iter().filter(|t| t.arm == Arm::Start).count(),
        fmt_ns(c.trial_ns)
    )
}

fn chosen(session: &SessionResult) -> Vec<&Knob> {
    session
        .knobs
        .iter()
        .filter(|r| session.choice.knobs.contains(&r.knob.id))
        .map(|r| &r.knob)
        .collect()
}

/// The winning set as a `cpushield.toml`: the shield of the run (with IRQs
/// kept off the siblings when that won) and the `[runtime]` section.
pub fn config_toml(session: &SessionResult, why: &str) -> String {
    let knobs = chosen(session);
    let (settings, irq_cpus) = settings_of(&knobs);
    let mut out = String::new();
    let _ = writeln!(out, "# Written by `cpushield tune`: {why}.");
    let _ = writeln!(
        out,
        "# `cpushield apply --config THIS-FILE` applies it; `cpushield reset` restores everything."
    );
    let _ = writeln!(out, "\n[shield]\nall = \"{}\"", session.cpus);
    if !irq_cpus.is_empty() {
        let _ = writeln!(out, "irqs = \"{irq_cpus}\"");
    }
    let lines = settings.toml_lines();
    if lines.is_empty() {
        let _ = writeln!(out, "\n# No run-time setting beat the starting point.");
    } else {
        let _ = writeln!(out, "\n[runtime]");
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

fn measured(session: &SessionResult, id: KnobId) -> Option<&Comparison> {
    session
        .knobs
        .iter()
        .find(|r| r.knob.id == id)
        .and_then(|r| match &r.outcome {
            Outcome::Measured(c) => Some(c),
            _ => None,
        })
}

/// The boot-time part: the shield's parameters (expected), and `preempt=`
/// and `idle=poll` when measured to win; words already on the command line
/// are left out.
pub fn kernel_cmdline(session: &SessionResult, machine: &Machine) -> Vec<BootParam> {
    let cpus = &session.cpus;
    let masks = cpushield_shield::ShieldMasks::all(cpus);
    let fragment =
        cpushield_shield::bootparams::boot_params(&masks, &machine.online, machine.numa_balancing);
    let on_cmdline: Vec<&str> = machine.cmdline.split_whitespace().collect();
    let mut out = Vec::new();
    for word in fragment.split_whitespace() {
        let reason = match word.split('=').next().unwrap_or("") {
            "isolcpus" => format!("expected: keeps kernel-managed IRQs, which no run-time setting moves, and the scheduler's load balancing off CPU {cpus}"),
            "nohz_full" => format!("expected: stops the tick on CPU {cpus} while one task runs there (Brosky & Rotolo's local-timer shield; run time cannot)"),
            "rcu_nocbs" => format!("expected: RCU callbacks of CPU {cpus} run on the housekeeping CPUs"),
            "irqaffinity" => "expected: IRQs start on the housekeeping CPUs from boot on".to_string(),
            "numa_balancing" => format!("expected: no NUMA-balancing page faults in the tasks of CPU {cpus} (several memory nodes)"),
            _ => "expected".to_string(),
        };
        out.push(BootParam {
            param: word.to_string(),
            reason,
        });
    }
    let won = |id| session.choice.knobs.contains(&id);
    if won(KnobId::Preempt) {
        if let Some(c) = measured(session, KnobId::Preempt) {
            out.push(BootParam {
                param: "preempt=full".into(),
                reason: format!("measured here: {}", effect_words(c)),
            });
        }
    }
    if won(KnobId::IdlePoll) {
        if let Some(c) = measured(session, KnobId::IdlePoll) {
            out.push(BootParam {
                param: "idle=poll".into(),
                reason: format!("measured here: {}; it makes every CPU poll, CPU 0 too (`cpushield run --idle-poll` polls only the real-time CPUs)", effect_words(c)),
            });
        }
    }
    out.retain(|p| !on_cmdline.contains(&p.param.as_str()));
    out
}

/// What the winning set asks of the real-time task itself.
pub fn advice(session: &SessionResult, priority: u8) -> Vec<String> {
    let won = |id| session.choice.knobs.contains(&id);
    let mut out = Vec::new();
    if won(KnobId::IdlePoll) {
        out.push(format!(
            "keep the real-time CPUs polling: cpushield run --cpus {} --idle-poll -- APP",
            session.cpus
        ));
    }
    if won(KnobId::DmaLatency) {
        out.push("hold /dev/cpu_dma_latency at 0 while the real-time task runs (cpushield run, measure and cyclictest do)".into());
    }
    if won(KnobId::ProbePriority) {
        out.push(format!(
            "run the real-time task at SCHED_FIFO {}: cpushield run --fifo {} -- APP",
            crate::knob::TOP_PRIORITY,
            crate::knob::TOP_PRIORITY
        ));
    } else if measured(session, KnobId::ProbePriority).is_some() {
        out.push(format!("SCHED_FIFO {priority} did as well as 99 here"));
    }
    let every_node = session.knobs.iter().find_map(|r| match &r.knob.change {
        Ok(crate::knob::Change::ShieldMems { nodes, .. }) => Some(nodes),
        _ => None,
    });
    if let Some(nodes) = every_node {
        if won(KnobId::Mems) {
            out.push(format!(
                "give the shield every memory node: cpushield shield --all {} --mems {nodes}",
                session.cpus
            ));
        } else if measured(session, KnobId::Mems).is_some() {
            out.push(format!(
                "every memory node ({nodes}) did no better than the nodes of CPU {} (what shield gives them)",
                session.cpus
            ));
        }
    }
    out
}

/// Builds the report.
pub fn build(
    session: SessionResult,
    machine: &Machine,
    budget_s: f64,
    elapsed_s: f64,
    load: &str,
    rate_hz: f64,
    priority: u8,
) -> TuneReport {
    let why = session.choice.reason.clone();
    TuneReport {
        schema: SCHEMA.into(),
        budget_s,
        elapsed_s,
        load: load.into(),
        rate_hz,
        config: config_toml(&session, &why),
        kernel_cmdline: kernel_cmdline(&session, machine),
        advice: advice(&session, priority),
        session,
    }
}

/// The table per knob, the sets measured together and the choice.
pub fn table(report: &TuneReport) -> String {
    let s = &report.session;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:<34} {:<22} {:<22} decision",
        "knob", "starting -> candidate", "worst case", "p99.99"
    );
    for r in &s.knobs {
        let change = format!("{} -> {}", r.knob.starting, r.knob.candidate);
        let change: String = change.chars().take(34).collect();
        match &r.outcome {
            Outcome::Measured(c) => {
                let _ = writeln!(
                    out,
                    "{:<16} {:<34} {:<22} {:<22} {}",
                    r.knob.id.name(),
                    change,
                    ratio(&c.verdict.max),
                    ratio(&c.verdict.p99_99),
                    c.verdict.decision.label()
                );
            }
            Outcome::NotAvailable { reason } => {
                let _ = writeln!(out, "{:<16} not available here: {reason}", r.knob.id.name());
            }
            Outcome::NotMeasured { reason } => {
                let _ = writeln!(
                    out,
                    "{:<16} {:<34} not measured: {reason}",
                    r.knob.id.name(),
                    change
                );
            }
            Outcome::Failed { reason } => {
                let _ = writeln!(
                    out,
                    "{:<16} {:<34} could not be set: {reason}",
                    r.knob.id.name(),
                    change
                );
            }
        }
    }
    for set in &s.sets {
        let names: Vec<&str> = set.knobs.iter().map(|k| k.name()).collect();
        let _ = writeln!(
            out,
            "{:<16} {:<34} {:<22} {:<22} {}",
            "together",
            names.join(" + ").chars().take(34).collect::<String>(),
            ratio(&set.comparison.verdict.max),
            ratio(&set.comparison.verdict.p99_99),
            set.comparison.verdict.decision.label()
        );
    }
    let coverage: Vec<f64> = s
        .knobs
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Measured(c) => Some(c.verdict.max.coverage),
            _ => None,
        })
        .chain(s.sets.iter().map(|x| x.comparison.verdict.max.coverage))
        .filter(|c| *c > 0.0)
        .collect();
    let lowest = coverage.iter().copied().fold(1.0, f64::min);
    let _ = writeln!(
        out,
        "ratios: candidate / starting point (Hodges-Lehmann), with their distribution-free intervals (at least {:.0}% coverage); kept only when better on both at one-sided p < {} (exact rank test over per-trial values)",
        lowest * 100.0,
        crate::decide::ALPHA
    );
    let _ = writeln!(
        out,
        "chosen: {}",
        if s.choice.knobs.is_empty() {
            "nothing".to_string()
        } else {
            s.choice
                .knobs
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(out, "why: {}", s.choice.reason);
    for p in &s.problems {
        let _ = writeln!(out, "problem: {p}");
    }
    out
}

/// The kernel command line as one line, then each word's reason.
pub fn cmdline_text(report: &TuneReport) -> String {
    if report.kernel_cmdline.is_empty() {
        return "kernel command line: nothing to add\n".into();
    }
    let mut out = format!(
        "kernel command line: {}\n",
        report
            .kernel_cmdline
            .iter()
            .map(|p| p.param.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    for p in &report.kernel_cmdline {
        let _ = writeln!(out, "  {}: {}", p.param, p.reason);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn points(c: &Comparison) -> Vec<TrialPoint> {
    c.trials
        .iter()
        .map(|t| TrialPoint {
            candidate: t.arm == Arm::Candidate,
            max_ns: t.sample.max_ns,
            p99_99_ns: t.sample.p99_99_ns,
        })
        .collect()
}

/// `report.html`: the table, the command line, the config and one plot per
/// comparison, offline (the plots inline).
pub fn html(report: &TuneReport) -> String {
    let mut out = String::from("<!doctype html><html><head><meta charset=\"utf-8\"><title>cpushield tune</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto}pre{background:#f4f4f4;padding:8px;overflow-x:auto}figure{display:inline-block;margin:4px}</style></head><body>");
    let _ = write!(
        out,
        "<h1>cpushield tune: CPU {}</h1><p>{} under load <code>{}</code>, probe at {:.0} Hz; {:.0} s of a {:.0} s budget.</p>",
        report.session.cpus,
        escape(&report.session.choice.reason),
        escape(&report.load),
        report.rate_hz,
        report.elapsed_s,
        report.budget_s
    );
    let _ = write!(out, "<h2>Knobs</h2><pre>{}</pre>", escape(&table(report)));
    let _ = write!(
        out,
        "<h2>Boot</h2><pre>{}</pre>",
        escape(&cmdline_text(report))
    );
    let _ = write!(
        out,
        "<h2>cpushield.toml</h2><pre>{}</pre>",
        escape(&report.config)
    );
    if !report.advice.is_empty() {
        out.push_str("<h2>For the real-time task</h2><ul>");
        for a in &report.advice {
            let _ = write!(out, "<li>{}</li>", escape(a));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2>Trials</h2><p>Each comparison's trials in run order: blue the starting point, red the candidate; dots the worst case, rings the 99.99th percentile.</p>");
    for r in &report.session.knobs {
        if let Outcome::Measured(c) = &r.outcome {
            let title = format!(
                "{}: {} ({})",
                r.knob.id.name(),
                r.knob.candidate,
                c.verdict.decision.label()
            );
            let _ = write!(out, "<figure>{}</figure>", trials_svg(&title, &points(c)));
        }
    }
    for set in &report.session.sets {
        let names: Vec<&str> = set.knobs.iter().map(|k| k.name()).collect();
        let title = format!(
            "together: {} ({})",
            names.join(" + "),
            set.comparison.verdict.decision.label()
        );
        let _ = write!(
            out,
            "<figure>{}</figure>",
            trials_svg(&title, &points(&set.comparison))
        );
    }
    out.push_str("</body></html>\n");
    out
}

/// Writes `tune.json`, `cpushield.toml` and `report.html` into `dir`
/// (created when missing); returns the paths.
pub fn write_all(report: &TuneReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let files = [
        (
            "tune.json",
            serde_json::to_string_pretty(report).map_err(io::Error::other)? + "\n",
        ),
        ("cpushield.toml", report.config.clone()),
        ("report.html", html(report)),
    ];
    let mut out = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        out.push(path);
    }
    Ok(out)
}

/// What `tune` prints when the run is done: the table, the kernel command
/// line the knobs that need a reboot want, and the advice for the task.
pub fn summary(report: &TuneReport) -> String {
    let mut out = table(report);
    out.push_str(&cmdline_text(report));
    for a in &report.advice {
        let _ = writeln!(out, "for the real-time task: {a}");
    }
    out
}

/// Where [`write_all`] put the config and the report in `dir`.
pub fn written(dir: &Path) -> String {
    let d = dir.display();
    format!("config: {d}/cpushield.toml (cpushield apply --config {d}/cpushield.toml); report: {d}/report.html, tune.json\n")
}

/// The run's time against its `budget_s`, and that everything is as found.
pub fn took(report: &TuneReport, budget_s: u64) -> String {
    format!(
        "took {:.0} s of a {budget_s} s budget; every knob, the shield and the load are as found\n",
        report.elapsed_s
    )
}

/// The progress line of trial `p`, `elapsed` into a run of `budget_s`.
pub fn progress_line(
    p: &crate::session::Progress,
    elapsed: std::time::Duration,
    budget_s: u64,
) -> String {
    let arm = match p.arm {
        Arm::Start => "starting point",
        Arm::Candidate => "candidate",
    };
    format!(
        "{} trial {}/{} ({arm}), {} s left",
        p.what,
        p.trial.0,
        p.trial.1,
        budget_s.saturating_sub(elapsed.as_secs())
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decide::{judge, Choice, Trial, TrialSample};
    use crate::knob::{catalog, Change, FileChange, TIMER_MIGRATION};
    use crate::session::{KnobResult, SetResult};
    use cpushield_cpuset::CpuSet;

    fn comparison(win: bool) -> Comparison {
        let trials: Vec<Trial> = (0..8)
            .map(|i| {
                let arm = if [0, 3, 4, 7].contains(&i) {
                    Arm::Start
                } else {
                    Arm::Candidate
                };
                let us = 1000 + i * 37 % 5 * 100;
                let us = if win && arm == Arm::Candidate {
                    us / 3
                } else {
                    us
                };
                Trial {
                    arm,
                    sample: TrialSample {
                        max_ns: us * 1000,
                        p99_99_ns: us * 200,
                        samples: 2048,
                    },
                }
            })
            .collect();
        Comparison {
            trial_ns: 1_000_000_000,
            verdict: judge(&trials),
            trials,
        }
    }

    fn session() -> (SessionResult, Machine) {
        let mut machine = Machine {
            online: CpuSet::parse_list("0-1").unwrap(),
            cmdline: "console=ttyS0 rcu_nocbs=1".into(),
            ..Default::default()
        };
        machine.sysctls.insert(TIMER_MIGRATION, "1".into());
        let cpus = CpuSet::from_cpus([1]);
        let knobs = catalog(&machine, &cpus, 95);
        let results = knobs
            .into_iter()
            .map(|knob| {
                let outcome = match knob.id {
                    KnobId::TimerMigration => Outcome::Measured(comparison(true)),
                    KnobId::IdlePoll => Outcome::Measured(comparison(false)),
                    _ => match &knob.change {
                        Err(reason) => Outcome::NotAvailable {
                            reason: reason.clone(),
                        },
                        Ok(_) => Outcome::NotMeasured {
                            reason: "no time left in the budget".into(),
                        },
                    },
                };
                KnobResult { knob, outcome }
            })
            .collect();
        let s = SessionResult {
            cpus,
            knobs: results,
            sets: vec![SetResult {
                knobs: vec![KnobId::TimerMigration],
                comparison: comparison(true),
            }],
            choice: Choice {
                knobs: vec![KnobId::TimerMigration],
                reason: "together they beat the starting point".into(),
            },
            interrupted: false,
            problems: vec![],
        };
        (s, machine)
    }

    /// A finished run's report: timer migration measured and kept.
    pub(crate) fn report() -> TuneReport {
        let (s, m) = session();
        build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95)
    }

    #[test]
    fn the_config_holds_the_winning_setting_and_parses_and_resolves() {
        let (s, m) = session();
        let r = build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95);
        assert!(
            r.config.contains("[runtime]\ntimer_migration = 0\n"),
            "{}",
            r.config
        );
        let config = cpushield_config::Config::parse("cpushield.toml", &r.config).unwrap();
        config.resolve(&m.online).unwrap();
        assert_eq!(config.runtime().timer_migration, Some(0));
    }

    #[test]
    fn the_table_has_a_row_per_knob_with_its_decision_or_why_not() {
        let (s, m) = session();
        let r = build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95);
        let t = table(&r);
        let row = |name: &str| {
            t.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name}: {t}"))
                .to_string()
        };
        assert!(row("timer-migration").ends_with("keep"), "{t}");
        assert!(row("idle-poll").contains("within the noise"), "{t}");
        assert!(row("governor").contains("not available here: "), "{t}");
        assert!(row("probe-priority").contains("not measured"), "{t}");
        assert!(row("together").contains("timer-migration"), "{t}");
        assert!(t.contains("chosen: timer-migration"));
        for line in t.lines().filter(|l| l.starts_with("timer-migration")) {
            assert!(line.contains("x0.3"), "{line}");
        }
    }

    #[test]
    fn the_command_line_gives_a_reason_for_each_word_and_skips_what_is_there() {
        let (s, m) = session();
        let r = build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95);
        let words: Vec<&str> = r.kernel_cmdline.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(
            words,
            [
                "isolcpus=managed_irq,domain,1",
                "nohz_full=1",
                "irqaffinity=0"
            ]
        );
        assert!(r
            .kernel_cmdline
            .iter()
            .all(|p| p.reason.starts_with("expected")));
        assert!(
            !words.iter().any(|w| w.starts_with("idle=")),
            "idle-poll did not win"
        );
    }

    #[test]
    fn a_winning_preemption_model_is_on_the_command_line_with_its_measure() {
        let (mut s, m) = session();
        let preempt = s
            .knobs
            .iter_mut()
            .find(|r| r.knob.id == KnobId::Preempt)
            .unwrap();
        preempt.knob.change = Ok(Change::Files(vec![FileChange {
            path: "/sys/kernel/debug/sched/preempt".into(),
            original: "voluntary".into(),
            candidate: "full".into(),
        }]));
        preempt.outcome = Outcome::Measured(comparison(true));
        s.choice.knobs.push(KnobId::Preempt);
        let r = build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95);
        let p = r
            .kernel_cmdline
            .iter()
            .find(|p| p.param == "preempt=full")
            .unwrap();
        assert!(
            p.reason.starts_with("measured here: worst case x0.3"),
            "{}",
            p.reason
        );
        assert!(r.config.contains("preempt = \"full\""));
    }

    #[test]
    fn the_report_files_are_written_and_the_html_has_a_plot_per_comparison() {
        let (s, m) = session();
        let r = build(s, &m, 300.0, 290.0, "stress-kernel", 2048.0, 95);
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(&r, dir.path()).unwrap();
        assert_eq!(files.len(), 3);
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert_eq!(html.matches("<svg").count(), 3, "two knobs and one set");
        let back: TuneReport =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("tune.json")).unwrap())
                .unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn the_progress_line_names_the_trial_its_arm_and_the_time_left() {
        let p = crate::session::Progress {
            what: "timer-migration".into(),
            trial: (3, 8),
            arm: Arm::Candidate,
        };
        assert_eq!(
            progress_line(&p, std::time::Duration::from_secs(100), 600),
            "timer-migration trial 3/8 (candidate), 500 s left"
        );
        assert!(
            written(Path::new("/tmp/t")).contains("cpushield apply --config /tmp/t/cpushield.toml")
        );
    }
}
