//! A config's `[runtime]` section made true (`cpushield apply`): a plan
//! against the machine as it is, and its execution, each file's value
//! journaled in the shield's saved state before it changes, so that `reset`
//! writes it back.

use crate::machine::{self, FileChange, Machine};
use crate::settings;
use cpushield_config::{Change, Config, ConfigError};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_shield::runtime::{write_setting, MountedDebugfs};
use cpushield_shield::{render, state, Options, ShieldMasks};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the `[runtime]` settings could not be planned or made true.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The config asks for what this machine cannot do (file, line, key, remedy).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reading or writing the machine or the saved state failed.
    // The error is part of the message and not a `source`: a chain printed
    // whole (`{:#}`) would say it twice.
    #[error("{context}: {error}")]
    Io {
        /// What was being done, with what the user can do about it.
        context: String,
        /// The error, errno kept.
        error: io::Error,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> RuntimeError {
    let context = context.into();
    move |error| RuntimeError::Io { context, error }
}

/// The `[runtime]` changes against the machine as it is now.
#[derive(Debug, Default)]
pub struct RuntimePlan {
    /// Files to set: the file, its value now, the value asked.
    pub set: Vec<FileChange>,
    /// Journaled files the config no longer names, with the value to write back.
    pub restore: Vec<(PathBuf, String)>,
}

impl RuntimePlan {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.restore.is_empty()
    }

    /// The plan, one change per line (what `apply --dry-run` prints).
    pub fn lines(&self) -> Vec<String> {
        let set = self.set.iter().map(|f| {
            format!(
                "set {} = {} (now {})",
                f.path.display(),
                f.candidate,
                f.original
            )
        });
        let restore = self
            .restore
            .iter()
            .map(|(p, v)| format!("restore {} to {v} (no longer in the config)", p.display()));
        set.chain(restore).collect()
    }
}

/// Plans `config`'s `[runtime]` settings for the housekeeping CPUs `procs`,
/// against the files of `host` as they are and the settings journaled in
/// its state.
pub fn plan(host: &Host, config: &Config, procs: &CpuSet) -> Result<RuntimePlan, RuntimeError> {
    let (kernel, store) = (host.kernel(), host.store());
    let journal = state::load_from(store)
        .map_err(io_error("reading the shield's saved state"))?
        .map(|l| l.state.runtime)
        .unwrap_or_default();
    let machine = Machine::read(kernel, procs);
    let files =
        settings::files_for(&machine, procs, &config.runtime()).map_err(|e| ConfigError {
            file: config.file.clone(),
            line: config.runtime_line(e.key),
            key: e.key.into(),
            problem: e.problem,
            remedy: e.remedy,
        })?;
    let restore = journal
        .files
        .iter()
        .filter(|j| !files.iter().any(|f| f.path == j.path))
        .map(|j| (j.path.clone(), j.original.clone()))
        .collect();
    Ok(RuntimePlan {
        set: files
            .into_iter()
            .filter(|f| f.original != f.candidate)
            .collect(),
        restore,
    })
}

/// One file `apply` changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Set to `value`; it held `was` (journaled).
    Set {
        /// The file.
        path: PathBuf,
        /// What it holds now.
        value: String,
        /// What it held, which `reset` writes back.
        was: String,
    },
    /// Written back to the value journaled, and forgotten.
    Restored {
        /// The file.
        path: PathBuf,
        /// What it holds again.
        value: String,
    },
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Applied::Set { path, value, was } => {
                write!(f, "set {} = {value} (was {was})", path.display())
            }
            Applied::Restored { path, value } => {
                write!(f, "restored {} to {value}", path.display())
            }
        }
    }
}

