//! Binding an IRQ to the CPUs of a real-time task, and putting it back (Sherer
//! §4: `rtl_irq_set_affinity(irq, &mask, &old_mask)` then restoring
//! `old_mask` on cleanup). The old mask is restored when the binding drops.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{read_trimmed, Kernel};
use std::io;
use std::path::PathBuf;

/// Why an IRQ could not be bound or restored.
#[derive(Debug, thiserror::Error)]
pub enum IrqError {
    /// There is no /proc/irq/N.
    #[error("IRQ {irq} does not exist: see /proc/interrupts for the IRQ numbers of this machine")]
    NoSuchIrq {
        /// The IRQ asked for.
        irq: u32,
    },
    /// The kernel manages this IRQ's affinity (writes fail with EIO).
    #[error(
        "IRQ {irq} is kernel-managed: its affinity is set by the kernel and can only change at boot \
         (isolcpus=managed_irq,<shielded CPUs> keeps it off shielded CPUs); bind a device IRQ that is not managed"
    )]
    KernelManaged {
        /// The IRQ asked for.
        irq: u32,
    },
    /// Not root.
    #[error("not permitted to change the affinity of IRQ {irq}: run as root")]
    NotPermitted {
        /// The IRQ asked for.
        irq: u32,
    },
    /// The kernel refused the CPUs (offline, or not allowed for IRQs).
    #[error("IRQ {irq} cannot be sent to CPUs {cpus}: {source}; choose online CPUs")]
    Refused {
        /// The IRQ asked for.
        irq: u32,
        /// The CPUs asked for.
        cpus: CpuSet,
        /// The kernel's error.
        source: io::Error,
    },
    /// Any other failure reading or writing the affinity file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// The affinity file of an IRQ (hex mask format).
pub fn affinity_path(irq: u32) -> PathBuf {
    cpushield_kernel::paths::irq_affinity(irq)
}

/// Names what an error writing IRQ `irq`'s affinity to `cpus` means.
pub fn classify_write_error(irq: u32, cpus: &CpuSet, error: io::Error) -> IrqError {
    match error.raw_os_error() {
        Some(libc::EIO) => IrqError::KernelManaged { irq },
        Some(libc::EPERM) | Some(libc::EACCES) => IrqError::NotPermitted { irq },
        Some(libc::ENOENT) => IrqError::NoSuchIrq { irq },
        Some(libc::EINVAL) | Some(libc::ERANGE) => IrqError::Refused {
            irq,
            cpus: cpus.clone(),
            source: error,
        },
        _ if error.kind() == io::ErrorKind::NotFound => IrqError::NoSuchIrq { irq },
        _ => IrqError::Io {
            path: affinity_path(irq),
            source: error,
        },
    }
}

/// An IRQ sent to chosen CPUs. Dropping it writes the old mask back.
pub struct IrqBinding<'k> {
    kernel: &'k dyn Kernel,
    irq: u32,
    old_mask: String,
    restored: bool,
}

impl std::fmt::Debug for IrqBinding<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IrqBinding")
            .field("irq", &self.irq)
            .field("old_mask", &self.old_mask)
            .field("restored", &self.restored)
            .finish()
    }
}

/// Sends IRQ `irq` to `cpus` on the running kernel; the old mask comes back
/// when the binding drops.
pub fn bind_irq(irq: u32, cpus: &CpuSet) -> Result<IrqBinding<'static>, IrqError> {
    bind_irq_with(crate::program::host().kernel(), irq, cpus)
}

