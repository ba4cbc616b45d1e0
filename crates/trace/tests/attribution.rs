//! Spike attribution over real trace windows (saved on this host under
//! stress-ng) and small synthetic ones.

use cpushield_trace::attribute::{
    attribute, AttributionContext, CauseKind, Phase, Spike, StealEvidence,
};
use cpushield_trace::event::{parse_line, Event};

fn events(text: &str) -> Vec<Event> {
    text.lines().filter_map(parse_line).collect()
}

fn ctx<'a>(
    is_kthread: &'a dyn Fn(i32) -> bool,
    steal: Option<StealEvidence>,
) -> AttributionContext<'a> {
    AttributionContext {
        tick_ns: Some(4_000_000),
        is_kthread,
        in_other_namespace: &|_| false,
        in_kubepods: &|_| false,
        virtual_cpu: false,
        steal,
        preempt_model: Some("none".into()),
        trace_start_ns: Some(0),
    }
}

#[test]
fn a_kworker_that_keeps_the_cpu_after_the_wakeup_is_the_cause() {
    let ev = events(include_str!("fixtures/trace-kworker-after-wakeup.txt"));
    let spike = Spike {
        seq: 1,
        cpu: 1,
        tid: 18227,
        intended_ns: 2_423_995_354_149,
        actual_ns: 2_423_998_193_351,
    };
    let kthread = |pid: i32| pid == 23939;
    let a = attribute(&ev, &spike, &ctx(&kthread, None));
    let top = &a.causes[0];
    assert_eq!(top.kind, CauseKind::Work);
    assert_eq!(top.name, "workqueue ext4_end_io_rsv_work");
    assert_eq!(top.phase, Phase::AfterWakeup);
    assert!(top.ns > 2_500_000, "{top:?}");
    assert!(a.wakeup_after_ns.unwrap() < 20_000);
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("preemption model is 'none'")),
        "{:?}",
        a.notes
    );
    assert_eq!(a.outside_ns, 0);
}

#[test]
fn a_stretch_without_events_is_outside_the_kernels_view_with_steal_as_evidence() {
    let ev = events(include_str!("fixtures/trace-silent-gap.txt"));
    let spike = Spike {
        seq: 6,
        cpu: 1,
        tid: 18227,
        intended_ns: 2_425_302_354_149,
        actual_ns: 2_425_323_900_483,
    };
    let steal = StealEvidence {
        steal_ns: 20_000_000,
        from_ns: 2_425_250_000_000,
        to_ns: 2_425_385_000_000,
    };
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, Some(steal)));
    assert_eq!(a.causes[0].kind, CauseKind::Outside);
    assert!(a.outside_ns > 15_000_000, "{:?}", a.causes);
    assert!(
        a.notes.iter().any(|n| n.contains("steal time +20.0 ms")),
        "{:?}",
        a.notes
    );
    assert!(
        a.notes.iter().any(|n| n.contains("timer interrupt came")),
        "{:?}",
        a.notes
    );
    let total: u64 = a.causes.iter().map(|c| c.ns).sum();
    assert!(
        total.abs_diff(a.latency_ns) < 5_000,
        "{total} vs {}",
        a.latency_ns
    );
}

const IDLE_LATE_TIMER: &str = "\
          <idle>-0       [001] d.h1.   100.000500: local_timer_entry: vector=236
          <idle>-0       [001] d.h1.   100.000501: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=100000500800
          <idle>-0       [001] dNh2.   100.000503: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
          <idle>-0       [001] dNh1.   100.000504: hrtimer_expire_exit: hrtimer=00000000aa
          <idle>-0       [001] dNh1.   100.000506: local_timer_exit: vector=236
          <idle>-0       [001] d..2.   100.000510: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn an_idle_cpu_whose_timer_fires_late_is_outside_the_kernels_view() {
    let ev = events(IDLE_LATE_TIMER);
    let spike = Spike {
        seq: 1,
        cpu: 1,
        tid: 50,
        intended_ns: 100_000_000_000,
        actual_ns: 100_000_520_000,
    };
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, None));
    assert_eq!(a.causes[0].kind, CauseKind::Outside);
    assert_eq!(a.causes[0].phase, Phase::BeforeWakeup);
    assert!(a.causes[0].name.contains("CPU idle"));
    assert!(a.causes[0].ns >= 499_000);
    assert!(a
        .causes
        .iter()
        .any(|c| c.kind == CauseKind::MeasuredTask && c.phase == Phase::Running));
}

