//! The real `shield`, `unshield` and `reset` end to end over a fake cgroup-v1
//! machine (the state in memory): Brosky's rule on every task and IRQ,
//! enforcement cgroups, exact undo.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::host::{Clock, FakeClock};
use cpushield_kernel::{FakeKernel, Host};
use cpushield_shield::fake_machine::v1_machine;
use cpushield_shield::plan::{plan_reset, plan_shield};
use cpushield_shield::snapshot;
use cpushield_shield::state::{self, MemoryStore, SavedState};
use cpushield_shield::steps::Step;
use cpushield_shield::{apply::apply, layout, Options, Report, ShieldMasks};
use std::path::Path;
use std::sync::Arc;

/// A fake host whose clock stands still but for the waits of the code
/// under test, and that clock: a wait's deadline passes at once and the
/// test reads how long the code waited.
fn host_on_fake_clock(k: &FakeKernel, store: &MemoryStore) -> (Host, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::at(0));
    (Host::fake(k, store).with_clock(clock.clone()), clock)
}

/// Asserts that `clock` let at least the namespace's end wait pass: the
/// reset refused only after waiting for the namespace's tasks to end.
fn waited_for_the_namespace(clock: &FakeClock) {
    assert!(
        clock.now_ns() >= cpushield_shield::NAMESPACE_END_WAIT.as_nanos() as u64,
        "refused after {} ns, before the namespace's tasks had their time to end",
        clock.now_ns()
    );
}

const ROOT_OPTIONS: Options = Options {
    is_root: true,
    whole_cores: false,
};

const ROOT: &str = cpushield_shield::fake_machine::V1_ROOT;

fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

/// A 4-CPU machine with v1 cpusets, `tasks` (tid, affinity) all in the root
/// cpuset (tgid = tid, parent 1), and IRQs 10..14 (14 kernel-managed).
fn machine(tasks: &[(i32, &str)]) -> FakeKernel {
    let k = v1_machine("0-3", tasks);
    k.set_file("/proc/2/comm", "kthreadd\n");
    for irq in 10..15 {
        k.set_file(format!("/proc/irq/{irq}/smp_affinity"), "f\n");
    }
    k.refuse_writes("/proc/irq/14/smp_affinity");
    k.set_file("/proc/interrupts", "CPU0 CPU1 CPU2 CPU3\n");
    k
}

/// Shields `masks` with the real [`cpushield_shield::shield_in`] (state in
/// `store`) and returns the report.
fn shield(k: &FakeKernel, store: &MemoryStore, masks: &ShieldMasks) -> Report {
    cpushield_shield::shield(&Host::fake(k, store), masks, ROOT_OPTIONS).unwrap()
}

/// The state the real shield saved in `store`.
fn saved_in(store: &MemoryStore) -> SavedState {
    state::load_from(store).unwrap().unwrap().state
}

/// Shields with the real `shield` and returns the state it saved.
fn shield_and_save(k: &FakeKernel, masks: &ShieldMasks) -> SavedState {
    let store = MemoryStore::new();
    shield(k, &store, masks);
    saved_in(&store)
}

#[test]
fn shielding_applies_broskys_rule_to_every_task() {
    let k = machine(&[
        (100, "0-3"),
        (101, "3"),
        (102, "2-3"),
        (103, "1"),
        (104, "0,3"),
    ]);
    shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("0-2"));
    assert_eq!(
        aff[&101],
        cpus("3"),
        "a task asking only for the shield stays there"
    );
    assert_eq!(aff[&102], cpus("2"));
    assert_eq!(aff[&103], cpus("1"));
    assert_eq!(aff[&104], cpus("0"));
}

#[test]
fn whole_cores_shields_each_cpus_smt_siblings_too_and_reset_restores() {
    let k = machine(&[(100, "0-3"), (101, "3"), (102, "1-2")]);
    for (cpu, siblings) in [(0, "0-1"), (1, "0-1"), (2, "2-3"), (3, "2-3")] {
        k.set_file(
            format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
            format!("{siblings}\n"),
        );
    }
    let files_before = k.files();
    let affinities_before = k.affinities();
    let store = MemoryStore::new();
    let options = Options {
        whole_cores: true,
        ..ROOT_OPTIONS
    };
    let report = cpushield_shield::shield(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("3")),
        options,
    )
    .unwrap();
    let saved = saved_in(&store);
    assert_eq!(saved.masks, ShieldMasks::all(&cpus("2-3")));
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("0-1"));
    assert_eq!(aff[&101], cpus("3"), "it asked only for shielded CPUs");
    assert_eq!(aff[&102], cpus("1"));
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.cpus"))
            .unwrap(),
        "2-3"
    );
    assert!(
        !report
            .notes
            .iter()
            .any(|n| n.text.contains("shares a core")),
        "a whole core leaves no sibling unshielded: {:?}",
        report.notes
    );
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.affinities(), affinities_before);
    let files_after = k.files();
    for (path, text) in &files_before {
        let after = &files_after[path];
        assert_eq!(after.trim_end(), text.trim_end(), "{}", path.display());
    }
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));

    // Without it, only CPU 3 is shielded and its sibling is named.
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(saved_in(&store).masks, ShieldMasks::all(&cpus("3")));
    assert!(
        report.notes.iter().any(|n| n
            .text
            .contains("CPU 3 shares a core with unshielded CPU(s) 2")),
        "{:?}",
        report.notes
    );
}

#[test]
fn shielded_tasks_are_enforced_by_cpusets() {
    let k = machine(&[(100, "0-3"), (101, "3")]);
    shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    let shield_tasks = k.file(format!("{ROOT}/cpushield-shield/tasks")).unwrap();
    let system_tasks = k.file(format!("{ROOT}/cpushield-system/tasks")).unwrap();
    assert_eq!(shield_tasks.trim(), "101");
    assert_eq!(system_tasks.trim(), "100");
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.cpus"))
            .unwrap(),
        "3"
    );
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-system/cpuset.cpus"))
            .unwrap(),
        "0-2"
    );
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.cpu_exclusive"))
            .unwrap(),
        "1"
    );
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.sched_load_balance"))
            .unwrap(),
        "0"
    );
    assert_eq!(
        k.file(format!("{ROOT}/cpuset.sched_load_balance")).unwrap(),
        "0",
        "system scope turns root balancing off"
    );
}

#[test]
fn irqs_follow_the_rule_and_managed_ones_are_reported_not_fatal() {
    let k = machine(&[(100, "0-3")]);
    let outcome = shield(&k, &MemoryStore::new(), &ShieldMasks::all(&cpus("3"))).outcome;
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap(), "7");
    assert_eq!(k.file("/proc/irq/14/smp_affinity").unwrap(), "f\n");
    assert_eq!(k.file("/proc/irq/default_smp_affinity").unwrap(), "7");
    assert_eq!(
        k.file("/sys/devices/virtual/workqueue/cpumask").unwrap(),
        "7"
    );
    assert_eq!(k.file("/proc/sys/kernel/watchdog_cpumask").unwrap(), "0-2");
    assert_eq!(k.file("/proc/sys/vm/stat_interval").unwrap(), "10");
    assert!(outcome
        .notes
        .iter()
        .any(|n| n.text.contains("IRQ 14") && n.remedy.is_some()));
}

