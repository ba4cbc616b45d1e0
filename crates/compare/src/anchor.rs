//! The independent anchors, run in the same scenario and placed like the
//! probe, so every verdict can be checked against tools the user already
//! trusts: cyclictest (rt-tests), started through `cpushield run`, which
//! places it in the shield's cpuset exactly as a user's real-time task would
//! be; and `rtla timerlat` where the kernel has the timerlat tracer, whose
//! measuring threads the kernel puts on the measured CPU (per-CPU kernel
//! threads, as the probe's are placed there) while rtla itself reads the
//! trace from the housekeeping CPUs, as the probe's control thread does.

use cpushield_kernel::{paths, Kernel};
use cpushield_report::Anchor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where cyclictest is, if installed.
pub fn find_cyclictest() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("cyclictest"))
        .find(|p| p.is_file())
}

/// Where rtla is, if installed.
pub fn find_rtla() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("rtla"))
        .find(|p| p.is_file())
}

/// The rtla to run as the second anchor on `kernel`, with rtla at `rtla`
/// (None: not installed, see [`find_rtla`]), or None with the one line
/// saying why not added to `notes`: rtla not installed, or a kernel without
/// the timerlat tracer (then only cyclictest anchors the verdict).
/// The kernel is asked first, since without its timerlat tracer no rtla
/// helps: tracefs's list of tracers where it is mounted, else the build
/// config (CONFIG_TIMERLAT_TRACER).
pub fn rtla_anchor(
    kernel: &dyn Kernel,
    rtla: Option<PathBuf>,
    notes: &mut Vec<String>,
) -> Option<PathBuf> {
    // Where tracefs is mounted; rtla mounts it itself otherwise.
    let mounted = [paths::TRACEFS, paths::TRACEFS_IN_DEBUGFS]
        .iter()
        .map(Path::new)
        .find(|d| kernel.exists(&d.join("available_tracers")));
    if let Some(dir) = mounted {
        if let Err(why) = cpushield_trace::timerlat::available(kernel, dir) {
            notes.push(format!("no rtla timerlat anchor: {why}"));
            return None;
        }
    } else {
        let (config, source) = cpushield_kernel::kconfig(kernel);
        if let (Some(source), false) = (
            source,
            config
                .get("CONFIG_TIMERLAT_TRACER")
                .is_some_and(|v| v == "y"),
        ) {
            notes.push(format!(
                "no rtla timerlat anchor: this kernel is built without CONFIG_TIMERLAT_TRACER ({source}), so it has no timerlat tracer for rtla to run, installed or not (PREEMPT_RT kernels such as Debian's linux-image-rt-amd64 6.12 have it)"
            ));
            return None;
        }
    }
    if rtla.is_none() {
        notes.push("no rtla timerlat anchor: rtla is not installed (apt-get install rtla)".into());
    }
    rtla
}

/// One cyclictest run's settings.
#[derive(Debug, Clone)]
pub struct AnchorRun {
    /// The `cpushield` binary that places it (`cpushield run`).
    pub cpushield: PathBuf,
    /// cyclictest itself.
    pub cyclictest: PathBuf,
    /// The CPU to measure.
    pub cpu: usize,
    /// How long.
    pub duration: Duration,
    /// Interval in microseconds.
    pub interval_us: u64,
    /// SCHED_FIFO priority.
    pub priority: u8,
    /// Keep the CPU polling while it runs (as the probe did).
    pub idle_poll: bool,
    /// Whether a shield is up (else `cpushield run` is told to run unshielded).
    pub shielded: bool,
}

impl AnchorRun {
    /// The cyclictest arguments: one thread on the CPU, memory locked.
    pub fn cyclictest_args(&self) -> Vec<String> {
        vec![
            "-m".into(),
            format!("-p{}", self.priority),
            format!("-i{}", self.interval_us),
            format!("-a{}", self.cpu),
            "-t1".into(),
            "-q".into(),
            format!("-D{}", self.duration.as_secs().max(1)),
        ]
    }

    /// The whole command line, as run.
    pub fn command(&self) -> Vec<String> {
        let mut c = vec![
            self.cpushield.display().to_string(),
            "run".into(),
            "--cpus".into(),
            self.cpu.to_string(),
        ];
        if self.idle_poll {
            c.push("--idle-poll".into());
        }
        if !self.shielded {
            c.push("--allow-unshielded".into());
        }
        c.push("--".into());
        c.push(self.cyclictest.display().to_string());
        c.extend(self.cyclictest_args());
        c
    }

