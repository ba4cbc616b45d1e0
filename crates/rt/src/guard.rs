//! The reservation check every command that places work on CPUs or lifts
//! their shield runs before it changes anything: one call into
//! [`ReserveDir::guard`] (`run` reaches the same function through
//! `RtRun::check`), its refusal naming the command.

use crate::reserve::{CpuUse, ReserveDir};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;

/// Refuses `command` on `cpus` when another process reserved one of them
/// (one line naming the command, the holder and the remedy; nothing
/// changed). `Ok(Some(note))`: `reset` proceeds, and the note says why.
pub fn guard_command(
    dir: &ReserveDir,
    command: &str,
    cpus: &CpuSet,
    usage: CpuUse,
) -> Result<Option<String>, String> {
    dir.guard(cpus, std::process::id() as i32, usage)
        .map_err(|e| format!("{command}: {e}"))
}

/// `reset`'s check: reset is the way back from anything, so a reservation
/// never stops it, but the holders that lose their shield are named (the
/// note). The shield's state (milliseconds to read with thousands of tasks;
/// reset reads it again under its lock) is read only when some CPU of
/// `host` is reserved at all; an unreadable state is left to reset itself.
pub fn reset_check(dir: &ReserveDir, host: &Host) -> Result<Option<String>, String> {
    let possible = cpushield_kernel::possible_cpus(host.kernel()).unwrap_or_default();
    if matches!(
        dir.guard(&possible, std::process::id() as i32, CpuUse::Reset),
        Ok(None)
    ) {
        return Ok(None);
    }
    match cpushield_shield::state::load(host.store()).ok().flatten() {
        Some(saved) => guard_command(dir, "reset", &saved.masks.any(), CpuUse::Reset),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reserve::{Holder, Reservation};

    fn held(dir: &ReserveDir) -> Reservation {
        dir.reserve(
            &CpuSet::from_cpus([1]),
            &Holder {
                pid: 4242,
                command: "rt-app".into(),
            },
        )
        .unwrap()
    }

    #[test]
    fn every_placing_command_is_refused_in_one_line_naming_itself_the_holder_and_the_remedy() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ReserveDir::new(tmp.path());
        let _held = held(&dir);
        for command in ["measure", "compare", "demo", "run --idle-poll"] {
            let e =
                guard_command(&dir, command, &CpuSet::from_cpus([1]), CpuUse::Place).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "{command}: CPU 1 is reserved by PID 4242 (rt-app)"
                )),
                "{e}"
            );
            assert!(e.contains("choose another CPU"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let free = guard_command(&dir, "measure", &CpuSet::from_cpus([0]), CpuUse::Place);
        assert_eq!(free, Ok(None));
    }

    #[test]
    fn unshield_of_a_reserved_cpu_is_refused_and_reset_proceeds_with_a_note() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ReserveDir::new(tmp.path());
        let _held = held(&dir);
        let one = CpuSet::from_cpus([1]);
        let e = guard_command(&dir, "unshield", &one, CpuUse::Unshield).unwrap_err();
        assert!(
            e.starts_with("unshield: CPU 1 is reserved by PID 4242 (rt-app)"),
            "{e}"
        );
        assert!(e.contains("cpushield reset"), "{e}");
        let note = guard_command(&dir, "reset", &one, CpuUse::Reset).unwrap();
        assert!(note.is_some_and(|n| n.contains("reset proceeds")));
    }

    #[test]
    fn reset_without_any_reservation_reads_no_state() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ReserveDir::new(tmp.path());
        let kernel = cpushield_kernel::FakeKernel::new();
        kernel.set_file("/sys/devices/system/cpu/possible", "0-3\n");
        let store = cpushield_kernel::store::MemoryStore::default();
        assert_eq!(reset_check(&dir, &Host::fake(&kernel, &store)), Ok(None));
    }
}
