//! `cpushield apply`: make the shield match the config file, through the
//! same shield, unshield and reset calls (and so the same saved state) as the
//! `shield` commands.

use crate::args::EXIT_OK;
use anyhow::Context;
use clap::Args;
use cpushield_config::{Change, Config, ConfigError};
use cpushield_shield::{render, state, ShieldMasks};
use cpushield_tune::apply as runtime;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

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
    path: &std::path::Path,
    online: &cpushield_cpuset::CpuSet,
) -> anyhow::Result<(ShieldMasks, Config)> {
    let file = path.display().to_string();
    let bytes = cpushield_config::read_file(path)
        .map_err(|e| anyhow::anyhow!(cpushield_config::unreadable(path, &e)))?;
    let mut config = Config::from_bytes(&file, &bytes)?;
    config.check_groups(&cpushield_kernel::group_exists)?;
    // `isolated = "tuned"`: tuned's variables file holds the CPUs.
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

/// Runs `cpushield apply`: one operation under the state lock, from reading
/// the saved masks to the last `[runtime]` setting, so that no other
/// cpushield command (a `reset`) can come between its steps. An error after
/// a change names what did change.
pub fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let online = cpushield_kernel::online_cpus(host.kernel()).context("reading the online CPUs")?;
    let (desired, config) = load(&args.config, &online)?;
    let host = host.with_store(Arc::new(state::Locked::take(host.shared_store())?));
    let kernel = host.kernel();
    let current = state::load_from(host.store())?
        .map(|l| l.state.masks)
        .unwrap_or_default();
    let plan = cpushield_config::plan(&current, &desired, &online);
    let _debugfs = runtime::DebugfsWhile::mount_if_needed(kernel, &config);
    let runtime = runtime::plan(&host, &config, &desired.procs)?;
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
    // What changed so far, for an error that comes after it.
    let mut changed: Vec<String> = Vec::new();
    let after = |changed: &[String], e: &dyn std::fmt::Display| {
        if changed.is_empty() {
            anyhow::anyhow!("{e}")
        } else {
            anyhow::anyhow!(
                "{e}; before this, apply changed: {} (`cpushield reset` undoes it, or run apply again)",
                changed.join("; ")
            )
        }
    };
    for change in &plan.changes {
        let done = match change {
            Change::Shield(m) => cpushield_shield::shield(&host, m, options)
                .map(|r| (r, "shielded", format!("shielded {}", m.describe()))),
            Change::Unshield(m) => cpushield_shield::unshield(&host, m, options)
                .map(|r| (r, "shield now", format!("unshielded {}", m.describe()))),
            Change::Reset => cpushield_shield::reset(&host, options)
                .map(|r| (r, "reset", "reset the shield".to_string())),
        };
        let (report, verb, what) = done.map_err(|e| after(&changed, &e))?;
        print!("{}", render::render_report(&report, verb));
        changed.push(what);
    }
    if !desired.is_empty() {
        let applied =
            runtime::apply(&host, &config, &desired.procs).map_err(|e| after(&changed, &e))?;
        for applied in applied {
            println!("{applied}");
        }
    }
    Ok(ExitCode::from(EXIT_OK))
}