const IRQ_AFTER_WAKEUP: &str = "\
            load-70      [001] d.h..   200.000000: local_timer_entry: vector=236
            load-70      [001] d.h..   200.000001: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=200000000500
            load-70      [001] dNh3.   200.000002: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
            load-70      [001] dNh..   200.000003: hrtimer_expire_exit: hrtimer=00000000aa
            load-70      [001] dNh..   200.000004: local_timer_exit: vector=236
            load-70      [001] dNh1.   200.000100: irq_handler_entry: irq=38 name=virtio2-input.0
            load-70      [001] dNh1.   200.000400: irq_handler_exit: irq=38 ret=handled
            load-70      [001] .Ns1.   200.000401: softirq_entry: vec=3 [action=NET_RX]
            load-70      [001] .Ns1.   200.000601: softirq_exit: vec=3 [action=NET_RX]
            load-70      [001] d..2.   200.000700: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4
";

/// The spike [`IRQ_AFTER_WAKEUP`] explains: the probe (50) on CPU 1, 710 us late.
fn irq_after_wakeup_spike(seq: u64) -> Spike {
    Spike {
        seq,
        cpu: 1,
        tid: 50,
        intended_ns: 200_000_000_000,
        actual_ns: 200_000_710_000,
    }
}

#[test]
fn irq_and_softirq_time_inside_the_window_is_named() {
    let ev = events(IRQ_AFTER_WAKEUP);
    let spike = irq_after_wakeup_spike(2);
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, None));
    let get = |name: &str| {
        a.causes
            .iter()
            .filter(|c| c.name == name)
            .map(|c| c.ns)
            .sum::<u64>()
    };
    assert_eq!(get("irq 38 virtio2-input.0"), 300_000);
    assert_eq!(get("softirq NET_RX"), 200_000);
    assert_eq!(get("load (70)"), 96_000 + 1_000 + 99_000);
    assert_eq!(a.switch_in_after_ns, Some(700_000));
}

const THROTTLED: &str = "\
            hog1-80      [001] d.h..   300.000000: local_timer_entry: vector=236
            hog1-80      [001] d.h..   300.000001: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=300000000500
            hog1-80      [001] dNh3.   300.000002: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
            hog1-80      [001] dNh..   300.000003: hrtimer_expire_exit: hrtimer=00000000aa
            hog1-80      [001] dNh..   300.000004: local_timer_exit: vector=236
            hog2-81      [001] d.h..   300.004000: local_timer_entry: vector=236
            hog2-81      [001] d.h..   300.004005: local_timer_exit: vector=236
            hog2-81      [001] d..2.   300.006000: sched_switch: prev_comm=hog2 prev_pid=81 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn ordinary_tasks_switching_while_the_rt_task_waits_are_rt_throttling() {
    let ev = events(THROTTLED);
    let spike = Spike {
        seq: 3,
        cpu: 1,
        tid: 50,
        intended_ns: 300_000_000_000,
        actual_ns: 300_006_010_000,
    };
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, None));
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::RtThrottled && c.name.contains("hog2 (81)")),
        "{:#?}",
        a.causes
    );
    assert!(
        a.notes.iter().any(|n| n.contains("RT throttling")),
        "{:?}",
        a.notes
    );
}

#[test]
fn time_before_tracing_started_is_untraced() {
    let ev = events(IRQ_AFTER_WAKEUP);
    let spike = Spike {
        seq: 5,
        cpu: 1,
        tid: 50,
        intended_ns: 199_999_000_000,
        actual_ns: 200_000_710_000,
    };
    let never = |_: i32| false;
    let c = AttributionContext {
        trace_start_ns: Some(199_999_500_000),
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &c);
    let untraced: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Untraced)
        .map(|c| c.ns)
        .sum();
    assert_eq!(untraced, 500_000);
}

#[test]
fn a_spike_with_no_events_is_reported_as_untraced() {
    let spike = Spike {
        seq: 4,
        cpu: 1,
        tid: 50,
        intended_ns: 10,
        actual_ns: 1_000_010,
    };
    let never = |_: i32| false;
    let a = attribute(&[], &spike, &ctx(&never, None));
    assert_eq!(a.causes.len(), 1);
    assert_eq!(a.causes[0].kind, CauseKind::Untraced);
    assert_eq!(a.causes[0].ns, 1_000_000);
}

