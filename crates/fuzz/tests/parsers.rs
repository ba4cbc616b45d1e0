//! Property/fuzz tests of every parser of kernel text and user input.
//!
//! Each target starts from real files (crates/fuzz/corpus/<target>/), mutated byte
//! by byte (cpushield_fuzz::input), plus fully random bytes. Properties: no
//! panic on any input (invalid UTF-8 included where the input is bytes);
//! round trips where a printer exists; two readings of the same set agree.
//! `CPUSHIELD_FUZZ_CASES` sets the cases per property (default 2000).

use cpushield_cpuset::{CpuSet, Reading, MAX_CPUS};
use cpushield_fuzz::{config, input, mutated_line, seeds, text};
use proptest::prelude::*;
use std::path::Path;

fn any_set() -> impl Strategy<Value = CpuSet> {
    prop_oneof![
        prop::collection::btree_set(0..MAX_CPUS, 0..48),
        prop::collection::btree_set(0usize..130, 0..130),
    ]
    .prop_map(|s| s.into_iter().collect::<CpuSet>())
}

/// A task name as the kernel keeps it (at most 15 bytes, here without ':'
/// and not starting or ending in a space), often holding ` [N]`, dashes and
/// digits, the parts that look like the columns after it.
fn comm_name() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        "[A-Za-z0-9_/.<>\\[\\]]{1,4}",
        Just(" [3]".to_string()),
        Just(" [012]".to_string()),
        Just(" ".to_string()),
        Just("-7".to_string()),
        Just("-".to_string()),
    ];
    prop::collection::vec(part, 1..6).prop_filter_map("empty name", |parts| {
        let name: String = parts.concat().chars().take(15).collect();
        let name = name.trim().to_string();
        (!name.is_empty()).then_some(name)
    })
}

