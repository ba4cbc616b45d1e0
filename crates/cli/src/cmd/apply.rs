//! `cpushield apply`: make the shield match the config file, through the
//! same shield, unshield and reset calls (and so the same saved state) as the
//! `shield` commands.

use crate::args::EXIT_OK;
use anyhow::Context;
use clap::Args;
use cpushield_config::{Change, Config, ConfigError};
use cpushield_kernel::{Kernel, RealKernel};
use cpushield_shield::{render, state, ShieldMasks};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cpushield apply`.
#[derive(Args)]
pub struct ApplyArgs {
    /// The config file.
    #[arg(long, value_name = "PATH", default_value = cpushield_config::DEFAULT_PATH)]
    config: PathBuf,
    /// Print the plan, one change per line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Reads and checks the file; every problem is one line naming file, line and key.
fn load(
    path: &PathBuf,
    online: &cpushield_cpuset::CpuSet,
) -> anyhow::Result<(ShieldMasks, Config)> {
    let file = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!(cpushield_config::unreadable(path, &e)))?;
    let config = Config::from_bytes(&file, &bytes)?;
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

/// The `[runtime]` changes against the machine as it is now: files to set
/// (path, value now, value asked) and journaled files the config no longer
/// names (path, value to write back).
struct RuntimePlan {
    set: Vec<cpushield_tune::knob::FileChange>,
    restore: Vec<(PathBuf, String)>,
}

impl RuntimePlan {
    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.restore.is_empty()
    }

    fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .set
            .iter()
            .map(|f| {
                format!(
                    "set {} = {} (now {})",
                    f.path.display(),
                    f.candidate,
                    f.original
                )
            })
            .collect();
        out.extend(
            self.restore
                .iter()
                .map(|(p, v)| format!("restore {} to {v} (no longer in the config)", p.display())),
        );
        out
    }
}

fn runtime_plan(
    kernel: &RealKernel,
    config: &Config,
    procs: &cpushield_cpuset::CpuSet,
) -> anyhow::Result<RuntimePlan> {
    let settings = config.runtime();
    let journal = state::load_through(kernel, &state::state_dir())?
        .map(|l| l.state.runtime)
        .unwrap_or_default();
    let machine = cpushield_tune::Machine::read(kernel, procs);
    let files = cpushield_tune::settings::files_for(&machine, procs, &settings).map_err(|e| {
        ConfigError {
            file: config.file.clone(),
            line: config.runtime_line(e.key),
            key: e.key.into(),
            problem: e.problem,
            remedy: e.remedy,
        }
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

/// Mounts debugfs while the config's preemption model is read and written,
/// when the kernel can switch it and debugfs is not mounted.
struct DebugfsWhile(bool);

impl DebugfsWhile {
    fn mount_if_needed(kernel: &RealKernel, config: &Config) -> Self {
        let file = std::path::Path::new(cpushield_tune::knob::PREEMPT_FILE);
        let debugfs = std::path::Path::new(cpushield_tune::knob::DEBUGFS);
        let wanted = config.runtime().preempt.is_some() && !kernel.exists(file);
        Self(wanted && kernel.mount("debugfs", debugfs).is_ok())
    }
}

impl Drop for DebugfsWhile {
    fn drop(&mut self) {
        if self.0 {
            let _ = RealKernel.unmount(std::path::Path::new(cpushield_tune::knob::DEBUGFS));
        }
    }
}

/// Runs `cpushield apply`.
pub fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let kernel = RealKernel;
    let online = cpushield_kernel::online_cpus(&kernel).context("reading the online CPUs")?;
    let (desired, config) = load(&args.config, &online)?;
    let current = state::load_through(&kernel, &state::state_dir())?
        .map(|l| l.state.masks)
        .unwrap_or_default();
    let plan = cpushield_config::plan(&current, &desired, &online);
    let _debugfs = DebugfsWhile::mount_if_needed(&kernel, &config);
    let runtime = runtime_plan(&kernel, &config, &desired.procs)?;
    if plan.is_empty() && runtime.is_empty() {
        println!(
            "nothing to change: the shield already matches {}",
            args.config.display()
        );
        return Ok(ExitCode::from(EXIT_OK));
    }
    if args.dry_run {
        for line in plan.lines().into_iter().chain(runtime.lines()) {
            println!("{line}");
        }
        return Ok(ExitCode::from(EXIT_OK));
    }
    let options = cpushield_shield::Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores: false,
    };
    for change in &plan.changes {
        let (mut report, verb) = match change {
            Change::Shield(m) => (cpushield_shield::shield(&kernel, m, options)?, "shielded"),
            Change::Unshield(m) => (
                cpushield_shield::unshield(&kernel, m, options)?,
                "shield now",
            ),
            Change::Reset => (cpushield_shield::reset(&kernel, options)?, "reset"),
        };
        cpushield_shield::irq_moves::note_pending(&kernel, &mut report);
        print!("{}", render::render_report(&report, verb));
    }
    if !desired.is_empty() {
        apply_runtime(&kernel, &config, &desired.procs)?;
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// Makes the `[runtime]` settings true, each file's value journaled in the
/// shield's saved state before it changes; journaled files the config no
/// longer names are written back and forgotten.
fn apply_runtime(
    kernel: &RealKernel,
    config: &Config,
    procs: &cpushield_cpuset::CpuSet,
) -> anyhow::Result<()> {
    use cpushield_shield::runtime;
    // After the shield changes: the local-timer shield may have set some.
    let plan = runtime_plan(kernel, config, procs)?;
    let store = state::FileStore::from_env();
    let journal: Vec<(PathBuf, String)> = plan
        .set
        .iter()
        .map(|f| (f.path.clone(), f.original.clone()))
        .collect();
    state::record_runtime_in(&store, &journal).context(
        "recording the run-time settings' values in the shield's saved state (nothing was changed)",
    )?;
    for f in &plan.set {
        runtime::write_setting(kernel, &f.path, &f.candidate).with_context(|| {
            format!(
                "setting {} = {} (`cpushield reset` restores what was set)",
                f.path.display(),
                f.candidate
            )
        })?;
        println!(
            "set {} = {} (was {})",
            f.path.display(),
            f.candidate,
            f.original
        );
    }
    let mut restored = Vec::new();
    for (path, original) in &plan.restore {
        runtime::write_setting(kernel, path, original)
            .with_context(|| format!("writing {original} back to {}", path.display()))?;
        println!("restored {} to {original}", path.display());
        restored.push(path.clone());
    }
    state::forget_runtime_in(&store, &restored)?;
    Ok(())
}
