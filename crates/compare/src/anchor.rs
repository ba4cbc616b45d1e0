//! The independent anchor: cyclictest (rt-tests) run in the same scenario,
//! placed like the probe, so every verdict can be checked against a tool the
//! user already trusts. It is started through `cpushield run`, which places
//! it in the shield's cpuset exactly as a user's real-time task would be.

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
        let out = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: cannot start: {e}", cmd[0]))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let summary = parse_summary(&text).ok_or_else(|| {
            format!(
                "cyclictest gave no summary (exit {}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
        Ok(Anchor {
            tool: "cyclictest".into(),
            command: shell_words(&cmd),
            duration_s: self.duration.as_secs().max(1) as f64,
            samples: summary.samples,
            max_ns: summary.max_us * 1000,
            avg_ns: summary.avg_us * 1000,
        })
    }
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
