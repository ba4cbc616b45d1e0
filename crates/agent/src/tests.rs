//! The drift decision and the endpoint, on `FakeKernel`.

use super::*;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::FakeKernel;
use drift::{Cause, Watch};
use tiny_http::Method;

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

fn fake() -> FakeKernel {
    let k = FakeKernel::new();
    k.set_file(
        "/proc/interrupts",
        "           CPU0       CPU1\n 10:  5  0  IO-APIC 10-edge  eth0\n 11:  1  2  IO-APIC 11-edge  disk\n",
    );
    k.add_dir("/proc/irq/10");
    k.add_dir("/proc/irq/11");
    k.set_file("/proc/irq/10/smp_affinity", "1\n");
    k.set_file("/proc/irq/11/smp_affinity", "1\n");
    k
}

#[test]
fn an_irq_rewritten_onto_a_shielded_cpu_is_drift_once() {
    let k = fake();
    let mut w = Watch::new();
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
    k.set_file("/proc/irq/11/smp_affinity", "3\n");
    let d = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].irq, d[0].cause, d[0].name.as_str()),
        (11, Cause::IrqRewritten, "disk")
    );
    assert_eq!(d[0].on, cpus("1"));
    // Unchanged since (e.g. a kernel-managed IRQ the shield cannot move): not again.
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
}

#[test]
fn a_rewrite_that_stays_off_the_shielded_cpus_is_not_drift() {
    let k = fake();
    let mut w = Watch::new();
    w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    k.set_file("/proc/irq/10/smp_affinity", "4\n");
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
}

#[test]
fn a_new_irq_on_a_shielded_cpu_is_drift_and_the_first_look_reports_what_is_there() {
    let k = fake();
    k.set_file("/proc/irq/10/smp_affinity", "2\n");
    let mut w = Watch::new();
    let first = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].irq, first[0].cause), (10, Cause::IrqAtStart));
    k.add_dir("/proc/irq/12");
    k.set_file("/proc/irq/12/smp_affinity", "3\n");
    let d = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].irq, d[0].cause), (12, Cause::IrqNew));
}

#[test]
fn nothing_is_drift_without_an_interrupt_shield() {
    let k = fake();
    k.set_file("/proc/irq/10/smp_affinity", "2\n");
    let mut w = Watch::new();
    assert!(w
        .observe(&snapshot::read_irqs(&k), &CpuSet::default())
        .is_empty());
}

#[test]
fn a_tick_without_a_shield_corrects_nothing_and_says_no_shield() {
    let k = fake();
    k.set_file("/sys/devices/system/cpu/online", "0-1\n");
    k.set_file("/proc/softirqs", "   CPU0 CPU1\n TIMER: 1 2\n");
    k.set_file(
        "/proc/stat",
        "cpu 1 1 1 1 1 1 1 1\ncpu0 1 1 1 1 1 1 1 0\ncpu1 1 1 1 1 1 1 1 3\n",
    );
    let store = state::MemoryStore::new();
    let shared = Shared::new("0");
    let mut agent = Agent::new(&k, &store, Arc::clone(&shared), Options::default());
    assert!(agent.tick().unwrap().is_empty());
    let json = lock(&shared.conditions).to_json();
    assert!(json.contains("\"NoShield\""), "{json}");
    assert!(!lock(&shared.metrics)
        .render()
        .contains("cpushield_corrections_total{"));
}

#[test]
fn the_endpoint_serves_only_get_metrics_and_status() {
    let shared = Shared::new("9.9.9");
    let (code, _, body) = server::respond(&shared, &Method::Get, "/metrics");
    assert_eq!(code, 200);
    assert!(
        body.contains("cpushield_build_info{version=\"9.9.9\"} 1"),
        "{body}"
    );
    assert_eq!(server::respond(&shared, &Method::Get, "/status").0, 200);
    assert_eq!(server::respond(&shared, &Method::Post, "/metrics").0, 405);
    assert_eq!(server::respond(&shared, &Method::Get, "/").0, 404);
    assert_eq!(server::respond(&shared, &Method::Get, "/reset").0, 404);
}
