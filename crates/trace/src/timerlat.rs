//! The kernel's timerlat tracer in a trace session: a kernel thread per
//! measured CPU (`timerlat/N`, SCHED_FIFO 95) wakes on a periodic hrtimer,
//! and the tracer records how late the timer's interrupt handler and the
//! thread ran (`#seq context irq|thread timer_latency N ns`). The session
//! hands those records out through a [`TimerlatFeed`]; while the tracer runs,
//! the osnoise events report each interference with its duration.
//!
//! The tracer's settings (`osnoise/cpus`, `osnoise/timerlat_period_us`, the
//! stop thresholds) are global to tracefs, not per instance: the session
//! refuses to start while another timerlat or osnoise tracer runs (say
//! `rtla`), and puts each setting back when it ends.

use crate::event::TimerlatRecord;
use crate::reader::Shared;
use crate::settings::SettingsGuard;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::path::Path;
use std::sync::Arc;

/// The tracers that share the osnoise workload and its settings.
const OSNOISE_TRACERS: &[&str] = &["timerlat", "osnoise"];

/// The osnoise events, enabled where the kernel has them: each fires at the
/// end of an interference while the timerlat or osnoise tracer runs.
pub const OSNOISE_EVENTS: &[&str] = &[
    "osnoise/irq_noise",
    "osnoise/softirq_noise",
    "osnoise/thread_noise",
    "osnoise/nmi_noise",
];

/// The shortest and longest timer period the tracer accepts, microseconds.
pub const PERIOD_US: std::ops::RangeInclusive<u32> = 100..=1_000_000;

/// The priority the kernel gives its timerlat threads (SCHED_FIFO).
pub const THREAD_PRIORITY: u8 = 95;

/// Hands out the timerlat records the session's reader has read so far.
/// Clone + Send; empty when the session runs no timerlat tracer.
#[derive(Clone)]
pub struct TimerlatFeed {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for TimerlatFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TimerlatFeed")
    }
}

impl TimerlatFeed {
    /// The records read since the last call, in the order read (per CPU in
    /// time order).
    pub fn drain(&self) -> Vec<TimerlatRecord> {
        std::mem::take(&mut *self.shared.timerlat.lock().expect("timerlat records"))
    }
}

/// Whether the kernel has the timerlat tracer; the error says why not and
/// what to do, in one line.
pub fn available(k: &dyn Kernel, tracefs: &Path) -> Result<(), String> {
    let file = tracefs.join("available_tracers");
    let text = k
        .read(&file)
        .map_err(|e| format!("{}: {e}; is tracefs mounted there?", file.display()))?;
    if text.split_whitespace().any(|t| t == "timerlat") {
        Ok(())
    } else {
        Err(format!(
            "this kernel has no timerlat tracer ({} lists: {}): it is built without CONFIG_TIMERLAT_TRACER (PREEMPT_RT kernels such as Debian's linux-image-rt-amd64 6.12 have it)",
            file.display(),
            text.trim()
        ))
    }
}

/// The instance (or the top level) where a timerlat or osnoise tracer runs
/// already, other than `own`.
fn running_elsewhere(k: &dyn Kernel, root: &Path, own: &Path) -> Option<String> {
    let mut dirs = vec![root.to_path_buf()];
    for name in k.read_dir(&root.join("instances")).unwrap_or_default() {
        dirs.push(root.join("instances").join(name));
    }
    dirs.into_iter().filter(|d| d != own).find_map(|d| {
        let tracer = k.read(&d.join("current_tracer")).ok()?;
        let tracer = tracer.trim();
        OSNOISE_TRACERS
            .contains(&tracer)
            .then(|| format!("{} runs the {tracer} tracer", d.display()))
    })
}

