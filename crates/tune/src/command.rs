//! What `cpushield tune` does around the run ([`crate::real`]): what it was
//! asked, checked and turned into a [`TuneConfig`]; the report directory
//! checked before any work; the signals that end a run early; and what it
//! says once done.

use crate::knob::KnobId;
use crate::real::{self, TuneConfig, TuneError};
use crate::render::{self, TuneReport};
use crate::session::Progress;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel};
use cpushield_measure::Period;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `tune` was asked, as given (`cpushield tune`'s options but `--out`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TuneRequest {
    /// CPUs to shield and measure (default: the highest CPU and its SMT siblings).
    #[cfg_attr(feature = "clap", arg(long, value_parser = CpuSet::parse_arg))]
    pub cpus: Option<CpuSet>,
    /// Load profile or workloads (comma-separated, as `cpushield load --list`
    /// shows), or `none` (default: stress-kernel; without compile where no C
    /// compiler is installed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub load: Option<String>,
    /// The whole run's time, setup and teardown included. Each knob's switch
    /// is timed and a knob whose switches no longer fit is left unmeasured;
    /// only a knob's first switch cannot be foreseen, so a run may end later
    /// by at most one first switch there and back (the machine is always
    /// restored).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_parser = cpushield_cpuset::parse_duration_arg, default_value = "10m")
    )]
    pub budget: Duration,
    /// Only these knobs (comma-separated): idle-poll, dma-latency,
    /// idle-states, preempt, rt-throttling, timer-migration, stat-interval,
    /// governor, epp, smt-offline, irq-siblings, probe-priority, mems.
    #[cfg_attr(feature = "clap", arg(long))]
    pub knobs: Option<String>,
    /// Latency probe rate in Hz (realfeel's 2048 by default).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2048))]
    pub rate: u32,
    /// Directory for the load's files.
    #[cfg_attr(
        feature = "clap",
        arg(long = "dir", value_name = "DIR", default_value = "/var/tmp")
    )]
    pub load_dir: PathBuf,
}

impl TuneRequest {
    /// The run this request asks for on the machine `kernel` reads (its
    /// default CPUs, [`cpus_or_default`]), the probe at SCHED_FIFO 95; a
    /// rate of 0, a load or a knob that does not exist is refused in one
    /// line naming the option.
    pub fn config(self, kernel: &dyn Kernel) -> Result<TuneConfig, TuneError> {
        if self.rate == 0 {
            return Err(TuneError::Refused(
                "--rate must be above 0: use e.g. --rate 2048".into(),
            ));
        }
        let (load, load_name) = match self.load.as_deref().map(str::trim) {
            Some("none") => (Vec::new(), "none".to_string()),
            named => cpushield_load::request::choose(named).map_err(TuneError::Refused)?,
        };
        let knobs: Option<Vec<KnobId>> = self
            .knobs
            .as_deref()
            .map(real::parse_knobs)
            .transpose()
            .map_err(TuneError::Refused)?;
        Ok(TuneConfig {
            cpus: cpus_or_default(kernel, self.cpus)?,
            load,
            load_name,
            load_dir: self.load_dir,
            budget: self.budget,
            period: Period::from_rate(self.rate),
            priority: 95,
            knobs,
        })
    }
}

/// The CPUs `tune` shields: `named` (`--cpus`), else the shield's default on
/// this machine (`cpushield_shield::default_cpus`), refused in one line where
/// there is none.
pub fn cpus_or_default(kernel: &dyn Kernel, named: Option<CpuSet>) -> Result<CpuSet, TuneError> {
    match named {
        Some(cpus) => Ok(cpus),
        None => {
            let online = cpushield_kernel::online_cpus(kernel)?;
            cpushield_shield::default_cpus::default_cpus_on(kernel, &online)
                .map_err(TuneError::Refused)
        }
    }
}

/// Everything checked before the first change: the report directory
/// (`out`, else ./cpushield-tune-<time>/), which must be writable, since a
/// run whose report cannot be written is lost, then [`real::preflight`].
/// Returns the report directory.
pub fn prepare(
    host: &Host,
    config: &TuneConfig,
    out: Option<PathBuf>,
) -> Result<PathBuf, TuneError> {
    let out = out.unwrap_or_else(|| cpushield_report::output::default_dir("cpushield-tune"));
    cpushield_report::output::check_dir(&out, "--out")
        .map_err(|e| TuneError::Refused(e.to_string()))?;
    real::preflight(host, config)?;
    Ok(out)
}

/// What a finished run says, and whether it ends well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    /// For stdout: the summary, where the config and the report are, the
    /// time the run took.
    pub stdout: String,
    /// For stderr, one line each, without the program's name.
    pub stderr: Vec<String>,
    /// The report was written and the run was not interrupted.
    pub ok: bool,
}

