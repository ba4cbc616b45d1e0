//! What every subcommand's arguments share: the exit codes, and the command
//! tree readied for this machine (CPU sets read against the online CPUs; a
//! value may start with `-`, so `--rr -5` is refused by the option's own
//! parser, naming the option and its range).

use clap::Command;
use cpushield_cpuset::CpuSet;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: error or bad usage.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: a latency threshold (`--max-latency`) was exceeded.
pub const EXIT_THRESHOLD: u8 = 2;
/// Exit code: `check` found something that breaks the shield.
pub const EXIT_FINDINGS: u8 = 3;

/// clap value parser for a CPU list (`0-3,8`) or hex mask (`0x8`, `f,00000000`)
/// on this machine: a mask typed without `0x` (`abc`, `1,00000000`) that
/// names CPUs which are not online is refused with the reading that was
/// taken. Options declare [`CpuSet::parse_arg`]; [`for_this_machine`] puts
/// this one in its place.
fn cpu_set(text: &str) -> Result<CpuSet, String> {
    let online = cpushield_kernel::online_cpus(crate::host::real().kernel()).ok();
    CpuSet::parse_user_for(text, online.as_ref())
}

/// Readies the command tree `cmd`, and all its subcommands, for this
/// machine:
/// - every option that takes a value accepts one that starts with `-`, so
///   `--rr -5`, `--all -1` and `--duration -1s` reach the option's parser
///   (which names the option and the valid range) instead of clap's
///   "unexpected argument" (which for `run` even suggests `-- -5`, running
///   `-5` as the program); positional arguments are unchanged;
/// - every option whose value is a [`CpuSet`] is read by [`cpu_set`],
///   against the online CPUs, whichever crate declared it (the library
///   crates' own options cannot read the machine).
pub fn for_this_machine(cmd: Command) -> Command {
    let cmd = cmd.mut_args(|arg| {
        let arg = if arg.get_value_parser().type_id() == std::any::TypeId::of::<CpuSet>() {
            arg.value_parser(cpu_set)
        } else {
            arg
        };
        if arg.is_positional() || !arg.get_action().takes_values() {
            arg
        } else {
            arg.allow_hyphen_values(true)
        }
    });
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names
        .into_iter()
        .fold(cmd, |cmd, name| cmd.mut_subcommand(name, for_this_machine))
}
