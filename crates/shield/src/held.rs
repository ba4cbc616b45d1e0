//! A shield held for the length of one experiment (`compare`, `tune`).

use crate::{reset, shield, Options, Report, ShieldError, ShieldMasks};
use cpushield_kernel::Host;

/// A shield raised for one experiment. Lowering it, or dropping it, resets
/// the shield, and the reset also writes back every setting journaled in its
/// saved state. An experiment lowers it itself (after stopping its load) to
/// learn whether the machine came back; the drop is the path of an early
/// return or a panic.
#[must_use = "dropping it resets the shield at once"]
pub struct HeldShield {
    host: Host,
    options: Options,
    /// The shield is up: dropping resets it.
    up: bool,
}

impl HeldShield {
    /// Shields `host` as `masks` asks.
    pub fn raise(host: &Host, masks: &ShieldMasks, options: Options) -> Result<Self, ShieldError> {
        shield(host, masks, options)?;
        Ok(Self {
            host: host.clone(),
            options,
            up: true,
        })
    }

    /// Resets the shield now and says whether that worked.
    pub fn lower(mut self) -> Result<Report, ShieldError> {
        self.up = false;
        reset(&self.host, self.options)
    }
}

impl Drop for HeldShield {
    fn drop(&mut self) {
        if !self.up {
            return;
        }
        // A drop cannot return the error, and a shield left up must not go
        // unsaid: the user is the only one left to finish the reset.
        if let Err(e) = reset(&self.host, self.options) {
            eprintln!("cpushield: error: {}", reset_failed(&e));
        }
    }
}

/// What the user is told when a shield could not be taken down: why, and the
/// command that finishes the reset.
pub fn reset_failed(error: &dyn std::fmt::Display) -> String {
    format!("resetting the shield failed: {error}; run `cpushield reset`")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_machine;
    use crate::state::MemoryStore;
    use cpushield_cpuset::CpuSet;

    fn root() -> Options {
        Options {
            is_root: true,
            whole_cores: false,
        }
    }

    #[test]
    fn a_dropped_shield_is_reset_and_leaves_no_state() {
        let kernel = fake_machine::v1_machine("0-1", &[(100, "0-1"), (101, "1")]);
        let store = MemoryStore::new();
        let masks = ShieldMasks::all(&CpuSet::from_cpus([1]));
        {
            let _held = HeldShield::raise(&Host::fake(&kernel, &store), &masks, root()).unwrap();
            assert!(crate::state::load_from(&store).unwrap().is_some());
        }
        assert!(crate::state::load_from(&store).unwrap().is_none());
    }

    #[test]
    fn a_lowered_shield_reports_its_reset() {
        let kernel = fake_machine::v1_machine("0-1", &[(100, "0-1"), (101, "1")]);
        let store = MemoryStore::new();
        let masks = ShieldMasks::all(&CpuSet::from_cpus([1]));
        let held = HeldShield::raise(&Host::fake(&kernel, &store), &masks, root()).unwrap();
        let report = held.lower().unwrap();
        assert!(report.masks.is_empty());
        assert!(crate::state::load_from(&store).unwrap().is_none());
    }

    #[test]
    fn the_failure_line_names_the_command_that_finishes_the_reset() {
        let line = reset_failed(&"EBUSY");
        assert_eq!(
            line,
            "resetting the shield failed: EBUSY; run `cpushield reset`"
        );
    }
}
