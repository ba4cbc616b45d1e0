//! `cpushield thread-demo` (hidden, for the guest tests): the programs of
//! [`cpushield_rt::demo`].
//!
//! It prints one line, `PID PLACED_TID OTHER_TID`, then both threads sleep
//! for `--seconds` (the test kills it sooner). A refused placement prints
//! the library's one-line message and exits 1.

use clap::Args;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::gettid;
use cpushield_rt::demo;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of the hidden `cpushield thread-demo`.
#[derive(Args, Debug)]
pub struct ThreadDemoArgs {
    /// CPUs the one placed thread goes to.
    #[arg(long, value_parser = CpuSet::parse_arg, value_name = "CPUS")]
    cpus: CpuSet,
    /// The interface that places it.
    #[arg(long, value_enum, default_value = "c")]
    api: demo::Api,
    /// How long both threads stay before the program exits.
    #[arg(long, default_value_t = 1000)]
    seconds: u64,
    /// Instead: one thread per CPU of --cpus, each pinning itself to its
    /// CPU (plain affinity, as a program started by `cpushield run` does
    /// within the CPUs it was given); prints `PID TID...` in CPU order.
    #[arg(long)]
    per_cpu: bool,
}

/// Prints `line` and waits `stay` while the threads stay.
fn print_and_stay(line: &str, stay: Duration) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    drop(out);
    std::thread::sleep(stay);
    Ok(ExitCode::SUCCESS)
}

fn refuse(message: &str) -> anyhow::Result<ExitCode> {
    eprintln!("cpushield: error: {message}");
    Ok(ExitCode::from(crate::args::EXIT_ERROR))
}

/// Runs the two-thread program (or, with `--per-cpu`, one thread per CPU).
pub fn run(args: ThreadDemoArgs) -> anyhow::Result<ExitCode> {
    let stay = Duration::from_secs(args.seconds);
    let pid = std::process::id();
    let line = if args.per_cpu {
        demo::pin_one_per_cpu(&args.cpus, stay).map(|tids| {
            let list: Vec<String> = tids.iter().map(i32::to_string).collect();
            format!("{pid} {}", list.join(" "))
        })
    } else {
        demo::place_one(args.api, &args.cpus, stay).map(|tid| format!("{pid} {tid} {}", gettid()))
    };
    match line {
        Ok(line) => print_and_stay(&line, stay),
        Err(message) => refuse(&message),
    }
}
