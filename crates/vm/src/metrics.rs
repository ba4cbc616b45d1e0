//! What the host side saw, as Prometheus metrics for node_exporter's textfile
//! collector: each vCPU's time held off (the guest had work for it and the
//! host ran something else, or woke it late), by why and by what held its
//! host CPU, and the guest's questions answered. Counted from the watch's
//! start; a dashboard takes their rate.

use crate::timeline::HeldOff;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, String)>;
type Seconds = Family<Labels, Counter<f64, AtomicU64>>;

/// The textfile for VM `vm`: its vCPUs' held-off time and the requests of
/// its guest answered.
pub fn textfile(vm: &str, held_off: &BTreeMap<u32, HeldOff>, answered: u64) -> String {
    let mut registry = Registry::with_prefix("cpushield_vm");
    let by_state = Seconds::default();
    registry.register_with_unit(
        "vcpu_held_off",
        "Time a vCPU had guest work but did not run on the host, per why: preempted (runnable, another took its host CPU), halted (woken, then run late), interrupted (a host IRQ or softirq), exit (a VM exit handled slowly)",
        Unit::Seconds,
        by_state.clone(),
    );
    let by_occupant = Seconds::default();
    registry.register_with_unit(
        "vcpu_held_off_by",
        "What held the vCPU's host CPU while the vCPU was held off, per kind: task, vcpu (another of this guest), other-vcpu (another guest's), irq, softirq, idle, others",
        Unit::Seconds,
        by_occupant.clone(),
    );
    let gaps = Family::<Labels, Counter>::default();
    registry.register(
        "vcpu_gaps",
        "Stretches of time a vCPU did not run guest code, recorded (at least the watch's shortest gap)",
        gaps.clone(),
    );
    let requests = Family::<Labels, Counter>::default();
    registry.register(
        "guest_requests",
        "Requests of the guest answered on its channel",
        requests.clone(),
    );
    let vm = vm.to_string();
    for (vcpu, h) in held_off {
        let base = || vec![("vm", vm.clone()), ("vcpu", vcpu.to_string())];
        for (state, ns) in &h.by_state {
            let mut l = base();
            l.push(("state", state.label().to_string()));
            by_state.get_or_create(&l).inc_by(*ns as f64 / 1e9);
        }
        for (kind, ns) in &h.by_occupant {
            let mut l = base();
            l.push(("by", kind.label().to_string()));
            by_occupant.get_or_create(&l).inc_by(*ns as f64 / 1e9);
        }
        gaps.get_or_create(&base()).inc_by(h.gaps);
    }
    requests.get_or_create(&vec![("vm", vm)]).inc_by(answered);
    let mut out = String::new();
    encode(&mut out, &registry).expect("writing to a String cannot fail");
    cpushield_report::textfile::to_textfile(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{GapState, OccupantKind};

    #[test]
    fn each_vcpus_held_off_time_is_a_seconds_counter_by_state_and_by_occupant() {
        let mut h = HeldOff::default();
        h.by_state.insert(GapState::Preempted, 15_100_000);
        h.by_state.insert(GapState::Halted, 3_000_000);
        h.by_occupant.insert(OccupantKind::Task, 18_100_000);
        h.gaps = 2;
        let text = textfile("rt-vm", &BTreeMap::from([(1, h)]), 7);
        for want in [
            "# TYPE cpushield_vm_vcpu_held_off_seconds_total counter",
            "cpushield_vm_vcpu_held_off_seconds_total{vm=\"rt-vm\",vcpu=\"1\",state=\"preempted\"} 0.0151",
            "cpushield_vm_vcpu_held_off_seconds_total{vm=\"rt-vm\",vcpu=\"1\",state=\"halted\"} 0.003",
            "cpushield_vm_vcpu_held_off_by_seconds_total{vm=\"rt-vm\",vcpu=\"1\",by=\"task\"} 0.0181",
            "cpushield_vm_vcpu_gaps_total{vm=\"rt-vm\",vcpu=\"1\"} 2",
            "cpushield_vm_guest_requests_total{vm=\"rt-vm\"} 7",
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
    }
}