/// Makes `config`'s `[runtime]` settings true, planned anew (the shield's own
/// changes, made just before, may have set some). Every file's value is
/// journaled in `store` before any file changes; journaled files the config
/// no longer names are written back and forgotten. Returns what changed, in
/// order; on an error, what changed before it stays journaled.
pub fn apply(host: &Host, config: &Config, procs: &CpuSet) -> Result<Vec<Applied>, RuntimeError> {
    let kernel = host.kernel();
    let store = host.store();
    let plan = plan(host, config, procs)?;
    let journal: Vec<(PathBuf, String)> = plan
        .set
        .iter()
        .map(|f| (f.path.clone(), f.original.clone()))
        .collect();
    state::record_runtime_in(store, &journal).map_err(io_error(
        "recording the run-time settings' values in the shield's saved state (nothing was changed)",
    ))?;
    let mut applied = Vec::new();
    for f in plan.set {
        write_setting(kernel, &f.path, &f.candidate).map_err(io_error(format!(
            "setting {} = {} (`cpushield reset` restores what was set)",
            f.path.display(),
            f.candidate
        )))?;
        applied.push(Applied::Set {
            path: f.path,
            value: f.candidate,
            was: f.original,
        });
    }
    let mut restored = Vec::new();
    for (path, value) in plan.restore {
        write_setting(kernel, &path, &value).map_err(io_error(format!(
            "writing {value} back to {}",
            path.display()
        )))?;
        restored.push(path.clone());
        applied.push(Applied::Restored { path, value });
    }
    state::forget_runtime_in(store, &restored)
        .map_err(io_error("forgetting the settings written back"))?;
    Ok(applied)
}

/// Why `cpushield apply` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The online CPUs could not be read.
    #[error("reading the online CPUs: {0}")]
    OnlineCpus(io::Error),
    /// The file cannot be read, or a step failed (with what changed before it).
    #[error("{0}")]
    Refused(String),
    /// The file is wrong (file, line, key, remedy).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The state could not be locked or read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The `[runtime]` settings could not be planned.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// Reads and checks the config file at `path` against the `online` CPUs
/// (its groups, tuned's variables file for `isolated = "tuned"`, and no
/// `[[irq]]` pins, which apply does not set); every problem is one line
/// naming file, line and key.
pub fn load_config(path: &Path, online: &CpuSet) -> Result<(ShieldMasks, Config), ApplyError> {
    let file = path.display().to_string();
    let bytes = cpushield_config::read_file(path)
        .map_err(|e| ApplyError::Refused(cpushield_config::unreadable(path, &e)))?;
    let mut config = Config::from_bytes(&file, &bytes)?;
    config.check_groups(&cpushield_kernel::group_exists)?;
    if let Some(vars) = config.tuned_variables_path() {
        let text = std::fs::read_to_string(&vars)
            .map_err(|e| config.tuned_variables_unreadable(&vars, &e))?;
        config.read_tuned_variables(&vars.display().to_string(), &text)?;
    }
    let desired = config.resolve(online)?;
    if let Some(line) = desired.first_irq_line {
        return Err(ConfigError {
            file,
            line,
            key: "irq".into(),
            problem: "IRQ pins are checked but this version of apply does not set them".into(),
            remedy: "remove the [[irq]] tables".into(),
        }
        .into());
    }
    Ok((desired.masks, config))
}