    /// Runs it to the end and reads its summary line.
    pub fn run(&self) -> Result<Anchor, String> {
        let cmd = self.command();
        let summary = run_to_summary(&cmd, "cyclictest", parse_summary)?;
        Ok(Anchor {
            tool: "cyclictest".into(),
            command: shell_words(&cmd),
            duration_s: self.duration.as_secs().max(1) as f64,
            samples: summary.samples,
            max_ns: summary.max_us * 1000,
            avg_ns: summary.avg_us * 1000,
            ..Anchor::default()
        })
    }
}

/// One `rtla timerlat hist` run's settings.
#[derive(Debug, Clone)]
pub struct RtlaRun {
    /// rtla itself.
    pub rtla: PathBuf,
    /// The CPU to measure.
    pub cpu: usize,
    /// How long.
    pub duration: Duration,
    /// The timer period in microseconds.
    pub period_us: u64,
    /// SCHED_FIFO priority of the timerlat threads.
    pub priority: u8,
}

impl RtlaRun {
    /// The command line: the kernel's timerlat thread on the CPU at the
    /// probe's period and priority, /dev/cpu_dma_latency held at 0 as the
    /// probe and cyclictest hold it.
    pub fn command(&self) -> Vec<String> {
        vec![
            self.rtla.display().to_string(),
            "timerlat".into(),
            "hist".into(),
            "-c".into(),
            self.cpu.to_string(),
            "-d".into(),
            format!("{}s", self.duration.as_secs().max(1)),
            "-p".into(),
            self.period_us.to_string(),
            "-P".into(),
            format!("f:{}", self.priority),
            "--dma-latency".into(),
            "0".into(),
        ]
    }

    /// Runs it to the end (it inherits this process's CPUs, the housekeeping
    /// ones while a shield is up) and reads its summary.
    pub fn run(&self) -> Result<Anchor, String> {
        let cmd = self.command();
        let summary = run_to_summary(&cmd, "rtla timerlat hist", parse_rtla_hist)?;
        Ok(Anchor {
            tool: "rtla timerlat".into(),
            command: shell_words(&cmd),
            duration_s: self.duration.as_secs().max(1) as f64,
            samples: summary.thread.samples,
            max_ns: summary.thread.max_us * 1000,
            avg_ns: summary.thread.avg_us * 1000,
            irq_max_ns: Some(summary.irq.max_us * 1000),
            ..Anchor::default()
        })
    }
}

/// What `rtla timerlat hist` sums up for one CPU: the IRQ and the thread latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtlaSummary {
    /// The timer interrupt's latency.
    pub irq: Summary,
    /// The timerlat thread's latency.
    pub thread: Summary,
}

/// Reads the summary of `rtla timerlat hist` for its first CPU: the
/// `Index IRQ-003 Thr-003` header names the columns of the `count:`,
/// `min:`, `avg:` and `max:` lines (microseconds).
pub fn parse_rtla_hist(text: &str) -> Option<RtlaSummary> {
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("Index"))?
        .split_whitespace()
        .skip(1)
        .collect();
    let column = |prefix: &str| header.iter().position(|h| h.starts_with(prefix));
    let (irq, thread) = (column("IRQ-")?, column("Thr-")?);
    let row = |key: &str| -> Option<Vec<u64>> {
        let line = text.lines().find(|l| l.trim_start().starts_with(key))?;
        line.split_whitespace()
            .skip(1)
            .map(|w| w.parse().ok())
            .collect()
    };
    let (count, min, avg, max) = (row("count:")?, row("min:")?, row("avg:")?, row("max:")?);
    let at = |i: usize| -> Option<Summary> {
        Some(Summary {
            samples: *count.get(i)?,
            min_us: *min.get(i)?,
            avg_us: *avg.get(i)?,
            max_us: *max.get(i)?,
        })
    };
    Some(RtlaSummary {
        irq: at(irq)?,
        thread: at(thread)?,
    })
}