/// Sets the tracer up in `dir` (the session's instance) for `cpus` at
/// `period_us`: the global osnoise settings first (each remembered in `g`),
/// the instance's tracer last. The tracer starts with `tracing_on`.
pub(crate) fn configure(
    g: &mut SettingsGuard,
    k: &dyn Kernel,
    root: &Path,
    dir: &Path,
    cpus: &CpuSet,
    period_us: u32,
) -> Result<(), String> {
    available(k, root)?;
    if !PERIOD_US.contains(&period_us) {
        return Err(format!(
            "a timerlat period of {period_us} us is outside what the tracer accepts ({} to {} us)",
            PERIOD_US.start(),
            PERIOD_US.end()
        ));
    }
    if let Some(other) = running_elsewhere(k, root, dir) {
        return Err(format!(
            "{other}, and its settings (osnoise/cpus, the period) are shared: wait until it ends (rtla, another cpushield), then run again"
        ));
    }
    let osnoise = root.join("osnoise");
    // Without the workload option the tracer starts no kernel thread (a user
    // thread would read timerlat_fd instead): nothing would be measured.
    if let Ok(options) = k.read(&osnoise.join("options")) {
        if options
            .split_whitespace()
            .any(|o| o == "NO_OSNOISE_WORKLOAD")
        {
            return Err(format!(
                "{}: NO_OSNOISE_WORKLOAD is set, so timerlat starts no kernel thread: echo OSNOISE_WORKLOAD > {}",
                osnoise.join("options").display(),
                osnoise.join("options").display()
            ));
        }
    }
    let set = |g: &mut SettingsGuard, file: &str, value: &str| {
        g.set(&osnoise.join(file), value).map_err(|e| e.to_string())
    };
    set(g, "cpus", &cpus.to_list())?;
    set(g, "timerlat_period_us", &period_us.to_string())?;
    // A threshold would stop tracing (for everyone) at the first long sample.
    for file in ["stop_tracing_us", "stop_tracing_total_us"] {
        if k.exists(&osnoise.join(file)) {
            set(g, file, "0")?;
        }
    }
    if k.exists(&osnoise.join("print_stack")) {
        set(g, "print_stack", "0")?;
    }
    g.set(&dir.join("current_tracer"), "timerlat")
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;
    use std::path::PathBuf;

    fn tracefs(k: &FakeKernel, tracers: &str) -> PathBuf {
        let root = PathBuf::from("/sys/kernel/tracing");
        k.set_file(root.join("available_tracers"), tracers);
        k.set_file(root.join("current_tracer"), "nop");
        for (f, v) in [
            ("cpus", "0-3"),
            ("timerlat_period_us", "1000"),
            ("stop_tracing_us", "0"),
            ("stop_tracing_total_us", "0"),
            ("print_stack", "0"),
            ("options", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP"),
        ] {
            k.set_file(root.join("osnoise").join(f), v);
        }
        k.set_file(root.join("instances/cpushield-1/current_tracer"), "nop");
        root
    }

    #[test]
    fn a_kernel_without_the_tracer_is_named_with_its_config_option() {
        let k = FakeKernel::new();
        let root = tracefs(&k, "hwlat blk function_graph function nop");
        let e = available(&k, &root).unwrap_err();
        assert!(
            e.contains("no timerlat tracer") && e.contains("CONFIG_TIMERLAT_TRACER"),
            "{e}"
        );
        assert!(available(&k, &tracefs(&k, "timerlat osnoise nop")).is_ok());
    }

    #[test]
    fn the_global_settings_are_set_for_the_cpus_and_period_and_restored() {
        let k = Arc::new(FakeKernel::new());
        let root = tracefs(&k, "timerlat osnoise nop");
        k.set_file(root.join("osnoise/stop_tracing_us"), "500");
        let dir = root.join("instances/cpushield-1");
        let mut g = SettingsGuard::new(k.clone());
        configure(
            &mut g,
            k.as_ref(),
            &root,
            &dir,
            &CpuSet::parse_list("2-3").unwrap(),
            488,
        )
        .unwrap();
        let read = |p: &str| k.read(&root.join(p)).unwrap();
        assert_eq!(read("osnoise/cpus"), "2-3");
        assert_eq!(read("osnoise/timerlat_period_us"), "488");
        assert_eq!(read("osnoise/stop_tracing_us"), "0");
        assert_eq!(read("instances/cpushield-1/current_tracer"), "timerlat");
        assert_eq!(read("current_tracer"), "nop");
        assert!(g.restore().is_empty());
        assert_eq!(read("osnoise/cpus"), "0-3");
        assert_eq!(read("osnoise/timerlat_period_us"), "1000");
        assert_eq!(read("osnoise/stop_tracing_us"), "500");
        assert_eq!(read("instances/cpushield-1/current_tracer"), "nop");
    }

    #[test]
    fn another_timerlat_user_or_a_workload_turned_off_is_refused_with_nothing_changed() {
        let k = Arc::new(FakeKernel::new());
        let root = tracefs(&k, "timerlat osnoise nop");
        k.set_file(root.join("instances/rtla/current_tracer"), "timerlat");
        let dir = root.join("instances/cpushield-1");
        let cpus = CpuSet::parse_list("3").unwrap();
        let mut g = SettingsGuard::new(k.clone());
        let e = configure(&mut g, k.as_ref(), &root, &dir, &cpus, 1000).unwrap_err();
        assert!(e.contains("instances/rtla runs the timerlat tracer"), "{e}");
        assert!(g.saved().is_empty());
        k.set_file(root.join("instances/rtla/current_tracer"), "nop");
        k.set_file(root.join("osnoise/options"), "DEFAULTS NO_OSNOISE_WORKLOAD");
        let e = configure(&mut g, k.as_ref(), &root, &dir, &cpus, 1000).unwrap_err();
        assert!(e.contains("echo OSNOISE_WORKLOAD >"), "{e}");
        assert!(g.saved().is_empty());
        let e = configure(&mut g, k.as_ref(), &root, &dir, &cpus, 50).unwrap_err();
        assert!(e.contains("100 to 1000000 us"), "{e}");
    }
}