#[test]
fn reset_restores_every_file_affinity_and_cgroup_exactly() {
    let k = machine(&[(100, "0-3"), (101, "3"), (102, "2-3"), (103, "1")]);
    let files_before = k.files();
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_ne!(k.affinities(), aff_before);
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.affinities(), aff_before);
    let files_after = k.files();
    for (path, text) in &files_before {
        let after = files_after
            .get(path)
            .unwrap_or_else(|| panic!("{} vanished", path.display()));
        let same = after == text || after.trim_end() == text.trim_end();
        assert!(same, "{}: {text:?} became {after:?}", path.display());
    }
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
}

#[test]
fn a_second_shield_reapplies_the_rule_from_the_requested_masks() {
    let k = machine(&[(100, "0-3"), (101, "2-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(k.affinities()[&101], cpus("2"));
    // Now shield 2 as well: task 101 asked for 2-3 only, so it goes onto the shield.
    shield(&k, &store, &ShieldMasks::all(&cpus("2")));
    assert_eq!(k.affinities()[&100], cpus("0-1"));
    assert_eq!(k.affinities()[&101], cpus("2-3"));
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/tasks"))
            .unwrap()
            .trim(),
        "101"
    );
}

#[test]
fn tasks_keep_their_rule_when_a_second_shield_resizes_the_cpusets() {
    // Resizing cpushield-system resets its tasks to 0-1 in the kernel; the
    // rule must be applied again afterwards (task 103 asked for 1 only).
    let k = machine(&[(100, "0-3"), (103, "1"), (104, "0,2")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    shield(&k, &store, &ShieldMasks::all(&cpus("2")));
    assert_eq!(saved_in(&store).masks, ShieldMasks::all(&cpus("2-3")));
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("0-1"));
    assert_eq!(aff[&103], cpus("1"));
    assert_eq!(aff[&104], cpus("0"));
}

/// Adds task 7, a per-CPU kernel thread (PF_KTHREAD|PF_NO_SETAFFINITY)
/// bound to CPU 3, in the root cgroup; the caller lists it.
fn add_ksoftirqd_on_cpu_3(k: &FakeKernel) {
    k.set_file(
        "/proc/7/task/7/stat",
        "7 (ksoftirqd/3) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
    );
    k.set_file("/proc/7/task/7/cgroup", "3:cpuset:/\n");
    k.set_thread_affinity(7, cpus("3"));
}

#[test]
fn per_cpu_kernel_threads_are_listed_not_moved() {
    let k = machine(&[(100, "0-3")]);
    add_ksoftirqd_on_cpu_3(&k);
    // Every task is in one cgroup of the hierarchy: the root's list names it.
    k.set_file(format!("{ROOT}/tasks"), "7\n100\n");
    let layout = layout::detect(&k).unwrap();
    let snap = snapshot::take(&k, &layout).unwrap();
    let saved = SavedState::from_snapshot(&snap, ShieldMasks::default());
    let plan = plan_shield(&snap, &saved, &ShieldMasks::all(&cpus("3")));
    assert!(!plan.steps.iter().any(|s| match s {
        Step::Moves { ids, .. } => ids.contains(&7),
        Step::Affinities(tasks) => tasks.iter().any(|a| a.tid == 7),
        _ => false,
    }));
    assert!(plan.notes.iter().any(|n| n.text.contains("ksoftirqd/3")));
}

#[test]
fn unshielding_everything_tears_down_the_cgroups() {
    let k = machine(&[(100, "0-3"), (101, "3")]);
    let store = MemoryStore::new();
    let all = ShieldMasks::all(&cpus("3"));
    shield(&k, &store, &all);
    cpushield_shield::unshield(&Host::fake(&k, &store), &all, ROOT_OPTIONS).unwrap();
    assert!(state::load_from(&store).unwrap().is_none());
    assert!(!k.has_dir(Path::new(ROOT).join("cpushield-shield")));
    assert_eq!(k.affinities()[&100], cpus("0-3"));
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap().trim(), "f");
}

#[test]
fn validation_refuses_offline_cpus_and_shielding_everything() {
    let online = cpus("0-3");
    assert!(cpushield_shield::validate(&ShieldMasks::all(&cpus("9")), &online).is_err());
    assert!(cpushield_shield::validate(&ShieldMasks::all(&cpus("0-3")), &online).is_err());
    let irqs_everywhere = ShieldMasks {
        procs: cpus("3"),
        irqs: cpus("0-3"),
        ltmr: CpuSet::new(),
    };
    assert!(cpushield_shield::validate(&irqs_everywhere, &online).is_err());
    assert!(cpushield_shield::validate(&ShieldMasks::all(&cpus("1-3")), &online).is_ok());
}

#[test]
fn cgroups_cpushield_creates_carry_its_mark_and_pass_the_machine_check() {
    let k = machine(&[(100, "0-3"), (101, "3")]);
    let saved = shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    let snap = snapshot::take(&k, &saved.layout).unwrap();
    assert_eq!(
        cpushield_shield::machine_problems(&k, &saved, &snap),
        Vec::<String>::new()
    );
}

#[test]
fn reset_refuses_to_remove_a_cgroup_without_the_mark_that_holds_a_task_or_cpus() {
    use cpushield_kernel::Kernel;
    for (file, value) in [("tasks", "100\n"), ("cpuset.cpus", "2\n")] {
        let k = machine(&[(100, "0-3")]);
        let mut saved = shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
        // Someone else's cgroup that happens to carry our name, made
        // unmarked and put to use.
        let foreign = Path::new(ROOT).join("cpushield-foreign");
        k.mkdir(&foreign).unwrap();
        k.set_file(foreign.join(file), value);
        saved.created_cgroups.push(foreign.clone());
        let snap = snapshot::take(&k, &saved.layout).unwrap();
        let problems = cpushield_shield::machine_problems(&k, &saved, &snap).join("\n");
        assert!(
            problems.contains(&format!(
                "cgroup {}: has no cpushield mark",
                foreign.display()
            )),
            "{file}: {problems}"
        );
    }
}

#[test]
fn a_shield_killed_between_making_a_cgroup_and_marking_it_is_reset_exactly() {
    use cpushield_kernel::Kernel;
    let k = machine(&[(100, "0-3"), (101, "3"), (102, "2-3")]);
    let files_before = k.files();
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let saved = saved_in(&store);
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    // The state is stored before the first change; SIGKILL then lands
    // right after the first mkdir, before its mark.
    put(&store, &saved);
    let first = saved.created_cgroups[0].clone();
    k.mkdir(&first).unwrap();
    let snap = snapshot::take(&k, &saved.layout).unwrap();
    assert_eq!(
        cpushield_shield::machine_problems(&k, &saved, &snap),
        Vec::<String>::new()
    );
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(&first), "{} removed", first.display());
    assert_eq!(as_read(k.files()), as_read(files_before));
    assert_eq!(k.affinities(), aff_before);
    assert!(state::load_from(&store).unwrap().is_none(), "state removed");
}

#[test]
fn a_shield_again_over_one_killed_before_or_just_after_its_mkdir_completes_and_resets_exactly() {
    use cpushield_kernel::Kernel;
    for made in [0, 1] {
        let k = machine(&[(100, "0-3"), (101, "3"), (102, "2-3")]);
        let files_before = k.files();
        let aff_before = k.affinities();
        let store = MemoryStore::new();
        let masks = ShieldMasks::all(&cpus("3"));
        shield(&k, &store, &masks);
        let saved = saved_in(&store);
        cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
        // The state is stored before the first change; SIGKILL lands
        // before any mkdir, or after the first one and before its mark.
        put(&store, &saved);
        for dir in &saved.created_cgroups[..made] {
            k.mkdir(dir).unwrap();
        }
        shield(&k, &store, &masks);
        for dir in &saved.created_cgroups {
            assert!(k.has_dir(dir), "{made} made: {} made again", dir.display());
        }
        cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
        for dir in &saved.created_cgroups {
            assert!(!k.has_dir(dir), "{made} made: {} removed", dir.display());
        }
        assert_eq!(as_read(k.files()), as_read(files_before), "{made} made");
        assert_eq!(k.affinities(), aff_before, "{made} made");
    }
}

#[test]
fn saved_values_this_machine_cannot_restore_are_named_before_any_change() {
    let k = machine(&[(100, "0-3"), (101, "0-3")]);
    let mut saved = shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    saved.tasks.get_mut(&100).unwrap().affinity = cpus("5000-8191");
    saved.irqs.insert(11, "10000".into());
    let snap = snapshot::take(&k, &saved.layout).unwrap();
    let problems = cpushield_shield::machine_problems(&k, &saved, &snap).join("\n");
    assert!(
        problems.contains("task 100 (task100): saved affinity '5000-8191' does not fit"),
        "{problems}"
    );
    assert!(
        problems.contains("IRQ 11: saved mask '10000'"),
        "{problems}"
    );
    assert!(!problems.contains("task 101"), "{problems}");
    // A task that exited is not restored: its saved value does not matter.
    saved.tasks.get_mut(&100).unwrap().starttime += 1;
    let problems = cpushield_shield::machine_problems(&k, &saved, &snap).join("\n");
    assert!(!problems.contains("task 100"), "{problems}");
}

#[test]
fn a_reset_plan_writing_outside_the_kernel_trees_is_caught() {
    let k = machine(&[(100, "0-3")]);
    let mut saved = shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    saved.files.insert("/etc/motd".into(), "x".into());
    k.set_file("/etc/motd", "y");
    let mut snap = snapshot::take(&k, &saved.layout).unwrap();
    snap.files.insert("/etc/motd".into(), "y".into());
    let plan = plan_reset(&snap, &saved);
    assert_eq!(
        cpushield_shield::paths_outside(&plan, &saved.layout),
        vec![std::path::PathBuf::from("/etc/motd")]
    );
}

#[test]
fn reset_gives_back_the_scheduling_policy_run_changed() {
    let k = machine(&[(100, "0-3"), (101, "0-3")]);
    let mut saved = shield_and_save(&k, &ShieldMasks::all(&cpus("3")));
    // What `run --pid 100 --fifo 10` records before changing it.
    saved.sched.insert(
        100,
        cpushield_shield::state::SavedSched {
            starttime: 1100,
            policy: 0,
            flags: 0,
            nice: 0,
            priority: 0,
            deadline: [0; 3],
        },
    );
    let fifo = cpushield_kernel::SchedParams {
        policy: 1,
        priority: 10,
        ..Default::default()
    };
    use cpushield_kernel::Kernel;
    k.set_sched(100, &fifo).unwrap();
    k.set_sched(101, &fifo).unwrap();
    let snap = snapshot::take(&k, &saved.layout).unwrap();
    apply(&k, &plan_reset(&snap, &saved)).unwrap();
    let scheds = k.scheds();
    assert_eq!(scheds[&100], cpushield_kernel::SchedParams::default());
    assert_eq!(
        scheds[&101], fifo,
        "a policy cpushield did not change is left alone"
    );
}

#[test]
fn unshielding_the_processes_alone_tears_down_the_cgroups_and_keeps_the_irq_shield() {
    let k = machine(&[(100, "0-3"), (101, "3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let procs = ShieldMasks {
        procs: cpus("3"),
        ..ShieldMasks::default()
    };
    cpushield_shield::unshield(&Host::fake(&k, &store), &procs, ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(Path::new(ROOT).join("cpushield-shield")));
    assert!(!k.has_dir(Path::new(ROOT).join("cpushield-system")));
    assert_eq!(k.affinities()[&100], cpus("0-3"));
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap(), "7");
    let saved = saved_in(&store);
    assert!(saved.created_cgroups.is_empty(), "{saved:?}");
    assert_eq!(saved.masks.irqs, cpus("3"));
}

/// Every file as a reader of the kernel file sees it: the kernel ends each
/// value with the newline it prints, whatever was written, while the fake
/// keeps the bytes written (the state saves values without it).
fn as_read(files: cpushield_kernel::FakeFiles) -> cpushield_kernel::FakeFiles {
    files
        .into_iter()
        .map(|(path, text)| {
            let text = match text.strip_suffix('\n') {
                Some(body) => body.to_string(),
                None => text,
            };
            (path, text)
        })
        .collect()
}

#[test]
fn shield_unshield_reset_round_trip_restores_every_file_byte_for_byte() {
    let k = machine(&[(100, "0-3"), (101, "3"), (102, "2-3"), (103, "1")]);
    let files_before = k.files();
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("2-3")));
    assert_ne!(k.files(), files_before);
    cpushield_shield::unshield(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("2")),
        ROOT_OPTIONS,
    )
    .unwrap();
    assert_eq!(saved_in(&store).masks, ShieldMasks::all(&cpus("3")));
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(
        as_read(k.files()),
        as_read(files_before.clone()),
        "every file byte for byte"
    );
    assert_eq!(k.affinities(), aff_before);
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
    assert!(state::load_from(&store).unwrap().is_none(), "state removed");
    // A second reset changes nothing.
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(as_read(k.files()), as_read(files_before));
}

