//! `cpushield vm watch` from start to finish: the guest's vCPU threads found
//! (QMP first, thread names where QMP is not given or does not answer), the
//! host CPUs they may run on traced, the guest answered on its channel until
//! a signal or the duration, and the tracer stopped.

use crate::host::{self, HostError, VcpuThread, VcpuWatch, WatchOptions};
use crate::timeline::Limits;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::signal::{stop_on_signals, SecondSignal};
use cpushield_kernel::{Kernel, Procfs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What `vm watch` is asked (its command-line options).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct WatchRequest {
    /// QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`): the vCPU
    /// threads come from `query-cpus-fast`.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "PATH", required_unless_present = "pid")
    )]
    pub qmp: Option<PathBuf>,
    /// QEMU's pid: the vCPU threads by their names (`CPU N/KVM`, `CPU N/TCG`;
    /// QEMU needs `-name NAME,debug-threads=on`). Used where --qmp is not given
    /// or does not answer.
    #[cfg_attr(feature = "clap", arg(long, value_name = "PID"))]
    pub pid: Option<i32>,
    /// The unix socket of the guest's channel: QEMU's `-chardev
    /// socket,id=ID,path=PATH,server=on,wait=off` with `-device
    /// virtserialport,chardev=ID,name=org.cpushield.vm.0`.
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub channel: PathBuf,
    /// How long gaps are kept (at most 600s).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "DURATION", default_value = "60s", value_parser = retention_arg)
    )]
    pub retention: Duration,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)
    )]
    pub duration: Option<Duration>,
    /// node_exporter textfile to rewrite every second: each vCPU's time held
    /// off by the host, by why and by what held its host CPU.
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub textfile: Option<PathBuf>,
}

/// `--retention` on the command line: 1s to 600s.
#[cfg(feature = "clap")]
fn retention_arg(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e}: e.g. 60s"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
        return Err("between 1s and 600s".into());
    }
    Ok(d)
}

/// How often `--textfile` is rewritten.
pub const TEXTFILE_EVERY: Duration = Duration::from_secs(1);

