//! Which CPUs `check` looks at by default: the shielded ones.
//!
//! [`shielded_cpus`] reads the shield's state where the shield writes it
//! (`cpushield_kernel::shield_state_dir`: `CPUSHIELD_STATE_DIR` or /run/cpushield)
//! with the shield's own reader (`cpushield_shield::state`): the same checks,
//! the same recovery from the verified copy, through the kernel door.

use crate::CpuSource;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_shield::snapshot::Scope;
use cpushield_shield::state::{self, SavedState};
use cpushield_shield::ShieldMasks;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Where the shield keeps its state by default (without `CPUSHIELD_STATE_DIR`).
pub const SHIELD_STATE: &str = "/run/cpushield/state.json";

/// The shielded CPUs (the union of the process, IRQ and local-timer shields)
/// from the shield state; `Ok(None)` when there is no state file.
pub fn shielded_cpus(kernel: &dyn Kernel) -> Result<Option<CpuSet>, String> {
    shielded_cpus_in(kernel, &cpushield_kernel::shield_state_file())
}

/// [`shielded_cpus`] from the state file `path`, or from its verified copy
/// (`state.json.bak`, which the shield writes first) when the file is absent
/// or damaged. Where neither exists but the kernel shows a shield (its state
/// is gone, see `cpushield_shield::orphan`), an error says so and names the
/// CPUs to pass.
pub fn shielded_cpus_in(kernel: &dyn Kernel, path: &Path) -> Result<Option<CpuSet>, String> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    match state::load_through(kernel, dir) {
        Ok(Some(loaded)) => Ok(Some(loaded.state.masks.any())),
        Ok(None) => match cpushield_shield::orphan::detect(kernel) {
            Ok(Some(found)) => Err(format!(
                "no shield state in {}, but a shield is in place without it ({}): pass --cpus {} to check the CPUs it shields, and undo it with `cpushield reset --without-state`",
                dir.display(),
                found.evidence.join("; "),
                found.masks.any()
            )),
            _ => Ok(None),
        },
        Err(e) => Err(format!(
            "{e}; or pass --cpus, or run `cpushield show` to see the shield"
        )),
    }
}

/// What the shield in force already does, from its saved state: `check`
/// advises a `cpushield shield` command only for what it leaves, and tells
/// an IRQ the shield did not move from one it could not move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShieldInForce {
    /// The CPUs shielded from processes, interrupts and the local timer.
    pub masks: ShieldMasks,
    /// What the shield could see: the whole machine or a PID namespace.
    pub scope: Scope,
    /// Each IRQ's mask before the first shield (its request, to which
    /// Brosky's rule applies), by IRQ.
    pub irq_requested: BTreeMap<u32, CpuSet>,
    /// The mask the shield left on each IRQ, as read back after its last
    /// change (empty in older states, or while a change was being applied).
    pub irq_set: BTreeMap<u32, CpuSet>,
    /// Set when the shield's saved state is gone and the shield was found
    /// from what the kernel shows (`cpushield_shield::orphan`): each sign
    /// of it. No `cpushield shield` command works over such a shield until
    /// `cpushield reset --without-state` has undone it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_lost: Option<Vec<String>>,
}

/// The kinds of shield, as `cpushield shield` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShieldKind {
    /// `--procs`: processes and unbound kernel threads.
    Procs,
    /// `--irqs`: interrupts.
    Irqs,
    /// `--ltmr`: the local timer (what run time allows).
    Ltmr,
}

impl ShieldKind {
    /// The option of `cpushield shield` (`procs`, `irqs`, `ltmr`).
    pub fn flag(self) -> &'static str {
        match self {
            ShieldKind::Procs => "procs",
            ShieldKind::Irqs => "irqs",
            ShieldKind::Ltmr => "ltmr",
        }
    }
}

