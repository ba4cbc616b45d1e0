//! The reservation check every command that places work on CPUs or lifts
//! their shield runs before it changes anything: one call into
//! [`ReserveDir::guard`] (`run` reaches the same function through
//! `RtRun::check`).

use cpushield_cpuset::CpuSet;
use cpushield_rt::reserve::{CpuUse, ReserveDir};

/// Refuses `command` on `cpus` when another process reserved one of them
/// (one line naming the holder and the remedy, exit 1, nothing changed); for
/// `reset` prints why it proceeds instead.
pub fn guard(command: &str, cpus: &CpuSet, usage: CpuUse) -> anyhow::Result<()> {
    guard_in(&crate::host::reserves(), command, cpus, usage)
}

/// [`guard`] with reservations kept in `dir`.
pub fn guard_in(
    dir: &ReserveDir,
    command: &str,
    cpus: &CpuSet,
    usage: CpuUse,
) -> anyhow::Result<()> {
    match dir.guard(cpus, std::process::id() as i32, usage) {
        Ok(None) => Ok(()),
        Ok(Some(note)) => {
            eprintln!("{note}");
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("{command}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_rt::reserve::{Holder, Reservation};

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
            let e = guard_in(&dir, command, &CpuSet::from_cpus([1]), CpuUse::Place)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!(
                    "{command}: CPU 1 is reserved by PID 4242 (rt-app)"
                )),
                "{e}"
            );
            assert!(e.contains("choose another CPU"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(guard_in(&dir, "measure", &CpuSet::from_cpus([0]), CpuUse::Place).is_ok());
    }

    #[test]
    fn unshield_of_a_reserved_cpu_is_refused_and_reset_proceeds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = ReserveDir::new(tmp.path());
        let _held = held(&dir);
        let e = guard_in(&dir, "unshield", &CpuSet::from_cpus([1]), CpuUse::Unshield)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("unshield: CPU 1 is reserved by PID 4242 (rt-app)"),
            "{e}"
        );
        assert!(e.contains("cpushield reset"), "{e}");
        assert!(guard_in(&dir, "reset", &CpuSet::from_cpus([1]), CpuUse::Reset).is_ok());
    }
}