#[test]
fn a_state_that_cannot_be_written_leaves_the_system_unchanged() {
    for errno in [libc::ENOSPC, libc::EROFS] {
        let k = machine(&[(100, "0-3"), (101, "3")]);
        let files_before = k.files();
        let aff_before = k.affinities();
        let store = MemoryStore::new();
        store.fail_writes(Some(errno));
        let err = cpushield_shield::shield(
            &Host::fake(&k, &store),
            &ShieldMasks::all(&cpus("3")),
            ROOT_OPTIONS,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cannot save the shield state"), "{text}");
        assert!(text.contains("nothing was changed"), "{text}");
        assert_eq!(k.files(), files_before, "errno {errno}: files changed");
        assert_eq!(
            k.affinities(),
            aff_before,
            "errno {errno}: affinities changed"
        );
        assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
        assert!(store.copy(state::STATE_FILE).is_none());
        assert!(store.copy(state::BACKUP_FILE).is_none());
    }
}

#[test]
fn a_second_shield_whose_state_cannot_be_written_changes_nothing_more() {
    let k = machine(&[(100, "0-3"), (101, "2-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let files_before = k.files();
    let aff_before = k.affinities();
    let saved_before = store.copy(state::STATE_FILE);
    store.fail_writes(Some(libc::ENOSPC));
    assert!(cpushield_shield::shield(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("2")),
        ROOT_OPTIONS
    )
    .is_err());
    assert_eq!(k.files(), files_before);
    assert_eq!(k.affinities(), aff_before);
    assert_eq!(
        store.copy(state::STATE_FILE),
        saved_before,
        "the saved original is kept"
    );
    store.fail_writes(None);
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.affinities()[&101], cpus("2-3"));
}

#[test]
fn a_damaged_state_in_the_store_is_recovered_from_its_copy_by_reset() {
    let k = machine(&[(100, "0-3")]);
    let files_before = k.files();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    store.set_copy(state::STATE_FILE, Some(b"{".to_vec()));
    let report = cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(report
        .notes
        .iter()
        .any(|n| n.text.contains("verified copy")));
    assert_eq!(as_read(k.files()), as_read(files_before));
}

#[test]
fn a_shield_from_another_pid_namespace_is_refused_and_reset_namespace_gone_restores_the_system() {
    let k = machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let mut saved = saved_in(&store);
    saved.pid_namespace = "pid:[1]".into();
    let text = state::encode(&saved).into_bytes();
    store.set_copy(state::STATE_FILE, Some(text.clone()));
    store.set_copy(state::BACKUP_FILE, Some(text));
    let shielded = k.files();
    let err = cpushield_shield::shield(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("2")),
        ROOT_OPTIONS,
    )
    .unwrap_err();
    assert!(
        matches!(err, cpushield_shield::ShieldError::OtherNamespace { .. }),
        "{err}"
    );
    assert!(cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).is_err());
    assert_eq!(k.files(), shielded, "nothing changed");
    cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap(), "f");
    assert!(state::load_from(&store).unwrap().is_none());
}

