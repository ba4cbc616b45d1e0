//! Which CPUs `check` looks at by default: the shielded ones.
//!
//! [`shielded_cpus`] reads the shield's state file where the shield writes it
//! (`cpushield_sys::shield_state_file`: `CPUSHIELD_STATE_DIR` or /run/cpushield),
//! without depending on the shield crate.

use cpushield_cpuset::CpuSet;
use cpushield_sys::Kernel;
use std::path::Path;

/// Where the shield keeps its state by default (without `CPUSHIELD_STATE_DIR`).
pub const SHIELD_STATE: &str = "/run/cpushield/state.json";

/// The shielded CPUs (the union of the process, IRQ and local-timer shields)
/// from the shield state file; `Ok(None)` when there is no state file.
pub fn shielded_cpus(kernel: &dyn Kernel) -> Result<Option<CpuSet>, String> {
    shielded_cpus_in(kernel, &cpushield_sys::shield_state_file())
}

/// [`shielded_cpus`] from the state file `path`, or from its verified copy
/// (`state.json.bak`, which the shield writes first) when the file is absent
/// or damaged.
pub fn shielded_cpus_in(kernel: &dyn Kernel, path: &Path) -> Result<Option<CpuSet>, String> {
    match shielded_cpus_at(kernel, path) {
        Ok(Some(cpus)) => Ok(Some(cpus)),
        first => match shielded_cpus_at(kernel, &path.with_file_name("state.json.bak")) {
            Ok(Some(cpus)) => Ok(Some(cpus)),
            _ => first,
        },
    }
}

/// [`shielded_cpus`] from the state file at `path`.
pub fn shielded_cpus_at(kernel: &dyn Kernel, path: &Path) -> Result<Option<CpuSet>, String> {
    let Ok(text) = kernel.read(path) else {
        return Ok(None);
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not JSON ({e}); pass --cpus, or run `cpushield show` to see the shield",
            path.display()
        )
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

    const AT: &str = SHIELD_STATE;

    #[test]
    fn no_state_file_means_no_default_cpus() {
        assert_eq!(
            shielded_cpus_at(&FakeKernel::new(), Path::new(AT)).unwrap(),
            None
        );
    }

    #[test]
    fn the_union_of_the_three_shields_is_checked() {
        let k = FakeKernel::new();
        k.set_file(AT, r#"{"procs":"2-3","irqs":"3","ltmr":"","other":1}"#);
        assert_eq!(
            shielded_cpus_at(&k, Path::new(AT))
                .unwrap()
                .unwrap()
                .to_list(),
            "2-3"
        );
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_naming_it() {
        let k = FakeKernel::new();
        k.set_file(AT, "{");
        assert!(shielded_cpus_at(&k, Path::new(AT))
            .unwrap_err()
            .contains(SHIELD_STATE));
    }

    #[test]
    fn a_damaged_or_missing_state_file_falls_back_to_its_copy() {
        let k = FakeKernel::new();
        let bak = "/run/cpushield/state.json.bak";
        k.set_file(bak, r#"{"masks":{"procs":"1","irqs":"1","ltmr":""}}"#);
        assert_eq!(
            shielded_cpus_in(&k, Path::new(AT))
                .unwrap()
                .unwrap()
                .to_list(),
            "1"
        );
        k.set_file(AT, "{");
        assert_eq!(
            shielded_cpus_in(&k, Path::new(AT))
                .unwrap()
                .unwrap()
                .to_list(),
            "1"
        );
    }

    #[test]
    fn the_state_file_is_looked_for_where_the_shield_writes_it() {
        assert_eq!(
            cpushield_sys::shield_state_file(),
            std::env::var_os("CPUSHIELD_STATE_DIR")
                .filter(|v| !v.is_empty())
                .map(|d| std::path::PathBuf::from(d).join("state.json"))
                .unwrap_or_else(|| SHIELD_STATE.into())
        );
    }
}
