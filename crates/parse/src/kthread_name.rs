//! What a kernel thread's name (`comm`, /proc/PID/stat field 2) says: the
//! threaded handler of an IRQ (`irq/24-virtio0-input.0`, cut to 15 bytes) and
//! the per-CPU threads the kernel names after their CPU (`ksoftirqd/3`,
//! `rcuc/3`, `ktimers/3`, `rcuop/3`).

/// The IRQ whose threaded handler this is: `irq/N-name` (and `irq/N-s-name`,
/// the thread of a secondary handler that forced threading adds).
pub fn irq_thread_irq(comm: &str) -> Option<u32> {
    let rest = comm.strip_prefix("irq/")?;
    let (number, name) = rest.split_once('-')?;
    if name.is_empty() {
        return None;
    }
    number.parse().ok()
}

/// The CPU a per-CPU kernel thread named `PREFIX/N` serves, for one of the
/// given prefixes (`ksoftirqd`, `rcuc`, `ktimers`, `rcuop`...); `kworker/3:1`
/// and `kworker/u8:2` are not of this form.
pub fn per_cpu_thread<'a>(comm: &str, prefixes: &[&'a str]) -> Option<(&'a str, usize)> {
    let (prefix, cpu) = comm.split_once('/')?;
    let prefix = prefixes.iter().find(|p| **p == prefix)?;
    Some((prefix, cpu.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threaded_handler_names_its_irq() {
        assert_eq!(irq_thread_irq("irq/24-virtio0-i"), Some(24));
        assert_eq!(irq_thread_irq("irq/9-acpi"), Some(9));
        assert_eq!(irq_thread_irq("irq/31-s-nvme0q1"), Some(31));
        assert_eq!(irq_thread_irq("irq_work/3"), None);
        assert_eq!(irq_thread_irq("irq/x-foo"), None);
        assert_eq!(irq_thread_irq("irq/12-"), None);
    }

    #[test]
    fn per_cpu_threads_name_their_cpu_and_others_do_not() {
        let kinds = ["ksoftirqd", "rcuc", "ktimers", "rcuop"];
        assert_eq!(per_cpu_thread("ktimers/3", &kinds), Some(("ktimers", 3)));
        assert_eq!(per_cpu_thread("rcuop/12", &kinds), Some(("rcuop", 12)));
        assert_eq!(per_cpu_thread("kworker/3:1", &kinds), None);
        assert_eq!(per_cpu_thread("rcuog/0", &kinds), None);
        assert_eq!(per_cpu_thread("ksoftirqd/x", &kinds), None);
    }
}
