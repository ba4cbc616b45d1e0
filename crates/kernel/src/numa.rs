//! Memory nodes as the kernel shows them: /sys/devices/system/node (the
//! node of each CPU, the nodes with memory), a device's `numa_node`, a
//! process's pages per node (/proc/PID/numa_maps), and the memory policy
//! a process gives itself (set_mempolicy).

use crate::{with_path, Kernel};
use cpushield_cpuset::CpuSet;
pub use cpushield_parse::numa::NodePages;
use cpushield_parse::numa::{
    device_irq, node_entry, parse_device_node, parse_node_list, parse_numa_maps,
};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// The directory of the memory nodes.
pub const NODE_DIR: &str = "/sys/devices/system/node";

/// The sysctl of automatic NUMA balancing (absent on a kernel built without
/// it, such as Debian's PREEMPT_RT builds).
pub const NUMA_BALANCING: &str = crate::paths::sysctl::NUMA_BALANCING;

/// One memory node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NumaNode {
    /// Its number.
    pub id: usize,
    /// Its CPUs (`nodeN/cpulist`); empty for a node of memory alone.
    pub cpus: CpuSet,
    /// Whether it has memory (`has_memory`); a node of CPUs alone has none.
    pub memory: bool,
}

/// The machine's memory nodes, by number; empty where the kernel has no
/// node directory (built without NUMA: one node, as if none). A node whose
/// `cpulist` cannot be read counts with no CPU. Where `has_memory` is
/// missing (kernels before 2.6.36) every node is taken to have memory.
pub fn nodes(kernel: &dyn Kernel) -> Vec<NumaNode> {
    let dir = Path::new(NODE_DIR);
    let Ok(entries) = kernel.read_dir(dir) else {
        return Vec::new();
    };
    let with_memory = kernel
        .read(&dir.join("has_memory"))
        .ok()
        .and_then(|t| parse_node_list("has_memory", &t).ok());
    let mut ids: Vec<usize> = entries.iter().filter_map(|e| node_entry(e)).collect();
    ids.sort_unstable();
    ids.into_iter()
        .map(|id| NumaNode {
            id,
            cpus: kernel
                .read(&dir.join(format!("node{id}/cpulist")))
                .ok()
                .and_then(|t| CpuSet::parse_list(&t).ok())
                .unwrap_or_default(),
            memory: with_memory.as_ref().is_none_or(|m| m.contains(id)),
        })
        .collect()
}