proptest! {
    #![proptest_config(config())]

    // ---- CPU sets: lists and masks, both ways ----

    #[test]
    fn cpu_set_parsers_never_panic(t in text("cpuset")) {
        let parsed = [CpuSet::parse_list(&t), CpuSet::parse_mask(&t), CpuSet::parse_user(&t)];
        for set in parsed.into_iter().flatten() {
            prop_assert!(set.iter().all(|c| c < MAX_CPUS));
            // Whatever was read prints and reads back the same.
            prop_assert_eq!(CpuSet::parse_list(&set.to_list()).unwrap(), set.clone());
            prop_assert_eq!(CpuSet::parse_mask(&set.to_mask()).unwrap(), set);
        }
    }

    #[test]
    fn any_set_round_trips_through_list_and_both_mask_prints(set in any_set(), width in 0usize..300) {
        prop_assert_eq!(CpuSet::parse_list(&set.to_list()).unwrap(), set.clone());
        prop_assert_eq!(CpuSet::parse_mask(&set.to_mask()).unwrap(), set.clone());
        prop_assert_eq!(CpuSet::parse_mask(&set.to_mask_padded(width)).unwrap(), set.clone());
        prop_assert_eq!(CpuSet::parse_user(&format!("0x{}", set.to_mask())).unwrap(), set.clone());
        if !set.is_empty() {
            // A list as a user types it is read as a list.
            let (back, reading) = CpuSet::parse_user_reading(&set.to_list()).unwrap();
            prop_assert_eq!(reading, Reading::List);
            prop_assert_eq!(back, set.clone());
        }
        // A kernel-printed mask with more than one group is read as a mask.
        let padded = set.to_mask_padded(width.max(33));
        prop_assert_eq!(CpuSet::parse_user(&padded).unwrap(), set);
    }

    #[test]
    fn the_list_and_the_mask_of_a_set_agree(set in any_set()) {
        let from_list = CpuSet::parse_list(&set.to_list()).unwrap();
        let from_mask = CpuSet::parse_mask(&set.to_mask_padded(MAX_CPUS)).unwrap();
        prop_assert_eq!(&from_list, &from_mask);
        prop_assert_eq!(from_list.len(), set.len());
    }

    #[test]
    fn kernel_used_group_lists_match_their_definition(
        lo in 0usize..200, span in 0usize..300, used in 0usize..9, group in 1usize..9,
    ) {
        let used = used % (group + 1);
        let hi = lo + span;
        let set = CpuSet::parse_list(&format!("{lo}-{hi}:{used}/{group}")).unwrap();
        let expected: CpuSet = (lo..=hi).filter(|c| (c - lo) % group < used).collect();
        prop_assert_eq!(set, expected);
    }

    // ---- /proc files ----

    #[test]
    fn proc_interrupts_parsers_never_panic(t in text("interrupts")) {
        let _ = cpushield_parse::interrupts::parse_interrupts(&t);
        let _ = cpushield_parse::interrupts::irq_names(&t);
    }

    #[test]
    fn proc_softirqs_parser_never_panics(t in text("softirqs")) {
        let _ = cpushield_parse::softirqs::parse_softirqs(&t);
    }

    #[test]
    fn proc_stat_parsers_never_panic_and_sums_saturate(t in text("stat")) {
        if let Ok(times) = cpushield_parse::stat::parse_cpu_times(&t) {
            for c in times.values() {
                prop_assert!(c.busy() <= c.total());
                let _ = c.since(c);
            }
        }
        for c in cpushield_measure::procstat::parse(&t).values() {
            prop_assert!(c.busy() <= c.total());
        }
    }

    #[test]
    fn pid_stat_and_schedstat_parsers_never_panic(
        stat in text("pid_stat"), sched in text("schedstat"), user_hz in any::<u64>(),
    ) {
        let _ = cpushield_parse::pid_stat::parse_thread_stat(&stat);
        let _ = cpushield_parse::schedstat::parse_schedstat_runtime(&sched);
        let _ = cpushield_parse::schedstat::parse_schedstat(&sched);
        let _ = cpushield_parse::qemu_args::vm_name(sched.as_bytes());
        let raw = cpushield_check::snapshot::RawThread {
            pid: 1,
            stat: stat.clone(),
            schedstat: Some(sched),
            affinity: None,
            cgroup: None,
        };
        let _ = cpushield_check::snapshot::parse_thread(&raw, user_hz);
        let raw = cpushield_check::snapshot::RawThread { schedstat: None, ..raw };
        let _ = cpushield_check::snapshot::parse_thread(&raw, user_hz);
    }

    #[test]
    fn every_reading_of_a_stat_line_agrees_and_none_panics(stat in input("pid_stat")) {
        use cpushield_parse::pid_stat::{parse_stat, parse_thread_stat, StatLine};
        let line = StatLine::parse(&stat);
        let shield = parse_stat(&stat);
        if let Ok(s) = &shield {
            let line = line.as_ref().unwrap();
            prop_assert_eq!((s.pid, &s.comm), (line.pid, &line.comm));
        }
        if let Ok(text) = std::str::from_utf8(&stat) {
            if let (Ok(t), Ok(s)) = (parse_thread_stat(text), &shield) {
                prop_assert_eq!((t.tid, &t.comm, t.ppid), (s.pid, &s.comm, s.ppid));
            }
        }
    }

    #[test]
    fn show_and_check_agree_on_rcu_offloaded_cpus(
        t in text("cmdline"),
        nohz in prop_oneof![Just(None), Just(Some("(null)\n".to_string())), "[0-9,-]{1,6}".prop_map(Some)],
        list in "[0-9]{1,2}(-[0-9]{1,2})?",
    ) {
        // A command line from the corpus or one with the parameters set.
        for cmdline in [t.clone(), format!("{t} nohz_full={list}"), format!("quiet nohz_full={list} rcu_nocbs=1")] {
            let k = cpushield_kernel::FakeKernel::new();
            k.set_file("/proc/cmdline", cmdline.clone());
            if let Some(n) = &nohz {
                k.set_file("/sys/devices/system/cpu/nohz_full", n.clone());
            }
            let (show_nohz, show_rcu) = cpushield_shield::status::tick_and_rcu_offload(&k);
            let facts = cpushield_check::facts::Facts {
                cmdline: cmdline.clone(),
                nohz_full: nohz.as_ref().map(|n| n.trim().to_string()),
                ..Default::default()
            };
            prop_assert_eq!(&show_nohz, &facts.nohz_full_cpus());
            prop_assert_eq!(&show_rcu, &facts.rcu_offloaded_cpus());
            // A nohz_full CPU is RCU-offloaded for both.
            prop_assert!(show_nohz.iter().all(|c| show_rcu.contains(c)));
        }
    }

    #[test]
    fn irq_affinity_parser_never_panics_and_a_pending_move_is_outside_the_mask(
        mask in text("cpuset"), effective in text("cpuset"), absent in any::<bool>(),
    ) {
        let text = cpushield_parse::irq_affinity::IrqAffinityText {
            smp_affinity_list: mask,
            effective_affinity_list: (!absent).then_some(effective),
        };
        if let Ok(a) = cpushield_parse::irq_affinity::IrqAffinity::parse(&text) {
            let pending = a.pending_off();
            prop_assert!(!pending.intersects(&a.requested));
            prop_assert!(a.effective.as_ref().is_some_and(|e| pending.is_subset(e)) || pending.is_empty());
        }
    }

    #[test]
    fn a_whole_check_snapshot_parses_without_panic(
        interrupts in text("interrupts"), softirqs in text("softirqs"), stat in text("stat"),
        thread in text("pid_stat"), user_hz in any::<u64>(), irq_list in text("cpuset"),
    ) {
        let raw = cpushield_check::snapshot::RawSnapshot {
            at_ns: 0,
            interrupts,
            softirqs,
            stat,
            threads: vec![cpushield_check::snapshot::RawThread {
                pid: 1,
                stat: thread,
                schedstat: None,
                affinity: None,
                cgroup: None,
            }],
            user_hz,
            irq_affinity: [(42, cpushield_parse::irq_affinity::IrqAffinityText {
                smp_affinity_list: irq_list.clone(),
                effective_affinity_list: Some(irq_list),
            })]
            .into_iter()
            .collect(),
        };
        let _ = cpushield_check::snapshot::Snapshot::parse(&raw);
    }

    #[test]
    fn a_thread_name_with_parentheses_and_spaces_is_read_whole(
        tid in 1i32..i32::MAX, comm in "[ -~]{0,15}",
    ) {
        let line = format!("{tid} ({comm}) S 1 1 1 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 4242 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0");
        let s = cpushield_parse::pid_stat::parse_thread_stat(&line).unwrap();
        prop_assert_eq!(s.tid, tid);
        prop_assert_eq!(s.comm, comm);
        prop_assert_eq!((s.utime, s.stime, s.processor), (7, 3, 1));
    }

    // ---- kernel command line and config ----

    #[test]
    fn cmdline_parser_never_panics_and_agrees_with_its_words(t in text("cmdline")) {
        use cpushield_parse::cmdline;
        let words = cmdline::words(&t);
        for key in ["isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity", "quiet"] {
            let last = words.iter().rev().find(|(k, _)| k.replace('-', "_") == key);
            prop_assert_eq!(
                cmdline::param(&t, key),
                last.map(|(_, v)| v.clone().unwrap_or_default())
            );
            if let Some((cpus, flags)) = cmdline::cpu_param(&t, key) {
                prop_assert!(cpus.iter().all(|c| c < MAX_CPUS));
                prop_assert!(flags.iter().all(|f| !f.is_empty()));
            }
        }
        let _ = cpushield_parse::kconfig::parse_kconfig(&t);
    }

    #[test]
    fn kernel_log_parser_never_panics_and_names_only_cpus_it_read(t in text("kernel_log")) {
        use cpushield_parse::kernel_log::{rcu_offload, RcuOffloadRecord};
        if let RcuOffloadRecord::Offloaded(cpus) = rcu_offload(&t) {
            prop_assert!(cpus.iter().all(|c| c < MAX_CPUS));
            prop_assert!(t.contains("Offload RCU callbacks from CPUs:"));
        }
    }

    #[test]
    fn kconfig_parser_never_panics(t in text("kconfig")) {
        let _ = cpushield_parse::kconfig::parse_kconfig(&t);
    }

    // ---- mountinfo and cgroup files ----

    #[test]
    fn cgroup_layout_detection_never_panics(
        mountinfo in text("mountinfo"), controllers in text("cgroup"),
    ) {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file("/proc/self/mountinfo", mountinfo);
        k.set_file("/sys/fs/cgroup/unified/cgroup.controllers", controllers.clone());
        k.set_file("/sys/fs/cgroup/cgroup.controllers", controllers);
        let _ = cpushield_shield::layout::detect(&k);
    }

    #[test]
    fn mount_tables_parse_without_panic_and_give_at_most_one_mount_a_line(t in text("mountinfo")) {
        let lines = t.lines().count();
        for mounts in [
            cpushield_parse::mounts::parse_mountinfo(&t),
            cpushield_parse::mounts::parse_mounts(&t),
        ] {
            prop_assert!(mounts.len() <= lines);
        }
    }

    #[test]
    fn cgroup_files_parse_without_panic(t in text("cgroup")) {
        use cpushield_shield::layout::{cgroup_of, CgroupLayout};
        for layout in [
            CgroupLayout::v1("/sys/fs/cgroup/cpuset"),
            CgroupLayout::v2("/sys/fs/cgroup"),
        ] {
            let _ = cgroup_of(&layout, &t);
        }
        let _ = CpuSet::parse_list(&t);
    }

    // ---- trace lines ----

    #[test]
    fn trace_line_parser_never_panics(line in mutated_line("trace"), t in text("trace")) {
        let _ = cpushield_trace::event::parse_line(&line);
        for l in t.lines() {
            let _ = cpushield_trace::event::parse_line(l);
        }
    }

    #[test]
    fn kernel_thread_names_never_panic_and_a_handler_thread_names_its_irq(
        comm in comm_name(), irq in 0u32..1_000_000, cpu in 0usize..8192,
    ) {
        use cpushield_parse::kthread_name::{irq_thread_irq, per_cpu_thread};
        let _ = irq_thread_irq(&comm);
        let _ = per_cpu_thread(&comm, &["ktimers", "rcuc", "ksoftirqd", "rcuop"]);
        let handler = format!("irq/{irq}-{comm}");
        prop_assert_eq!(irq_thread_irq(&handler), Some(irq));
        let per_cpu = format!("ktimers/{cpu}");
        prop_assert_eq!(per_cpu_thread(&per_cpu, &["ktimers"]), Some(("ktimers", cpu)));
    }

    #[test]
    fn a_formatted_trace_line_reads_back_its_columns(
        comm in comm_name(), pid in 0i32..4_194_304, cpu in 0usize..8192,
        flags in prop_oneof![Just(""), Just("d.h1."), Just("...1"), Just("dNh3.")],
        secs in 0u64..10_000_000, usecs in 0u64..1_000_000,
    ) {
        let line = format!(
            "{comm:>16}-{pid:<7} [{cpu:03}] {flags} {secs:>5}.{usecs:06}: local_timer_entry: vector=236"
        );
        let e = cpushield_trace::event::parse_line(&line);
        prop_assert!(e.is_some(), "{}", line);
        let e = e.unwrap();
        prop_assert_eq!(e.comm, comm);
        prop_assert_eq!((e.pid, e.cpu), (pid, cpu));
        prop_assert_eq!(e.ts_ns, secs * 1_000_000_000 + usecs * 1_000);
    }

    // ---- the state file ----

    #[test]
    fn the_state_file_gives_an_error_never_a_panic(bytes in input("state")) {
        use cpushield_shield::state::SavedState;
        if let Ok(state) = serde_json::from_slice::<SavedState>(&bytes) {
            // What was accepted writes and reads back the same.
            let json = serde_json::to_value(&state).unwrap();
            let back: SavedState = serde_json::from_value(json.clone()).unwrap();
            prop_assert_eq!(serde_json::to_value(&back).unwrap(), json);
        }
    }

    // ---- other small parsers ----

    #[test]
    fn lock_holder_stressng_and_load_selection_parsers_never_panic(t in text("cmdline")) {
        let _ = cpushield_rt::reserve::Holder::parse(&t);
        let _ = cpushield_load::stressng::parse_metrics_yaml(&t);
        let names: Vec<&str> = t.split_whitespace().collect();
        let _ = cpushield_load::catalog::parse_selection(&names);
    }

    #[test]
    fn the_tsc_counts_as_invariant_exactly_when_every_cpu_has_both_flags(
        cpus in prop::collection::vec(
            prop::collection::vec(
                prop::sample::select(vec!["fpu", "tsc", "constant_tsc", "nonstop_tsc", "nonstop_tsc_s3", "rdtscp"]),
                0..6,
            ),
            0..5,
        ),
        junk in text("cmdline"),
    ) {
        let text: String = cpus
            .iter()
            .enumerate()
            .map(|(i, flags)| format!("processor\t: {i}\nflags\t\t: {}\n\n", flags.join(" ")))
            .collect();
        let want = !cpus.is_empty()
            && cpus.iter().all(|f| f.contains(&"constant_tsc") && f.contains(&"nonstop_tsc"));
        prop_assert_eq!(cpushield_parse::cpuinfo::has_invariant_tsc(&text), want);
        let _ = cpushield_parse::cpuinfo::has_invariant_tsc(&junk);
    }
}