/// Why the watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// No vCPU thread found, or the tracer refused.
    #[error(transparent)]
    Host(#[from] HostError),
    /// Reading the online CPUs or installing the signal handlers failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a finished watch did.
#[derive(Debug)]
pub struct WatchSummary {
    /// Requests answered.
    pub answered: u64,
    /// Gaps kept in the timeline at the end.
    pub kept: usize,
    /// Gaps dropped by the timeline's bounds.
    pub dropped: u64,
    /// Problems met while tracing or restoring tracefs.
    pub errors: Vec<String>,
}

impl WatchSummary {
    /// The line a finished watch prints: what it answered and kept.
    pub fn line(&self) -> String {
        format!(
            "answered {} requests; {} gaps kept, {} dropped by the bounds",
            self.answered, self.kept, self.dropped
        )
    }
}

/// The vCPU threads: QMP first; thread names (`/proc`) where QMP is not
/// given or does not answer.
pub fn find_vcpus(
    kernel: &dyn Kernel,
    qmp: Option<&Path>,
    pid: Option<i32>,
) -> Result<Vec<VcpuThread>, HostError> {
    let qmp = qmp.map(|s| host::vcpus_from_qmp(s, Duration::from_secs(3)));
    match (qmp, pid) {
        (Some(Ok(t)), _) => Ok(t),
        (Some(Err(_)), Some(pid)) | (None, Some(pid)) => {
            // The proc root is a parameter of the reader for its tests.
            host::vcpus_by_name(kernel, Path::new(cpushield_kernel::procfs::PROC), pid)
        }
        (Some(Err(e)), None) => Err(e),
        (None, None) => Err(HostError::Vcpus(
            "pass --qmp SOCKET or --pid QEMU_PID".into(),
        )),
    }
}

/// The VM's name for metrics: its `-name`, else its process's name, from
/// QEMU's process (`pid`, else the first vCPU thread's: /proc/TID reads as
/// its process).
pub fn vm_label(kernel: &dyn Kernel, pid: Option<i32>, threads: &[VcpuThread]) -> String {
    let proc = Procfs::new(kernel);
    let Some(pid) = pid.or(threads.first().map(|t| t.tid)) else {
        return "qemu".into();
    };
    proc.process_bytes(pid, "cmdline")
        .ok()
        .flatten()
        .and_then(|argv| cpushield_parse::qemu_args::vm_name(&argv))
        .or_else(|| {
            let comm = proc.process_file(pid, "comm").ok().flatten()?;
            Some(comm.trim_end().to_string()).filter(|c| !c.is_empty())
        })
        .unwrap_or_else(|| format!("qemu-{pid}"))
}

/// The online CPUs that can hold one of `threads` (an affinity that cannot
/// be read counts as every online CPU).
pub fn vcpu_cpus(kernel: &dyn Kernel, threads: &[VcpuThread], online: &CpuSet) -> CpuSet {
    let mut cpus = CpuSet::new();
    for t in threads {
        let allowed = kernel
            .get_affinity(t.tid)
            .unwrap_or_else(|_| online.clone());
        cpus = cpus.union(&allowed);
    }
    cpus.intersection(online)
}

/// Runs the watch of `request`; `started` is told, once tracing runs, the
/// line that says what is watched.
pub fn watch(
    kernel: Arc<dyn Kernel>,
    request: &WatchRequest,
    started: &mut dyn FnMut(&str),
) -> Result<WatchSummary, WatchError> {
    let threads = find_vcpus(kernel.as_ref(), request.qmp.as_deref(), request.pid)?;
    let online = cpushield_kernel::online_cpus(kernel.as_ref())?;
    let cpus = vcpu_cpus(kernel.as_ref(), &threads, &online);
    let opts = WatchOptions {
        limits: Limits {
            retention_ns: request.retention.as_nanos() as u64,
            ..Limits::default()
        },
        ..WatchOptions::default()
    };
    let stop = stop_on_signals(SecondSignal::Caught)?;
    let w = VcpuWatch::start(
        kernel.clone(),
        &threads,
        &cpus,
        opts,
        cpushield_kernel::clock::now_ns,
    )?;
    let list: Vec<String> = threads
        .iter()
        .map(|t| format!("vCPU {} = thread {}", t.vcpu, t.tid))
        .collect();
    started(&format!(
        "watching {} on host CPUs {} ({}); answering on {}",
        list.join(", "),
        w.cpus.to_list(),
        w.events.join(" "),
        request.channel.display()
    ));
    if let Some(d) = request.duration {
        std::thread::spawn(move || {
            std::thread::sleep(d);
            cpushield_kernel::signal::request_stop();
        });
    }
    let vm = vm_label(kernel.as_ref(), request.pid, &threads);
    let mut errors = Vec::new();
    let write_textfile = |errors: &mut Vec<String>| {
        let Some(path) = &request.textfile else {
            return;
        };
        let text = {
            let tl = w.timeline();
            let tl = tl.lock().expect("timeline");
            crate::metrics::textfile(&vm, tl.held_off(), w.answered())
        };
        if let Err(e) = cpushield_report::textfile::write(path, &text) {
            let line = format!("{}: cannot write the textfile: {e}", path.display());
            if !errors.contains(&line) {
                errors.push(line);
            }
        }
    };
    let served = AtomicBool::new(false);
    let answered = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut errors = Vec::new();
            while request.textfile.is_some() && !served.load(Ordering::SeqCst) {
                write_textfile(&mut errors);
                std::thread::park_timeout(TEXTFILE_EVERY);
            }
            errors
        });
        let answered = host::serve(&w, &request.channel, stop);
        served.store(true, Ordering::SeqCst);
        writer.thread().unpark();
        errors.extend(writer.join().unwrap_or_default());
        answered
    });
    write_textfile(&mut errors);
    let (kept, dropped) = {
        let tl = w.timeline();
        let tl = tl.lock().expect("timeline");
        (tl.len(), tl.dropped())
    };
    errors.extend(w.finish());
    Ok(WatchSummary {
        answered,
        kept,
        dropped,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn the_summary_line_says_answers_kept_and_dropped_gaps() {
        let s = WatchSummary {
            answered: 3,
            kept: 7,
            dropped: 2,
            errors: Vec::new(),
        };
        assert_eq!(
            s.line(),
            "answered 3 requests; 7 gaps kept, 2 dropped by the bounds"
        );
    }

    #[test]
    fn without_qmp_or_pid_the_watch_names_both() {
        let k = FakeKernel::new();
        let e = find_vcpus(&k, None, None).unwrap_err().to_string();
        assert_eq!(e, "pass --qmp SOCKET or --pid QEMU_PID");
    }

    #[test]
    fn the_vm_is_labelled_by_its_dash_name_else_its_process_name() {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/40/cmdline",
            "qemu-system-x86_64\0-name\0guest=rt,debug-threads=on\0",
        );
        k.set_file("/proc/41/comm", "qemu-kvm\n");
        let t = |tid| [VcpuThread { vcpu: 0, tid }];
        assert_eq!(vm_label(&k, Some(40), &t(99)), "rt");
        assert_eq!(vm_label(&k, None, &t(40)), "rt");
        assert_eq!(vm_label(&k, None, &t(41)), "qemu-kvm");
        assert_eq!(vm_label(&k, Some(42), &t(42)), "qemu-42");
    }

    #[test]
    fn the_traced_cpus_are_the_online_ones_the_vcpus_may_use() {
        let k = FakeKernel::new();
        k.set_thread_affinity(101, CpuSet::from_cpus([2, 3]));
        k.set_thread_affinity(102, CpuSet::from_cpus([3, 9]));
        let threads = [
            VcpuThread { vcpu: 0, tid: 101 },
            VcpuThread { vcpu: 1, tid: 102 },
        ];
        let online = CpuSet::first_n(4);
        assert_eq!(vcpu_cpus(&k, &threads, &online).to_list(), "2-3");
    }
}