impl ShieldInForce {
    /// The facts `check` needs from a saved state. Masks are parsed as the
    /// shield writes them; one that does not parse is left out.
    pub fn from_saved(saved: &SavedState) -> Self {
        let masks = |m: &BTreeMap<u32, String>| {
            m.iter()
                .filter_map(|(irq, text)| Some((*irq, CpuSet::parse_mask(text.trim()).ok()?)))
                .collect()
        };
        Self {
            masks: saved.masks.clone(),
            scope: saved.scope,
            irq_requested: masks(&saved.irqs),
            irq_set: if saved.set.applying {
                BTreeMap::new()
            } else {
                masks(&saved.set.irqs)
            },
            state_lost: None,
        }
    }

    /// A shield whose state is gone, as the kernel shows it: its CPUs, and
    /// no IRQ's request (those were in the state).
    pub fn from_orphan(found: &cpushield_shield::orphan::OrphanShield) -> Self {
        Self {
            masks: found.masks.clone(),
            scope: Scope::System,
            irq_requested: BTreeMap::new(),
            irq_set: BTreeMap::new(),
            state_lost: Some(found.evidence.clone()),
        }
    }

    /// The CPUs shielded from `kind`.
    pub fn shielded(&self, kind: ShieldKind) -> &CpuSet {
        match kind {
            ShieldKind::Procs => &self.masks.procs,
            ShieldKind::Irqs => &self.masks.irqs,
            ShieldKind::Ltmr => &self.masks.ltmr,
        }
    }
}

/// The shield in force, from the state where the shield writes it (or its
/// verified copy); without a state, one the kernel shows all the same
/// (its state is gone: [`ShieldInForce::state_lost`], as `show` finds it);
/// `Ok(None)` when no shield is up.
pub fn shield_in_force(kernel: &dyn Kernel) -> Result<Option<ShieldInForce>, String> {
    let path = cpushield_kernel::shield_state_file();
    let dir = path.parent().unwrap_or(Path::new("/"));
    match state::load_through(kernel, dir) {
        Ok(Some(loaded)) => Ok(Some(ShieldInForce::from_saved(&loaded.state))),
        Ok(None) => Ok(cpushield_shield::orphan::detect(kernel)
            .ok()
            .flatten()
            .map(|found| ShieldInForce::from_orphan(&found))),
        Err(e) => Err(format!(
            "{e}; or pass --cpus, or run `cpushield show` to see the shield"
        )),
    }
}

/// The CPUs `check` looks at and where they came from: `cpus` when given,
/// else the shielded ones; with the shield in force, so that no finding
/// advises what it already does (with `cpus` given, an unreadable state is
/// only no knowledge of the shield). Refused, naming the remedy, when
/// neither names a CPU.
pub fn choose(
    kernel: &dyn Kernel,
    cpus: Option<CpuSet>,
) -> Result<(CpuSet, CpuSource, Option<ShieldInForce>), String> {
    let shield = match (&cpus, shield_in_force(kernel)) {
        (_, Ok(shield)) => shield,
        (Some(_), Err(_)) => None,
        (None, Err(e)) => return Err(e),
    };
    let (cpus, source) = match cpus {
        Some(c) => (c, CpuSource::Argument),
        None => match shielded_cpus(kernel)? {
            Some(c) if !c.is_empty() => (c, CpuSource::ShieldState),
            Some(_) => {
                return Err(format!(
                    "{SHIELD_STATE}: no CPU is shielded: pass --cpus, e.g. --cpus 1"
                ))
            }
            None => return Err(format!(
                "no shield is up ({SHIELD_STATE} is absent): pass the CPUs to check with --cpus, e.g. --cpus 1"
            )),
        },
    };
    Ok((cpus, source, shield))
}

