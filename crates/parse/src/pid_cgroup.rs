//! /proc/PID/cgroup: the cgroup of a task in each hierarchy, one
//! `hierarchy-ID:controllers:path` line per hierarchy (`0::path` for cgroup v2).

/// The lines of /proc/PID/cgroup as (hierarchy ID, controllers, path); a line
/// without two colons is skipped.
pub fn lines(text: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    text.lines().filter_map(|line| {
        let mut parts = line.splitn(3, ':');
        Some((parts.next()?, parts.next()?, parts.next()?))
    })
}

/// Whether a cgroup path belongs to Kubernetes pods: a component named
/// `kubepods*` (cgroupfs driver `/kubepods/burstable/pod…`, systemd driver
/// `/kubepods.slice/kubepods-burstable.slice/…`). The kubelet's CPU manager
/// owns these tasks' CPUs.
pub fn is_kubepods(path: &str) -> bool {
    path.split('/').any(|part| part.starts_with("kubepods"))
}

/// Whether the text of /proc/PID/cgroup puts the task under Kubernetes pods
/// in any hierarchy.
pub fn in_kubepods(text: &str) -> bool {
    lines(text).any(|(_, _, path)| is_kubepods(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_splits_into_id_controllers_and_a_path_that_may_hold_colons() {
        let text = "12:cpuset:/system\n0::/user.slice/a:b.scope\nbroken\n";
        assert_eq!(
            lines(text).collect::<Vec<_>>(),
            vec![
                ("12", "cpuset", "/system"),
                ("0", "", "/user.slice/a:b.scope")
            ]
        );
    }

    #[test]
    fn pod_cgroups_of_both_kubelet_drivers_are_recognised_and_others_are_not() {
        assert!(is_kubepods("/kubepods/burstable/pod1234/abcd"));
        assert!(is_kubepods("/kubepods"));
        assert!(is_kubepods(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12.slice/cri-containerd-ab.scope"
        ));
        assert!(!is_kubepods("/"));
        assert!(!is_kubepods("/system.slice/kubelet.service"));
        assert!(!is_kubepods("/cpushield-system"));
    }

    #[test]
    fn a_task_under_kubepods_in_any_hierarchy_is_a_pod_task() {
        assert!(in_kubepods(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-9.scope\n"
        ));
        assert!(in_kubepods(
            "3:cpuset:/kubepods/burstable/pod12/abc\n0::/\n"
        ));
        assert!(!in_kubepods("0::/system.slice/kubelet.service\n"));
        assert!(!in_kubepods("0::/user.slice/notkubepods\n"));
    }
}