/// Runs `cmd` to the end and reads its summary from its output with
/// `parse`; the error names `tool`, its exit status and what it said.
fn run_to_summary<T>(
    cmd: &[String],
    tool: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, String> {
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: cannot start: {e}", cmd[0]))?;
    parse(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
        format!(
            "{tool} gave no summary (exit {}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let name = Path::new(w)
                .file_name()
                .filter(|_| w.starts_with('/'))
                .map(|n| n.to_string_lossy().into_owned());
            name.unwrap_or_else(|| w.clone())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// cyclictest's `-q` summary line, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Cycles (samples).
    pub samples: u64,
    /// Minimum, us.
    pub min_us: u64,
    /// Average, us.
    pub avg_us: u64,
    /// Maximum, us.
    pub max_us: u64,
}

/// Reads `T: 0 (16968) P:95 I:488 C:   4096 Min:     13 Act:   19 Avg:   34 Max:    1553`;
/// with several threads, the worst maximum and the summed cycles.
pub fn parse_summary(text: &str) -> Option<Summary> {
    let mut found: Option<Summary> = None;
    for line in text.lines().filter(|l| l.trim_start().starts_with("T:")) {
        let field = |key: &str| -> Option<u64> {
            let rest = line.split_once(key)?.1;
            rest.split_whitespace().next()?.parse().ok()
        };
        let s = Summary {
            samples: field("C:")?,
            min_us: field("Min:")?,
            avg_us: field("Avg:")?,
            max_us: field("Max:")?,
        };
        found = Some(match found {
            None => s,
            Some(f) => Summary {
                samples: f.samples + s.samples,
                min_us: f.min_us.min(s.min_us),
                avg_us: f.avg_us.max(s.avg_us),
                max_us: f.max_us.max(s.max_us),
            },
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quiet_summary_line_gives_cycles_and_maximum() {
        let text = "# /dev/cpu_dma_latency set to 0us\nT: 0 (16968) P:95 I:488 C:   4096 Min:     13 Act:   19 Avg:   34 Max:    1553\n";
        assert_eq!(
            parse_summary(text),
            Some(Summary {
                samples: 4096,
                min_us: 13,
                avg_us: 34,
                max_us: 1553
            })
        );
        assert_eq!(parse_summary("no summary here\n"), None);
    }

    #[test]
    fn the_rtla_histogram_summary_gives_irq_and_thread_latency_by_column() {
        let text = "# RTLA timerlat histogram\n# Time unit is microseconds (us)\n# Duration:   0 00:00:10\nIndex   IRQ-003   Thr-003\n0          12         0\n1         400        30\n9           0         1\nover:       0         0\ncount:    412        31\nmin:        0         1\navg:        1         3\nmax:        9        41\n";
        let s = parse_rtla_hist(text).unwrap();
        assert_eq!(
            s.irq,
            Summary {
                samples: 412,
                min_us: 0,
                avg_us: 1,
                max_us: 9
            }
        );
        assert_eq!((s.thread.samples, s.thread.max_us), (31, 41));
        assert_eq!(parse_rtla_hist("rtla: timerlat is not available\n"), None);
        // Avg can be a dash when a column had no sample.
        assert_eq!(
            parse_rtla_hist("Index IRQ-003 Thr-003\ncount: 0 0\nmin: - -\navg: - -\nmax: - -\n"),
            None
        );
    }

    #[test]
    fn rtla_runs_the_kernels_timerlat_thread_on_the_cpu_at_the_probes_period_and_priority() {
        let r = RtlaRun {
            rtla: "/usr/bin/rtla".into(),
            cpu: 3,
            duration: Duration::from_secs(5),
            period_us: 488,
            priority: 95,
        };
        assert_eq!(
            shell_words(&r.command()),
            "rtla timerlat hist -c 3 -d 5s -p 488 -P f:95 --dma-latency 0"
        );
    }

    #[test]
    fn the_anchor_runs_through_cpushield_run_like_the_probe() {
        let a = AnchorRun {
            cpushield: "/usr/local/bin/cpushield".into(),
            cyclictest: "/usr/bin/cyclictest".into(),
            cpu: 1,
            duration: Duration::from_secs(10),
            interval_us: 488,
            priority: 95,
            idle_poll: true,
            shielded: true,
        };
        assert_eq!(
            shell_words(&a.command()),
            "cpushield run --cpus 1 --idle-poll -- cyclictest -m -p95 -i488 -a1 -t1 -q -D10"
        );
        let unshielded = AnchorRun {
            idle_poll: false,
            shielded: false,
            ..a
        };
        assert_eq!(
            shell_words(&unshielded.command()),
            "cpushield run --cpus 1 --allow-unshielded -- cyclictest -m -p95 -i488 -a1 -t1 -q -D10"
        );
    }
}