/// Stores `saved` as both copies of the state, sealed.
fn put(store: &MemoryStore, saved: &SavedState) {
    state::store_in(store, saved).unwrap();
}

/// Task 100 of a [`machine`] shielded on CPU 3, its state stored as if the
/// shield had been put up in the PID namespace `ns`, not this one: the
/// machine, the store and that state.
fn shielded_from_namespace(ns: &str) -> (FakeKernel, MemoryStore, SavedState) {
    let k = machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let mut saved = saved_in(&store);
    saved.pid_namespace = ns.into();
    put(&store, &saved);
    (k, store, saved)
}

#[test]
fn an_affinity_a_task_sets_while_shielded_is_its_request_for_later_shields_and_reset() {
    let k = machine(&[(100, "0-3"), (101, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(k.affinities()[&100], cpus("0-2"));
    // The task narrows its own affinity (taskset) behind the shield's back.
    k.set_thread_affinity(100, cpus("1-2"));
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("2")));
    assert!(
        report.notes.iter().any(|n| n
            .text
            .contains("task 100 (task100) set its affinity to 1-2")),
        "{:?}",
        report.notes
    );
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("1"), "the rule on its new request 1-2");
    assert_eq!(
        aff[&101],
        cpus("0-1"),
        "an untouched task keeps 0-3 as its request"
    );
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let aff = k.affinities();
    assert_eq!(
        aff[&100],
        cpus("1-2"),
        "reset gives the new request, not 0-3"
    );
    assert_eq!(aff[&101], cpus("0-3"));
}

#[test]
fn a_mask_written_to_an_irq_while_shielded_is_its_request_for_later_shields_and_reset() {
    let k = machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap(), "7");
    // irqbalance or a user writes CPUs 0-1.
    k.set_file("/proc/irq/10/smp_affinity", "3\n");
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("1")));
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.text.contains("IRQ 10: smp_affinity was set to 3")),
        "{:?}",
        report.notes
    );
    assert_eq!(
        k.file("/proc/irq/10/smp_affinity").unwrap(),
        "1",
        "0-1 minus the shield"
    );
    assert_eq!(k.file("/proc/irq/11/smp_affinity").unwrap(), "5");
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap(), "3");
    assert_eq!(
        k.file("/proc/irq/11/smp_affinity").unwrap(),
        "f",
        "untouched: the original"
    );
}

#[test]
fn reset_keeps_an_affinity_set_while_shielded_and_restores_everything_else_exactly() {
    let k = machine(&[(100, "0-3"), (101, "3"), (102, "2-3")]);
    let files_before = k.files();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    k.set_thread_affinity(100, cpus("1"));
    k.set_file("/proc/irq/12/smp_affinity", "2\n");
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("1"));
    assert_eq!(aff[&101], cpus("3"));
    assert_eq!(aff[&102], cpus("2-3"));
    let mut expected = as_read(files_before);
    expected.insert("/proc/irq/12/smp_affinity".into(), "2".into());
    assert_eq!(
        as_read(k.files()),
        expected,
        "every other file byte for byte"
    );
}

#[test]
fn a_change_cut_short_trusts_no_record_and_reset_restores_the_saved_affinities() {
    // As after a SIGKILL during shield: the state says a change was being
    // applied, so what differs may be the shield's own half-done work.
    let k = machine(&[(100, "0-3")]);
    let files_before = k.files();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let mut saved = saved_in(&store);
    assert!(!saved.set.applying && saved.set.tasks.contains_key(&100));
    saved.set.applying = true;
    put(&store, &saved);
    k.set_thread_affinity(100, cpus("1"));
    k.set_file("/proc/irq/10/smp_affinity", "2\n");
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.affinities()[&100], cpus("0-3"));
    assert_eq!(as_read(k.files()), as_read(files_before));
}

#[test]
fn a_version_1_state_without_records_still_resets_exactly() {
    let k = machine(&[(100, "0-3"), (101, "2-3")]);
    let files_before = k.files();
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    // The state as cpushield 1 wrote it: version 1, no record of what was set.
    let mut old = serde_json::to_value(saved_in(&store)).unwrap();
    old["version"] = 1.into();
    old.as_object_mut().unwrap().remove("set");
    let text = old.to_string();
    for copy in [state::STATE_FILE, state::BACKUP_FILE] {
        store.set_copy(copy, Some(text.clone().into_bytes()));
    }
    assert!(
        text.contains("\"version\":1") && !text.contains("\"set\""),
        "{text}"
    );
    k.set_thread_affinity(100, cpus("1"));
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(
        k.affinities(),
        aff_before,
        "the requests saved at the first shield"
    );
    assert_eq!(as_read(k.files()), as_read(files_before));
    assert!(state::load_from(&store).unwrap().is_none(), "state removed");
}

#[test]
fn a_reset_whose_state_cannot_be_written_follows_nothing_and_restores_the_saved_state() {
    let k = machine(&[(100, "0-3")]);
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    k.set_thread_affinity(100, cpus("1"));
    store.fail_writes(Some(libc::EROFS));
    let _ = cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS);
    assert_eq!(k.affinities(), aff_before);
}