const POLLING_STALL: &str = "\
  cpushield-poll1-90     [001] d.h..   400.004000: local_timer_entry: vector=236
  cpushield-poll1-90     [001] d.h..   400.004002: local_timer_exit: vector=236
  cpushield-poll1-90     [001] d.h..   400.009000: local_timer_entry: vector=236
  cpushield-poll1-90     [001] d.h..   400.009001: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=400009000500
  cpushield-poll1-90     [001] dNh3.   400.009002: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
  cpushield-poll1-90     [001] dNh..   400.009003: hrtimer_expire_exit: hrtimer=00000000aa
  cpushield-poll1-90     [001] dNh..   400.009004: local_timer_exit: vector=236
  cpushield-poll1-90     [001] d..2.   400.009010: sched_switch: prev_comm=cpushield-poll1 prev_pid=90 prev_prio=139 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn a_polling_cpu_whose_timer_fires_late_with_no_guest_event_is_outside_the_guest() {
    // The idle poller spins; nothing in the guest delays the interrupt, which
    // arrives 4.5 ms late: the vCPU was not running.
    let ev = events(POLLING_STALL);
    let spike = Spike {
        seq: 9,
        cpu: 1,
        tid: 50,
        intended_ns: 400_004_500_000,
        actual_ns: 400_009_020_000,
    };
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, None));
    assert_eq!(a.causes[0].kind, CauseKind::Outside, "{:#?}", a.causes);
    assert!(a.causes[0].name.contains("CPU polling"));
    assert!(a.outside_ns >= 4_490_000, "{}", a.outside_ns);
    assert_eq!(a.irq_entry_after_ns, Some(4_500_000), "kernel latency");
    assert!(a
        .causes
        .iter()
        .all(|c| c.kind != CauseKind::Task || c.ns < 20_000));
}

#[test]
fn the_kernel_latency_is_the_interrupt_entry_that_led_to_the_wakeup() {
    let ev = events(IDLE_LATE_TIMER);
    let spike = Spike {
        seq: 1,
        cpu: 1,
        tid: 50,
        intended_ns: 100_000_000_000,
        actual_ns: 100_000_520_000,
    };
    let never = |_: i32| false;
    let a = attribute(&ev, &spike, &ctx(&never, None));
    assert_eq!(a.irq_entry_after_ns, Some(500_000));
    assert_eq!(a.wakeup_after_ns, Some(503_000));
    assert_eq!(a.latency_ns, 520_000);
}

#[test]
fn a_task_of_another_pid_namespace_is_named_as_such() {
    let ev = events(IRQ_AFTER_WAKEUP);
    let spike = irq_after_wakeup_spike(2);
    let never = |_: i32| false;
    let foreign = |pid: i32| pid == 70;
    let c = AttributionContext {
        in_other_namespace: &foreign,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &c);
    assert!(a
        .causes
        .iter()
        .any(|c| c.kind == CauseKind::OtherNamespace && c.name == "load (70)"));
}

#[test]
fn a_task_of_a_kubernetes_pod_is_named_as_a_pods_in_either_scope() {
    let ev = events(IRQ_AFTER_WAKEUP);
    let spike = irq_after_wakeup_spike(2);
    let never = |_: i32| false;
    let pod = |pid: i32| pid == 70;
    // A pod's task lives in its own PID namespace: it is a pod's first.
    for foreign in [&(|pid: i32| pid == 70) as &dyn Fn(i32) -> bool, &never] {
        let c = AttributionContext {
            in_other_namespace: foreign,
            in_kubepods: &pod,
            ..ctx(&never, None)
        };
        let a = attribute(&ev, &spike, &c);
        assert!(
            a.causes
                .iter()
                .any(|c| c.kind == CauseKind::PodTask && c.name == "load (70)"),
            "{:#?}",
            a.causes
        );
        assert!(a
            .causes
            .iter()
            .all(|c| c.kind != CauseKind::Task && c.kind != CauseKind::OtherNamespace));
    }
}