/// `cpushield apply`: makes the shield and the `[runtime]` settings of
/// `host` match the config file at `path`, through the same shield, unshield
/// and reset calls (and so the same saved state) as the `shield` commands.
/// One operation under the state lock, from reading the saved masks to the
/// last setting, so that no other cpushield command (a `reset`) comes
/// between its steps. With `dry_run`, the plan is said, one change a line,
/// and nothing changes. `say` is given the text to print, each piece ending
/// in a newline; an error after a change names what did change.
pub fn apply_file(
    host: &Host,
    path: &Path,
    dry_run: bool,
    options: Options,
    say: &mut dyn FnMut(&str),
) -> Result<(), ApplyError> {
    let online = cpushield_kernel::online_cpus(host.kernel()).map_err(ApplyError::OnlineCpus)?;
    let (desired, config) = load_config(path, &online)?;
    let host = host.with_store(Arc::new(state::Locked::take(host.shared_store())?));
    let current = state::load_from(host.store())?
        .map(|l| l.state.masks)
        .unwrap_or_default();
    let plan_ = cpushield_config::plan(&current, &desired, &online);
    let _debugfs = debugfs_for(&host, &config);
    let runtime = plan(&host, &config, &desired.procs)?;
    if plan_.is_empty() && runtime.is_empty() {
        say(&format!(
            "nothing to change: the shield already matches {}\n",
            path.display()
        ));
        return Ok(());
    }
    if dry_run {
        for line in plan_.lines().into_iter().chain(runtime.lines()) {
            say(&format!("{line}\n"));
        }
        return Ok(());
    }
    // What changed so far, for an error that comes after it.
    let mut changed: Vec<String> = Vec::new();
    let after = |changed: &[String], e: &dyn std::fmt::Display| {
        ApplyError::Refused(if changed.is_empty() {
            e.to_string()
        } else {
            format!(
                "{e}; before this, apply changed: {} (`cpushield reset` undoes it, or run apply again)",
                changed.join("; ")
            )
        })
    };
    for change in &plan_.changes {
        let done = match change {
            Change::Shield(m) => cpushield_shield::shield(&host, m, options)
                .map(|r| (r, "shielded", format!("shielded {}", m.describe()))),
            Change::Unshield(m) => cpushield_shield::unshield(&host, m, options)
                .map(|r| (r, "shield now", format!("unshielded {}", m.describe()))),
            Change::Reset => cpushield_shield::reset(&host, options)
                .map(|r| (r, "reset", "reset the shield".to_string())),
        };
        let (report, verb, what) = done.map_err(|e| after(&changed, &e))?;
        say(&render::render_report(&report, verb));
        changed.push(what);
    }
    if !desired.is_empty() {
        let applied = apply(&host, &config, &desired.procs).map_err(|e| after(&changed, &e))?;
        for applied in applied {
            say(&format!("{applied}\n"));
        }
    }
    Ok(())
}

