//! The host's half of a shielded virtual machine: on the host of a QEMU/KVM
//! guest, what libvirt's `vcpupin`/`emulatorpin` and KubeVirt's
//! `dedicatedCpuPlacement`/`isolateEmulatorThread` set, and what users get
//! wrong. A guest's worst case is its vCPU threads' worst case on the host:
//! - each vCPU thread that may run on a checked CPU pinned to one checked
//!   CPU of its own (a vCPU that floats, or shares a CPU with another, waits
//!   for the CPU like any task); one pinned to a housekeeping CPU is the
//!   guest's housekeeping vCPU, left alone;
//! - the emulator and I/O threads off those CPUs (they wake on the guest's
//!   I/O and would preempt the vCPU that asked for it);
//! - every vCPU of a VM at one scheduling policy once one is real-time;
//! - the kernel's `kvm-pit/PID` thread with vCPU 0, whose PIT interrupts it
//!   injects (KubeVirt had to place it by hand, PR #9613).
//!
//! A VM is looked at when one of its vCPU threads may run on a checked CPU;
//! one that lives on the housekeeping CPUs is not a real-time guest here.
//! vCPU threads are found by QEMU's names for them (`-name
//! NAME,debug-threads=on`).

use super::CheckInput;
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::snapshot::ThreadSample;
use cpushield_cpuset::CpuSet;
use cpushield_parse::qemu_thread::{is_vcpu_thread_name, kvm_pit_owner, vcpu_of_thread_name};
use std::collections::{BTreeMap, BTreeSet};

/// One VM process on this host, as its threads show it.
struct VmProcess<'a> {
    /// The process id.
    pid: i32,
    /// Its main thread's name (`qemu-system-x86`).
    name: String,
    /// vCPU threads by vCPU number; single-threaded TCG's one thread has none.
    vcpus: Vec<(Option<u32>, &'a ThreadSample)>,
    /// Every other thread of the process: the emulator's main loop, I/O
    /// threads, vhost workers, RCU and worker threads.
    others: Vec<&'a ThreadSample>,
    /// The kernel's `kvm-pit/PID` thread for it, when it has one.
    pit: Option<&'a ThreadSample>,
}

impl VmProcess<'_> {
    fn label(&self) -> String {
        format!("VM {} (pid {})", self.name, self.pid)
    }
}

fn vcpu_label(vcpu: Option<u32>) -> String {
    match vcpu {
        Some(n) => format!("vCPU {n}"),
        None => "every vCPU (single-threaded TCG)".into(),
    }
}

/// The VM processes of the snapshot: a process with a thread named as a
/// vCPU thread.
fn vm_processes(threads: &[ThreadSample]) -> Vec<VmProcess<'_>> {
    let vm_pids: BTreeSet<i32> = threads
        .iter()
        .filter(|t| !t.stat.is_kthread() && is_vcpu_thread_name(&t.stat.comm))
        .map(|t| t.pid)
        .collect();
    let mut vms: BTreeMap<i32, VmProcess<'_>> = vm_pids
        .iter()
        .map(|&pid| {
            let vm = VmProcess {
                pid,
                name: String::new(),
                vcpus: Vec::new(),
                others: Vec::new(),
                pit: None,
            };
            (pid, vm)
        })
        .collect();
    for t in threads {
        if t.stat.is_kthread() {
            if let Some(vm) = kvm_pit_owner(&t.stat.comm).and_then(|p| vms.get_mut(&p)) {
                vm.pit = Some(t);
            }
            continue;
        }
        let Some(vm) = vms.get_mut(&t.pid) else {
            continue;
        };
        if t.stat.tid == t.pid {
            vm.name = t.stat.comm.clone();
        }
        if is_vcpu_thread_name(&t.stat.comm) {
            vm.vcpus.push((vcpu_of_thread_name(&t.stat.comm), t));
        } else {
            vm.others.push(t);
        }
    }
    let mut out: Vec<VmProcess<'_>> = vms.into_values().collect();
    for vm in &mut out {
        vm.vcpus.sort_by_key(|(n, t)| (*n, t.stat.tid));
        if vm.name.is_empty() {
            vm.name = "qemu".into();
        }
    }
    out
}

/// Whether the thread may run on one of `cpus`.
fn may_run_on(t: &ThreadSample, cpus: &CpuSet) -> bool {
    t.affinity.as_ref().is_some_and(|a| a.intersects(cpus))
}