#[test]
fn a_task_widened_to_every_housekeeping_cpu_is_taken_to_request_every_cpu() {
    // In the housekeeping cpuset the kernel clamps `taskset -p 0-3` to 0-2:
    // the task asked for more than its cpuset lets it show.
    let k = machine(&[(100, "1"), (101, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(k.affinities()[&100], cpus("1"));
    k.set_thread_affinity(100, cpus("0-2"));
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("0-3"));
    assert_eq!(aff[&101], cpus("0-3"));
}

/// Task `tid` exits and a new task gets its ID: a child of `ppid` started at
/// `starttime`, in the cgroup its parent was in.
fn reuse_id(k: &FakeKernel, tid: i32, ppid: i32, starttime: u64, affinity: &str) {
    k.set_file(
        format!("/proc/{tid}/task/{tid}/stat"),
        format!("{tid} (new{tid}) S {ppid} {tid} {tid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {starttime} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
    );
    k.set_thread_affinity(tid, cpus(affinity));
}

#[test]
fn a_task_given_a_saved_tasks_id_is_told_from_it_by_its_start_time_and_restored_as_new() {
    let k = machine(&[(100, "0-3"), (101, "1"), (200, "0")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    // Since: 200 exited and a child of 100 got ID 200 (by the allocator, or
    // chosen through ns_last_pid or clone3's set_tid).
    reuse_id(&k, 200, 100, 90_000, "0-2");
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let aff = k.affinities();
    assert_eq!(aff[&100], cpus("0-3"));
    assert_eq!(aff[&101], cpus("1"));
    assert_eq!(
        aff[&200],
        cpus("0-3"),
        "the new task 200 gets its parent's saved affinity, not the exited task's '0'"
    );
    let root_tasks = k.file(format!("{ROOT}/tasks")).unwrap();
    for tid in ["100", "101", "200"] {
        assert!(
            root_tasks.lines().any(|l| l == tid),
            "{tid} not back in the root: {root_tasks}"
        );
    }
}

#[test]
fn a_reset_marks_the_state_as_being_applied_before_its_first_change_and_removes_it_at_the_end() {
    let k = machine(&[(100, "0-3"), (101, "1")]);
    let aff_before = k.affinities();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let writes = store.writes();
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(
        store.writes(),
        writes + 2,
        "the state's two copies, marked as being applied, before the first change"
    );
    assert_eq!(k.affinities(), aff_before);
    for name in [state::STATE_FILE, state::BACKUP_FILE] {
        assert!(store.copy(name).is_none(), "{name} left after reset");
    }
}

#[test]
fn a_reset_of_a_gone_namespace_takes_no_task_here_for_a_saved_one() {
    // Saved in another namespace, where task 100 asked for CPU 7 (not here).
    let (k, store, mut saved) = shielded_from_namespace("pid:[1]");
    saved.tasks.get_mut(&100).unwrap().affinity = cpus("7");
    put(&store, &saved);
    // Task 100 here is another task, even with the same start time: it is
    // not taken for the saved one (whose CPU 7 would make the reset refuse).
    cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
    assert!(state::load_from(&store).unwrap().is_none());
}

#[test]
fn a_version_4_state_takes_a_task_saved_without_its_start_time_by_the_tick_it_names() {
    let k = machine(&[(100, "2"), (101, "1")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    // As a version-4 first shield saved them: no start time, no name, and
    // the tick before which they started (100 started at 1100, 101 at 1101).
    let mut saved = saved_in(&store);
    saved.version = 4;
    saved.unread_start_before = Some(1102);
    for task in saved.tasks.values_mut() {
        task.starttime = 0;
        task.comm.clear();
    }
    for rec in saved.set.tasks.values_mut() {
        rec.starttime = 0;
    }
    put(&store, &saved);
    // Then 101 exited and a task started at the tick the state names got
    // its ID.
    reuse_id(&k, 101, 1, 1102, "1");
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let aff = k.affinities();
    assert_eq!(
        aff[&100],
        cpus("2"),
        "the saved task 100 gets its affinity back"
    );
    assert_eq!(
        aff[&101],
        cpus("0-3"),
        "the new task 101 is not taken for the exited one (saved '1')"
    );
}

#[test]
fn run_time_settings_journaled_over_the_shield_are_undone_first_by_reset() {
    use cpushield_kernel::Kernel;
    use cpushield_shield::runtime;
    let k = machine(&[(100, "0-3")]);
    let debugfs = Path::new(runtime::DEBUGFS);
    let preempt = Path::new("/sys/kernel/debug/sched/preempt");
    k.set_unmounted_file(debugfs, preempt, "none (voluntary) full lazy\n");
    let files_before = k.files();
    let store = MemoryStore::new();
    let stat = Path::new("/proc/sys/vm/stat_interval");
    assert!(
        state::record_runtime_in(&store, &[(stat.into(), "1".into())]).is_err(),
        "no shield, no journal"
    );
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    // The local-timer shield raised vm.stat_interval to 10; tune journals
    // the 10 it finds, then writes its candidate.
    let shielded = k.file(stat).unwrap();
    state::record_runtime_in(&store, &[(stat.into(), shielded.trim().into())]).unwrap();
    state::record_runtime_in(&store, &[(stat.into(), "999".into())]).unwrap();
    k.write(stat, "120").unwrap();
    k.mount("debugfs", debugfs).unwrap();
    state::record_runtime_in(&store, &[(preempt.into(), "voluntary".into())]).unwrap();
    k.write(preempt, "full").unwrap();
    k.unmount(debugfs).unwrap();
    assert_eq!(
        saved_in(&store).runtime.original(stat),
        Some(shielded.trim())
    );
    // A SIGKILL here leaves the state as it is; reset finds everything in it.
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let trimmed = |f: cpushield_kernel::FakeFiles| -> Vec<(std::path::PathBuf, String)> {
        f.into_iter()
            .map(|(p, t)| (p, t.trim_end().to_string()))
            .collect()
    };
    assert_eq!(
        trimmed(k.files()),
        trimmed(files_before),
        "stat_interval back to 1, not the shield's 10"
    );
    assert!(!k.is_mounted(debugfs));
    k.mount("debugfs", debugfs).unwrap();
    assert!(k.read(preempt).unwrap().starts_with("voluntary"));
    assert!(state::load_from(&store).unwrap().is_none());
}

/// The text of `path` on `k`, without its trailing newline.
fn text(k: &FakeKernel, path: &str) -> String {
    k.file(path).unwrap().trim_end().to_string()
}

#[test]
fn show_reports_a_shield_whose_state_is_gone_with_the_cpus_it_shields() {
    let k = machine(&[(100, "0-3")]);
    shield(&k, &MemoryStore::new(), &ShieldMasks::all(&cpus("3")));
    // The state is gone (removed, or in another state directory).
    let st = cpushield_shield::status::status(&Host::fake(&k, &MemoryStore::new())).unwrap();
    assert_eq!(
        (st.procs.as_str(), st.irqs.as_str(), st.ltmr.as_str()),
        ("3", "3", "3")
    );
    let found = st
        .without_state
        .clone()
        .expect("a shield without its state");
    let evidence = found.evidence.join("\n");
    for sign in [
        &format!("cgroup {ROOT}/cpushield-shield holds CPUs 3 (cpushield made it)"),
        "/proc/irq/default_smp_affinity leaves out CPU 3",
        "/proc/sys/kernel/watchdog_cpumask leaves out CPU 3",
        "/proc/sys/vm/stat_interval is 10",
    ] {
        assert!(evidence.contains(sign), "{sign} not in {evidence}");
    }
    let text = cpushield_shield::render::render_status(&st);
    assert!(
        text.contains("NO STATE") && text.contains("cpushield reset --without-state"),
        "{text}"
    );
}

#[test]
fn reset_without_a_state_refuses_naming_what_shows_the_shield_and_changes_nothing() {
    let k = machine(&[(100, "0-3"), (101, "2-3")]);
    shield(&k, &MemoryStore::new(), &ShieldMasks::all(&cpus("3")));
    let (files, affinities) = (k.files(), k.affinities());
    let e = cpushield_shield::reset(&Host::fake(&k, &MemoryStore::new()), ROOT_OPTIONS)
        .unwrap_err()
        .to_string();
    for part in [
        "a shield is in place but there is no shield state",
        "cpushield-shield holds CPUs 3",
        "default_smp_affinity leaves out CPU 3",
        "cpushield reset --without-state",
    ] {
        assert!(e.contains(part), "{part} not in {e}");
    }
    assert_eq!(k.files(), files);
    assert_eq!(k.affinities(), affinities);
}

#[test]
fn an_irq_shield_without_its_state_is_found_by_the_default_irq_affinity() {
    let k = machine(&[(100, "0-3")]);
    let irqs_only = ShieldMasks {
        irqs: cpus("3"),
        ..ShieldMasks::default()
    };
    shield(&k, &MemoryStore::new(), &irqs_only);
    let e = cpushield_shield::reset(&Host::fake(&k, &MemoryStore::new()), ROOT_OPTIONS)
        .unwrap_err()
        .to_string();
    assert!(e.contains("default_smp_affinity leaves out CPU 3"), "{e}");
    assert!(!e.contains("cgroup"), "no cgroup was made: {e}");
}

#[test]
fn reset_without_state_undoes_the_shield_as_far_as_the_kernel_shows_and_says_what_it_cannot_know() {
    let k = machine(&[(100, "0-3"), (101, "2-3"), (102, "1")]);
    add_ksoftirqd_on_cpu_3(&k);
    let files_before = as_read(k.files());
    shield(&k, &MemoryStore::new(), &ShieldMasks::all(&cpus("3")));
    let lost = MemoryStore::new();
    let report =
        cpushield_shield::reset_without_state(&Host::fake(&k, &lost), ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
    let root_tasks = k.file(format!("{ROOT}/tasks")).unwrap();
    let aff = k.affinities();
    for tid in [100, 101, 102] {
        assert!(
            root_tasks.lines().any(|l| l == tid.to_string()),
            "{tid}: {root_tasks}"
        );
        // What each asked for before is not known: every online CPU.
        assert_eq!(aff[&tid], cpus("0-3"), "task {tid}");
    }
    assert_eq!(aff[&7], cpus("3"), "a per-CPU kernel thread is not touched");
    for irq in 10..14 {
        assert_eq!(text(&k, &format!("/proc/irq/{irq}/smp_affinity")), "f");
    }
    let files_now = as_read(k.files());
    for path in [
        "/proc/irq/default_smp_affinity",
        "/sys/devices/virtual/workqueue/cpumask",
        "/proc/sys/kernel/watchdog_cpumask",
        "/proc/sys/kernel/timer_migration",
        "/proc/sys/vm/stat_interval",
    ] {
        assert_eq!(
            files_now.get(Path::new(path)),
            files_before.get(Path::new(path)),
            "{path} is not at the kernel's default"
        );
    }
    assert_eq!(text(&k, &format!("{ROOT}/cpuset.sched_load_balance")), "1");
    let notes: Vec<&str> = report.notes.iter().map(|n| n.text.as_str()).collect();
    assert!(
        notes.iter().any(|n| n.contains("cannot be undone exactly")),
        "{notes:?}"
    );
    // Nothing shows a shield any more: a reset now has nothing to do.
    cpushield_shield::reset(&Host::fake(&k, &lost), ROOT_OPTIONS).unwrap();
}

#[test]
fn reset_without_state_is_refused_while_the_state_exists() {
    let k = machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let e = cpushield_shield::reset_without_state(&Host::fake(&k, &store), ROOT_OPTIONS)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`cpushield reset` restores exactly"), "{e}");
    assert!(k.has_dir(format!("{ROOT}/cpushield-shield")));
}

#[test]
fn a_cgroup_with_our_name_but_no_mark_is_named_and_left_by_reset_without_state() {
    let k = machine(&[(100, "0-3")]);
    k.set_file(format!("{ROOT}/cpushield-system/tasks"), "");
    k.set_file(format!("{ROOT}/cpushield-system/cpuset.cpus"), "0-2\n");
    let report =
        cpushield_shield::reset_without_state(&Host::fake(&k, &MemoryStore::new()), ROOT_OPTIONS)
            .unwrap();
    assert!(k.has_dir(format!("{ROOT}/cpushield-system")));
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.text.contains("cpushield-system has no cpushield mark")),
        "{:?}",
        report.notes
    );
}

/// Makes task `tid` the kernel thread `irq/10-eth0`, IRQ 10's threaded
/// handler (PF_KTHREAD, its affinity settable: the kernel keeps it on its
/// IRQ's effective affinity).
fn irq_10_thread(k: &FakeKernel, tid: i32) {
    k.set_file(
        format!("/proc/{tid}/task/{tid}/stat"),
        format!("{tid} (irq/10-eth0) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 50 1 0 0 0 0 0 0 0 0\n", 1000 + tid),
    );
}

#[test]
fn an_irq_handler_thread_with_its_irq_on_the_shielded_cpu_is_left_to_the_kernel() {
    // IRQ 10 is delivered to CPU 3 (its effective affinity), so is its thread.
    let k = machine(&[(100, "0-3"), (120, "3")]);
    irq_10_thread(&k, 120);
    let store = MemoryStore::new();
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let shield_tasks = k
        .file(format!("{ROOT}/cpushield-shield/tasks"))
        .unwrap_or_default();
    assert!(
        !shield_tasks.lines().any(|t| t.trim() == "120"),
        "the handler thread was pinned into the shield: {shield_tasks}"
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.text.contains("irq/10-eth0 (IRQ 10) stay with their IRQs")),
        "{:?}",
        report.notes
    );
    assert!(
        !report
            .notes
            .iter()
            .chain(&report.outcome.notes)
            .any(|n| n.text.contains("refused")),
        "{:?}",
        report.notes
    );
    // IRQ 10 itself is moved off CPU 3: the kernel takes its thread along.
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap().trim(), "7");
}

#[test]
fn an_irq_handler_threads_affinity_that_moved_with_its_irq_is_not_taken_for_a_request() {
    let k = machine(&[(100, "0-3"), (120, "0-3")]);
    irq_10_thread(&k, 120);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    // The kernel moves the thread with its IRQ, to IRQ 10's effective CPU.
    k.set_thread_affinity(120, cpus("1"));
    let report = cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(
        !report.notes.iter().any(|n| n.text.contains("irq/10-eth0")),
        "the kernel's move is not the thread's request: {:?}",
        report.notes
    );
    assert_eq!(
        k.affinities()[&120],
        cpus("0-3"),
        "reset gives back what it had before the shield"
    );
}

#[test]
fn unshield_without_a_state_refuses_naming_reset_without_state_and_changes_nothing() {
    let k = machine(&[(100, "0-3"), (101, "2-3")]);
    shield(&k, &MemoryStore::new(), &ShieldMasks::all(&cpus("3")));
    let (files, affinities) = (k.files(), k.affinities());
    let e = cpushield_shield::unshield(
        &Host::fake(&k, &MemoryStore::new()),
        &ShieldMasks::all(&cpus("3")),
        ROOT_OPTIONS,
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    for part in [
        "a shield is in place but there is no shield state",
        "cpushield-shield holds CPUs 3",
        "nothing was changed",
        "cpushield reset --without-state",
    ] {
        assert!(e.contains(part), "{part} not in {e}");
    }
    assert_eq!(k.files(), files);
    assert_eq!(k.affinities(), affinities);
}

/// tuned running profile `cpushield` (over cpu-partitioning) with
/// isolated_cores 3, as its files say, its scheduler plugin having moved IRQs.
fn load_tuned_profile(k: &FakeKernel) {
    k.set_file("/etc/tuned/active_profile", "cpushield\n");
    k.set_file("/run/tuned/tuned.pid", "4242\n");
    k.add_dir("/proc/4242");
    k.set_file(
        "/usr/lib/tuned/cpushield/tuned.conf",
        include_str!("../../../dist/tuned/cpushield/tuned.conf"),
    );
    k.set_file(
        "/usr/lib/tuned/cpu-partitioning/tuned.conf",
        "[main]\n[variables]\ninclude=/etc/tuned/cpu-partitioning-variables.conf\nisolated_cores = ${isolated_cores}\n[sysctl]\nvm.stat_interval = 10\nkernel.timer_migration = 0\n[sysfs]\n/sys/devices/virtual/workqueue/cpumask = ${not_isolated_cpumask}\n[scheduler]\nisolated_cores=${isolated_cores}\n",
    );
    k.set_file(
        "/etc/tuned/cpu-partitioning-variables.conf",
        "isolated_cores=3\n",
    );
    // The scheduler plugin's saved IRQ affinities, in tuned's save file.
    k.set_file_bytes(
        "/run/tuned/save.pickle",
        b"tuned.plugins.plugin_scheduler\x94\x8c\rIRQAffinities".to_vec(),
    );
}

#[test]
fn reset_while_tuned_isolates_the_cpu_leaves_what_tuned_sets_and_restores_the_rest() {
    // The shield first, then tuned's profile (it finds the IRQs already off
    // CPU 3 and writes its files), then `cpushield reset`.
    let k = machine(&[(100, "0-3")]);
    k.set_file("/proc/irq/11/smp_affinity", "8\n");
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("2-3")));
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap().trim(), "3");
    assert_eq!(
        k.file("/proc/sys/kernel/timer_migration").unwrap().trim(),
        "1"
    );
    load_tuned_profile(&k);
    // What tuned writes over the shield: its sysctls, the workqueue mask and
    // default_smp_affinity (its rule on what it found).
    k.set_file("/proc/sys/kernel/timer_migration", "0\n");
    k.set_file("/proc/sys/vm/stat_interval", "10\n");
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "7\n");
    let report = cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    // tuned's rule on each IRQ's original: f less CPU 3, and IRQ 11 (CPU 3
    // only) on every CPU tuned keeps for the system.
    assert_eq!(k.file("/proc/irq/10/smp_affinity").unwrap().trim(), "7");
    assert_eq!(k.file("/proc/irq/11/smp_affinity").unwrap().trim(), "7");
    // The files tuned writes stay as tuned wrote them; the rest is
    // cpushield's and comes back: the task's affinity, the watchdog mask.
    assert_eq!(
        k.file("/proc/irq/default_smp_affinity").unwrap().trim(),
        "3"
    );
    assert_eq!(
        k.file("/sys/devices/virtual/workqueue/cpumask")
            .unwrap()
            .trim(),
        "7"
    );
    assert_eq!(
        k.file("/proc/sys/kernel/timer_migration").unwrap().trim(),
        "0"
    );
    assert_eq!(k.file("/proc/sys/vm/stat_interval").unwrap().trim(), "10");
    assert_eq!(
        k.file("/proc/sys/kernel/watchdog_cpumask").unwrap().trim(),
        "0-3"
    );
    assert_eq!(k.affinities()[&100], cpus("0-3"));
    let notes: Vec<&str> = report.notes.iter().map(|n| n.text.as_str()).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("tuned profile cpushield (isolated_cores 3)")),
        "{notes:?}"
    );
}

