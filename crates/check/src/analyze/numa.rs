//! Memory nodes on a machine of several: checked CPUs that span nodes, a
//! device IRQ delivered to a checked CPU of another node than its device,
//! and a real-time task whose own pages sit on a node that is not its
//! CPUs'. Each costs a remote memory access (1.3-2x a local one per cache
//! miss on two-socket machines) where a real-time task feels it.

use super::CheckInput;
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::snapshot::Snapshot;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::numa::NumaNode;
use cpushield_kernel::procfs::PROC;

/// The nodes that hold one of `cpus` (with memory or not).
fn nodes_with(nodes: &[NumaNode], cpus: &CpuSet) -> CpuSet {
    CpuSet::from_cpus(
        nodes
            .iter()
            .filter(|n| n.cpus.intersects(cpus))
            .map(|n| n.id),
    )
}

/// The CPUs of node `id`.
fn cpus_of(nodes: &[NumaNode], id: usize) -> CpuSet {
    nodes
        .iter()
        .find(|n| n.id == id)
        .map(|n| n.cpus.clone())
        .unwrap_or_default()
}

/// The real-time user processes with a thread whose affinity is within
/// `cpus`: the tasks whose pages `check` reads.
pub(crate) fn rt_processes_on(after: &Snapshot, cpus: &CpuSet) -> Vec<i32> {
    let mut pids: Vec<i32> = after
        .threads
        .iter()
        .filter(|t| !t.stat.is_kthread() && t.stat.is_realtime())
        .filter(|t| {
            t.affinity
                .as_ref()
                .is_some_and(|a| !a.is_empty() && a.is_subset(cpus))
        })
        .map(|t| t.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Every NUMA finding; none on a machine of one node.
pub(super) fn analyze(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    let nodes = &input.facts.nodes;
    if nodes.len() < 2 {
        return;
    }
    spans_nodes(input, nodes, findings);
    remote_devices(input, nodes, findings);
    remote_pages(input, nodes, findings);
    balancing(input, nodes, findings);
}

/// Automatic NUMA balancing on: each scan period it unmaps a sample of every
/// task's pages to learn which node uses them, and the task's next touch of
/// each is a page fault, a shielded real-time task's too (tuned's realtime
/// profiles turn it off for this reason).
fn balancing(input: &CheckInput<'_>, nodes: &[NumaNode], findings: &mut Vec<Finding>) {
    let facts = input.facts;
    if !cpushield_kernel::numa::balancing_applies(nodes, facts.numa_balancing) {
        return;
    }
    let Some(mode) = facts.numa_balancing.filter(|&m| m != 0) else {
        return;
    };
    let with_memory = nodes.iter().filter(|n| n.memory).count();
    findings.push(
        Finding::new(
            Severity::Warn,
            Topic::Numa,
            None,
            format!(
                "automatic NUMA balancing is on (kernel.numa_balancing={mode}) on a machine of {with_memory} memory nodes: it unmaps a sample of every task's pages each scan period, and the next touch of each is a page fault in the task on CPU {}",
                input.cpus
            ),
            format!("{} {mode}", cpushield_kernel::numa::NUMA_BALANCING),
        )
        .remedy(Remedy::runtime("sysctl -w kernel.numa_balancing=0"))
        .remedy(Remedy::boot("numa_balancing=disable")),
    );
}

fn spans_nodes(input: &CheckInput<'_>, nodes: &[NumaNode], findings: &mut Vec<Finding>) {
    let spanned = nodes_with(nodes, input.cpus);
    if spanned.len() < 2 {
        return;
    }
    let per_node: Vec<String> = spanned
        .iter()
        .map(|id| format!("node{id} cpulist {}", cpus_of(nodes, id)))
        .collect();
    // The node with most checked CPUs keeps them; the others' go.
    let keep = spanned
        .iter()
        .max_by_key(|&id| {
            let cpus = cpus_of(nodes, id);
            // At a tie, the node without CPU 0, which the rest of the system keeps.
            (cpus.intersection(input.cpus).len(), !cpus.contains(0), id)
        })
        .unwrap_or(0);
    let others = input.cpus.difference(&cpus_of(nodes, keep));
    let covered = input
        .shield
        .is_some_and(|s| others.is_subset(&s.masks.any()));
    let remedy = if covered {
        format!(
            "cpushield unshield --all {others} (the shield keeps node {keep}'s CPUs {})",
            input.cpus.difference(&others)
        )
    } else {
        format!("cpushield shield --all {}", input.cpus.difference(&others))
    };
    findings.push(
        Finding::new(
            Severity::Warn,
            Topic::Numa,
            None,
            format!(
                "the checked CPUs {} span memory nodes {}: a task or data shared across them makes remote memory accesses (1.3-2x a local one per cache miss), and the shield's cpuset takes memory from every one of those nodes",
                input.cpus, spanned
            ),
            format!("{} (/sys/devices/system/node)", per_node.join(", ")),
        )
        .remedy(Remedy::cpushield(remedy)),
    );
}

fn remote_devices(input: &CheckInput<'_>, nodes: &[NumaNode], findings: &mut Vec<Finding>) {
    for (irq, aff) in &input.after.irq_affinity {
        let Some(&device_node) = input.facts.irq_nodes.get(irq) else {
            continue;
        };
        let delivered = aff.effective.as_ref().unwrap_or(&aff.requested);
        let here = delivered.intersection(input.cpus);
        let remote = here.difference(&cpus_of(nodes, device_node));
        let Some(cpu) = remote.first() else {
            continue;
        };
        let local = cpus_of(nodes, device_node).difference(input.cpus);
        let name = input
            .after
            .interrupts
            .iter()
            .find(|l| l.number() == Some(*irq))
            .map(|l| l.name())
            .unwrap_or_default();
        let label = if name.is_empty() {
            format!("IRQ {irq}")
        } else {
            format!("IRQ {irq} ({name})")
        };
        let mut f = Finding::new(
            Severity::Warn,
            Topic::Numa,
            Some(cpu),
            format!(
                "{label} is delivered to CPU {remote} on node {}, but its device sits on node {device_node}: its handler and the task that takes its data reach the device and its buffers across nodes",
                nodes_with(nodes, &remote)
            ),
            format!(
                "numa_node {device_node} (/sys/bus/pci/devices/…, msi_irqs/{irq}), effective affinity {delivered}, node{device_node} cpulist {}",
                cpus_of(nodes, device_node)
            ),
        );
        if !local.is_empty() {
            f = f.remedy(Remedy::runtime(format!(
                "echo {local} > /proc/irq/{irq}/smp_affinity_list (CPUs of node {device_node})"
            )));
        }
        // Or the real-time work moves to the device's node; CPU 0 stays
        // with the rest of the system.
        let mut there = cpus_of(nodes, device_node);
        there.remove(0);
        if !there.is_empty() {
            f = f.remedy(Remedy::cpushield(format!(
                "cpushield shield --all {there} (run the task that takes its data on node {device_node}'s CPUs)"
            )));
        }
        findings.push(f);
    }
}

fn remote_pages(input: &CheckInput<'_>, nodes: &[NumaNode], findings: &mut Vec<Finding>) {
    for (pid, pages) in &input.facts.rt_pages {
        let threads: Vec<_> = input
            .after
            .threads
            .iter()
            .filter(|t| t.pid == *pid && t.stat.is_realtime())
            .collect();
        let cpus = threads
            .iter()
            .filter_map(|t| t.affinity.as_ref())
            .fold(CpuSet::new(), |all, a| all.union(a));
        let local = nodes_with(nodes, &cpus);
        let remote: u64 = pages
            .iter()
            .filter(|(node, _)| !local.contains(**node))
            .map(|(_, n)| n)
            .sum();
        if remote == 0 || local.is_empty() {
            continue;
        }
        let total: u64 = pages.values().sum();
        let comm = threads
            .first()
            .map(|t| t.stat.comm.clone())
            .unwrap_or_default();
        let per_node: Vec<String> = pages.iter().map(|(n, p)| format!("N{n}={p}")).collect();
        findings.push(
            Finding::new(
                Severity::Warn,
                Topic::Numa,
                cpus.first(),
                format!(
                    "real-time task {pid} ({comm}) runs on CPUs {cpus} (node {local}) but {remote} of its {total} resident pages of its own sit on another node: each access to them is remote"
                ),
                format!("{PROC}/{pid}/numa_maps, heap, stack and anonymous mappings: {}", per_node.join(" ")),
            )
            .remedy(Remedy::cpushield(format!(
                "cpushield run --cpus {cpus} --mlock -- PROGRAM (binds its memory to node {local} before it allocates)"
            )))
            .remedy(Remedy::runtime(format!(
                "migratepages {pid} all {local}"
            ))),
        );
    }
}
