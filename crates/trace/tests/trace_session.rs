//! A whole trace session against a fake tracefs: settings written and put
//! back, events read from the pipe, a marked spike attributed.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::FakeKernel;
use cpushield_trace::watch::WATCH_SEQ_BASE;
use cpushield_trace::{
    CauseKind, SignalMode, Spike, TraceInstance, TraceOptions, TraceSession, TraceSummary,
    WakeupWatch, WatchedWakeups,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ROOT: &str = "/sys/kernel/tracing";

/// One session per process at a time: the tests take turns.
static TURN: Mutex<()> = Mutex::new(());

/// The lines the session wrote to trace_marker, the clock sync left out.
fn marks(k: &FakeKernel) -> Vec<String> {
    k.file(format!("{ROOT}/trace_marker"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with("cpushield-clock-sync"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Files as the kernel reads them back after a restore (a value written
/// reads without its newline, a buffer size without its "expanded" form, a
/// filter cleared with "0", the selected clock alone).
fn restored_form(m: &BTreeMap<PathBuf, String>) -> BTreeMap<PathBuf, String> {
    m.iter()
        .map(|(p, v)| {
            (
                p.clone(),
                v.trim()
                    .replace("7 (expanded: 1408)", "1408")
                    .replace("none", "0")
                    .replace("[local] global counter mono mono_raw", "local"),
            )
        })
        .collect()
}

/// Puts `text` in CPU `cpu`'s trace pipe, for the session to read once.
fn feed_pipe(k: &FakeKernel, cpu: usize, text: &str) {
    k.set_file(format!("{ROOT}/per_cpu/cpu{cpu}/trace_pipe"), text);
}

fn tracefs() -> FakeKernel {
    let k = FakeKernel::new();
    k.set_file(
        "/proc/self/mounts",
        format!("tracefs {ROOT} tracefs rw,nosuid,nodev,noexec 0 0\n"),
    );
    k.set_file("/sys/devices/system/cpu/online", "0-1\n");
    k.set_file("/sys/devices/system/cpu/possible", "0-1\n");
    k.set_file(
        "/proc/stat",
        "cpu  0 0 0 0\ncpu0 1 0 1 10 0 0 0 0\ncpu1 1 0 1 10 0 0 0 3\n",
    );
    let f = |p: &str, v: &str| k.set_file(format!("{ROOT}/{p}"), v);
    f("trace_clock", "[local] global counter mono mono_raw\n");
    f("tracing_on", "1\n");
    f("current_tracer", "nop\n");
    f("tracing_cpumask", "3\n");
    f("trace_marker", "");
    f("trace", "# tracer: nop\n");
    f("per_cpu/cpu0/buffer_size_kb", "7 (expanded: 1408)\n");
    f("per_cpu/cpu0/trace_pipe", "");
    f("per_cpu/cpu1/trace_pipe", "");
    f("per_cpu/cpu1/buffer_size_kb", "7 (expanded: 1408)\n");
    for ev in [
        "irq/irq_handler_entry",
        "irq/irq_handler_exit",
        "irq/softirq_entry",
        "irq/softirq_exit",
        "sched/sched_switch",
        "sched/sched_wakeup",
        "irq_vectors/local_timer_entry",
        "irq_vectors/local_timer_exit",
        "timer/hrtimer_start",
    ] {
        f(&format!("events/{ev}/enable"), "0\n");
        f(&format!("events/{ev}/filter"), "none\n");
    }
    k
}

fn window(t0: u64) -> String {
    // Times are trace-clock seconds.microseconds around `t0` (ns).
    let ts = |off_us: u64| {
        let ns = t0 + off_us * 1000;
        format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1000)
    };
    [
        format!("            load-70      [001] d.h..  {}: local_timer_entry: vector=236", ts(10)),
        format!("            load-70      [001] dNh..  {}: local_timer_exit: vector=236", ts(14)),
        format!("            load-70      [001] dNh1.  {}: irq_handler_entry: irq=38 name=virtio2-input.0", ts(100)),
        format!("            load-70      [001] dNh1.  {}: irq_handler_exit: irq=38 ret=handled", ts(900)),
        format!("            load-70      [001] d..2.  {}: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=probe next_pid=50 next_prio=4", ts(1000)),
        format!("           probe-50      [001] d..2.  {}: sched_switch: prev_comm=probe prev_pid=50 prev_prio=4 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120", ts(1020)),
        format!("          <idle>-0       [001] d.h1.  {}: local_timer_entry: vector=236", ts(9000)),
        String::new(),
    ]
    .join("\n")
}

#[test]
fn a_session_sets_up_attributes_a_marked_spike_and_restores_every_setting() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    // CPU 0 is not traced: its pipe is never read.
    let cpu0_events =
        "          <idle>-0       [000] d.h1.  1.000000: local_timer_entry: vector=236\n";
    feed_pipe(&k, 0, cpu0_events);
    feed_pipe(&k, 1, "");
    let before = k.files();
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        poll: Duration::from_millis(1),
        ..Default::default()
    };
    let cpus = CpuSet::parse_list("1").unwrap();
    let session = TraceSession::start(k.clone(), &cpus, opts).unwrap();
    // Recorded after the session started (what was recorded before is not its).
    let t0 = cpushield_kernel::clock::now_ns();
    feed_pipe(&k, 1, &window(t0));
    // While tracing: only CPU 1 traced, clock mono, events on with filters.
    assert_eq!(k.file(format!("{ROOT}/tracing_cpumask")).unwrap(), "2");
    assert_eq!(k.file(format!("{ROOT}/trace_clock")).unwrap(), "mono");
    assert_eq!(k.file(format!("{ROOT}/tracing_on")).unwrap(), "1");
    assert_eq!(
        k.file(format!("{ROOT}/per_cpu/cpu1/buffer_size_kb"))
            .unwrap(),
        "32768"
    );
    assert_eq!(
        k.file(format!("{ROOT}/per_cpu/cpu0/buffer_size_kb"))
            .unwrap(),
        "7 (expanded: 1408)\n"
    );
    assert_eq!(
        k.file(format!("{ROOT}/events/sched/sched_switch/filter"))
            .unwrap(),
        "prev_prio < 100 || next_prio < 100"
    );
    assert_eq!(
        k.file(format!("{ROOT}/events/irq_vectors/local_timer_exit/enable"))
            .unwrap(),
        "1"
    );
    // sched_wakeup fires in the measured CPU's own wakeup path: left off
    // (the wakeup is taken from the end of the interrupt that woke it).
    assert_eq!(
        k.file(format!("{ROOT}/events/sched/sched_wakeup/enable"))
            .unwrap(),
        "0\n"
    );

    let spike = Spike {
        seq: 7,
        cpu: 1,
        tid: 50,
        intended_ns: t0,
        actual_ns: t0 + 1_010_000,
    };
    assert!(session.mark(&spike));
    let a = session
        .attribute(&spike, Duration::from_secs(5))
        .expect("attributed");
    let irq: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Irq)
        .map(|c| c.ns)
        .sum();
    assert_eq!(irq, 800_000, "{:#?}", a.causes);
    assert!(marks(&k)[0].starts_with("cpushield spike seq=7 cpu=1 tid=50"));

    let summary = session.finish();
    assert_eq!(summary.attributions.len(), 1);
    assert_eq!(summary.top_causes[0].name, "irq 38 virtio2-input.0");
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    // Every setting back; the marker's lines and the traced CPU's pipe, read,
    // are the only traces.
    assert_eq!(
        k.file(format!("{ROOT}/per_cpu/cpu0/trace_pipe")).unwrap(),
        cpu0_events
    );
    let mut after = k.files();
    let mut expected = before;
    for f in ["trace_marker", "trace", "per_cpu/cpu1/trace_pipe"] {
        after.remove(&PathBuf::from(format!("{ROOT}/{f}")));
        expected.remove(&PathBuf::from(format!("{ROOT}/{f}")));
    }
    assert_eq!(restored_form(&after), restored_form(&expected));
}

#[test]
fn sessions_lent_one_instance_share_its_events_read_only_what_they_recorded_and_closing_restores_all(
) {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    let before = k.files();
    let file = |f: &str| k.file(format!("{ROOT}/{f}")).unwrap();
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        poll: Duration::from_millis(1),
        ..Default::default()
    };
    let cpus = CpuSet::parse_list("1").unwrap();
    let instance = Arc::new(TraceInstance::create(k.clone(), &cpus, &opts).unwrap());
    // Ready, not recording: the events are on, tracing is off.
    assert_eq!(file("events/irq/irq_handler_entry/enable"), "1");
    assert_eq!(file("tracing_on"), "0");

    let first = TraceSession::start_in(&instance, &cpus, opts.clone()).unwrap();
    assert_eq!(file("tracing_on"), "1");
    let t0 = cpushield_kernel::clock::now_ns();
    feed_pipe(&k, 1, &window(t0));
    std::thread::sleep(Duration::from_millis(30));
    let first = first.finish();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.events, 7);
    // Between sessions: tracing off, the events still on.
    assert_eq!(file("tracing_on"), "0");
    assert_eq!(file("events/irq/irq_handler_entry/enable"), "1");

    // What the first session's reader never took (recorded before the
    // second started, a spike marker among it) is not the second's; a
    // watching session turns its own event on and off again.
    let stale = window(t0);
    let watching = TraceOptions {
        watch: Some(WakeupWatch {
            comm_prefixes: vec!["cyclictest".into()],
            threshold_ns: 50_000,
        }),
        ..opts.clone()
    };
    feed_pipe(&k, 1, &stale);
    std::thread::sleep(Duration::from_millis(2));
    let second = TraceSession::start_in(&instance, &cpus, watching).unwrap();
    assert_eq!(file("events/timer/hrtimer_start/enable"), "1");
    let t1 = cpushield_kernel::clock::now_ns();
    let fresh = format!(
        "{stale}{}",
        window(t1)
            .lines()
            .take(3)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    feed_pipe(&k, 1, &fresh);
    std::thread::sleep(Duration::from_millis(30));
    let second = second.finish();
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert_eq!(second.events, 3, "only what was recorded after it started");
    assert_eq!(file("events/timer/hrtimer_start/enable").trim(), "0");
    assert_eq!(file("events/irq/irq_handler_entry/enable"), "1");

    assert!(instance.close().is_empty());
    let mut after = k.files();
    let mut expected = before;
    for f in ["trace_marker", "trace", "per_cpu/cpu1/trace_pipe"] {
        after.remove(&PathBuf::from(format!("{ROOT}/{f}")));
        expected.remove(&PathBuf::from(format!("{ROOT}/{f}")));
    }
    assert_eq!(
        restored_form(&after),
        restored_form(&expected),
        "every setting as it was"
    );
}

#[test]
fn a_kernel_without_the_mono_clock_is_refused_and_nothing_is_left_changed() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    k.set_file(format!("{ROOT}/trace_clock"), "[local] global counter\n");
    let before = k.files();
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        ..Default::default()
    };
    let err = TraceSession::start(k.clone(), &CpuSet::parse_list("1").unwrap(), opts)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("no 'mono' trace clock"), "{err}");
    assert_eq!(k.files(), before);
}