#[test]
fn with_tuned_loaded_first_the_shield_leaves_its_files_and_reset_gives_back_tuneds_masks() {
    // tuned's profile first (IRQs off CPU 3, its files), then the shield on
    // the same CPU, then reset: everything as tuned left it.
    let k = machine(&[(100, "0-3")]);
    load_tuned_profile(&k);
    for irq in 10..14 {
        k.set_file(format!("/proc/irq/{irq}/smp_affinity"), "7\n");
    }
    k.set_file("/proc/irq/default_smp_affinity", "7\n");
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "7\n");
    k.set_file("/proc/sys/kernel/timer_migration", "0\n");
    k.set_file("/proc/sys/vm/stat_interval", "10\n");
    let before = k.files();
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(
        k.file("/proc/sys/kernel/timer_migration").unwrap().trim(),
        "0",
        "the shield does not write a sysctl tuned's profile sets"
    );
    let saved = saved_in(&store);
    for path in [
        "/proc/sys/kernel/timer_migration",
        "/sys/devices/virtual/workqueue/cpumask",
        "/proc/irq/default_smp_affinity",
    ] {
        assert!(!saved.files.contains_key(Path::new(path)), "{path} saved");
    }
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    let text = |path: &str| k.file(path).map(|t| t.trim().to_string());
    let was = |path: &str| before.get(Path::new(path)).map(|t| t.trim().to_string());
    for irq in 10..14 {
        let path = format!("/proc/irq/{irq}/smp_affinity");
        assert_eq!(text(&path), was(&path), "{path}");
    }
    for path in [
        "/proc/irq/default_smp_affinity",
        "/sys/devices/virtual/workqueue/cpumask",
        "/proc/sys/kernel/timer_migration",
        "/proc/sys/vm/stat_interval",
        "/proc/sys/kernel/watchdog_cpumask",
    ] {
        assert_eq!(text(path), was(path), "{path}");
    }
}

