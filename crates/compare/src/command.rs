//! What `cpushield compare` and `cpushield demo` say besides the report: a
//! load refused with the remedies that command has, the progress line, and
//! the shielded scenarios over `--max-latency`.

use crate::experiment::{CompareConfig, CompareError, Progress};
use crate::{runner, Lab};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_load::LoadError;
use cpushield_report::{human_ns, CompareReport};
use cpushield_rt::reserve::{CpuUse, ReserveDir};
use std::path::Path;

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
            human_ns(self.max_ns)
        )
    }
}

/// The shielded scenarios of `report` whose worst latency is above
/// `limit_ns`, as `shielded (41 us), ...`; None when none is.
pub fn over_limit(report: &CompareReport, limit_ns: u64) -> Option<String> {
    let over: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.shielded && s.latency.max_ns > limit_ns)
        .map(|s| format!("{} ({})", s.name, human_ns(s.latency.max_ns)))
        .collect();
    (!over.is_empty()).then(|| over.join(", "))
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
}