/// [`bind_irq`] through any [`Kernel`] (a fake one in tests).
pub fn bind_irq_with<'k>(
    kernel: &'k dyn Kernel,
    irq: u32,
    cpus: &CpuSet,
) -> Result<IrqBinding<'k>, IrqError> {
    let path = affinity_path(irq);
    let old_mask = read_trimmed(kernel, &path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => IrqError::NoSuchIrq { irq },
        _ => IrqError::Io {
            path: path.clone(),
            source: e,
        },
    })?;
    if cpus.is_empty() {
        return Err(IrqError::Refused {
            irq,
            cpus: cpus.clone(),
            source: io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    kernel
        .write(&path, &cpus.to_mask())
        .map_err(|e| classify_write_error(irq, cpus, e))?;
    Ok(IrqBinding {
        kernel,
        irq,
        old_mask,
        restored: false,
    })
}

impl IrqBinding<'_> {
    /// The IRQ.
    pub fn irq(&self) -> u32 {
        self.irq
    }

    /// The mask the IRQ had before, exactly as the kernel printed it.
    pub fn old_mask(&self) -> &str {
        &self.old_mask
    }

    /// The CPUs the IRQ had before.
    pub fn old_cpus(&self) -> CpuSet {
        CpuSet::parse_mask(&self.old_mask).unwrap_or_default()
    }

    /// Writes the old mask back now, reporting failure (drop does it silently).
    pub fn restore(mut self) -> Result<(), IrqError> {
        self.restored = true;
        self.write_back()
    }

    fn write_back(&self) -> Result<(), IrqError> {
        let old = self.old_cpus();
        self.kernel
            .write(&affinity_path(self.irq), &self.old_mask)
            .map_err(|e| classify_write_error(self.irq, &old, e))
    }
}

impl Drop for IrqBinding<'_> {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.write_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    fn fake_with_irq(irq: u32, mask: &str) -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file(affinity_path(irq), format!("{mask}\n"));
        k
    }

    #[test]
    fn binding_moves_the_irq_and_dropping_restores_the_old_mask() {
        let k = fake_with_irq(41, "3");
        let b = bind_irq_with(&k, 41, &CpuSet::from_cpus([1])).unwrap();
        assert_eq!(b.old_mask(), "3");
        assert_eq!(b.old_cpus(), CpuSet::from_cpus([0, 1]));
        assert_eq!(k.file(affinity_path(41)).unwrap(), "2");
        drop(b);
        assert_eq!(k.file(affinity_path(41)).unwrap(), "3");
    }

    #[test]
    fn explicit_restore_reports_and_does_not_write_twice() {
        let k = fake_with_irq(41, "3");
        let b = bind_irq_with(&k, 41, &CpuSet::from_cpus([1])).unwrap();
        b.restore().unwrap();
        assert_eq!(k.file(affinity_path(41)).unwrap(), "3");
    }

    #[test]
    fn a_kernel_managed_irq_names_the_boot_time_remedy() {
        let k = fake_with_irq(36, "3");
        k.refuse_writes(affinity_path(36));
        let err = bind_irq_with(&k, 36, &CpuSet::from_cpus([1])).unwrap_err();
        assert!(matches!(err, IrqError::KernelManaged { irq: 36 }));
        assert!(err.to_string().contains("isolcpus=managed_irq"), "{err}");
        assert_eq!(k.file(affinity_path(36)).unwrap(), "3\n", "nothing changed");
    }

    #[test]
    fn a_missing_irq_is_named() {
        let k = FakeKernel::new();
        let err = bind_irq_with(&k, 999, &CpuSet::from_cpus([1])).unwrap_err();
        assert!(matches!(err, IrqError::NoSuchIrq { irq: 999 }), "{err}");
    }

    #[test]
    fn an_irq_that_does_not_exist_on_this_machine_is_refused_without_change() {
        let err = bind_irq(4_000_000, &CpuSet::from_cpus([1])).unwrap_err();
        assert!(
            err.to_string().contains("IRQ 4000000 does not exist"),
            "{err}"
        );
    }

    #[test]
    fn write_errors_are_classified_by_errno() {
        let cpus = CpuSet::from_cpus([1]);
        let e = |n| io::Error::from_raw_os_error(n);
        assert!(matches!(
            classify_write_error(1, &cpus, e(libc::EIO)),
            IrqError::KernelManaged { .. }
        ));
        assert!(matches!(
            classify_write_error(1, &cpus, e(libc::EPERM)),
            IrqError::NotPermitted { .. }
        ));
        assert!(matches!(
            classify_write_error(1, &cpus, e(libc::EINVAL)),
            IrqError::Refused { .. }
        ));
        assert!(matches!(
            classify_write_error(1, &cpus, e(libc::EBUSY)),
            IrqError::Io { .. }
        ));
    }
}
