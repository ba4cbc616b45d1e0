//! The scenarios of the papers' experiments and how they are named.

use std::fmt;
use std::str::FromStr;

/// One experimental condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// No load, no shield: the baseline.
    Idle,
    /// Load on every CPU, no shield: the papers' "standard kernel" row.
    Loaded,
    /// Shield up (processes, IRQs, local timer), load running, probes on the shield.
    Shielded,
    /// As shielded, with a best-effort batch job sharing the shielded CPUs'
    /// idle time (`cpushield run --share`; the Hyades paper's ARTiS sharing).
    ShieldedShared,
    /// As shielded, with the latency probe waking early and spinning (advance).
    ShieldedAdvance,
    /// Shield up, probes on a CPU that is not shielded (Brosky & Rotolo Figure 3).
    UnshieldedCpu,
}

impl Scenario {
    /// The papers' shield scenarios (the default set, and `demo`'s), in the
    /// order they run.
    pub const ALL: [Scenario; 5] = [
        Scenario::Idle,
        Scenario::Loaded,
        Scenario::Shielded,
        Scenario::ShieldedAdvance,
        Scenario::UnshieldedCpu,
    ];

    /// Scenarios run only when named (`--scenarios`).
    pub const OPTIONAL: [Scenario; 1] = [Scenario::ShieldedShared];

    /// Every scenario that can be named, in run order.
    pub fn named() -> Vec<Scenario> {
        let mut all: Vec<Scenario> = Self::ALL.into_iter().chain(Self::OPTIONAL).collect();
        all.sort();
        all
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Loaded => "loaded",
            Scenario::Shielded => "shielded",
            Scenario::ShieldedShared => "shielded+shared",
            Scenario::ShieldedAdvance => "shielded+advance",
            Scenario::UnshieldedCpu => "unshielded-cpu",
        }
    }

    /// One sentence saying what the scenario is.
    pub fn description(self) -> &'static str {
        match self {
            Scenario::Idle => "no load, no shield: the baseline",
            Scenario::Loaded => "load on every CPU, no shield (the papers' standard kernel)",
            Scenario::Shielded => {
                "CPU shielded from processes, IRQs and the local timer; load running"
            }
            Scenario::ShieldedShared => {
                "as shielded, with a best-effort batch job (compute, SCHED_IDLE nice 19, `run --share`) in the shielded CPU's idle time"
            }
            Scenario::ShieldedAdvance => {
                "as shielded, the probe wakes early and spins to the deadline"
            }
            Scenario::UnshieldedCpu => "shield up, probes on a CPU that is not shielded",
        }
    }

    /// Whether the load runs during this scenario.
    pub fn loaded(self) -> bool {
        self != Scenario::Idle
    }

    /// Whether the shield is up during this scenario.
    pub fn shield_up(self) -> bool {
        matches!(
            self,
            Scenario::Shielded
                | Scenario::ShieldedShared
                | Scenario::ShieldedAdvance
                | Scenario::UnshieldedCpu
        )
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::named()
            .into_iter()
            .find(|sc| sc.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Scenario::named().iter().map(|s| s.name()).collect();
                format!(
                    "unknown scenario '{s}': use one or more of {}",
                    names.join(",")
                )
            })
    }
}

/// Parses a comma-separated scenario list, sorted into run order, without duplicates.
pub fn parse_list(text: &str) -> Result<Vec<Scenario>, String> {
    let mut list = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Scenario::from_str)
        .collect::<Result<Vec<_>, _>>()?;
    if list.is_empty() {
        return Err("empty scenario list: use e.g. idle,loaded,shielded".into());
    }
    list.sort();
    list.dedup();
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shielded_shared_runs_right_after_shielded_under_the_shield_and_load_but_only_when_named() {
        let list = parse_list("shielded+shared,unshielded-cpu,shielded,shielded+advance").unwrap();
        assert_eq!(
            list,
            vec![
                Scenario::Shielded,
                Scenario::ShieldedShared,
                Scenario::ShieldedAdvance,
                Scenario::UnshieldedCpu
            ]
        );
        let s = Scenario::ShieldedShared;
        assert_eq!(s.name().parse::<Scenario>(), Ok(s));
        assert!(s.shield_up() && s.loaded());
        assert!(
            !Scenario::ALL.contains(&s),
            "not in the default set nor demo"
        );
    }

    #[test]
    fn scenario_lists_parse_into_run_order() {
        let list = parse_list("shielded,idle,loaded,shielded").unwrap();
        assert_eq!(
            list,
            vec![Scenario::Idle, Scenario::Loaded, Scenario::Shielded]
        );
        assert!(parse_list("idle,bogus").unwrap_err().contains("bogus"));
        assert!(parse_list("idle,bogus")
            .unwrap_err()
            .contains("shielded,shielded+shared,shielded+advance"));
        assert!(parse_list("").is_err());
    }
}
