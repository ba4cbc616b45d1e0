//! What a load did: ops and ops/s per workload (so two runs can be shown to
//! have carried the same load), as data (serde) and as a text table.

use cpushield_cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One workload's totals over all its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadStats {
    /// Workload name (or stress-ng stressor name).
    pub name: String,
    /// What one op is.
    pub unit: String,
    /// Instances that ran.
    pub instances: u32,
    /// Ops done.
    pub ops: u64,
    /// Ops per second of the run.
    pub ops_per_s: f64,
}

/// The result of a load run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// `builtin` or `stress-ng`.
    pub source: String,
    /// Seconds from all workers running to the stop.
    pub seconds: f64,
    /// CPUs the load was confined to (`None` = unconfined).
    pub cpus: Option<CpuSet>,
    /// Instances per workload.
    pub scale: u32,
    /// Per-workload totals, in catalogue order.
    pub workloads: Vec<WorkloadStats>,
    /// Workers that failed, with why (empty on a clean run).
    pub failures: Vec<String>,
}

/// One counted entry: (name, unit, ops) of one instance.
pub type Entry = (String, String, u64);

/// Sums instances of the same name (first-seen order) into per-workload stats.
pub fn summarize(entries: &[Entry], seconds: f64) -> Vec<WorkloadStats> {
    let mut out: Vec<WorkloadStats> = Vec::new();
    for (name, unit, ops) in entries {
        match out.iter_mut().find(|s| &s.name == name) {
            Some(s) => {
                s.instances += 1;
                s.ops += ops;
            }
            None => out.push(WorkloadStats {
                name: name.clone(),
                unit: unit.clone(),
                instances: 1,
                ops: *ops,
                ops_per_s: 0.0,
            }),
        }
    }
    for s in &mut out {
        s.ops_per_s = if seconds > 0.0 {
            s.ops as f64 / seconds
        } else {
            0.0
        };
    }
    out
}

impl LoadReport {
    /// Ops of the named workload, if it ran.
    pub fn ops(&self, name: &str) -> Option<u64> {
        self.workloads
            .iter()
            .find(|w| w.name == name)
            .map(|w| w.ops)
    }

    /// The report as an aligned text table with a header line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let cpus = self
            .cpus
            .as_ref()
            .map_or("unconfined".to_string(), |c| format!("CPUs {c}"));
        let _ = writeln!(
            out,
            "load ({}) ran {:.1} s, {cpus}, scale {}",
            self.source, self.seconds, self.scale
        );
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>14} {:>14}  unit",
            "workload", "instances", "ops", "ops/s"
        );
        for w in &self.workloads {
            let _ = writeln!(
                out,
                "{:<12} {:>9} {:>14} {:>14.1}  {}",
                w.name, w.instances, w.ops, w.ops_per_s, w.unit
            );
        }
        for f in &self.failures {
            let _ = writeln!(out, "FAILED: {f}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str, ops: u64) -> Entry {
        (name.into(), "u".into(), ops)
    }

    #[test]
    fn instances_of_a_workload_are_summed_in_first_seen_order() {
        let s = summarize(&[e("fpu", 10), e("ttcp", 4), e("fpu", 30)], 2.0);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].name.as_str(), s[0].instances, s[0].ops),
            ("fpu", 2, 40)
        );
        assert_eq!(s[0].ops_per_s, 20.0);
        assert_eq!(s[1].ops_per_s, 2.0);
    }

    #[test]
    fn a_zero_length_run_has_zero_rates() {
        assert_eq!(summarize(&[e("fpu", 10)], 0.0)[0].ops_per_s, 0.0);
    }

    #[test]
    fn the_table_lists_every_workload_and_failure() {
        let r = LoadReport {
            source: "builtin".into(),
            seconds: 2.0,
            cpus: Some(CpuSet::from_cpus([1])),
            scale: 1,
            workloads: summarize(&[e("fpu", 10), e("crashme", 3)], 2.0),
            failures: vec!["ttcp#0: boom".into()],
        };
        let t = r.render();
        assert!(t.contains("CPUs 1"), "{t}");
        assert!(
            t.lines().any(|l| l.starts_with("fpu") && l.contains("5.0")),
            "{t}"
        );
        assert!(t.contains("FAILED: ttcp#0: boom"), "{t}");
        assert_eq!(r.ops("crashme"), Some(3));
        assert_eq!(r.ops("find"), None);
    }

    #[test]
    fn the_report_round_trips_through_json() {
        let r = LoadReport {
            source: "builtin".into(),
            seconds: 1.5,
            cpus: None,
            scale: 2,
            workloads: summarize(&[e("fs", 7)], 1.5),
            failures: vec![],
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<LoadReport>(&json).unwrap(), r);
    }
}