#[test]
fn an_unbound_kernel_thread_is_outside_a_namespace_scope_and_a_per_cpu_one_is_not() {
    let spike = irq_after_wakeup_spike(3);
    // In a namespace-scoped experiment every kernel thread is outside the
    // namespace (one ID in NSpid).
    let kthread = |_: i32| true;
    let foreign = |pid: i32| pid != 50;
    let c = AttributionContext {
        in_other_namespace: &foreign,
        ..ctx(&kthread, None)
    };
    let unbound = IRQ_AFTER_WAKEUP
        .replace("load-70", "kdamond.0-70")
        .replace("prev_comm=load", "prev_comm=kdamond.0");
    let a = attribute(&events(&unbound), &spike, &c);
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::OtherNamespace && c.name == "kdamond.0 (70)"),
        "{:#?}",
        a.causes
    );
    let bound = IRQ_AFTER_WAKEUP
        .replace("load-70", "ksoftirqd/1-70")
        .replace("prev_comm=load", "prev_comm=ksoftirqd/1");
    let a = attribute(&events(&bound), &spike, &c);
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::KernelThread && c.name == "ksoftirqd/1 (70)"),
        "{:#?}",
        a.causes
    );
    assert!(cpushield_trace::attribute::is_per_cpu_kthread(
        "kworker/1:2H"
    ));
    assert!(!cpushield_trace::attribute::is_per_cpu_kthread(
        "kworker/u8:3"
    ));
}

const PREEMPTED_IN_HANDLER: &str = "\
           <idle>-0       [001] d.h1.   500.000010: local_timer_entry: vector=236
           <idle>-0       [001] d.h1.   500.000011: hrtimer_expire_entry: hrtimer=00000000bb function=tick_nohz_handler now=500000010000
           <idle>-0       [001] d.h1.   500.001711: hrtimer_expire_exit: hrtimer=00000000bb
           <idle>-0       [001] d.h1.   500.001712: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=500001711000
           <idle>-0       [001] dNh2.   500.001713: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
           <idle>-0       [001] dNh1.   500.001714: hrtimer_expire_exit: hrtimer=00000000aa
           <idle>-0       [001] dNh1.   500.001715: local_timer_exit: vector=236
           <idle>-0       [001] d..2.   500.001720: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn a_handler_that_shows_no_event_for_too_long_was_preempted_from_outside() {
    // The tick's hrtimer callback "runs" 1.7 ms: no handler does; the vCPU
    // was taken away inside it.
    let ev = events(PREEMPTED_IN_HANDLER);
    let spike = Spike {
        seq: 11,
        cpu: 1,
        tid: 50,
        intended_ns: 500_000_000_000,
        actual_ns: 500_001_730_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &vm);
    let bare_metal = attribute(&ev, &spike, &ctx(&never, None));
    assert!(
        bare_metal
            .causes
            .iter()
            .any(|c| c.name == "hrtimer tick_nohz_handler" && c.ns == 1_700_000),
        "on bare metal a slow handler is the handler's own time"
    );
    let preempted: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Outside && c.name.starts_with("hrtimer tick_nohz_handler"))
        .map(|c| c.ns)
        .sum();
    assert_eq!(preempted, 1_700_000 - 100_000, "{:#?}", a.causes);
    let handler: u64 = a
        .causes
        .iter()
        .filter(|c| c.name == "hrtimer tick_nohz_handler")
        .map(|c| c.ns)
        .sum();
    assert_eq!(handler, 100_000);
}

const CPU_BOUND_RUN: &str = "\
           probe-50      [001] d.h1.   600.000000: local_timer_entry: vector=236
           probe-50      [001] d.h1.   600.000004: local_timer_exit: vector=236
           probe-50      [001] d.h1.   600.004000: local_timer_entry: vector=236
           probe-50      [001] d.h1.   600.004004: local_timer_exit: vector=236
           probe-50      [001] d.h1.   600.008000: local_timer_entry: vector=236
           probe-50      [001] d.h1.   600.008004: local_timer_exit: vector=236
           probe-50      [001] d.h1.   600.012000: local_timer_entry: vector=236
           probe-50      [001] d.h1.   600.012004: local_timer_exit: vector=236
";

#[test]
fn a_determinism_run_computing_between_ticks_on_a_vcpu_is_not_time_outside_the_guest() {
    // The measured task runs 4 ms between ticks: its own work, not a lost vCPU.
    let ev = events(CPU_BOUND_RUN);
    let window = Spike {
        seq: 1 << 48,
        cpu: 1,
        tid: 50,
        intended_ns: 600_000_000_000,
        actual_ns: 600_012_004_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &window, &vm);
    assert_eq!(a.outside_ns, 0, "{:#?}", a.causes);
    let own: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::MeasuredTask)
        .map(|c| c.ns)
        .sum();
    assert!(own > 11_900_000, "{own}");
}