/// The one CPU a thread may run on.
fn pinned_cpu(t: &ThreadSample) -> Option<usize> {
    let a = t.affinity.as_ref()?;
    (a.len() == 1).then(|| a.first()).flatten()
}

/// Every VM finding.
pub(super) fn analyze(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    let vms = vm_processes(&input.after.threads);
    let relevant: Vec<&VmProcess<'_>> = vms
        .iter()
        .filter(|vm| vm.vcpus.iter().any(|(_, t)| may_run_on(t, input.cpus)))
        .collect();
    if relevant.is_empty() {
        return;
    }
    // A checked CPU holds one vCPU: the first (by VM, then vCPU) pinned to it.
    let mut owner: BTreeMap<usize, (i32, Option<u32>)> = BTreeMap::new();
    for vm in &relevant {
        for (n, t) in &vm.vcpus {
            if let Some(cpu) = pinned_cpu(t).filter(|c| input.cpus.contains(*c)) {
                owner.entry(cpu).or_insert((vm.pid, *n));
            }
        }
    }
    let mut free: Vec<usize> = input
        .cpus
        .iter()
        .filter(|c| !owner.contains_key(c))
        .collect();
    free.reverse();
    for vm in &relevant {
        vcpu_pinning(input, vm, &owner, &mut free, findings);
        emulator_threads(input, vm, findings);
        vcpu_policies(vm, findings);
        kvm_pit(vm, findings);
    }
}

/// Each vCPU thread on one checked CPU of its own; the fix places it on a
/// checked CPU no vCPU holds yet.
fn vcpu_pinning(
    input: &CheckInput<'_>,
    vm: &VmProcess<'_>,
    owner: &BTreeMap<usize, (i32, Option<u32>)>,
    free: &mut Vec<usize>,
    findings: &mut Vec<Finding>,
) {
    for (n, t) in &vm.vcpus {
        let Some(allowed) = &t.affinity else { continue };
        let problem = match pinned_cpu(t) {
            Some(cpu) if input.cpus.contains(cpu) => match owner.get(&cpu) {
                Some(&(pid, other)) if (pid, other) != (vm.pid, *n) => {
                    let whose = if pid == vm.pid {
                        vcpu_label(other)
                    } else {
                        format!("{} of pid {pid}", vcpu_label(other))
                    };
                    format!("shares CPU {cpu} with {whose}")
                }
                _ => continue,
            },
            // A vCPU of its own on a housekeeping CPU: the guest's
            // housekeeping vCPU, by the user's choice.
            Some(_) => continue,
            None if allowed.intersects(input.cpus) => {
                format!("may run on CPUs {}", allowed.to_list())
            }
            None => continue,
        };
        let title = format!(
            "{}: {} (thread {}) is not pinned to a checked CPU of its own",
            vm.label(),
            vcpu_label(*n),
            t.stat.tid
        );
        let evidence = format!(
            "it {problem}; a vCPU that floats or shares its CPU waits for it like any task, and the guest sees the wait as its own latency (libvirt: <vcpupin vcpu='N' cpuset='CPU'/>; KubeVirt: dedicatedCpuPlacement)"
        );
        let finding = Finding::new(Severity::Warn, Topic::Vm, None, title, evidence);
        findings.push(match free.pop() {
            // sched_setaffinity, as libvirt's vcpupin does: `cpushield run
            // --pid` would move the whole QEMU process into a v2 shield,
            // emulator threads with it.
            Some(cpu) => finding.remedy(Remedy::runtime(format!(
                "taskset -pc {cpu} {}",
                t.stat.tid
            ))),
            None => Finding {
                evidence: format!(
                    "{}; every checked CPU ({}) already holds a vCPU: check more CPUs or give the VM fewer vCPUs",
                    finding.evidence,
                    input.list()
                ),
                ..finding
            },
        });
    }
}

