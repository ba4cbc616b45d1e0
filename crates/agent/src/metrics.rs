//! The Prometheus metrics, in Prometheus naming (base unit seconds, `_total`
//! counters), encoded by `prometheus-client`.

use crate::sample::Sample;
use crate::vcpus::VcpuSample;
use cpushield_report::textfile::to_textfile;
use cpushield_shield::ShieldMasks;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

/// A label set: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The latency histograms, one per CPU, each with the classic buckets.
type LatencyFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric the agent serves, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    interrupts: Family<Labels, Counter>,
    softirqs: Family<Labels, Counter>,
    steal: Family<Labels, Counter<f64, AtomicU64>>,
    shield_cpus: Family<Labels, Gauge>,
    corrections: Family<Labels, Counter>,
    findings: Family<Labels, Gauge>,
    pod_tasks: Gauge,
    latency: Option<LatencyFamily>,
    vcpu_ready: Family<Labels, Counter<f64, AtomicU64>>,
    vcpu_run: Family<Labels, Counter<f64, AtomicU64>>,
    /// Each vCPU's labels and schedstat at the last look, by (VM pid, vCPU).
    last_vcpus: HashMap<(i32, u32), (Labels, VcpuSample)>,
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
        let findings = Family::<Labels, Gauge>::default();
        registry.register(
            "check_findings",
            "Findings of the last periodic check of the shielded CPUs, per severity (info, warn, breaks-shield)",
            findings.clone(),
        );
        let pod_tasks = Gauge::default();
        registry.register(
            "pod_tasks_on_shield",
            "Tasks of Kubernetes pods whose affinity reaches a CPU shielded from processes (the kubelet places them; the agent does not)",
            pod_tasks.clone(),
        );
        let vcpu_ready = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "vcpu_ready",
            "Time a guest's vCPU thread was runnable on this host but not running (schedstat run-queue wait: CPU Ready), per VM and vCPU",
            Unit::Seconds,
            vcpu_ready.clone(),
        );
        let vcpu_run = Family::<Labels, Counter<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "vcpu_run",
            "Time a guest's vCPU thread ran on this host (schedstat), per VM and vCPU",
            Unit::Seconds,
            vcpu_run.clone(),
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
            findings,
            pod_tasks,
            latency: None,
            vcpu_ready,
            vcpu_run,
            last_vcpus: HashMap::new(),
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

    /// Registers `cpushield_latency_seconds` (classic buckets, 5 us to 10 ms)
    /// for the latency probe; once.
    pub fn enable_latency(&mut self) {
        if self.latency.is_some() {
            return;
        }
        fn classic() -> Histogram {
            Histogram::new([
                5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3,
            ])
        }
        let family = LatencyFamily::new_with_constructor(classic);
        self.registry.register_with_unit(
            "latency",
            "Timer wake-up latency of the agent's low-duty probe on a shielded CPU",
            Unit::Seconds,
            family.clone(),
        );
        self.latency = Some(family);
    }

    /// Records one wake-up latency of the probe on `cpu`, in seconds.
    pub fn observe_latency(&self, cpu: usize, seconds: f64) {
        if let Some(h) = &self.latency {
            h.get_or_create(&labels(&[("cpu", &cpu.to_string())]))
                .observe(seconds);
        }
    }

    /// Sets the findings gauge: `(severity, count)` for every severity.
    pub fn set_findings<'a>(&self, counts: impl IntoIterator<Item = (&'a str, usize)>) {
        for (severity, n) in counts {
            self.findings
                .get_or_create(&labels(&[("severity", severity)]))
                .set(n as i64);
        }
    }

    /// Sets how many tasks of Kubernetes pods may run on CPUs shielded from processes.
    pub fn set_pod_tasks_on_shield(&self, n: usize) {
        self.pod_tasks.set(n as i64);
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

    /// Adds what each vCPU's run and run-queue wait grew since the last look
    /// (the first look of a vCPU adds its time since its thread started), and
    /// drops the series of the vCPUs no longer there, so that VMs that come
    /// and go do not grow the exposition.
    pub fn update_vcpus(&mut self, samples: Vec<VcpuSample>) {
        let mut now = HashMap::with_capacity(samples.len());
        for s in samples {
            let key = (s.pid, s.vcpu);
            let (labels, was) = match self.last_vcpus.remove(&key) {
                Some((l, was)) if was.vm == s.vm => (l, Some(was.stat)),
                Some((l, _)) => {
                    self.forget_vcpu(&l);
                    (vcpu_labels(&s), None)
                }
                None => (vcpu_labels(&s), None),
            };
            let was = was.unwrap_or_default();
            let secs = |now: u64, was: u64| now.saturating_sub(was) as f64 / 1e9;
            self.vcpu_ready
                .get_or_create(&labels)
                .inc_by(secs(s.stat.wait_ns, was.wait_ns));
            self.vcpu_run
                .get_or_create(&labels)
                .inc_by(secs(s.stat.run_ns, was.run_ns));
            now.insert(key, (labels, s));
        }
        for (_, (labels, _)) in std::mem::replace(&mut self.last_vcpus, now) {
            self.forget_vcpu(&labels);
        }
    }

    fn forget_vcpu(&self, labels: &Labels) {
        self.vcpu_ready.remove(labels);
        self.vcpu_run.remove(labels);
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    /// The same metrics in the Prometheus text format that node_exporter's
    /// textfile collector reads (no `# EOF` or `# UNIT`; each counter's
    /// `# TYPE` and `# HELP` name its `_total` series).
    pub fn render_textfile(&self) -> String {
        to_textfile(&self.render())
    }
}

fn vcpu_labels(s: &VcpuSample) -> Labels {
    labels(&[
        ("vm", &s.vm),
        ("pid", &s.pid.to_string()),
        ("vcpu", &s.vcpu.to_string()),
    ])
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
    fn findings_and_latency_are_served_with_classic_buckets() {
        let mut m = Metrics::new("0", 100);
        assert!(!m.render().contains("cpushield_latency_seconds"));
        m.enable_latency();
        m.observe_latency(1, 30e-6);
        m.set_findings([("info", 2), ("warn", 0), ("breaks-shield", 1)]);
        let text = m.render();
        for want in [
            "# TYPE cpushield_latency_seconds histogram",
            "cpushield_latency_seconds_bucket{le=\"0.00002\",cpu=\"1\"} 0",
            "cpushield_latency_seconds_bucket{le=\"0.00005\",cpu=\"1\"} 1",
            "cpushield_latency_seconds_count{cpu=\"1\"} 1",
            "cpushield_check_findings{severity=\"breaks-shield\"} 1",
            "cpushield_check_findings{severity=\"info\"} 2",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }

    #[test]
    fn the_textfile_is_prometheus_text_with_total_type_lines() {
        let m = Metrics::new("0", 100);
        m.correction("irq_new");
        let text = m.render_textfile();
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE cpushield_corrections_total counter"),
            "{text}"
        );
        assert!(
            text.contains("cpushield_corrections_total{cause=\"irq_new\"} 1"),
            "{text}"
        );
    }

    fn vcpu(vm: &str, pid: i32, vcpu: u32, run_ns: u64, wait_ns: u64) -> VcpuSample {
        VcpuSample {
            vm: vm.into(),
            pid,
            vcpu,
            stat: cpushield_parse::schedstat::Schedstat {
                run_ns,
                wait_ns,
                slices: 1,
            },
        }
    }

    #[test]
    fn vcpu_ready_grows_by_each_vcpus_run_queue_wait_and_a_stopped_vm_leaves_no_series() {
        let mut m = Metrics::new("0", 100);
        m.update_vcpus(vec![
            vcpu("rt", 40, 0, 3_000_000_000, 500_000_000),
            vcpu("rt", 40, 1, 1_000_000_000, 0),
        ]);
        m.update_vcpus(vec![
            vcpu("rt", 40, 0, 4_000_000_000, 2_000_000_000),
            vcpu("rt", 40, 1, 1_500_000_000, 250_000_000),
        ]);
        let text = m.render();
        for want in [
            "# UNIT cpushield_vcpu_ready_seconds seconds",
            "cpushield_vcpu_ready_seconds_total{vm=\"rt\",pid=\"40\",vcpu=\"0\"} 2.0",
            "cpushield_vcpu_ready_seconds_total{vm=\"rt\",pid=\"40\",vcpu=\"1\"} 0.25",
            "cpushield_vcpu_run_seconds_total{vm=\"rt\",pid=\"40\",vcpu=\"0\"} 4.0",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
        // The VM stopped and another took its pid: its counters start afresh.
        m.update_vcpus(vec![vcpu("other", 40, 0, 10, 7_000_000_000)]);
        let text = m.render();
        assert!(!text.contains("vm=\"rt\""), "{text}");
        assert!(
            text.contains(
                "cpushield_vcpu_ready_seconds_total{vm=\"other\",pid=\"40\",vcpu=\"0\"} 7.0"
            ),
            "{text}"
        );
        m.update_vcpus(Vec::new());
        assert!(!m.render().contains("cpushield_vcpu_ready_seconds_total{"));
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