/// debugfs, mounted while `config`'s preemption model is read and written
/// when the config sets it and its file is not there (unmounted when
/// dropped); a failed mount is left for the plan to report.
fn debugfs_for(host: &Host, config: &Config) -> Option<MountedDebugfs> {
    let wanted = config.runtime().preempt.is_some()
        && !host.kernel().exists(Path::new(machine::PREEMPT_FILE));
    wanted
        .then(|| MountedDebugfs::mount(host.shared_kernel()).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;
    use cpushield_shield::fake_machine::v1_machine;
    use cpushield_shield::state::MemoryStore;
    use cpushield_shield::{Options, ShieldMasks};

    fn config(text: &str) -> Config {
        Config::from_bytes("cpushield.toml", text.as_bytes()).unwrap()
    }

    /// A machine of two CPUs with CPU 1 shielded from processes, RT
    /// throttling at the kernel's default.
    fn shielded() -> (FakeKernel, MemoryStore, CpuSet) {
        let kernel = v1_machine("0-1", &[(100, "0-1")]);
        kernel.set_file(machine::RT_RUNTIME, "950000\n");
        let store = MemoryStore::new();
        let cpus = CpuSet::from_cpus([1]);
        let masks = ShieldMasks {
            procs: cpus.clone(),
            irqs: CpuSet::new(),
            ltmr: CpuSet::new(),
        };
        let root = Options {
            is_root: true,
            whole_cores: false,
        };
        cpushield_shield::shield(&Host::fake(&kernel, &store), &masks, root).unwrap();
        (kernel, store, cpus)
    }

    fn journal(store: &MemoryStore) -> Vec<(PathBuf, String)> {
        state::load_from(store)
            .unwrap()
            .unwrap()
            .state
            .runtime
            .files
            .into_iter()
            .map(|f| (f.path, f.original))
            .collect()
    }

    #[test]
    fn a_setting_is_journaled_then_set_and_dropping_it_from_the_config_writes_it_back() {
        let (kernel, store, cpus) = shielded();
        let with = config("[shield]\nprocs = \"1\"\n\n[runtime]\nsched_rt_runtime_us = -1\n");
        let planned = plan(&Host::fake(&kernel, &store), &with, &cpus).unwrap();
        assert_eq!(
            planned.lines(),
            ["set /proc/sys/kernel/sched_rt_runtime_us = -1 (now 950000)"]
        );
        let applied = apply(&Host::fake(&kernel, &store), &with, &cpus).unwrap();
        assert_eq!(
            applied.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["set /proc/sys/kernel/sched_rt_runtime_us = -1 (was 950000)"]
        );
        assert_eq!(kernel.file(machine::RT_RUNTIME).unwrap().trim(), "-1");
        assert_eq!(
            journal(&store),
            [(PathBuf::from(machine::RT_RUNTIME), "950000".to_string())]
        );
        assert!(plan(&Host::fake(&kernel, &store), &with, &cpus)
            .unwrap()
            .is_empty());

        let without = config("[shield]\nprocs = \"1\"\n");
        let applied = apply(&Host::fake(&kernel, &store), &without, &cpus).unwrap();
        assert_eq!(
            applied,
            [Applied::Restored {
                path: PathBuf::from(machine::RT_RUNTIME),
                value: "950000".into()
            }]
        );
        assert_eq!(kernel.file(machine::RT_RUNTIME).unwrap().trim(), "950000");
        assert!(journal(&store).is_empty());
    }

    #[test]
    fn a_journal_that_cannot_be_written_changes_no_file() {
        let (kernel, store, cpus) = shielded();
        // ENOSPC: a full state directory.
        store.fail_writes(Some(28));
        let with = config("[shield]\nprocs = \"1\"\n\n[runtime]\nsched_rt_runtime_us = -1\n");
        let error = apply(&Host::fake(&kernel, &store), &with, &cpus)
            .unwrap_err()
            .to_string();
        assert!(error.contains("nothing was changed"), "{error}");
        assert_eq!(kernel.file(machine::RT_RUNTIME).unwrap().trim(), "950000");
    }

    #[test]
    fn a_setting_this_machine_lacks_is_a_config_error_naming_its_line() {
        let (kernel, store, cpus) = shielded();
        let with = config("[shield]\nprocs = \"1\"\n\n[runtime]\npreempt = \"full\"\n");
        match plan(&Host::fake(&kernel, &store), &with, &cpus) {
            Err(RuntimeError::Config(e)) => {
                assert_eq!((e.line, e.key.as_str()), (5, "runtime.preempt"));
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn apply_shields_from_the_file_then_finds_nothing_to_change() {
        let kernel = v1_machine("0-1", &[(100, "0-1")]);
        kernel.set_file(machine::RT_RUNTIME, "950000\n");
        let store = MemoryStore::new();
        let host = Host::fake(&kernel, &store);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("cpushield.toml");
        std::fs::write(&path, "[shield]\nprocs = \"1\"\n").unwrap();
        let root = Options {
            is_root: true,
            whole_cores: false,
        };
        let mut said = String::new();
        apply_file(&host, &path, true, root, &mut |t| said.push_str(t)).unwrap();
        assert!(
            state::load(&store).unwrap().is_none(),
            "a dry run changes nothing"
        );
        assert!(!said.is_empty() && said.ends_with('\n'), "{said}");
        let mut said = String::new();
        apply_file(&host, &path, false, root, &mut |t| said.push_str(t)).unwrap();
        let saved = state::load(&store).unwrap().expect("shielded");
        assert_eq!(saved.masks.procs.to_list(), "1");
        let mut said = String::new();
        apply_file(&host, &path, false, root, &mut |t| said.push_str(t)).unwrap();
        assert!(
            said.starts_with("nothing to change: the shield already matches"),
            "{said}"
        );
    }

    #[test]
    fn an_unreadable_config_file_is_one_line_naming_it() {
        let kernel = v1_machine("0-1", &[(100, "0-1")]);
        let store = MemoryStore::new();
        let root = Options {
            is_root: true,
            whole_cores: false,
        };
        let e = apply_file(
            &Host::fake(&kernel, &store),
            Path::new("/nonexistent/cpushield.toml"),
            false,
            root,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/cpushield.toml"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