const WOKEN_THEN_SILENT: &str = "\
  cpushield-poll1-90     [001] d.h..   700.000010: local_timer_entry: vector=236
  cpushield-poll1-90     [001] d.h..   700.000011: hrtimer_expire_entry: hrtimer=00000000aa function=hrtimer_wakeup now=700000010500
  cpushield-poll1-90     [001] dNh3.   700.000012: sched_wakeup: comm=probe pid=50 prio=4 target_cpu=001
  cpushield-poll1-90     [001] dNh..   700.000013: hrtimer_expire_exit: hrtimer=00000000aa
  cpushield-poll1-90     [001] dNh..   700.000014: local_timer_exit: vector=236
           probe-50      [001] d.h..   700.004900: local_timer_entry: vector=236
           probe-50      [001] d.h..   700.004902: local_timer_exit: vector=236
";

#[test]
fn a_woken_probe_silent_for_milliseconds_without_its_switch_in_lost_its_vcpu() {
    // The switch-in is missing from the trace; the probe's own stretch after
    // its wakeup shows no event for almost 5 ms: on a vCPU, time outside.
    let ev = events(WOKEN_THEN_SILENT);
    let spike = Spike {
        seq: 12,
        cpu: 1,
        tid: 50,
        intended_ns: 700_000_000_000,
        actual_ns: 700_004_910_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &vm);
    let own: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::MeasuredTask)
        .map(|c| c.ns)
        .sum();
    assert!(own <= 100_000 + 20_000, "{:#?}", a.causes);
    assert!(a.outside_ns > 4_700_000, "{:#?}", a.causes);
}

const RUNNING_WITHOUT_WAKEUP: &str = "\
           probe-50      [001] d.h..   800.000010: local_timer_entry: vector=236
           probe-50      [001] d.h..   800.000012: local_timer_exit: vector=236
           probe-50      [001] d.h..   800.003200: local_timer_entry: vector=236
           probe-50      [001] d.h..   800.003202: local_timer_exit: vector=236
";

#[test]
fn a_late_wakeup_whose_probe_is_silent_for_milliseconds_without_a_wakeup_in_the_trace_lost_its_vcpu(
) {
    // No wakeup and no waking interrupt inside the window: the phase is
    // unknown. A late wakeup's probe has no work of its own to do for 3 ms,
    // so on a vCPU its silent stretch is time outside the guest, as it is
    // when the wakeup is seen; only a determinism window computes that long.
    let ev = events(RUNNING_WITHOUT_WAKEUP);
    let spike = Spike {
        seq: 13,
        cpu: 1,
        tid: 50,
        intended_ns: 800_000_100_000,
        actual_ns: 800_003_100_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &vm);
    let own: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::MeasuredTask)
        .map(|c| c.ns)
        .sum();
    assert!(own <= 100_000, "{:#?}", a.causes);
    assert!(a.outside_ns >= 2_900_000, "{:#?}", a.causes);
    let window = Spike {
        seq: cpushield_trace::attribute::DETERMINISM_SEQ_BASE,
        ..spike
    };
    let computing = attribute(&ev, &window, &vm);
    assert_eq!(computing.outside_ns, 0, "{:#?}", computing.causes);
}