#[test]
fn a_session_mounts_tracefs_when_it_is_not_mounted_and_unmounts_it_at_the_end() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let mounted = tracefs();
    let k = Arc::new(FakeKernel::new());
    for (path, text) in mounted.files() {
        if path.starts_with(ROOT) {
            k.set_unmounted_file(ROOT, &path, &text);
        } else if path != Path::new("/proc/self/mounts") {
            k.set_file(&path, text);
        }
    }
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        poll: Duration::from_millis(1),
        ..Default::default()
    };
    let session = TraceSession::start(k.clone(), &CpuSet::parse_list("1").unwrap(), opts).unwrap();
    assert!(k.is_mounted(ROOT));
    assert_eq!(k.file(format!("{ROOT}/trace_clock")).unwrap(), "mono");
    let summary = session.finish();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert!(!k.is_mounted(ROOT), "the session unmounts what it mounted");
    assert!(k.file(format!("{ROOT}/trace_clock")).is_none());
}

#[test]
fn an_offline_cpu_is_refused() {
    let k = Arc::new(tracefs());
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        ..Default::default()
    };
    let err = TraceSession::start(k, &CpuSet::parse_list("5").unwrap(), opts)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("CPU 5 is not online"), "{err}");
}

/// Starts a session on CPU 1 over [`window`] that reads the machine's /proc
/// at /hostproc (the initial namespace's: kthreadd shows there), announces
/// the probe (global ID 50) as `tid` when that is its ID inside a measuring
/// namespace, and attributes the window's spike (`tid` as the caller names
/// it). Returns the attribution and the marks written.
fn attribute_hostproc_window(
    k: Arc<FakeKernel>,
    namespace_scope: bool,
    tid: i32,
) -> (cpushield_trace::Attribution, Vec<String>) {
    k.set_file("/hostproc/2/comm", "kthreadd\n");
    let (a, marks, _) = attribute_hostproc_events(k, namespace_scope, tid, &window);
    (a, marks)
}

