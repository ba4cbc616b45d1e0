//! The guests' vCPUs on this host, for their CPU Ready: how long each vCPU's
//! thread was runnable but not running (its schedstat run-queue wait), the
//! time the guest lost to the host while it had work to do.
//!
//! A VM is a QEMU process (its name starts with `qemu`: `qemu-system-*`,
//! `qemu-kvm`) whose vCPU threads carry QEMU's names for them (`CPU 1/KVM`,
//! given by `-name NAME,debug-threads=on`, which libvirt sets). The work per
//! look is bounded whatever the machine's size: the process list is read
//! every [`RELIST_EVERY`] looks, a process is classified once, on a later
//! look than the one that first listed it (so that a fork has had time to
//! exec), at most [`CLASSIFY_PER_LOOK`] of them per look, and each look
//! reads one schedstat per vCPU.

use cpushield_kernel::{Kernel, Procfs};
use cpushield_parse::qemu_args::vm_name;
use cpushield_parse::qemu_thread::vcpu_of_thread_name;
use cpushield_parse::schedstat::{parse_schedstat, Schedstat};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Looks between two readings of the process list.
pub const RELIST_EVERY: u64 = 10;

/// Processes classified (VM or not) per look, at most.
pub const CLASSIFY_PER_LOOK: usize = 1024;

/// One vCPU's counters at one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcpuSample {
    /// The VM's name (`-name`), or its process's name without one.
    pub vm: String,
    /// The VM's process.
    pub pid: i32,
    /// The guest's CPU number.
    pub vcpu: u32,
    /// Its host thread's schedstat.
    pub stat: Schedstat,
}

/// A VM found on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Vm {
    name: String,
    /// (vCPU, thread ID), by vCPU.
    vcpus: Vec<(u32, i32)>,
}

/// The VMs of the host, found over the looks; see the module's doc.
#[derive(Debug, Default)]
pub struct Vcpus {
    looks: u64,
    /// Every listed process: `Some` for a VM, `None` for anything else.
    classified: HashMap<i32, Option<Vm>>,
    /// Listed, not classified yet, with the look that listed them.
    pending: VecDeque<(i32, u64)>,
    /// QEMU processes without named vCPU threads, told once each.
    unnamed: HashSet<i32>,
    /// One look only (`agent --once`): classify every process at once.
    one_shot: bool,
}

impl Vcpus {
    /// Nothing found yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// For a single look (`agent --once`): it classifies every process it
    /// lists in that look, with no bound, since there is no later look.
    pub fn one_shot() -> Self {
        Self {
            one_shot: true,
            ..Self::default()
        }
    }

    /// One look: the process list when due, some classification, and every
    /// known vCPU's schedstat. Returns the samples and the lines to log (a
    /// QEMU whose vCPU threads have no names, once per process).
    pub fn look(&mut self, kernel: &dyn Kernel) -> (Vec<VcpuSample>, Vec<String>) {
        let proc = Procfs::new(kernel);
        let mut log = Vec::new();
        if self.looks.is_multiple_of(RELIST_EVERY) {
            self.relist(&proc);
        }
        let look = self.looks;
        let (budget, due) = match self.one_shot {
            true => (usize::MAX, look + 1),
            false => (CLASSIFY_PER_LOOK, look),
        };
        let mut done = 0;
        while done < budget {
            match self.pending.front() {
                Some(&(pid, listed)) if listed < due => {
                    self.pending.pop_front();
                    let vm = classify(&proc, pid);
                    if let Some(Some(vm)) = &vm {
                        if vm.vcpus.is_empty() && self.unnamed.insert(pid) {
                            log.push(format!(
                                "QEMU process {pid} ({}) has no named vCPU threads, so its vCPUs' CPU Ready is not counted: start it with -name NAME,debug-threads=on (libvirt does)",
                                vm.name
                            ));
                        }
                    }
                    if let Some(vm) = vm {
                        self.classified.insert(pid, vm);
                    }
                    done += 1;
                }
                _ => break,
            }
        }
        self.looks += 1;
        let mut samples = Vec::new();
        let mut ended = Vec::new();
        for (pid, vm) in self
            .classified
            .iter()
            .filter_map(|(p, v)| Some((p, v.as_ref()?)))
        {
            for &(vcpu, tid) in &vm.vcpus {
                match proc.thread_file(*pid, tid, "schedstat") {
                    Ok(Some(text)) => {
                        if let Some(stat) = parse_schedstat(&text) {
                            samples.push(VcpuSample {
                                vm: vm.name.clone(),
                                pid: *pid,
                                vcpu,
                                stat,
                            });
                        }
                    }
                    // A vCPU thread that ended (unplugged, or the VM
                    // stopped): the process is classified again.
                    _ => ended.push(*pid),
                }
            }
        }
        for pid in ended {
            self.classified.remove(&pid);
            self.pending.push_back((pid, look));
        }
        samples.sort_by_key(|s| (s.pid, s.vcpu));
        (samples, log)
    }

