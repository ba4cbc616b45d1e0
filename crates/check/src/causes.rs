//! The fix for a cause the tracer charged a latency spike to, when the
//! sampling checks cannot see it: work items and kernel threads that run for
//! microseconds, and tasks outside a namespace-scoped experiment.
//!
//! The tracer names causes as `compare` shows them: a kind (`work`,
//! `kthread`, `task`, `other-ns`, `pod`, ...) and a name (`workqueue vmstat_update`,
//! `kdamond.0 (77)`, `tokio-rt-worker (75)`).

use crate::analyze::tasks::{bound_kthread_advice, pod_task_remedy, BootIsolation};
use crate::finding::Remedy;
use crate::target::{ShieldInForce, ShieldKind};
use cpushield_cpuset::CpuSet;
use cpushield_shield::snapshot::Scope;
use cpushield_trace::attribute::is_per_cpu_kthread;

/// Where a traced cause was seen and what shield was up there.
#[derive(Debug, Clone, Copy)]
pub struct CauseContext<'a> {
    /// The measured (shielded) CPUs.
    pub cpus: &'a CpuSet,
    /// Where the experiment's shield applied.
    pub scope: Scope,
    /// The shield in force, when one is up: a fix it already applies is
    /// never named.
    pub shield: Option<&'a ShieldInForce>,
    /// The CPUs a thread can be moved to.
    pub housekeeping: &'a CpuSet,
}

