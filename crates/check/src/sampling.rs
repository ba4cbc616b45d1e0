//! Which threads ran on which CPU and for how long, from repeated samples.
//!
//! Limits of sampling (no tracing): each sample gives a thread's total run time
//! and the CPU it last ran on. The run time added since the previous sample is
//! charged to the CPU of the later sample. A thread that ran on two CPUs between
//! samples is charged to the last one; a thread that started and exited between
//! two samples is not seen at all; a thread seen for the first time after the
//! first sample is charged its whole run time (it was born during the interval).
//! Sampling more often (the default is every 100 ms) narrows the first error;
//! the tracer (`cpushield-trace`) has none of these limits.

use crate::snapshot::ThreadSample;
use cpushield_parse::stat::CpuTimes;
use std::collections::BTreeMap;

/// One sample of the CPUs' time counters and the disks' busy time, for
/// telling whether steal on one CPU rises while others do I/O.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ActivitySample {
    /// /proc/stat per CPU (USER_HZ ticks).
    pub cpu_times: BTreeMap<usize, CpuTimes>,
    /// Milliseconds the block devices spent doing I/O, summed (/proc/diskstats).
    pub disk_busy_ms: u64,
}

/// What one thread did on one CPU during the interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRun {
    /// The process id.
    pub pid: i32,
    /// The thread id.
    pub tid: i32,
    /// Run time charged to that CPU, ns.
    pub run_ns: u64,
}

/// Accumulates per-(thread, CPU) run time over successive samples.
#[derive(Debug, Default)]
pub struct RunTracker {
    last: BTreeMap<i32, u64>,
    first_done: bool,
    per_cpu: BTreeMap<(usize, i32), ThreadRun>,
    latest: BTreeMap<i32, ThreadSample>,
    activity: Vec<ActivitySample>,
}

impl RunTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample of all threads.
    pub fn add(&mut self, threads: &[ThreadSample]) {
        for t in threads {
            let tid = t.stat.tid;
            let delta = match self.last.get(&tid) {
                Some(&prev) => t.runtime_ns.saturating_sub(prev),
                None if self.first_done => t.runtime_ns,
                None => 0,
            };
            self.last.insert(tid, t.runtime_ns);
            if delta > 0 {
                let entry = self
                    .per_cpu
                    .entry((t.stat.processor, tid))
                    .or_insert(ThreadRun {
                        pid: t.pid,
                        tid,
                        run_ns: 0,
                    });
                entry.run_ns += delta;
            }
            self.latest.insert(tid, t.clone());
        }
        self.first_done = true;
    }

    /// Threads charged with run time on `cpu`, most run time first.
    pub fn ran_on(&self, cpu: usize) -> Vec<ThreadRun> {
        let mut v: Vec<ThreadRun> = self
            .per_cpu
            .range((cpu, i32::MIN)..=(cpu, i32::MAX))
            .map(|(_, r)| r.clone())
            .collect();
        v.sort_by(|a, b| b.run_ns.cmp(&a.run_ns).then(a.tid.cmp(&b.tid)));
        v
    }

    /// The most recent sample of a thread.
    pub fn latest(&self, tid: i32) -> Option<&ThreadSample> {
        self.latest.get(&tid)
    }

    /// Adds one sample of the CPU counters and disk activity.
    pub fn add_activity(&mut self, sample: ActivitySample) {
        self.activity.push(sample);
    }

    /// The CPU counter and disk activity samples, in order.
    pub fn activity(&self) -> &[ActivitySample] {
        &self.activity
    }

    /// The most recent sample of every thread seen.
    pub fn all_latest(&self) -> impl Iterator<Item = &ThreadSample> {
        self.latest.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_parse::pid_stat::ThreadStat;

    fn sample(tid: i32, cpu: usize, runtime_ns: u64) -> ThreadSample {
        ThreadSample {
            pid: tid,
            stat: ThreadStat {
                tid,
                comm: format!("t{tid}"),
                state: 'R',
                ppid: 1,
                flags: 0,
                utime: 0,
                stime: 0,
                processor: cpu,
                rt_priority: 0,
                policy: 0,
            },
            runtime_ns,
            affinity: None,
            in_kubepods: false,
        }
    }

    #[test]
    fn run_time_between_samples_is_charged_to_the_later_cpu() {
        let mut r = RunTracker::new();
        r.add(&[sample(10, 0, 1_000)]);
        r.add(&[sample(10, 1, 5_000)]);
        r.add(&[sample(10, 0, 6_000)]);
        assert_eq!(r.ran_on(1)[0].run_ns, 4_000);
        assert_eq!(r.ran_on(0)[0].run_ns, 1_000);
    }

    #[test]
    fn a_thread_born_during_the_interval_is_charged_its_whole_run_time() {
        let mut r = RunTracker::new();
        r.add(&[sample(10, 0, 1_000)]);
        r.add(&[sample(10, 0, 1_000), sample(11, 1, 700)]);
        assert_eq!(
            r.ran_on(1),
            vec![ThreadRun {
                pid: 11,
                tid: 11,
                run_ns: 700
            }]
        );
        assert!(r.ran_on(0).is_empty());
    }
}
