//! Which cgroup hierarchy holds the cpuset controller: v2, v1, or none.

use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where cpusets live on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CgroupLayout {
    /// The unified hierarchy has the cpuset controller (partitions available).
    V2 {
        /// Mount point of cgroup2.
        root: PathBuf,
    },
    /// A legacy hierarchy has the cpuset controller.
    V1 {
        /// Mount point of the cpuset hierarchy.
        root: PathBuf,
    },
}

impl CgroupLayout {
    /// The hierarchy's mount point.
    pub fn root(&self) -> &Path {
        match self {
            CgroupLayout::V2 { root } | CgroupLayout::V1 { root } => root,
        }
    }

    /// A name for humans and JSON: "cgroup v2 cpuset partition" etc.
    pub fn mechanism(&self) -> &'static str {
        match self {
            CgroupLayout::V2 { .. } => "cgroup v2 cpuset partition (isolated)",
            CgroupLayout::V1 { .. } => "cgroup v1 exclusive cpuset, sched_load_balance=0",
        }
    }

    /// The file a TID is written to, to move one thread (v1) or a whole
    /// process (v2) into `cgroup`.
    pub fn tasks_file(&self, cgroup: &Path) -> PathBuf {
        match self {
            CgroupLayout::V2 { .. } => cgroup.join("cgroup.procs"),
            CgroupLayout::V1 { .. } => cgroup.join("tasks"),
        }
    }

    /// The file a TID is written to, to move that one thread into `cgroup`:
    /// `tasks` (v1), `cgroup.threads` (v2; the cgroup must be threaded, and
    /// the thread's process in the same threaded domain).
    pub fn threads_file(&self, cgroup: &Path) -> PathBuf {
        match self {
            CgroupLayout::V2 { .. } => cgroup.join("cgroup.threads"),
            CgroupLayout::V1 { .. } => cgroup.join("tasks"),
        }
    }

    /// The absolute directory of a cgroup given its path inside the hierarchy
    /// (`/` or `/system.slice`), as /proc/PID/cgroup shows it.
    pub fn dir_of(&self, cgroup: &str) -> PathBuf {
        let rel = cgroup.trim_start_matches('/');
        if rel.is_empty() {
            self.root().to_path_buf()
        } else {
            self.root().join(rel)
        }
    }

    /// Whether cgroup-v2 rules apply (per-process moves, no kthread moves).
    pub fn is_v2(&self) -> bool {
        matches!(self, CgroupLayout::V2 { .. })
    }
}

/// Finds the cpuset controller from /proc/self/mountinfo: on cgroup2 when its
/// root lists `cpuset` in cgroup.controllers, else on a v1 mount with the
/// `cpuset` option. `None` when neither exists.
pub fn detect(kernel: &dyn Kernel) -> Option<CgroupLayout> {
    let mountinfo = kernel.read(Path::new("/proc/self/mountinfo")).ok()?;
    let mut v1 = None;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split_whitespace().collect();
        let rfields: Vec<&str> = right.split_whitespace().collect();
        if fields.len() < 5 || rfields.len() < 3 {
            continue;
        }
        let mount_point = PathBuf::from(fields[4]);
        match rfields[0] {
            "cgroup2" if v2.is_none() => {
                let controllers = kernel
                    .read(&mount_point.join("cgroup.controllers"))
                    .unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "cpuset") {
                    v2 = Some(mount_point);
                }
            }
            "cgroup" if v1.is_none() && rfields[2].split(',').any(|o| o == "cpuset") => {
                v1 = Some(mount_point);
            }
            _ => {}
        }
    }
    v2.map(|root| CgroupLayout::V2 { root })
        .or(v1.map(|root| CgroupLayout::V1 { root }))
}

/// The hierarchy's cgroup path of a task, from the text of /proc/TID/cgroup.
pub fn cgroup_of(layout: &CgroupLayout, proc_cgroup: &str) -> Option<String> {
    cgroup_lines(proc_cgroup)
        .find(|(id, controllers, _)| match layout {
            CgroupLayout::V2 { .. } => *id == "0" && controllers.is_empty(),
            CgroupLayout::V1 { .. } => controllers.split(',').any(|c| c == "cpuset"),
        })
        .map(|(_, _, path)| path.to_string())
}

/// The lines of /proc/PID/cgroup as (hierarchy ID, controllers, path).
pub use cpushield_parse::pid_cgroup::lines as cgroup_lines;

/// Whether /proc/PID/cgroup puts the task under Kubernetes pods in any
/// hierarchy: the shield leaves such a task to the kubelet's CPU manager.
pub use cpushield_parse::pid_cgroup::in_kubepods;

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    const HYBRID: &str = "\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
27 25 0:24 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn hybrid_host_uses_the_v1_cpuset_when_v2_lacks_it() {
        let k = FakeKernel::new();
        k.set_file("/proc/self/mountinfo", HYBRID);
        k.set_file("/sys/fs/cgroup/unified/cgroup.controllers", "memory pids\n");
        let layout = detect(&k).unwrap();
        assert_eq!(
            layout,
            CgroupLayout::V1 {
                root: "/sys/fs/cgroup/cpuset".into()
            }
        );
    }

    #[test]
    fn v2_with_cpuset_is_preferred() {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/self/mountinfo",
            "27 25 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
        );
        k.set_file(
            "/sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        assert_eq!(
            detect(&k).unwrap(),
            CgroupLayout::V2 {
                root: "/sys/fs/cgroup".into()
            }
        );
    }

    #[test]
    fn no_cpuset_anywhere_is_none() {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/self/mountinfo",
            "27 25 0:24 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
        );
        k.set_file("/sys/fs/cgroup/cgroup.controllers", "memory pids\n");
        assert!(detect(&k).is_none());
    }

    #[test]
    fn task_cgroup_is_read_from_the_right_line() {
        let text = "12:cpuset:/docker/abc\n0::/system.slice/x.service\n";
        let v1 = CgroupLayout::V1 { root: "/c".into() };
        let v2 = CgroupLayout::V2 { root: "/c".into() };
        assert_eq!(cgroup_of(&v1, text).unwrap(), "/docker/abc");
        assert_eq!(cgroup_of(&v2, text).unwrap(), "/system.slice/x.service");
    }
}