/// The fix for a traced cause of kind `kind` named `name`, or `None` when
/// none is known (IRQs, softirqs and the local timer are named by the
/// sampling checks instead).
pub fn remedy_for_cause(kind: &str, name: &str, at: &CauseContext<'_>) -> Option<Remedy> {
    let (cpus, scope, shield) = (at.cpus, at.scope, at.shield);
    let list = cpus.to_list();
    let (task, id) = match name.rsplit_once(" (") {
        Some((comm, rest)) => (comm, rest.trim_end_matches(')')),
        None => (name, ""),
    };
    // cpushield's own threads are not the user's to move: one of them on a
    // measured CPU is cpushield's bug, which the verdict says so.
    if kind == "task" && (task == "cpushield" || task.starts_with("cpushield-")) {
        return None;
    }
    // A thread that ran on a CPU the process shield covers was not moved by
    // it: what is left is to move it by hand.
    let procs = |all: &str| {
        super::analyze::shield_remedy(shield, ShieldKind::Procs, cpus).or_else(|| {
            (!id.is_empty()).then(|| {
                Remedy::runtime(format!(
                    "taskset {all}-pc {} {id}",
                    at.housekeeping.to_list()
                ))
            })
        })
    };
    let whole_machine = || {
        Remedy::cpushield(format!(
            "cpushield shield --procs {list} outside a PID namespace (compare --system): a namespace-scoped shield leaves the machine's tasks and kernel threads in place"
        ))
    };
    match kind {
        "work" => match name.strip_prefix("workqueue ")? {
            // vmstat's shepherd queues this per-CPU update only on CPUs that
            // are not isolated (kernel 6.4+: cpu_is_isolated()).
            "vmstat_update" => Some(Remedy::boot(format!(
                "isolcpus=domain,managed_irq,{list} (vmstat's per-CPU update skips isolated CPUs; on cgroup v2 the shield's isolated partition does the same without a reboot)"
            ))),
            _ => None,
        },
        // What the boot did is not known here: its parameters are advised.
        "kthread" if is_per_cpu_kthread(task) => {
            bound_kthread_advice(task, cpus, shield, &BootIsolation::default()).1
        }
        "kthread" => match scope {
            Scope::Namespace => Some(whole_machine()),
            Scope::System => procs(""),
        },
        "other-ns" => Some(whole_machine()),
        // Neither scope moves a pod's task: the kubelet places it.
        "pod" => Some(pod_task_remedy(&list)),
        "task" => procs("-a "),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(kind: &str, name: &str, scope: Scope) -> Option<String> {
        fix_under(kind, name, scope, None)
    }

    fn fix_under(
        kind: &str,
        name: &str,
        scope: Scope,
        shield: Option<&ShieldInForce>,
    ) -> Option<String> {
        let at = CauseContext {
            cpus: &CpuSet::from_cpus([1]),
            scope,
            shield,
            housekeeping: &CpuSet::from_cpus([0]),
        };
        remedy_for_cause(kind, name, &at).map(|r| r.action)
    }

    fn shield_all_1() -> ShieldInForce {
        ShieldInForce {
            masks: cpushield_shield::ShieldMasks::all(&CpuSet::from_cpus([1])),
            scope: Scope::System,
            irq_requested: Default::default(),
            irq_set: Default::default(),
            state_lost: None,
        }
    }

    #[test]
    fn under_the_shield_no_cause_fix_is_a_shield_command_it_already_applies() {
        let s = shield_all_1();
        for (kind, name) in [
            ("task", "stress-ng-fifo (4411)"),
            ("kthread", "kdamond.0 (77)"),
            ("kthread", "ksoftirqd/1 (20)"),
            ("kthread", "migration/1 (19)"),
            ("kthread", "kworker/1:2H (99)"),
        ] {
            let f = fix_under(kind, name, Scope::System, Some(&s));
            assert!(
                f.as_deref()
                    .is_none_or(|f| !f.starts_with("cpushield shield --")),
                "{kind} {name}: {f:?}"
            );
        }
        assert_eq!(
            fix_under("task", "stress-ng-fifo (4411)", Scope::System, Some(&s)).as_deref(),
            Some("taskset -a -pc 0 4411")
        );
        assert_eq!(
            fix_under("kthread", "kdamond.0 (77)", Scope::System, Some(&s)).as_deref(),
            Some("taskset -pc 0 77")
        );
    }

    #[test]
    fn cpushield_own_threads_get_no_fix_for_the_user_to_apply() {
        for name in [
            "cpushield (218)",
            "cpushield-trace (256)",
            "cpushield-load (300)",
        ] {
            assert_eq!(fix_under("task", name, Scope::System, None), None, "{name}");
        }
    }

    #[test]
    fn vmstat_update_is_fixed_by_isolating_the_cpu() {
        let f = fix("work", "workqueue vmstat_update", Scope::Namespace).unwrap();
        assert!(f.starts_with("isolcpus=domain,managed_irq,1 "), "{f}");
        assert_eq!(
            fix("work", "workqueue ext4_end_io_rsv_work", Scope::System),
            None
        );
    }

    #[test]
    fn an_unbound_kernel_thread_outside_the_namespace_needs_the_whole_machine_shielded() {
        let f = fix("kthread", "kdamond.0 (77)", Scope::Namespace).unwrap();
        assert!(
            f.starts_with("cpushield shield --procs 1 outside a PID namespace"),
            "{f}"
        );
        assert_eq!(
            fix("kthread", "kdamond.0 (77)", Scope::System).as_deref(),
            Some("cpushield shield --procs 1")
        );
        let f = fix("other-ns", "tokio-rt-worker (75)", Scope::Namespace).unwrap();
        assert!(f.contains("compare --system"), "{f}");
    }

    #[test]
    fn a_pod_task_gets_the_kubelet_fix_in_either_scope_not_a_shield_command() {
        for scope in [Scope::Namespace, Scope::System] {
            let f = fix("pod", "tokio-rt-worker (4411)", scope).unwrap();
            assert!(f.starts_with("kubelet: static CPU manager"), "{f}");
            assert!(f.contains("including 1 "), "{f}");
        }
    }

    #[test]
    fn a_per_cpu_kernel_thread_gets_the_advice_for_its_work() {
        assert_eq!(
            fix("kthread", "ksoftirqd/1 (20)", Scope::Namespace).as_deref(),
            Some("cpushield shield --irqs 1")
        );
        assert_eq!(
            fix("kthread", "kworker/1:2H (99)", Scope::Namespace).as_deref(),
            Some("sysctl -w vm.stat_interval=10")
        );
        assert!(is_per_cpu_kthread("migration/1"));
        assert!(!is_per_cpu_kthread("kworker/u8:3"));
        assert!(!is_per_cpu_kthread("kdamond.0"));
    }

    #[test]
    fn interrupts_and_the_probe_itself_have_no_cause_fix_here() {
        assert_eq!(fix("irq", "irq 36 virtio1-req.0", Scope::System), None);
        assert_eq!(fix("self", "the probe itself", Scope::System), None);
    }
}