    /// Reads the process list: forgets the processes that ended, queues the
    /// new ones, and queues the known VMs again (a vCPU plugged in since).
    fn relist(&mut self, proc: &Procfs) {
        let Ok(pids) = proc.pids() else { return };
        let now: HashSet<i32> = pids.iter().copied().collect();
        self.classified.retain(|pid, _| now.contains(pid));
        self.unnamed.retain(|pid| now.contains(pid));
        self.pending.retain(|(pid, _)| now.contains(pid));
        let queued: HashSet<i32> = self.pending.iter().map(|(p, _)| *p).collect();
        let look = self.looks;
        let vms: Vec<i32> = self
            .classified
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(p, _)| *p)
            .collect();
        for pid in pids
            .into_iter()
            .filter(|p| !self.classified.contains_key(p) && !queued.contains(p))
            .chain(vms)
        {
            self.pending.push_back((pid, look));
        }
    }
}

/// What process `pid` is: `Some(Some(vm))` for a QEMU, `Some(None)` for
/// anything else, `None` when it ended.
fn classify(proc: &Procfs, pid: i32) -> Option<Option<Vm>> {
    let comm = proc.process_file(pid, "comm").ok()??;
    let comm = comm.trim_end();
    if !comm.starts_with("qemu") {
        return Some(None);
    }
    let name = proc
        .process_bytes(pid, "cmdline")
        .ok()
        .flatten()
        .and_then(|argv| vm_name(&argv))
        .unwrap_or_else(|| comm.to_string());
    let mut vcpus = BTreeMap::new();
    for tid in proc.threads(pid).ok()??.into_iter() {
        if let Ok(Some(c)) = proc.thread_file(pid, tid, "comm") {
            if let Some(v) = vcpu_of_thread_name(c.trim_end()) {
                vcpus.insert(v, tid);
            }
        }
    }
    Some(Some(Vm {
        name,
        vcpus: vcpus.into_iter().collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::{FakeKernel, Kernel};

    fn qemu(k: &FakeKernel, pid: i32, name: &str, vcpus: &[(u32, i32, &str)]) {
        k.set_file(format!("/proc/{pid}/comm"), "qemu-system-x86\n");
        k.set_file(
            format!("/proc/{pid}/cmdline"),
            format!("qemu-system-x86_64\0-name\0guest={name},debug-threads=on\0"),
        );
        k.set_file(format!("/proc/{pid}/task/{pid}/comm"), "qemu-system-x86\n");
        for (vcpu, tid, stat) in vcpus {
            k.set_file(
                format!("/proc/{pid}/task/{tid}/comm"),
                format!("CPU {vcpu}/KVM\n"),
            );
            k.set_file(format!("/proc/{pid}/task/{tid}/schedstat"), *stat);
        }
    }

    fn look_until_found(v: &mut Vcpus, k: &FakeKernel) -> Vec<VcpuSample> {
        for _ in 0..3 {
            let (s, _) = v.look(k);
            if !s.is_empty() {
                return s;
            }
        }
        panic!("no vCPU found in three looks");
    }

    #[test]
    fn each_vcpu_of_a_named_qemu_is_sampled_with_its_run_queue_wait() {
        let k = FakeKernel::new();
        k.set_file("/proc/1/comm", "systemd\n");
        qemu(
            &k,
            40,
            "rt-vm",
            &[(0, 41, "500 2000 3\n"), (1, 42, "700 9000 4\n")],
        );
        let mut v = Vcpus::new();
        let s = look_until_found(&mut v, &k);
        assert_eq!(
            s.iter()
                .map(|s| (s.vm.as_str(), s.pid, s.vcpu, s.stat.wait_ns))
                .collect::<Vec<_>>(),
            [("rt-vm", 40, 0, 2000), ("rt-vm", 40, 1, 9000)]
        );
    }

    #[test]
    fn a_process_is_classified_on_a_later_look_than_the_one_that_listed_it() {
        let k = FakeKernel::new();
        qemu(&k, 40, "vm", &[(0, 41, "1 2 3\n")]);
        let mut v = Vcpus::new();
        assert!(v.look(&k).0.is_empty(), "classified on the listing look");
        assert_eq!(v.look(&k).0.len(), 1);
    }

    #[test]
    fn a_single_look_classifies_every_process_it_lists() {
        let k = FakeKernel::new();
        for pid in 100..(100 + 2 * CLASSIFY_PER_LOOK as i32) {
            k.set_file(format!("/proc/{pid}/comm"), "worker\n");
        }
        qemu(&k, 9000, "vm", &[(0, 9001, "1 2 3\n")]);
        assert_eq!(Vcpus::one_shot().look(&k).0.len(), 1);
    }

    #[test]
    fn a_vm_that_stops_is_dropped_and_a_new_one_is_found_at_the_next_listing() {
        let k = FakeKernel::new();
        qemu(&k, 40, "a", &[(0, 41, "1 2 3\n")]);
        let mut v = Vcpus::new();
        look_until_found(&mut v, &k);
        k.remove_tree(std::path::Path::new("/proc/40")).unwrap();
        qemu(&k, 50, "b", &[(0, 51, "1 5 3\n")]);
        let mut names = Vec::new();
        for _ in 0..(RELIST_EVERY + 2) {
            names = v.look(&k).0.into_iter().map(|s| s.vm).collect();
        }
        assert_eq!(names, ["b"]);
    }

    #[test]
    fn a_qemu_without_named_vcpu_threads_is_told_once_with_the_option_that_names_them() {
        let k = FakeKernel::new();
        k.set_file("/proc/40/comm", "qemu-kvm\n");
        k.set_file("/proc/40/task/40/comm", "qemu-kvm\n");
        let mut v = Vcpus::new();
        let mut logged = Vec::new();
        for _ in 0..(2 * RELIST_EVERY + 2) {
            logged.extend(v.look(&k).1);
        }
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(logged[0].contains("debug-threads=on"), "{logged:?}");
    }

    #[test]
    fn classification_per_look_is_bounded_so_a_big_host_is_covered_over_several_looks() {
        let k = FakeKernel::new();
        for pid in 100..(100 + 2 * CLASSIFY_PER_LOOK as i32) {
            k.set_file(format!("/proc/{pid}/comm"), "worker\n");
        }
        let vm = 100 + 2 * CLASSIFY_PER_LOOK as i32 + 5;
        qemu(&k, vm, "last", &[(0, vm + 1, "1 2 3\n")]);
        let mut v = Vcpus::new();
        assert!(v.look(&k).0.is_empty());
        assert!(v.look(&k).0.is_empty(), "found before its turn");
        assert!(v.look(&k).0.is_empty(), "found before its turn");
        assert_eq!(v.look(&k).0.len(), 1);
    }
}
