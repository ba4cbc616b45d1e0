//! The Prometheus metrics, in Prometheus naming (base unit seconds, `_total`
//! counters), encoded by `prometheus-client`.

use crate::sample::Sample;
use cpushield_shield::ShieldMasks;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// A label set: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Every metric the agent serves, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    interrupts: Family<Labels, Counter>,
    softirqs: Family<Labels, Counter>,
    steal: Family<Labels, Counter<f64, AtomicU64>>,
    shield_cpus: Family<Labels, Gauge>,
    corrections: Family<Labels, Counter>,
    last: Option<Sample>,
    user_hz: f64,
}

impl Metrics {
    /// Registers every metric; `version` is the build's version, `user_hz`
    /// the tick rate of /proc/stat.
    pub fn new(version: &str, user_hz: u64) -> Self {
        let mut registry = Registry::with_prefix("cpushield");
        let interrupts = Family::<Labels, Counter>::default();
        registry.register(
            "interrupts",
            "Interrupts handled on a shielded CPU, per CPU and IRQ (/proc/interrupts)",
            interrupts.clone(),
        );
        let softirqs = Family::<Labels, Counter>::default();
        registry.register(
            "softirqs",
            "Softirqs run on a shielded CPU, per CPU and kind (/proc/softirqs)",
            softirqs.clone(),
        );
        let steal = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "steal",
            "Time the hypervisor ran something else on a shielded vCPU (/proc/stat)",
            Unit::Seconds,
            steal.clone(),
        );
        let shield_cpus = Family::<Labels, Gauge>::default();
        registry.register(
            "shield_cpus",
            "How many CPUs are shielded, per kind of shield (procs, irqs, ltmr)",
            shield_cpus.clone(),
        );
        let corrections = Family::<Labels, Counter>::default();
        registry.register(
            "corrections",
            "Times the agent re-applied the shield, per cause",
            corrections.clone(),
        );
        let build_info = Family::<Labels, Gauge>::default();
        build_info
            .get_or_create(&labels(&[("version", version)]))
            .set(1);
        registry.register("build_info", "The cpushield build (always 1)", build_info);
        Self {
            registry,
            interrupts,
            softirqs,
            steal,
            shield_cpus,
            corrections,
            last: None,
            user_hz: user_hz.max(1) as f64,
        }
    }

    /// Sets the shield gauges from the masks in force.
    pub fn set_shield(&self, masks: &ShieldMasks) {
        for (kind, set) in [
            ("procs", &masks.procs),
            ("irqs", &masks.irqs),
            ("ltmr", &masks.ltmr),
        ] {
            self.shield_cpus
                .get_or_create(&labels(&[("kind", kind)]))
                .set(set.len() as i64);
        }
    }

    /// Counts one correction of `cause`.
    pub fn correction(&self, cause: &str) {
        self.corrections
            .get_or_create(&labels(&[("cause", cause)]))
            .inc();
    }

    /// Adds what the counters grew since the last sample (the first sample
    /// adds everything since boot; a counter that went back is skipped).
    pub fn update(&mut self, sample: Sample) {
        let last = self.last.take().unwrap_or_default();
        for ((cpu, irq), n) in &sample.interrupts {
            let was = last
                .interrupts
                .get(&(*cpu, irq.clone()))
                .copied()
                .unwrap_or(0);
            let c = self
                .interrupts
                .get_or_create(&labels(&[("cpu", &cpu.to_string()), ("irq", irq)]));
            c.inc_by(n.saturating_sub(was));
        }
        for ((cpu, kind), n) in &sample.softirqs {
            let was = last
                .softirqs
                .get(&(*cpu, kind.clone()))
                .copied()
                .unwrap_or(0);
            let c = self
                .softirqs
                .get_or_create(&labels(&[("cpu", &cpu.to_string()), ("kind", kind)]));
            c.inc_by(n.saturating_sub(was));
        }
        for (cpu, n) in &sample.steal_ticks {
            let was = last.steal_ticks.get(cpu).copied().unwrap_or(0);
            let c = self
                .steal
                .get_or_create(&labels(&[("cpu", &cpu.to_string())]));
            c.inc_by(n.saturating_sub(was) as f64 / self.user_hz);
        }
        self.last = Some(sample);
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_cpuset::CpuSet;

    fn sample(irq: u64, steal: u64) -> Sample {
        let mut s = Sample::default();
        s.interrupts.insert((1, "36".into()), irq);
        s.softirqs.insert((1, "TIMER".into()), 7);
        s.steal_ticks.insert(1, steal);
        s
    }

    #[test]
    fn metrics_follow_prometheus_naming_with_seconds_and_total_suffixes() {
        let mut m = Metrics::new("1.2.3", 100);
        m.set_shield(&ShieldMasks::all(&CpuSet::parse_list("1").unwrap()));
        m.correction("irq_rewritten");
        m.update(sample(5, 250));
        let text = m.render();
        for want in [
            "cpushield_interrupts_total{cpu=\"1\",irq=\"36\"} 5",
            "cpushield_softirqs_total{cpu=\"1\",kind=\"TIMER\"} 7",
            "# UNIT cpushield_steal_seconds seconds",
            "cpushield_steal_seconds_total{cpu=\"1\"} 2.5",
            "cpushield_shield_cpus{kind=\"irqs\"} 1",
            "cpushield_corrections_total{cause=\"irq_rewritten\"} 1",
            "cpushield_build_info{version=\"1.2.3\"} 1",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }

    #[test]
    fn counters_grow_by_what_the_kernel_counters_grew() {
        let mut m = Metrics::new("0", 100);
        m.update(sample(5, 100));
        m.update(sample(12, 300));
        let text = m.render();
        assert!(
            text.contains("cpushield_interrupts_total{cpu=\"1\",irq=\"36\"} 12"),
            "{text}"
        );
        assert!(
            text.contains("cpushield_steal_seconds_total{cpu=\"1\"} 3.0"),
            "{text}"
        );
    }
}