/// The VM's other threads, and its vhost workers, off the checked CPUs.
fn emulator_threads(input: &CheckInput<'_>, vm: &VmProcess<'_>, findings: &mut Vec<Finding>) {
    let on: Vec<&ThreadSample> = vm
        .others
        .iter()
        .copied()
        .filter(|t| may_run_on(t, input.cpus))
        .collect();
    if on.is_empty() {
        return;
    }
    let cpus = on.iter().fold(CpuSet::default(), |acc, t| {
        acc.union(
            &t.affinity
                .as_ref()
                .map(|a| a.intersection(input.cpus))
                .unwrap_or_default(),
        )
    });
    let names: Vec<String> = on
        .iter()
        .map(|t| format!("{} ({})", t.stat.comm, t.stat.tid))
        .collect();
    let title = format!(
        "{}: {} emulator and I/O thread{} may run on checked CPU{} {}",
        vm.label(),
        on.len(),
        if on.len() == 1 { "" } else { "s" },
        if cpus.len() == 1 { "" } else { "s" },
        cpus.to_list()
    );
    let evidence = format!(
        "{}; they wake on the guest's I/O and preempt the vCPU on that CPU (libvirt: <emulatorpin cpuset='HOUSEKEEPING'/> and <iothreadpin>; KubeVirt: isolateEmulatorThread)",
        names.join(", ")
    );
    let housekeeping = input.housekeeping();
    let finding = Finding::new(Severity::Warn, Topic::Vm, None, title, evidence);
    findings.push(if housekeeping.is_empty() {
        finding
    } else {
        let tids: Vec<String> = on.iter().map(|t| t.stat.tid.to_string()).collect();
        finding.remedy(Remedy::runtime(format!(
            "for t in {}; do taskset -pc {} $t; done",
            tids.join(" "),
            housekeeping.to_list()
        )))
    });
}

/// `chrt`'s option for SCHED_FIFO (1) or SCHED_RR (2).
fn chrt_flag(policy: u32) -> &'static str {
    if policy == 2 {
        "-r"
    } else {
        "-f"
    }
}

/// Once one vCPU of a VM runs SCHED_FIFO or SCHED_RR, every vCPU must: a
/// guest's real-time task may be on any of them. (A SCHED_DEADLINE vCPU is
/// not copied: its runtime and period are the user's to choose.)
fn vcpu_policies(vm: &VmProcess<'_>, findings: &mut Vec<Finding>) {
    let Some((rt_n, rt)) = vm
        .vcpus
        .iter()
        .find(|(_, t)| matches!(t.stat.policy, 1 | 2))
    else {
        return;
    };
    for (n, t) in &vm.vcpus {
        if t.stat.is_realtime() {
            continue;
        }
        findings.push(
            Finding::new(
                Severity::Warn,
                Topic::Vm,
                None,
                format!(
                    "{}: {} (thread {}) is not real-time, while {} is",
                    vm.label(),
                    vcpu_label(*n),
                    t.stat.tid,
                    vcpu_label(*rt_n)
                ),
                format!(
                    "policy {} beside policy {} priority {}: a guest task on this vCPU waits behind any host task the others would preempt",
                    t.stat.policy, rt.stat.policy, rt.stat.rt_priority
                ),
            )
            .remedy(Remedy::runtime(format!(
                "chrt {} -p {} {}",
                chrt_flag(rt.stat.policy),
                rt.stat.rt_priority,
                t.stat.tid
            ))),
        );
    }
}

/// The VM's `kvm-pit/PID` thread where vCPU 0 is pinned.
fn kvm_pit(vm: &VmProcess<'_>, findings: &mut Vec<Finding>) {
    let Some(pit) = vm.pit else { return };
    let Some(cpu) = vm
        .vcpus
        .iter()
        .find(|(n, _)| *n == Some(0))
        .and_then(|(_, t)| pinned_cpu(t))
    else {
        return;
    };
    let Some(allowed) = &pit.affinity else { return };
    if allowed.len() == 1 && allowed.contains(cpu) {
        return;
    }
    findings.push(
        Finding::new(
            Severity::Warn,
            Topic::Vm,
            None,
            format!(
                "{}: its kernel thread {} ({}) is not with vCPU 0 on CPU {cpu}",
                vm.label(),
                pit.stat.comm,
                pit.stat.tid
            ),
            format!(
                "it may run on CPUs {}; it injects the guest's PIT timer interrupts into vCPU 0, late when it waits for another CPU (KubeVirt places it with vCPU 0, PR #9613)",
                allowed.to_list()
            ),
        )
        .remedy(Remedy::runtime(format!("taskset -pc {cpu} {}", pit.stat.tid))),
    );
}