#[test]
fn every_seed_of_the_real_files_parses() {
    // The corpus is real: each seed is valid for its parser, so mutations start
    // from inputs that reach past the first check.
    let t = |target: &str| -> Vec<String> {
        seeds(target)
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    };
    for s in t("interrupts") {
        assert!(!cpushield_parse::interrupts::parse_interrupts(&s)
            .unwrap()
            .is_empty());
    }
    for s in t("softirqs") {
        cpushield_parse::softirqs::parse_softirqs(&s).unwrap();
    }
    for s in t("stat") {
        assert!(!cpushield_parse::stat::parse_cpu_times(&s)
            .unwrap()
            .is_empty());
        assert!(!cpushield_measure::procstat::parse(&s).is_empty());
    }
    for s in t("pid_stat") {
        cpushield_parse::pid_stat::parse_thread_stat(&s).unwrap();
    }
    for s in t("kernel_log") {
        assert!(matches!(
            cpushield_parse::kernel_log::rcu_offload(&s),
            cpushield_parse::kernel_log::RcuOffloadRecord::Offloaded(_)
        ));
    }
    for s in t("cpuset") {
        CpuSet::parse_user(&s).unwrap();
    }
    for s in t("state") {
        serde_json::from_str::<cpushield_shield::state::SavedState>(&s).unwrap();
    }
    let parsed: usize = t("trace")
        .iter()
        .flat_map(|s| s.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| cpushield_trace::event::parse_line(l).is_some())
        .count();
    assert!(parsed > 20, "only {parsed} trace lines parsed");
    let k = cpushield_kernel::FakeKernel::new();
    k.set_file(
        "/proc/self/mountinfo",
        String::from_utf8(seeds("mountinfo")[0].clone()).unwrap(),
    );
    assert!(cpushield_shield::layout::detect(&k).is_some());
    assert!(Path::new(&cpushield_fuzz::corpus_dir("cmdline")).is_dir());
}