/// [`attribute_hostproc_window`] over the events `events` gives for a spike
/// due at t0, with /hostproc as the caller made it; also returns the
/// session's summary.
fn attribute_hostproc_events(
    k: Arc<FakeKernel>,
    namespace_scope: bool,
    tid: i32,
    events: &dyn Fn(u64) -> String,
) -> (cpushield_trace::Attribution, Vec<String>, TraceSummary) {
    feed_pipe(&k, 1, "");
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        poll: Duration::from_millis(1),
        proc_root: PathBuf::from("/hostproc"),
        namespace_scope,
        ..Default::default()
    };
    let cpus = CpuSet::parse_list("1").unwrap();
    let session = TraceSession::start(k.clone(), &cpus, opts).unwrap();
    let t0 = cpushield_kernel::clock::now_ns();
    let ts = |off_us: u64| {
        let ns = t0 + off_us * 1000;
        format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1000)
    };
    let announce = if tid == 50 {
        String::new()
    } else {
        format!(
            "           probe-50      [001] .....  {}: tracing_mark_write: cpushield thread cpu=1 tid={tid}\n",
            ts(1)
        )
    };
    feed_pipe(&k, 1, &(announce + &events(t0)));
    if tid != 50 {
        session.marker().announce(1, tid);
    }
    let spike = Spike {
        seq: 1,
        cpu: 1,
        tid,
        intended_ns: t0,
        actual_ns: t0 + 1_010_000,
    };
    assert!(session.mark(&spike));
    let a = session
        .attribute(&spike, Duration::from_secs(5))
        .expect("attributed");
    let summary = session.finish();
    (a, marks(&k), summary)
}