/// A window as the tracer records it now: without `sched_wakeup` and the
/// hrtimer events, which fire in the measured task's own wakeup path.
fn without_wakeup_path_events(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(" sched_wakeup: ") && !l.contains(" hrtimer_expire_"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn without_wakeup_and_hrtimer_events_the_wakeup_is_the_end_of_its_interrupt_and_the_causes_stay() {
    let spike = |seq, tid, intended_ns, actual_ns| Spike {
        seq,
        cpu: 1,
        tid,
        intended_ns,
        actual_ns,
    };
    let cases = [
        (
            IDLE_LATE_TIMER.to_string(),
            spike(1, 50, 100_000_000_000, 100_000_520_000),
        ),
        (
            IRQ_AFTER_WAKEUP.to_string(),
            spike(2, 50, 200_000_000_000, 200_000_710_000),
        ),
        (
            THROTTLED.to_string(),
            spike(3, 50, 300_000_000_000, 300_006_010_000),
        ),
        (
            POLLING_STALL.to_string(),
            spike(9, 50, 400_004_500_000, 400_009_020_000),
        ),
        (
            include_str!("fixtures/trace-kworker-after-wakeup.txt").to_string(),
            spike(1, 18227, 2_423_995_354_149, 2_423_998_193_351),
        ),
        (
            include_str!("fixtures/trace-silent-gap.txt").to_string(),
            spike(6, 18227, 2_425_302_354_149, 2_425_323_900_483),
        ),
    ];
    let never = |_: i32| false;
    for (text, spike) in cases {
        let full = attribute(&events(&text), &spike, &ctx(&never, None));
        let lean = attribute(
            &events(&without_wakeup_path_events(&text)),
            &spike,
            &ctx(&never, None),
        );
        let seq = spike.seq;
        assert_eq!(full.switch_in_after_ns, lean.switch_in_after_ns, "{seq}");
        // The wakeup moves to the end of the interrupt it ran in: a few us.
        let (fw, lw) = (full.wakeup_after_ns.unwrap(), lean.wakeup_after_ns.unwrap());
        assert!(lw >= fw && lw - fw <= 25_000, "{seq}: {fw} -> {lw}");
        let ie = lean.irq_entry_after_ns.unwrap();
        assert!(ie <= lw, "{seq}: entry {ie} after wakeup {lw}");
        // Every cause but the interrupt itself keeps its time, to within the
        // interrupt's length; nothing is lost or added.
        let by_kind = |a: &cpushield_trace::attribute::Attribution, k: CauseKind| -> u64 {
            a.causes.iter().filter(|c| c.kind == k).map(|c| c.ns).sum()
        };
        for k in [
            CauseKind::Irq,
            CauseKind::Softirq,
            CauseKind::Work,
            CauseKind::Task,
            CauseKind::KernelThread,
            CauseKind::RtThrottled,
            CauseKind::MeasuredTask,
            CauseKind::Outside,
        ] {
            let (f, l) = (by_kind(&full, k), by_kind(&lean, k));
            assert!(f.abs_diff(l) <= 25_000, "{seq} {k:?}: {f} vs {l}");
        }
        let total = |a: &cpushield_trace::attribute::Attribution| -> u64 {
            a.causes.iter().map(|c| c.ns).sum()
        };
        assert_eq!(total(&full), total(&lean), "{seq}");
        assert_eq!(full.causes[0].kind, lean.causes[0].kind, "{seq}");
        // The notes that do not need the hrtimer event say the same (their
        // figures move by the interrupt's length).
        let keep = |a: &cpushield_trace::attribute::Attribution| -> Vec<String> {
            a.notes
                .iter()
                .filter(|n| !n.contains("hrtimer now="))
                .map(|n| n.replace(|c: char| c.is_ascii_digit() || c == '.', ""))
                .collect()
        };
        assert_eq!(keep(&full), keep(&lean), "{seq}");
    }
}

#[test]
fn osnoise_events_mark_the_interrupt_and_thread_that_delayed_a_timerlat_thread() {
    // What the timerlat tracer records with only sched_switch and the osnoise
    // events on: no irq or vector entry/exit. The local timer's 10 us are
    // known only from irq_noise, the kworker's stretch from thread_noise.
    let ev = events(
        "  kworker/1:2-88 [001] d.... 9.999000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/1:2 next_pid=88 next_prio=120
  kworker/1:2-88 [001] d.h.. 10.000004: #5 context    irq timer_latency      2000 ns
  kworker/1:2-88 [001] d.h.. 10.000012: irq_noise: local_timer:236 start 10.000002000 duration 10000 ns
  kworker/1:2-88 [001] d.... 10.000090: thread_noise: kworker/1:2:88 start 9.999000000 duration 1080000 ns
  kworker/1:2-88 [001] d.... 10.000090: sched_switch: prev_comm=kworker/1:2 prev_pid=88 prev_prio=120 prev_state=R+ ==> next_comm=timerlat/1 next_pid=700 next_prio=4
  timerlat/1-700 [001] ..... 10.000095: #5 context thread timer_latency     95000 ns
",
    );
    let spike = Spike {
        seq: 5,
        cpu: 1,
        tid: 700,
        intended_ns: 10_000_000_000,
        actual_ns: 10_000_095_000,
    };
    let kthread = |pid: i32| pid == 88 || pid == 700;
    let a = attribute(&ev, &spike, &ctx(&kthread, None));
    let cause = |kind| a.causes.iter().find(|c| c.kind == kind);
    let timer = cause(CauseKind::Vector).expect("the local timer from irq_noise");
    assert_eq!(timer.name, "local timer interrupt");
    assert!((9_000..=11_000).contains(&timer.ns), "{:?}", a.causes);
    let kworker = cause(CauseKind::KernelThread).expect("the kworker from thread_noise");
    assert_eq!(kworker.name, "kworker/1:2 (88)");
    assert!((75_000..=82_000).contains(&kworker.ns), "{:?}", a.causes);
    // The five lines from the intended time on; each osnoise event counts
    // once, though its start is placed as well.
    assert_eq!(a.events, 5, "{:?}", a.causes);
}

/// A load task in the kernel on a vCPU the host stops for 3 ms just as the
/// probe's timer is due at 800.005000: its interrupt enters 3 ms late.
const STALL_BEFORE_THE_WAKEUP: &str = "\
            load-70      [001] d.h..   800.002000: local_timer_entry: vector=236
            load-70      [001] d.h..   800.002004: local_timer_exit: vector=236
            load-70      [001] d.h..   800.008000: local_timer_entry: vector=236
            load-70      [001] dNh..   800.008010: local_timer_exit: vector=236
            load-70      [001] d..2.   800.008100: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn a_timer_interrupt_that_a_running_task_cannot_hold_off_came_late_from_outside_the_guest() {
    // Interrupts are on in a task: the probe's timer, due at the intended
    // time, fires at once unless the vCPU is not running. The 3 ms until its
    // interrupt are the host's, not the load task's (a stretch shorter than
    // one and a half ticks used to be charged whole to the task).
    let ev = events(STALL_BEFORE_THE_WAKEUP);
    let spike = Spike {
        seq: 20,
        cpu: 1,
        tid: 50,
        intended_ns: 800_005_000_000,
        actual_ns: 800_008_110_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &vm);
    let load: u64 = a
        .causes
        .iter()
        .filter(|c| c.name == "load (70)")
        .map(|c| c.ns)
        .sum();
    assert!(a.outside_ns >= 2_890_000, "{:#?}", a.causes);
    assert!(load <= 100_000 + 100_000, "{:#?}", a.causes);
}

/// The probe woken on time at 900.001000 while a load task is in a system
/// call (preemption model none); no local timer interrupt comes for 5 ms,
/// longer than the tick's period: the vCPU stopped.
const STALL_AFTER_THE_WAKEUP: &str = "\
            load-70      [001] d.h..   900.000000: local_timer_entry: vector=236
            load-70      [001] d.h..   900.000004: local_timer_exit: vector=236
            load-70      [001] d.h..   900.001000: local_timer_entry: vector=236
            load-70      [001] dNh..   900.001004: local_timer_exit: vector=236
            load-70      [001] dNh..   900.006000: local_timer_entry: vector=236
            load-70      [001] dNh..   900.006004: local_timer_exit: vector=236
            load-70      [001] d..2.   900.006500: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4
";

#[test]
fn a_tick_that_comes_late_while_a_task_keeps_the_woken_probe_waiting_is_outside_the_guest() {
    let ev = events(STALL_AFTER_THE_WAKEUP);
    let spike = Spike {
        seq: 21,
        cpu: 1,
        tid: 50,
        intended_ns: 900_001_000_000,
        actual_ns: 900_006_510_000,
    };
    let never = |_: i32| false;
    let vm = AttributionContext {
        virtual_cpu: true,
        ..ctx(&never, None)
    };
    let a = attribute(&ev, &spike, &vm);
    let load_after: u64 = a
        .causes
        .iter()
        .filter(|c| c.name == "load (70)" && c.phase == Phase::AfterWakeup)
        .map(|c| c.ns)
        .sum();
    // Without the hrtimer events the trace cannot tell the tick's interrupt
    // from the probe's: the next tick is due at most one period after the
    // latest local timer interrupt (900.001000). Until then (plus its way
    // in) the task held the CPU, the guest's time; the 0.9 ms after it are
    // the host's (a stretch shorter than one and a half ticks used to be
    // charged whole to the task).
    assert_eq!(a.outside_ns, 900_000, "{:#?}", a.causes);
    assert_eq!(load_after, 4_096_000 + 496_000, "{:#?}", a.causes);
}