/// [`shielded_cpus`] from the state file at `path` alone (no fallback to its copy).
pub fn shielded_cpus_at(kernel: &dyn Kernel, path: &Path) -> Result<Option<CpuSet>, String> {
    let Ok(bytes) = kernel.read_bytes(path) else {
        return Ok(None);
    };
    match state::decode(&bytes) {
        Ok(saved) => Ok(Some(saved.masks.any())),
        Err(why) => Err(format!(
            "{}: {why}; pass --cpus, or run `cpushield show` to see the shield",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    const AT: &str = SHIELD_STATE;

    /// A state file as the shield writes it, with these three masks.
    fn state_text(procs: &str, irqs: &str, ltmr: &str) -> String {
        let list = |s: &str| CpuSet::parse_list(s).unwrap();
        let masks = ShieldMasks {
            procs: list(procs),
            irqs: list(irqs),
            ltmr: list(ltmr),
        };
        state::encode(&cpushield_shield::fake_machine::saved_state(masks, "0-3"))
    }

    #[test]
    fn the_shield_in_force_keeps_each_irqs_request_and_what_the_shield_left_on_it() {
        let mut saved: SavedState = state::decode(state_text("1", "1", "").as_bytes()).unwrap();
        saved.irqs.insert(42, "00000003".into());
        saved.irqs.insert(9, "zz".into());
        saved.set.irqs.insert(42, "00000001".into());
        let shield = ShieldInForce::from_saved(&saved);
        assert_eq!(shield.irq_requested.get(&42).unwrap().to_list(), "0-1");
        assert!(
            !shield.irq_requested.contains_key(&9),
            "unparsable masks are left out"
        );
        assert_eq!(shield.irq_set.get(&42).unwrap().to_list(), "0");
        assert_eq!(shield.shielded(ShieldKind::Irqs).to_list(), "1");
        assert!(shield.shielded(ShieldKind::Ltmr).is_empty());
        // What was set is not trusted while a change was being applied.
        saved.set.applying = true;
        assert!(ShieldInForce::from_saved(&saved).irq_set.is_empty());
    }

    #[test]
    fn cpus_given_are_the_ones_checked_and_without_them_or_a_shield_the_refusal_asks_for_them() {
        let k = FakeKernel::new();
        let (cpus, source, _) = choose(&k, Some(CpuSet::from_cpus([1]))).unwrap();
        assert_eq!(cpus.to_list(), "1");
        assert!(matches!(source, CpuSource::Argument));
        let e = choose(&k, None).unwrap_err();
        assert!(e.contains("pass") && e.contains("--cpus"), "{e}");
    }

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
        k.set_file(AT, state_text("2-3", "3", ""));
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
    fn a_state_file_the_shield_would_refuse_is_refused_by_check_too() {
        let k = FakeKernel::new();
        let bad = state_text("2-3", "3", "").replacen("\"irqs\":{}", "\"irqs\":{\"9\":\"zz\"}", 1);
        assert!(bad.contains("zz"));
        k.set_file(AT, bad.clone());
        k.set_file("/run/cpushield/state.json.bak", bad);
        let e = shielded_cpus_in(&k, Path::new(AT)).unwrap_err();
        assert!(e.contains("IRQ 9: saved affinity mask 'zz'"), "{e}");
        assert!(e.contains(SHIELD_STATE), "{e}");
    }

    #[test]
    fn a_shield_whose_state_is_gone_is_named_with_the_cpus_to_check() {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file("/proc/irq/default_smp_affinity", "7\n");
        let e = shielded_cpus_in(&k, Path::new(AT)).unwrap_err();
        assert!(e.contains("default_smp_affinity leaves out CPU 3"), "{e}");
        assert!(e.contains("--cpus 3"), "{e}");
        assert!(e.contains("cpushield reset --without-state"), "{e}");
    }

    #[test]
    fn a_damaged_or_missing_state_file_falls_back_to_its_copy() {
        let k = FakeKernel::new();
        let bak = "/run/cpushield/state.json.bak";
        k.set_file(bak, state_text("1", "1", ""));
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
            cpushield_kernel::shield_state_file(),
            std::env::var_os("CPUSHIELD_STATE_DIR")
                .filter(|v| !v.is_empty())
                .map(|d| std::path::PathBuf::from(d).join("state.json"))
                .unwrap_or_else(|| SHIELD_STATE.into())
        );
    }
}