#[test]
fn from_a_nested_pid_namespace_a_kernel_thread_in_the_trace_is_out_of_view_never_a_task_in_scope() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for namespace_scope in [true, false] {
        let k = Arc::new(tracefs());
        // cpushield runs in a nested PID namespace: the /proc it reads is
        // that namespace's (no kthreadd), where its own process has two IDs
        // in NSpid and ID 15 names one of its own tasks, while the trace's 15
        // is the initial namespace's rcu_preempt.
        k.set_file("/hostproc/1/status", "Name:\tbash\nNSpid:\t1\n");
        k.set_file("/hostproc/9/status", "Name:\tcpushield\nNSpid:\t9\t1\n");
        k.set_file("/hostproc/self/status", "Name:\tcpushield\nNSpid:\t9\t1\n");
        k.set_file("/hostproc/15/status", "Name:\tload\nNSpid:\t15\t3\n");
        k.set_file(
            "/hostproc/15/stat",
            "15 (load) R 9 15 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0 0\n",
        );
        let rcu = |t0: u64| {
            window(t0).replace("load-70", "rcu_preempt-15").replace(
                "prev_comm=load prev_pid=70",
                "prev_comm=rcu_preempt prev_pid=15",
            )
        };
        let (a, _, summary) = attribute_hostproc_events(k, namespace_scope, 5, &rcu);
        assert!(
            a.causes
                .iter()
                .any(|c| c.kind == CauseKind::OtherNamespace && c.name == "rcu_preempt (15)"),
            "scope {namespace_scope}: {:#?}",
            a.causes
        );
        assert!(
            a.causes.iter().all(|c| c.kind != CauseKind::Task),
            "scope {namespace_scope}: {:#?}",
            a.causes
        );
        assert!(summary.nested_namespace);
    }
}

