//! Which CPUs `check` looks at by default: the shielded ones.
//!
//! The shield's state file is being written by the shield crate; until its API
//! lands, [`shielded_cpus`] reads the file itself. It is the one place to
//! replace with the shield crate's own lookup.

use cpushield_cpuset::CpuSet;
use cpushield_sys::Kernel;
use std::path::Path;

/// Where the shield keeps its state.
pub const SHIELD_STATE: &str = "/run/cpushield/state.json";

/// The shielded CPUs (the union of the process, IRQ and local-timer shields)
/// from the shield state file; `Ok(None)` when there is no state file.
pub fn shielded_cpus(kernel: &dyn Kernel) -> Result<Option<CpuSet>, String> {
    let path = Path::new(SHIELD_STATE);
    let Ok(text) = kernel.read(path) else {
        return Ok(None);
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!("{SHIELD_STATE}: not JSON ({e}); pass --cpus or run `cpushield reset`")
    })?;
    let mut cpus = CpuSet::new();
    // `show --json` shape at top level, or nested under "shield"/"masks".
    let candidates = [
        Some(&value),
        value.get("shield"),
        value.get("masks"),
        value.get("shielded"),
    ];
    for obj in candidates.into_iter().flatten() {
        for key in ["procs", "irqs", "ltmr"] {
            if let Some(list) = obj.get(key).and_then(|v| v.as_str()) {
                if let Ok(set) = CpuSet::parse_list(list) {
                    cpus = cpus.union(&set);
                }
            }
        }
    }
    Ok(Some(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_sys::FakeKernel;

    #[test]
    fn no_state_file_means_no_default_cpus() {
        assert_eq!(shielded_cpus(&FakeKernel::new()).unwrap(), None);
    }

    #[test]
    fn the_union_of_the_three_shields_is_checked() {
        let k = FakeKernel::new();
        k.set_file(
            SHIELD_STATE,
            r#"{"procs":"2-3","irqs":"3","ltmr":"","other":1}"#,
        );
        assert_eq!(shielded_cpus(&k).unwrap().unwrap().to_list(), "2-3");
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_naming_it() {
        let k = FakeKernel::new();
        k.set_file(SHIELD_STATE, "{");
        assert!(shielded_cpus(&k).unwrap_err().contains(SHIELD_STATE));
    }
}
