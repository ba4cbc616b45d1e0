//! `cpushield`: shield CPUs, run real-time work on them, measure, load and compare.
//! This binary only parses arguments and prints; the work is in the library crates.

mod args;
mod cmd;
mod host;
mod progress;
mod usage_error;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Real-time CPU shielding for stock Linux, with proof by measurement.
#[derive(Parser)]
#[command(name = "cpushield", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Shield CPUs from processes, interrupts and the local timer.
    Shield(cmd::shield::ShieldArgs),
    /// Drop some kinds of shield from some CPUs.
    Unshield(cmd::shield::UnshieldArgs),
    /// Restore exactly the state from before the first shield.
    ///
    /// Every task, IRQ, cgroup and setting nobody else touched gets back its
    /// value from before the first shield, byte for byte. An affinity a task
    /// (taskset) or an IRQ's owner (irqbalance, a write to
    /// /proc/irq/N/smp_affinity) set while the shield was up is that object's
    /// requested affinity under Brosky's rule: reset keeps it, and so does
    /// the rule at every later shield change.
    Reset(cmd::shield::ResetArgs),
    /// Make the shield match the config file (/etc/cpushield/cpushield.toml).
    Apply(cmd::apply::ApplyArgs),
    /// Keep the shield true and serve Prometheus metrics (127.0.0.1:9477).
    Agent(cpushield_agent::start::Choices),
    /// Show the shields and what still runs on each CPU.
    Show(cmd::shield::ShowArgs),
    /// Print the kernel command line a reboot needs for what runtime cannot do.
    BootParams(cmd::shield::BootParamsArgs),
    /// Start or move a real-time task onto shielded CPUs.
    Run(cmd::run::RunArgs),
    /// Measure wakeup latency, execution determinism or OS noise.
    Measure(cmd::measure::MeasureArgs),
    /// Run the papers' background workloads.
    Load(cmd::load::LoadArgs),
    /// Compare idle, loaded and shielded CPUs in one experiment.
    Compare(cmd::compare::CompareArgs),
    /// A short compare run that is safe on any machine.
    Demo(cmd::compare::DemoArgs),
    /// Find what still reaches a shielded CPU, and the fix.
    Check(cmd::check::CheckArgs),
    /// Find this machine's best run-time settings by measurement; write them as a config.
    Tune(cmd::tune::TuneArgs),
    /// Put the systemd units and the default config in place (cpushield.service at boot).
    Install(cpushield_install::InstallRequest),
    /// Remove exactly what `install` put (a config edited since stays).
    Uninstall(cpushield_install::UninstallRequest),
    /// The host side of a VM's blame: what kept each vCPU from running.
    Vm(cmd::vm::VmArgs),
    /// Write the man pages or shell completions (for packaging).
    #[command(hide = true)]
    Generate(cmd::generate::GenerateArgs),
    /// A two-thread program that places one thread (guest tests).
    #[command(hide = true)]
    ThreadDemo(cmd::thread_demo::ThreadDemoArgs),
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = args::for_this_machine(Cli::command());
    let parsed = command
        .clone()
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        // --help and --version: clap prints them to stdout.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // One line, like every other bad input; clap would exit 2, which
            // means "threshold exceeded" here.
            eprintln!(
                "cpushield: error: {}",
                usage_error::one_line(&error, &command, &argv)
            );
            return ExitCode::from(args::EXIT_ERROR);
        }
    };
    let result = match cli.command {
        Command::Shield(a) => cmd::shield::shield(a),
        Command::Unshield(a) => cmd::shield::unshield(a),
        Command::Reset(a) => cmd::shield::reset(a),
        Command::Apply(a) => cmd::apply::apply(a),
        Command::Agent(a) => cmd::agent::agent(a),
        Command::Show(a) => cmd::shield::show(a),
        Command::BootParams(a) => cmd::shield::boot_params(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Measure(a) => cmd::measure::run(a),
        Command::Load(a) => cmd::load::run(a),
        Command::Compare(a) => cmd::compare::compare(a),
        Command::Demo(a) => cmd::compare::demo(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Tune(a) => cmd::tune::tune(a),
        Command::Install(a) => cmd::install::install(a),
        Command::Uninstall(a) => cmd::install::uninstall(a),
        Command::Vm(a) => cmd::vm::vm(a),
        Command::Generate(a) => cmd::generate::generate(a, Cli::command()),
        Command::ThreadDemo(a) => cmd::thread_demo::run(a),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cpushield: error: {error:#}");
            ExitCode::from(args::EXIT_ERROR)
        }
    }
}