#[test]
fn from_the_initial_namespace_the_summary_says_nothing_of_a_nested_one() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    k.set_file("/hostproc/2/comm", "kthreadd\n");
    k.set_file("/hostproc/50/status", "Name:\tprobe\nNSpid:\t50\t5\n");
    let (_, _, summary) = attribute_hostproc_events(k, true, 5, &window);
    assert!(!summary.nested_namespace);
}

#[test]
fn a_spike_with_a_namespace_tid_is_matched_through_the_threads_announcement() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    // The load task 70 lives in another PID namespace (one ID in NSpid); the
    // probe (global 50, 5 inside the measuring namespace) in ours.
    k.set_file("/hostproc/70/status", "Name:\tload\nNSpid:\t70\n");
    k.set_file("/hostproc/50/status", "Name:\tprobe\nNSpid:\t50\t5\n");
    let (a, marks) = attribute_hostproc_window(k, true, 5);
    assert!(marks[0].starts_with("cpushield thread cpu=1 tid=5"));
    assert_eq!(a.spike.tid, 5, "the spike keeps the caller's ID");
    // Trace times are whole microseconds: allow 1 us of rounding.
    let near = |got: Option<u64>, want: u64| got.is_some_and(|g| g.abs_diff(want) < 1_000);
    // No sched_wakeup is traced: the wakeup is the end of the interrupt
    // that woke the probe (its exit shows the reschedule flag).
    assert!(near(a.wakeup_after_ns, 14_000), "{:#?}", a);
    assert!(
        near(a.switch_in_after_ns, 1_000_000),
        "{:?}",
        a.switch_in_after_ns
    );
    assert!(
        near(a.irq_entry_after_ns, 10_000),
        "kernel latency {:?}",
        a.irq_entry_after_ns
    );
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::OtherNamespace && c.name == "load (70)"),
        "{:#?}",
        a.causes
    );
    assert!(a.causes.iter().all(|c| c.kind != CauseKind::Task));
}

#[test]
fn a_task_gone_before_it_was_read_and_never_listed_in_our_namespace_is_another_namespaces() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    // The load task 70 ran on the CPU and exited before the reader could read
    // its status (a short `git` of another namespace did so); the probe
    // (global 50, 5 inside the measuring namespace) is ours.
    k.set_file("/hostproc/50/status", "Name:\tprobe\nNSpid:\t50\t5\n");
    let (a, marks) = attribute_hostproc_window(k, true, 5);
    assert!(marks[0].starts_with("cpushield thread cpu=1 tid=5"));
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::OtherNamespace && c.name == "load (70)"),
        "{:#?}",
        a.causes
    );
    assert!(a.causes.iter().all(|c| c.kind != CauseKind::Task));
}

