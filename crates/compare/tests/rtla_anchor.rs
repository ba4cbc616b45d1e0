//! Why there is no rtla anchor: the missing piece named, the kernel first.

use cpushield_compare::anchor::rtla_anchor;
use cpushield_kernel::FakeKernel;
use std::path::PathBuf;

/// A kernel whose build config is /boot/config-6.18.0-test with `config`,
/// tracefs not mounted.
fn kernel_built_with(config: &str) -> FakeKernel {
    let k = FakeKernel::new();
    k.set_file("/proc/sys/kernel/osrelease", "6.18.0-test\n");
    k.set_file("/boot/config-6.18.0-test", config);
    k
}

#[test]
fn a_kernel_without_the_timerlat_tracer_is_named_not_a_missing_rtla() {
    let k = kernel_built_with("CONFIG_HZ=250\n# CONFIG_TIMERLAT_TRACER is not set\n");
    let mut notes = Vec::new();
    assert_eq!(rtla_anchor(&k, None, &mut notes), None);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("built without CONFIG_TIMERLAT_TRACER (/boot/config-6.18.0-test)"),
        "{notes:?}"
    );
    assert!(!notes[0].contains("apt-get install rtla"), "{notes:?}");
    // rtla installed changes nothing on such a kernel.
    let mut notes = Vec::new();
    assert_eq!(
        rtla_anchor(&k, Some(PathBuf::from("/usr/bin/rtla")), &mut notes),
        None
    );
    assert!(notes[0].contains("CONFIG_TIMERLAT_TRACER"), "{notes:?}");
}

#[test]
fn with_the_tracer_built_in_a_missing_rtla_is_what_is_named() {
    let k = kernel_built_with("CONFIG_TIMERLAT_TRACER=y\n");
    let mut notes = Vec::new();
    assert_eq!(rtla_anchor(&k, None, &mut notes), None);
    assert_eq!(
        notes,
        ["no rtla timerlat anchor: rtla is not installed (apt-get install rtla)"]
    );
    let mut notes = Vec::new();
    let rtla = PathBuf::from("/usr/bin/rtla");
    assert_eq!(rtla_anchor(&k, Some(rtla.clone()), &mut notes), Some(rtla));
    assert!(notes.is_empty(), "{notes:?}");
    // Where tracefs is mounted, its list of tracers is what counts.
    k.set_file("/sys/kernel/tracing/available_tracers", "nop function\n");
    let mut notes = Vec::new();
    assert_eq!(
        rtla_anchor(&k, Some(PathBuf::from("/usr/bin/rtla")), &mut notes),
        None
    );
    assert!(notes[0].contains("no timerlat tracer"), "{notes:?}");
}
