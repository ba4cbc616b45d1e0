//! `cpushield shield | unshield | reset | show | boot-params`.

use crate::args::EXIT_OK;
use crate::host::shield_options;
use anyhow::Context;
use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_shield::{render, status, ShieldMasks};
use std::process::ExitCode;

/// Which CPUs to (un)shield from which kind of disturbance.
#[derive(Args, Debug, Clone)]
pub struct MaskArgs {
    /// CPUs to shield from processes, interrupts and the local timer.
    #[arg(long, value_parser = CpuSet::parse_arg, value_name = "CPUS")]
    all: Option<CpuSet>,
    /// CPUs to shield from processes (and unbound kernel threads).
    #[arg(long, value_parser = CpuSet::parse_arg, value_name = "CPUS")]
    procs: Option<CpuSet>,
    /// CPUs to shield from interrupts.
    #[arg(long, value_parser = CpuSet::parse_arg, value_name = "CPUS")]
    irqs: Option<CpuSet>,
    /// CPUs to shield from the local timer (runtime part; see boot-params).
    #[arg(long, value_parser = CpuSet::parse_arg, value_name = "CPUS")]
    ltmr: Option<CpuSet>,
}

impl MaskArgs {
    fn masks(&self) -> ShieldMasks {
        let all = self.all.clone().unwrap_or_default();
        ShieldMasks {
            procs: all.union(&self.procs.clone().unwrap_or_default()),
            irqs: all.union(&self.irqs.clone().unwrap_or_default()),
            ltmr: all.union(&self.ltmr.clone().unwrap_or_default()),
        }
    }
}

/// Arguments of `cpushield shield`.
#[derive(Args)]
pub struct ShieldArgs {
    #[command(flatten)]
    masks: MaskArgs,
    /// Also shield the hyperthread siblings of each CPU.
    #[arg(long)]
    whole_cores: bool,
    /// Memory nodes of the shield's cpuset, e.g. 1 or 0-1 (default: the
    /// nodes of the CPUs shielded from processes). Kept until reset.
    #[arg(long, value_parser = node_list, value_name = "NODES")]
    mems: Option<Nodes>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Memory nodes: a type of their own, so that the CPU set options'
/// reading ([`crate::args::for_this_machine`]) leaves them alone.
#[derive(Clone)]
struct Nodes(CpuSet);

/// A list of memory nodes (`0-1,3`), at least one.
fn node_list(text: &str) -> Result<Nodes, String> {
    let set = cpushield_parse::numa::parse_node_list("--mems", text)
        .map_err(|e| format!("{e}; name memory nodes with a list like 1 or 0-1"))?;
    if set.is_empty() {
        return Err("names no node: name memory nodes with a list like 1 or 0-1".into());
    }
    Ok(Nodes(set))
}

/// Arguments of `cpushield unshield`.
#[derive(Args)]
pub struct UnshieldArgs {
    #[command(flatten)]
    masks: MaskArgs,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cpushield reset`.
#[derive(Args)]
pub struct ResetArgs {
    /// The shield was set up from a PID namespace that no longer exists:
    /// restore its cgroups, IRQs and settings (its tasks are gone).
    #[arg(long, conflicts_with = "without_state")]
    namespace_gone: bool,
    /// The shield's saved state is gone: undo it as far as the kernel shows
    /// (tasks in cpushield's cgroups to the root with every CPU, the cgroups
    /// removed, IRQs and settings at the kernel's defaults).
    #[arg(long)]
    without_state: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cpushield show`.
#[derive(Args)]
pub struct ShowArgs {
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cpushield boot-params`.
#[derive(Args)]
pub struct BootParamsArgs {
    #[command(flatten)]
    masks: MaskArgs,
}

/// Prints `value` as JSON when `json`, else its `text`.
fn print<T: serde::Serialize>(json: bool, value: &T, text: String) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{text}");
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// Runs `cpushield shield`.
pub fn shield(args: ShieldArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let report = cpushield_shield::shield_with(
        &host,
        &args.masks.masks(),
        args.mems.as_ref().map(|nodes| &nodes.0),
        shield_options(args.whole_cores),
    )?;
    let text = render::render_report(&report, "shielded");
    print(args.json, &report, text)
}

/// Runs `cpushield unshield`.
pub fn unshield(args: UnshieldArgs) -> anyhow::Result<ExitCode> {
    let masks = args.masks.masks();
    super::reserved::guard(
        "unshield",
        &masks.any(),
        cpushield_rt::reserve::CpuUse::Unshield,
    )?;
    let report = cpushield_shield::unshield(&crate::host::real(), &masks, shield_options(false))?;
    let text = render::render_report(&report, "shield now");
    print(args.json, &report, text)
}

/// Runs `cpushield reset`.
pub fn reset(args: ResetArgs) -> anyhow::Result<ExitCode> {
    let host = crate::host::real();
    let dir = crate::host::reserve_dir();
    super::reserved::print_note(cpushield_rt::guard::reset_check(&dir, &host))?;
    let report = if args.namespace_gone {
        cpushield_shield::reset_namespace_gone(&host, shield_options(false))?
    } else if args.without_state {
        cpushield_shield::reset_without_state(&host, shield_options(false))?
    } else {
        cpushield_shield::reset(&host, shield_options(false))?
    };
    print(args.json, &report, render::render_report(&report, "reset"))
}

/// Runs `cpushield show`.
pub fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let st = status::status(&crate::host::real()).context("reading the shield status")?;
    print(args.json, &st, render::render_status(&st))
}

/// Runs `cpushield boot-params`.
pub fn boot_params(args: BootParamsArgs) -> anyhow::Result<ExitCode> {
    let line = cpushield_shield::bootparams::for_host(&crate::host::real(), &args.masks.masks())?;
    println!("{line}");
    Ok(ExitCode::from(EXIT_OK))
}