#[test]
fn what_tuned_sets_is_no_evidence_of_a_shield_whose_state_is_lost() {
    // tuned's cpu-partitioning alone (no cpushield state): its workqueue mask
    // and vm.stat_interval 10 look like a shield's, but are tuned's.
    let k = machine(&[(100, "0-3")]);
    k.set_file("/sys/devices/virtual/workqueue/cpumask", "7\n");
    k.set_file("/proc/sys/vm/stat_interval", "10\n");
    let store = MemoryStore::new();
    assert!(
        cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).is_err(),
        "without tuned these are a lost shield's traces"
    );
    load_tuned_profile(&k);
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).expect("nothing to reset");
    assert_eq!(
        k.file("/sys/devices/virtual/workqueue/cpumask")
            .unwrap()
            .trim(),
        "7"
    );
}

#[test]
fn reset_namespace_gone_while_that_namespace_lives_is_refused_before_any_change() {
    let (k, store, _) = shielded_from_namespace("pid:[1]");
    // A process this reset can see is still in the shield's namespace.
    k.set_file("/proc/100/ns/pid", "pid:[1]");
    let shielded = k.files();
    let state_before = store.copy(state::STATE_FILE);
    let (host, clock) = host_on_fake_clock(&k, &store);
    let err = cpushield_shield::reset_namespace_gone(&host, ROOT_OPTIONS).unwrap_err();
    assert!(
        matches!(err, cpushield_shield::ShieldError::NamespaceAlive { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("process 100"), "{err}");
    waited_for_the_namespace(&clock);
    assert_eq!(k.files(), shielded, "nothing changed");
    assert_eq!(
        store.copy(state::STATE_FILE),
        state_before,
        "the state is not marked as being applied"
    );
    // Run from inside that namespace itself: refused too.
    k.set_file("/proc/100/ns/pid", "pid:[4026531836]");
    k.set_file("/proc/self/ns/pid", "pid:[1]");
    let shielded = k.files();
    let err =
        cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap_err();
    assert!(err.to_string().contains("this command runs in it"), "{err}");
    assert_eq!(k.files(), shielded, "nothing changed");
    // Gone: no process in it, and this one elsewhere.
    k.set_file("/proc/self/ns/pid", "pid:[4026531836]");
    cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(!k.has_dir(format!("{ROOT}/cpushield-system")));
    assert!(state::load_from(&store).unwrap().is_none());
}

#[test]
fn a_namespace_this_reset_cannot_see_is_alive_while_its_init_holds_its_lock() {
    // A sibling PID namespace on cgroup v1: none of its processes shows
    // here, and v1 cgroups tell nothing of tasks this reader cannot see.
    let (k, store, _) = shielded_from_namespace("pid:[4026532999]");
    store.set_namespace_alive("pid:[4026532999]", true);
    let shielded = k.files();
    let state_before = store.copy(state::STATE_FILE);
    let (host, clock) = host_on_fake_clock(&k, &store);
    let err = cpushield_shield::reset_namespace_gone(&host, ROOT_OPTIONS).unwrap_err();
    assert!(
        matches!(err, cpushield_shield::ShieldError::NamespaceAlive { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("holds its lock"), "{err}");
    waited_for_the_namespace(&clock);
    assert!(!err.to_string().contains('\n'), "one line: {err}");
    assert_eq!(k.files(), shielded, "nothing changed");
    assert_eq!(store.copy(state::STATE_FILE), state_before);
    // Its init ended: the lock with it.
    store.set_namespace_alive("pid:[4026532999]", false);
    cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(state::load_from(&store).unwrap().is_none());
}

#[test]
fn reset_namespace_gone_removes_the_liveness_file_a_killed_init_left_and_only_then() {
    let (k, store, _) = shielded_from_namespace("pid:[4026532999]");
    // While its init lives, refused: the file stays.
    store.set_namespace_alive("pid:[4026532999]", true);
    let (host, _clock) = host_on_fake_clock(&k, &store);
    cpushield_shield::reset_namespace_gone(&host, ROOT_OPTIONS).unwrap_err();
    assert!(store.has_namespace_file("pid:[4026532999]"));
    // Its init SIGKILLed: the lock gone with it, the file left behind.
    store.leave_namespace_file("pid:[4026532999]");
    cpushield_shield::reset_namespace_gone(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(!store.has_namespace_file("pid:[4026532999]"));
    assert!(state::load_from(&store).unwrap().is_none());
}

#[test]
fn a_cgroup_v2_shield_cgroup_still_populated_shows_its_namespace_alive() {
    let (k, store, saved) = shielded_from_namespace("pid:[1]");
    let system = saved.created_cgroups[0].join("cgroup.events");
    k.set_file(&system, "populated 1\nfrozen 0\n");
    let shielded = k.files();
    let (host, clock) = host_on_fake_clock(&k, &store);
    let err = cpushield_shield::reset_namespace_gone(&host, ROOT_OPTIONS).unwrap_err();
    assert!(err.to_string().contains("holds tasks"), "{err}");
    waited_for_the_namespace(&clock);
    assert_eq!(k.files(), shielded, "nothing changed");
}

#[test]
fn reset_removes_the_load_directories_the_state_records_and_only_those() {
    let k = machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    let load = std::path::Path::new("/var/tmp/cpushield-load-4242-1-0");
    k.set_file(load.join("fs/0/big"), "x");
    k.set_file("/var/tmp/cpushield-load-5151-1-0/fs/0/big", "y");
    state::record_load_dir_in(&store, load).unwrap();
    assert!(
        state::record_load_dir_in(&store, std::path::Path::new("/var/tmp/precious")).is_err(),
        "a directory not named as a load's is never recorded"
    );
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert!(
        !k.has_dir(load.display().to_string()),
        "the load's files are left"
    );
    assert!(
        k.file("/var/tmp/cpushield-load-5151-1-0/fs/0/big")
            .is_some(),
        "another run's files were removed"
    );
    assert!(state::load_from(&store).unwrap().is_none());
}

/// [`machine`] on two memory nodes: CPUs 0-1 on node 0, 2-3 on node 1.
fn two_node_machine(tasks: &[(i32, &str)]) -> FakeKernel {
    let k = machine(tasks);
    cpushield_shield::fake_machine::add_nodes(&k, &["0-1", "2-3"]);
    k
}

#[test]
fn a_shield_on_two_nodes_takes_its_cpus_node_shows_it_and_reset_restores_every_file() {
    let k = two_node_machine(&[(100, "0-3"), (101, "3")]);
    let files_before = k.files();
    let store = MemoryStore::new();
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("2-3")));
    assert_eq!(report.mems.as_deref(), Some("1 (the nodes of its CPUs)"));
    let mems = |cgroup: &str| k.file(format!("{ROOT}/{cgroup}/cpuset.mems")).unwrap();
    assert_eq!(mems("cpushield-shield").trim(), "1");
    assert_eq!(
        mems("cpushield-system").trim(),
        "0-1",
        "the rest keeps every node"
    );
    assert_eq!(k.file(format!("{ROOT}/cpuset.mems")).unwrap(), "0-1\n");
    let st = cpushield_shield::status::status(&Host::fake(&k, &store)).unwrap();
    let shown = cpushield_shield::render::render_status(&st);
    assert!(
        shown.contains("memory nodes: shield 1 (the nodes of its CPUs) (in force: 1); the rest keeps every node (0-1)"),
        "{shown}"
    );
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(as_read(k.files()), as_read(files_before));
    assert!(!k.has_dir(format!("{ROOT}/cpushield-shield")));
}

#[test]
fn mems_asked_by_hand_stay_in_force_for_the_next_shield_until_reset() {
    let k = two_node_machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    let report = cpushield_shield::shield_with(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("3")),
        Some(&cpus("0")),
        ROOT_OPTIONS,
    )
    .unwrap();
    assert_eq!(report.mems.as_deref(), Some("0 (--mems)"));
    let shield_mems = || {
        k.file(format!("{ROOT}/cpushield-shield/cpuset.mems"))
            .unwrap()
    };
    assert_eq!(shield_mems().trim(), "0");
    shield(&k, &store, &ShieldMasks::all(&cpus("2")));
    assert_eq!(
        shield_mems().trim(),
        "0",
        "a shield without --mems keeps them"
    );
    assert_eq!(saved_in(&store).mems, Some(cpus("0")));
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(shield_mems().trim(), "1", "reset forgets them");
}

#[test]
fn a_shield_that_grows_onto_the_other_node_widens_its_nodes() {
    let k = two_node_machine(&[(100, "0-3")]);
    let store = MemoryStore::new();
    shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    shield(&k, &store, &ShieldMasks::all(&cpus("1")));
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.mems"))
            .unwrap()
            .trim(),
        "0-1"
    );
}

#[test]
fn mems_naming_a_node_that_does_not_exist_are_refused_in_one_line_with_no_change() {
    let k = two_node_machine(&[(100, "0-3")]);
    let files_before = k.files();
    let store = MemoryStore::new();
    let err = cpushield_shield::shield_with(
        &Host::fake(&k, &store),
        &ShieldMasks::all(&cpus("3")),
        Some(&cpus("1,4")),
        ROOT_OPTIONS,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--mems 1,4: memory node(s) 4 do not exist"),
        "{err}"
    );
    assert!(err.contains("from 0-1"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    assert_eq!(k.files(), files_before, "nothing changed");
    assert!(state::load_from(&store).unwrap().is_none(), "no state");
}

#[test]
fn a_one_node_machine_shields_as_before_numa_placement() {
    let k = machine(&[(100, "0-3")]);
    k.set_file("/sys/devices/system/node/node0/cpulist", "0-3\n");
    k.set_file("/sys/devices/system/node/has_memory", "0\n");
    let store = MemoryStore::new();
    let report = shield(&k, &store, &ShieldMasks::all(&cpus("3")));
    assert_eq!(report.mems.as_deref(), Some("0 (every node)"));
    assert_eq!(
        k.file(format!("{ROOT}/cpushield-shield/cpuset.mems"))
            .unwrap()
            .trim(),
        "0"
    );
}
