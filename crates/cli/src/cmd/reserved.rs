//! The reservation check every command that places work on CPUs or lifts
//! their shield runs before it changes anything ([`cpushield_rt::guard`]).

use cpushield_cpuset::CpuSet;
use cpushield_rt::reserve::CpuUse;

/// Refuses `command` on `cpus` when another process reserved one of them;
/// for `reset` prints why it proceeds instead.
pub fn guard(command: &str, cpus: &CpuSet, usage: CpuUse) -> anyhow::Result<()> {
    let dir = crate::host::reserve_dir();
    let note = cpushield_rt::guard::guard_command(&dir, command, cpus, usage);
    print_note(note)
}

/// Prints the note of a check that lets the command proceed.
pub fn print_note(note: Result<Option<String>, String>) -> anyhow::Result<()> {
    if let Some(note) = note.map_err(anyhow::Error::msg)? {
        eprintln!("{note}");
    }
    Ok(())
}