#[test]
fn a_task_whose_cgroup_is_a_kubernetes_pods_is_charged_to_the_pod_in_a_system_scope() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    // The load task 70 belongs to a pod (its cgroup, read from the machine's
    // /proc); the shield covers the whole machine.
    k.set_file(
        "/hostproc/70/cgroup",
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7.slice/cri-containerd-1.scope\n",
    );
    k.set_file("/hostproc/70/status", "Name:\tload\nNSpid:\t70\t3\n");
    k.set_file("/hostproc/50/cgroup", "0::/user.slice\n");
    let (a, _) = attribute_hostproc_window(k, false, 50);
    assert!(
        a.causes
            .iter()
            .any(|c| c.kind == CauseKind::PodTask && c.name == "load (70)"),
        "{:#?}",
        a.causes
    );
    assert!(a.causes.iter().all(|c| c.kind != CauseKind::Task));
}

#[test]
fn a_watched_threads_late_wakeup_is_found_in_the_trace_and_explained_like_a_probe_spike() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let k = Arc::new(tracefs());
    feed_pipe(&k, 1, "");
    let opts = TraceOptions {
        signals: SignalMode::None,
        instance: false,
        poll: Duration::from_millis(1),
        watch: Some(WakeupWatch {
            comm_prefixes: vec!["cyclictest".into()],
            threshold_ns: 50_000,
        }),
        ..Default::default()
    };
    let cpus = CpuSet::parse_list("1").unwrap();
    let session = TraceSession::start(k.clone(), &cpus, opts).unwrap();
    // Whole microseconds, as the text trace has them.
    let t0 = cpushield_kernel::clock::now_ns() / 1000 * 1000;
    let ts = |off_us: u64| {
        let ns = t0 + off_us * 1000;
        format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1000)
    };
    // cyclictest (812) arms its timer for t0 + 100 us; its wakeup waits
    // behind an interrupt handler for 700 us.
    let expires = t0 + 100_000;
    feed_pipe(
        &k,
        1,
        &[
            format!("      cyclictest-812     [001] d..1.  {}: hrtimer_start: hrtimer=00000000aa function=hrtimer_wakeup expires={expires} softexpires={expires} mode=ABS", ts(1)),
            format!("      cyclictest-812     [001] d..2.  {}: sched_switch: prev_comm=cyclictest prev_pid=812 prev_prio=4 prev_state=S ==> next_comm=load next_pid=70 next_prio=120", ts(2)),
            format!("            load-70      [001] d.h..  {}: local_timer_entry: vector=236", ts(100)),
            format!("            load-70      [001] dNh..  {}: local_timer_exit: vector=236", ts(104)),
            format!("            load-70      [001] dNh1.  {}: irq_handler_entry: irq=38 name=virtio2-input.0", ts(110)),
            format!("            load-70      [001] dNh1.  {}: irq_handler_exit: irq=38 ret=handled", ts(810)),
            format!("            load-70      [001] d..2.  {}: sched_switch: prev_comm=load prev_pid=70 prev_prio=120 prev_state=R+ ==> next_comm=cyclictest next_pid=812 next_prio=4", ts(820)),
            String::new(),
        ]
        .join("\n"),
    );
    assert_eq!(
        k.file(format!("{ROOT}/events/timer/hrtimer_start/enable"))
            .unwrap(),
        "1",
        "the event that says when the thread meant to wake"
    );
    std::thread::sleep(Duration::from_millis(50));
    let summary = session.finish();
    assert_eq!(
        summary.watched,
        Some(WatchedWakeups {
            wakeups: 1,
            max_ns: 720_000,
            above: 1,
            threads: vec!["cyclictest (812)".into()],
        })
    );
    assert_eq!(summary.attributions.len(), 1, "{:#?}", summary.attributions);
    let a = &summary.attributions[0];
    assert_eq!(a.spike.seq, WATCH_SEQ_BASE);
    assert_eq!((a.spike.tid, a.latency_ns), (812, 720_000));
    let irq: u64 = a
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Irq)
        .map(|c| c.ns)
        .sum();
    assert_eq!(irq, 700_000, "{:#?}", a.causes);
    assert_eq!(
        k.file(format!("{ROOT}/events/timer/hrtimer_start/enable"))
            .unwrap()
            .trim(),
        "0",
        "put back"
    );
}