/// The run of `config` on `host` from start to end (in the process that may
/// be a private namespace's init): SIGINT and SIGTERM end it early, every
/// knob, the shield and the load restored; `progress` gets each trial and
/// the time since the start; then the report is written to `out` and
/// [`conclude`] says so.
pub fn run_to_end(
    host: &Host,
    config: &TuneConfig,
    out: &Path,
    progress: &mut dyn FnMut(&Progress, Duration),
) -> Result<Conclusion, TuneError> {
    let stop = cpushield_measure::signal::stop_on_signals()
        .map_err(|e| TuneError::Refused(format!("installing signal handlers: {e}")))?;
    let report = real::run(host, config, stop, progress)?;
    Ok(conclude(&report, out, config.budget.as_secs()))
}

/// Writes `report` into `out` and says what `tune` prints once done: the
/// summary, where the config and the report are, the time it took of a
/// `budget_s` budget; an interrupted run says so and does not end well.
pub fn conclude(report: &TuneReport, out: &Path, budget_s: u64) -> Conclusion {
    let mut c = Conclusion {
        stdout: render::summary(report),
        stderr: Vec::new(),
        ok: true,
    };
    if let Err(e) = render::write_all(report, out) {
        c.stderr.push(format!(
            "error: writing the report to {}: {e}",
            out.display()
        ));
        c.ok = false;
        return c;
    }
    c.stdout.push_str(&render::written(out));
    c.stdout.push_str(&render::took(report, budget_s));
    if report.session.interrupted {
        c.stderr.push("interrupted: every knob was restored, the shield reset and the load stopped; the report holds what was measured".into());
        c.ok = false;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> TuneRequest {
        TuneRequest {
            cpus: Some(CpuSet::from_cpus([1])),
            load: Some("none".into()),
            knobs: None,
            budget: Duration::from_secs(600),
            rate: 2048,
            load_dir: "/var/tmp".into(),
        }
    }

    #[test]
    fn named_cpus_are_kept_and_without_them_the_shields_default_is_taken() {
        let k = cpushield_kernel::FakeKernel::new();
        let named = cpus_or_default(&k, Some(CpuSet::from_cpus([1]))).unwrap();
        assert_eq!(named.to_list(), "1");
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        assert_eq!(cpus_or_default(&k, None).unwrap().to_list(), "3");
        k.set_file("/sys/devices/system/cpu/online", "0\n");
        let e = cpus_or_default(&k, None).unwrap_err().to_string();
        assert!(e.contains("at least 2 CPUs"), "{e}");
    }

    #[test]
    fn a_load_of_none_runs_no_workload_and_the_probe_runs_at_fifo_95() {
        let config = request()
            .config(&cpushield_kernel::FakeKernel::new())
            .unwrap();
        assert!(config.load.is_empty());
        assert_eq!(config.load_name, "none");
        assert_eq!(config.priority, 95);
        assert_eq!(config.period, Period::from_rate(2048));
        assert_eq!(config.knobs, None);
    }

    #[test]
    fn a_zero_rate_an_unknown_load_or_knob_is_refused_naming_the_option() {
        let zero = TuneRequest {
            rate: 0,
            ..request()
        };
        let e = zero
            .config(&cpushield_kernel::FakeKernel::new())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--rate must be above 0"), "{e}");
        let load = TuneRequest {
            load: Some("no-such-load".into()),
            ..request()
        };
        let e = load
            .config(&cpushield_kernel::FakeKernel::new())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--load"), "{e}");
        let knob = TuneRequest {
            knobs: Some("no-such-knob".into()),
            ..request()
        };
        let e = knob
            .config(&cpushield_kernel::FakeKernel::new())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--knobs"), "{e}");
    }

    #[test]
    fn named_knobs_are_kept_in_the_order_given() {
        let knobs = TuneRequest {
            knobs: Some("preempt,timer-migration".into()),
            ..request()
        };
        let config = knobs.config(&cpushield_kernel::FakeKernel::new()).unwrap();
        assert_eq!(
            config.knobs,
            Some(vec![KnobId::Preempt, KnobId::TimerMigration])
        );
    }

    #[test]
    fn a_finished_run_writes_the_report_and_says_where_and_how_long_it_took() {
        let dir = tempfile::tempdir().unwrap();
        let report = render::tests::report();
        let c = conclude(&report, dir.path(), 300);
        assert!(c.ok, "{:?}", c.stderr);
        assert!(c.stderr.is_empty(), "{:?}", c.stderr);
        assert!(c.stdout.starts_with(&render::summary(&report)));
        assert!(
            c.stdout.contains("cpushield apply --config"),
            "{}",
            c.stdout
        );
        assert!(c.stdout.ends_with("are as found\n"), "{}", c.stdout);
        assert!(dir.path().join("cpushield.toml").is_file());
    }

    #[test]
    fn an_interrupted_run_or_an_unwritable_report_does_not_end_well() {
        let dir = tempfile::tempdir().unwrap();
        let mut report = render::tests::report();
        report.session.interrupted = true;
        let c = conclude(&report, dir.path(), 300);
        assert!(!c.ok);
        assert!(c.stderr[0].starts_with("interrupted: "), "{:?}", c.stderr);
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let c = conclude(&report, &file, 300);
        assert!(!c.ok);
        assert!(c.stderr[0].contains("a-file"), "{:?}", c.stderr);
        assert!(!c.stdout.contains("report.html"), "{}", c.stdout);
    }
}
