//! What the name (`comm`) of a thread of a virtual machine's host says: QEMU's
//! vCPU threads (`-name NAME,debug-threads=on`: `CPU 1/KVM`, `CPU 1/TCG`, or
//! `ALL CPUs/TCG` for single-threaded TCG) and the kernel's per-VM PIT thread
//! (`kvm-pit/PID`, PID being the VM's process).

/// The vCPU number of a QEMU vCPU thread named `CPU N/ACCEL`.
pub fn vcpu_of_thread_name(comm: &str) -> Option<u32> {
    let rest = comm.strip_prefix("CPU ")?;
    let (n, accel) = rest.split_once('/')?;
    matches!(accel, "KVM" | "TCG" | "HVF" | "WHPX").then_some(())?;
    n.parse().ok()
}

/// Whether the thread runs guest code: one vCPU's thread, or single-threaded
/// TCG's one thread for every vCPU.
pub fn is_vcpu_thread_name(comm: &str) -> bool {
    vcpu_of_thread_name(comm).is_some() || comm == "ALL CPUs/TCG"
}

/// The VM process a `kvm-pit/PID` kernel thread serves (the in-kernel PIT's
/// timer worker, which KVM names after the VM's userspace pid).
pub fn kvm_pit_owner(comm: &str) -> Option<i32> {
    comm.strip_prefix("kvm-pit/")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_vcpu_thread_names_give_the_vcpu() {
        assert_eq!(vcpu_of_thread_name("CPU 1/TCG"), Some(1));
        assert_eq!(vcpu_of_thread_name("CPU 12/KVM"), Some(12));
        assert_eq!(vcpu_of_thread_name("CPU x/KVM"), None);
        assert_eq!(vcpu_of_thread_name("CPU 1/foo"), None);
        assert_eq!(vcpu_of_thread_name("qemu-system-x86"), None);
    }

    #[test]
    fn single_threaded_tcg_runs_guest_code_on_one_thread_of_no_number() {
        assert!(is_vcpu_thread_name("ALL CPUs/TCG"));
        assert!(is_vcpu_thread_name("CPU 0/KVM"));
        assert!(!is_vcpu_thread_name("IO mon_iothread"));
        assert_eq!(vcpu_of_thread_name("ALL CPUs/TCG"), None);
    }

    #[test]
    fn a_kvm_pit_thread_names_its_vm_process() {
        assert_eq!(kvm_pit_owner("kvm-pit/4711"), Some(4711));
        assert_eq!(kvm_pit_owner("kvm-pit/"), None);
        assert_eq!(kvm_pit_owner("kvm-nx-lpage-re"), None);
    }
}