/// Automatic NUMA balancing's mode (`kernel.numa_balancing`: 0 off, 1 on,
/// 2 memory tiering, 3 both), or `None` on a kernel without it.
pub fn balancing(kernel: &dyn Kernel) -> Option<u32> {
    kernel
        .read(Path::new(NUMA_BALANCING))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// Whether automatic NUMA balancing applies here: a kernel that has it, on a
/// machine of more than one node with memory (the kernel turns it on only
/// there).
pub fn balancing_applies(nodes: &[NumaNode], balancing: Option<u32>) -> bool {
    balancing.is_some() && several_memory_nodes(nodes)
}

/// Whether more than one of `nodes` has memory: only then can a page be
/// remote to a CPU.
pub fn several_memory_nodes(nodes: &[NumaNode]) -> bool {
    nodes.iter().filter(|n| n.memory).count() > 1
}

/// The node of the device whose sysfs directory is `device` (its
/// `numa_node`); `None` when the kernel does not know it or the device has
/// no such file.
pub fn device_node(kernel: &dyn Kernel, device: &Path) -> Option<usize> {
    let text = kernel.read(&device.join("numa_node")).ok()?;
    parse_device_node(&text).ok().flatten()
}

/// Where PCI devices are listed.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The node of the device behind each IRQ whose device's node is known:
/// each PCI device's MSI vectors (`msi_irqs/N`) and its legacy `irq`.
pub fn irq_device_nodes(kernel: &dyn Kernel) -> BTreeMap<u32, usize> {
    let mut out = BTreeMap::new();
    let pci = Path::new(PCI_DEVICES);
    for dev in kernel.read_dir(pci).unwrap_or_default() {
        let dir = pci.join(&dev);
        let Some(node) = device_node(kernel, &dir) else {
            continue;
        };
        let msi = kernel.read_dir(&dir.join("msi_irqs")).unwrap_or_default();
        let legacy = kernel.read(&dir.join("irq")).ok();
        for irq in msi
            .iter()
            .map(String::as_str)
            .chain(legacy.as_deref())
            .filter_map(device_irq)
        {
            out.insert(irq, node);
        }
    }
    out
}

/// The resident pages of process `pid` on each node (its numa_maps).
pub fn pages_per_node(kernel: &dyn Kernel, pid: i32) -> io::Result<NodePages> {
    let path = format!("/proc/{pid}/numa_maps");
    let path = Path::new(&path);
    let text = kernel.read(path).map_err(|e| with_path(e, path))?;
    parse_numa_maps(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The nodes of `cpus` that have memory.
pub fn nodes_of(nodes: &[NumaNode], cpus: &CpuSet) -> CpuSet {
    CpuSet::from_cpus(
        nodes
            .iter()
            .filter(|n| n.memory && n.cpus.intersects(cpus))
            .map(|n| n.id),
    )
}

/// Bits of the node masks passed to the memory-policy calls: the most
/// nodes a Linux kernel supports (NODES_SHIFT 10).
const MASK_NODES: usize = 1024;

/// `nodes` as the words of a kernel node mask of [`MASK_NODES`] bits.
fn node_mask(nodes: &CpuSet) -> Vec<libc::c_ulong> {
    let bits = libc::c_ulong::BITS as usize;
    let mut words = vec![0 as libc::c_ulong; MASK_NODES / bits];
    for node in nodes.iter().filter(|&n| n < MASK_NODES) {
        words[node / bits] |= 1 << (node % bits);
    }
    words
}

/// The memory policy of the calling thread, given back when dropped: see
/// [`bind_this_thread`].
#[derive(Debug)]
pub struct ThreadPolicy {
    mode: libc::c_int,
    mask: Vec<libc::c_ulong>,
}

impl Drop for ThreadPolicy {
    fn drop(&mut self) {
        // MPOL_DEFAULT takes no mask.
        let (mask, maxnode) = if self.mode == libc::MPOL_DEFAULT {
            (std::ptr::null(), 0)
        } else {
            (self.mask.as_ptr(), MASK_NODES as libc::c_ulong + 1)
        };
        // SAFETY: set_mempolicy reads at most `maxnode - 1` bits from `mask`,
        // which holds MASK_NODES bits (or is null with MPOL_DEFAULT).
        unsafe { libc::syscall(libc::SYS_set_mempolicy, self.mode, mask, maxnode) };
    }
}

/// Binds the calling thread's future memory to `nodes` (set_mempolicy
/// MPOL_BIND) until the returned guard drops, which gives back the policy
/// it had. A child forked meanwhile keeps the binding through exec: its
/// pages come from those nodes only, before it allocates anything.
pub fn bind_this_thread(nodes: &CpuSet) -> io::Result<ThreadPolicy> {
    let mut previous = ThreadPolicy {
        mode: libc::MPOL_DEFAULT,
        mask: vec![0; MASK_NODES / libc::c_ulong::BITS as usize],
    };
    // SAFETY: get_mempolicy writes the mode to `mode` and at most MASK_NODES
    // bits to `mask`, which holds that many; no address is asked about.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut previous.mode as *mut libc::c_int,
            previous.mask.as_mut_ptr(),
            MASK_NODES as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let mask = node_mask(nodes);
    // SAFETY: set_mempolicy reads at most MASK_NODES bits of `mask`, which
    // holds that many.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            libc::MPOL_BIND,
            mask.as_ptr(),
            MASK_NODES as libc::c_ulong + 1,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(previous)
}

/// Moves the pages of process `pid` on nodes `from` to nodes `to`
/// (migrate_pages); returns how many pages could not be moved.
pub fn migrate_pages(pid: i32, from: &CpuSet, to: &CpuSet) -> io::Result<u64> {
    let (old, new) = (node_mask(from), node_mask(to));
    // SAFETY: migrate_pages reads at most MASK_NODES bits of each mask,
    // which hold that many.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid,
            MASK_NODES as libc::c_ulong + 1,
            old.as_ptr(),
            new.as_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeKernel;

    fn two_nodes() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file(format!("{NODE_DIR}/node0/cpulist"), "0-1\n");
        k.set_file(format!("{NODE_DIR}/node1/cpulist"), "2-3\n");
        k.set_file(format!("{NODE_DIR}/node2/cpulist"), "\n");
        k.set_file(format!("{NODE_DIR}/has_memory"), "0,2\n");
        k.set_file(format!("{NODE_DIR}/online"), "0-2\n");
        k
    }

    #[test]
    fn nodes_are_read_with_their_cpus_and_whether_they_have_memory() {
        let got = nodes(&two_nodes());
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[1].id, got[1].cpus.to_list(), got[1].memory),
            (1, "2-3".into(), false)
        );
        assert!(got[0].memory && got[2].memory && got[2].cpus.is_empty());
    }

    #[test]
    fn the_nodes_of_cpus_are_those_with_memory_that_hold_one_of_them() {
        let got = nodes(&two_nodes());
        assert_eq!(nodes_of(&got, &CpuSet::from_cpus([1, 2])).to_list(), "0");
        assert!(nodes_of(&got, &CpuSet::from_cpus([3])).is_empty());
    }

    #[test]
    fn a_node_mask_has_one_bit_per_node() {
        let words = node_mask(&CpuSet::from_cpus([0, 2, 65]));
        assert_eq!(words.len(), MASK_NODES / 64);
        assert_eq!((words[0], words[1]), (0b101, 0b10));
    }

    #[test]
    fn binding_this_thread_to_its_own_nodes_and_back_leaves_its_policy_as_it_was() {
        // Every node this thread may use now: binding to them changes
        // nothing it can allocate, and the guard gives the policy back.
        let mut mode: libc::c_int = -1;
        let guard = match bind_this_thread(&CpuSet::from_cpus([0])) {
            Ok(g) => g,
            // A kernel built without NUMA has no memory policy.
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return,
            Err(e) => panic!("{e}"),
        };
        drop(guard);
        // SAFETY: get_mempolicy writes the mode only (no mask asked for).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut libc::c_int,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                std::ptr::null::<libc::c_void>(),
                0 as libc::c_ulong,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(mode, libc::MPOL_DEFAULT);
    }

    #[test]
    fn a_kernel_without_numa_has_no_node() {
        assert!(nodes(&FakeKernel::new()).is_empty());
    }

    #[test]
    fn each_msi_vector_and_the_legacy_irq_of_a_device_map_to_its_node() {
        let k = FakeKernel::new();
        let nic = format!("{PCI_DEVICES}/0000:00:03.0");
        k.set_file(format!("{nic}/numa_node"), "1\n");
        k.set_file(format!("{nic}/msi_irqs/40"), "msix\n");
        k.set_file(format!("{nic}/msi_irqs/41"), "msix\n");
        k.set_file(format!("{nic}/irq"), "11\n");
        let unknown = format!("{PCI_DEVICES}/0000:00:04.0");
        k.set_file(format!("{unknown}/numa_node"), "-1\n");
        k.set_file(format!("{unknown}/irq"), "10\n");
        let got = irq_device_nodes(&k);
        assert_eq!(got, BTreeMap::from([(11, 1), (40, 1), (41, 1)]));
    }

    #[test]
    fn a_device_node_is_read_from_its_numa_node_file() {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/pci0000:00/0000:00:03.0/numa_node", "1\n");
        k.set_file("/sys/devices/pci0000:00/0000:00:04.0/numa_node", "-1\n");
        assert_eq!(
            device_node(&k, Path::new("/sys/devices/pci0000:00/0000:00:03.0")),
            Some(1)
        );
        assert_eq!(
            device_node(&k, Path::new("/sys/devices/pci0000:00/0000:00:04.0")),
            None
        );
        assert_eq!(device_node(&k, Path::new("/sys/devices/none")), None);
    }
}
