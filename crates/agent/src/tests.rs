//! The drift decision and the endpoint, on `FakeKernel`.

use super::*;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{FakeKernel, Host};
use cpushield_shield::state::MemoryStore;
use drift::{Cause, Watch};
use std::io;

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

fn fake() -> FakeKernel {
    let k = FakeKernel::new();
    k.set_file(
        "/proc/interrupts",
        "           CPU0       CPU1\n 10:  5  0  IO-APIC 10-edge  eth0\n 11:  1  2  IO-APIC 11-edge  disk\n",
    );
    k.add_dir("/proc/irq/10");
    k.add_dir("/proc/irq/11");
    k.set_file("/proc/irq/10/smp_affinity", "1\n");
    k.set_file("/proc/irq/11/smp_affinity", "1\n");
    k
}

#[test]
fn an_irq_rewritten_onto_a_shielded_cpu_is_drift_once() {
    let k = fake();
    let mut w = Watch::new();
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
    k.set_file("/proc/irq/11/smp_affinity", "3\n");
    let d = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].irq, d[0].cause, d[0].name.as_str()),
        (11, Cause::IrqRewritten, "disk")
    );
    assert_eq!(d[0].on, cpus("1"));
    // Unchanged since (e.g. a kernel-managed IRQ the shield cannot move): not again.
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
}

#[test]
fn a_rewrite_that_stays_off_the_shielded_cpus_is_not_drift() {
    let k = fake();
    let mut w = Watch::new();
    w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    k.set_file("/proc/irq/10/smp_affinity", "4\n");
    assert!(w.observe(&snapshot::read_irqs(&k), &cpus("1")).is_empty());
}

#[test]
fn a_new_irq_on_a_shielded_cpu_is_drift_and_the_first_look_reports_what_is_there() {
    let k = fake();
    k.set_file("/proc/irq/10/smp_affinity", "2\n");
    let mut w = Watch::new();
    let first = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].irq, first[0].cause), (10, Cause::IrqAtStart));
    k.add_dir("/proc/irq/12");
    k.set_file("/proc/irq/12/smp_affinity", "3\n");
    let d = w.observe(&snapshot::read_irqs(&k), &cpus("1"));
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].irq, d[0].cause), (12, Cause::IrqNew));
}

#[test]
fn nothing_is_drift_without_an_interrupt_shield() {
    let k = fake();
    k.set_file("/proc/irq/10/smp_affinity", "2\n");
    let mut w = Watch::new();
    assert!(w
        .observe(&snapshot::read_irqs(&k), &CpuSet::default())
        .is_empty());
}

#[test]
fn a_tick_without_a_shield_corrects_nothing_and_says_no_shield() {
    let k = fake();
    k.set_file("/sys/devices/system/cpu/online", "0-1\n");
    k.set_file("/proc/softirqs", "   CPU0 CPU1\n TIMER: 1 2\n");
    k.set_file(
        "/proc/stat",
        "cpu 1 1 1 1 1 1 1 1\ncpu0 1 1 1 1 1 1 1 0\ncpu1 1 1 1 1 1 1 1 3\n",
    );
    let store = state::MemoryStore::new();
    let shared = Shared::new("0");
    let host = Host::fake(&k, &store);
    let mut agent = Agent::new(&host, Arc::clone(&shared), Options::default());
    assert!(agent.tick().unwrap().is_empty());
    let json = lock(&shared.conditions).to_json();
    assert!(json.contains("\"NoShield\""), "{json}");
    assert!(!lock(&shared.metrics)
        .render()
        .contains("cpushield_corrections_total{"));
}

#[test]
fn the_endpoint_serves_only_get_metrics_and_status() {
    let shared = Shared::new("9.9.9");
    let (code, _, body) = server::respond(&shared, "GET", "/metrics");
    assert_eq!(code, 200);
    assert!(
        body.contains("cpushield_build_info{version=\"9.9.9\"} 1"),
        "{body}"
    );
    assert_eq!(server::respond(&shared, "GET", "/status").0, 200);
    assert_eq!(server::respond(&shared, "POST", "/metrics").0, 405);
    assert_eq!(server::respond(&shared, "GET", "/").0, 404);
    assert_eq!(server::respond(&shared, "GET", "/reset").0, 404);
}

/// A caller (pid 40, uid 1000, in group 900) with a process of its own (41)
/// and root's (1); no shield is up (an empty state directory).
fn placement_fake() -> (FakeKernel, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    // The shield's state lives in this test's own directory, never /run/cpushield.
    std::env::set_var("CPUSHIELD_STATE_DIR", dir.path());
    let k = FakeKernel::new();
    for (pid, uid) in [(40, 1000), (41, 1000), (1, 0)] {
        k.set_file(
            format!("/proc/{pid}/status"),
            format!("Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGroups:\t900 \n"),
        );
        k.add_dir(format!("/proc/{pid}/task/{pid}"));
        k.set_file(
            format!("/proc/{pid}/task/{pid}/stat"),
            format!("{pid} (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"),
        );
        k.set_thread_affinity(pid, cpus("0-1"));
    }
    (k, dir)
}

fn rules() -> Vec<access::Rule> {
    vec![access::Rule {
        group: "rt".into(),
        gid: 900,
        cpus: cpus("1"),
        max_priority: 50,
    }]
}

/// The hold of the fake's processes, which never exit: these tests are of
/// the decision; the pidfd that tells a process from a later one with its
/// PID is tested on a real child
/// (`a_process_that_exited_while_held_is_never_placed_though_its_pid_names_another`).
fn fake_never_exits(_: i32) -> io::Result<Box<dyn Fn() -> bool>> {
    Ok(Box::new(|| true))
}

#[test]
fn the_socket_places_the_callers_own_process_and_refuses_anything_else() {
    let (k, _dir) = placement_fake();
    let peer = access::Peer {
        pid: 40,
        uid: 1000,
        groups: vec![900],
    };
    let reserves = cpushield_rt::reserve::ReserveDir::new(_dir.path().join("reserve"));
    let ask = |pid: i32, cpus: &str, prio: u32| {
        socket::answer(
            &Host::fake(&k, &MemoryStore::new()),
            &rules(),
            &reserves,
            &peer,
            &format!(
                r#"{{"place":{{"pid":{pid},"cpus":"{cpus}","policy":"fifo","priority":{prio}}}}}"#
            ),
            &fake_never_exits,
        )
    };
    let ok = ask(0, "1", 50);
    assert!(
        ok.starts_with("ok: placed process 40 (1 thread) on CPU 1 with fifo 50"),
        "{ok}"
    );
    assert_eq!(k.affinities()[&40], cpus("1"));
    assert_eq!(k.scheds()[&40].policy, libc::SCHED_FIFO as u32);
    assert_eq!(k.scheds()[&40].priority, 50);
    assert!(ask(41, "0", 5).contains("CPU 0 is not granted"));
    assert!(ask(41, "1", 51).contains("above max_priority 50"));
    assert!(ask(1, "1", 5).contains("process 1 belongs to uid 0"));
    assert!(ask(77, "1", 5).contains("there is no process 77"));
    assert_eq!(
        k.affinities()[&41],
        cpus("0-1"),
        "a refusal changes nothing"
    );
    assert_eq!(k.affinities()[&1], cpus("0-1"));
    assert!(!k.scheds().contains_key(&41) && !k.scheds().contains_key(&1));
    let outsider = access::Peer {
        pid: 41,
        uid: 1000,
        groups: vec![100],
    };
    let e = socket::answer(
        &Host::fake(&k, &MemoryStore::new()),
        &rules(),
        &reserves,
        &outsider,
        r#"{"place":{"pid":0,"cpus":"1","policy":"rr","priority":1}}"#,
        &fake_never_exits,
    );
    assert!(e.contains("none of the groups"), "{e}");
    // A CPU another process reserved (`run --reserve`) is refused as `run` refuses it.
    let holder = cpushield_rt::reserve::Holder::of_pid(std::process::id() as i32);
    let _held = reserves.reserve(&cpus("1"), &holder).unwrap();
    let e = ask(41, "1", 5);
    assert!(e.starts_with("refused: CPU 1 is reserved by"), "{e}");
}

/// Process `pid` in the fake as a process of the caller of
/// [`placement_fake`] (uid 1000, group 900), one thread, on CPUs 0-1.
fn add_callers_process(k: &FakeKernel, pid: i32) {
    k.set_file(
        format!("/proc/{pid}/status"),
        "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGroups:\t900 \n",
    );
    k.add_dir(format!("/proc/{pid}/task/{pid}"));
    k.set_thread_affinity(pid, cpus("0-1"));
}

/// A real process that lives until killed (at most 30 s).
fn sleeper() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap()
}

/// The socket's request placing `pid` on CPU 1 at fifo 10.
fn place_on_cpu_1(pid: i32) -> String {
    format!(r#"{{"place":{{"pid":{pid},"cpus":"1","policy":"fifo","priority":10}}}}"#)
}

#[test]
fn a_process_that_exited_while_held_is_never_placed_though_its_pid_names_another() {
    let (k, dir) = placement_fake();
    let mut child = sleeper();
    let pid = child.id() as i32;
    // The PID as the checks see it: a process of the caller's (uid 1000), as
    // if the PID had gone to another process of the same user.
    add_callers_process(&k, pid);
    let peer = access::Peer {
        pid: 40,
        uid: 1000,
        groups: vec![900],
    };
    let reserves = cpushield_rt::reserve::ReserveDir::new(dir.path().join("reserve"));
    let request = place_on_cpu_1(pid);
    // The real pidfd, taken while the child lives; the child then exits
    // and is reaped before any check.
    let child = std::cell::RefCell::new(&mut child);
    let hold_then_exit = |p: i32| -> io::Result<Box<dyn Fn() -> bool>> {
        let held = socket::hold_by_pidfd(p)?;
        let mut c = child.borrow_mut();
        c.kill()?;
        c.wait()?;
        Ok(held)
    };
    let answer = socket::answer(
        &Host::fake(&k, &MemoryStore::new()),
        &rules(),
        &reserves,
        &peer,
        &request,
        &hold_then_exit,
    );
    assert_eq!(
        answer,
        format!("refused: process {pid} exited while it was checked")
    );
    assert_eq!(k.affinities()[&pid], cpus("0-1"), "the PID was placed");
    assert!(!k.scheds().contains_key(&pid));
    let by_pidfd = |request: &str| {
        socket::answer(
            &Host::fake(&k, &MemoryStore::new()),
            &rules(),
            &reserves,
            &peer,
            request,
            &socket::hold_by_pidfd,
        )
    };
    // Gone before it could be held at all: refused as absent.
    assert_eq!(
        by_pidfd(&request),
        format!("refused: there is no process {pid}")
    );
    // A live process held by its pidfd is placed.
    let mut live = sleeper();
    let live_pid = live.id() as i32;
    add_callers_process(&k, live_pid);
    let answer = by_pidfd(&place_on_cpu_1(live_pid));
    let _ = live.kill();
    let _ = live.wait();
    assert!(answer.starts_with("ok: placed process"), "{answer}");
    assert_eq!(k.affinities()[&live_pid], cpus("1"));
}

const ROOT: &str = cpushield_shield::fake_machine::V1_ROOT;

const ROOT_OPTIONS: Options = Options {
    is_root: true,
    whole_cores: false,
};

/// A fake cgroup-v1 machine with CPUs `online` of 0-3, `tasks` (tid,
/// affinity) in the root cpuset, IRQ 10, and the counters the agent reads.
fn machine(online: &str, tasks: &[(i32, &str)]) -> FakeKernel {
    let k = cpushield_shield::fake_machine::v1_machine(online, tasks);
    k.set_file("/proc/irq/10/smp_affinity", "f\n");
    k.set_file(
        "/proc/interrupts",
        "     CPU0 CPU1 CPU2 CPU3\n 10: 1 1 1 1 IO-APIC 10-edge eth0\n",
    );
    k.set_file(
        "/proc/softirqs",
        "   CPU0 CPU1 CPU2 CPU3\n TIMER: 1 2 3 4\n",
    );
    k.set_file(
        "/proc/stat",
        "cpu 1 1 1 1 1 1 1 1\ncpu0 1 1 1 1 1 1 1 0\ncpu1 1 1 1 1 1 1 1 0\ncpu2 1 1 1 1 1 1 1 0\ncpu3 1 1 1 1 1 1 1 0\n",
    );
    k
}

/// Puts the shield up on CPUs `shielded` of `k` as root, its state in
/// `store`, and returns a host on the same machine for the agent to watch.
fn shield_up(k: &FakeKernel, store: &MemoryStore, shielded: &str) -> Host {
    cpushield_shield::shield(
        &Host::fake(k, store),
        &ShieldMasks::all(&cpus(shielded)),
        ROOT_OPTIONS,
    )
    .unwrap();
    Host::fake(k, store)
}

/// Behind the shield's back, task `tid` leaves the housekeeping cpuset for
/// the root one (`echo TID > tasks`) and is given every CPU (`taskset -p
/// 0-3`): in the housekeeping cpuset the kernel would narrow that affinity
/// to the cpuset's CPUs.
fn escape_to_root(k: &FakeKernel, tid: i32) {
    k.write(
        std::path::Path::new(&format!("{ROOT}/tasks")),
        &tid.to_string(),
    )
    .unwrap();
    k.set_thread_affinity(tid, cpus("0-3"));
}

#[test]
fn a_task_widened_onto_the_shield_is_set_back_and_its_widened_mask_is_kept_as_its_request() {
    let k = machine("0-3", &[(100, "0-3"), (101, "1")]);
    let store = state::MemoryStore::new();
    let host = shield_up(&k, &store, "3");
    assert_eq!(k.affinities()[&100], cpus("0-2"));
    let shared = Shared::new("0");
    let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT_OPTIONS);
    let first = agent.tick().unwrap();
    assert!(first.iter().all(|l| !l.contains("task")), "{first:?}");
    escape_to_root(&k, 101);
    let log = agent.tick().unwrap();
    let line = log
        .iter()
        .find(|l| l.contains("task 101"))
        .unwrap_or_else(|| panic!("{log:?}"));
    assert!(
        line.starts_with("correction: task 101 (task101) affinity 0-3 reached shielded CPU 3"),
        "{line}"
    );
    assert!(line.contains("[cause task_widened]"), "{line}");
    assert_eq!(k.affinities()[&101], cpus("0-2"));
    assert!(lock(&shared.metrics)
        .render()
        .contains("cpushield_corrections_total{cause=\"task_widened\"} 1"));
    // Unchanged since: no second correction.
    assert!(agent
        .tick()
        .unwrap()
        .iter()
        .all(|l| !l.contains("task 101")));
    // Reset gives the task what it asked for last (Brosky's rule), not 1.
    cpushield_shield::reset(&Host::fake(&k, &store), ROOT_OPTIONS).unwrap();
    assert_eq!(k.affinities()[&101], cpus("0-3"));
}

#[test]
fn a_cpu_coming_online_re_applies_the_shield_and_is_logged_with_its_cause() {
    let k = machine("0-2", &[(100, "0-2")]);
    let store = state::MemoryStore::new();
    let host = shield_up(&k, &store, "2");
    let shared = Shared::new("0");
    let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT_OPTIONS);
    assert!(agent.tick().unwrap().iter().all(|l| !l.contains("online")));
    k.set_file("/sys/devices/system/cpu/online", "0-3\n");
    k.set_file(format!("{ROOT}/cpuset.cpus"), "0-3\n");
    let log = agent.tick().unwrap();
    let line = log
        .iter()
        .find(|l| l.contains("came online"))
        .unwrap_or_else(|| panic!("{log:?}"));
    assert!(line.starts_with("correction: CPU 3 came online"), "{line}");
    assert!(
        line.contains("[cause cpu_online]") && line.contains("re-applied the shield"),
        "{line}"
    );
    let system = k
        .file(format!("{ROOT}/cpushield-system/cpuset.cpus"))
        .unwrap();
    assert_eq!(
        CpuSet::parse_list(system.trim()).unwrap(),
        cpus("0-1,3"),
        "{log:?}"
    );
    assert!(lock(&shared.metrics)
        .render()
        .contains("cpushield_corrections_total{cause=\"cpu_online\"} 1"));
}

#[test]
fn tasks_in_the_shield_or_bound_by_the_kernel_are_not_drift_and_a_new_task_outside_is() {
    let task = |tid: i32, aff: &str, cgroup: &str, pinned: bool| snapshot::TaskInfo {
        tid,
        tgid: tid,
        ppid: 1,
        comm: format!("t{tid}"),
        starttime: 5,
        kthread: pinned,
        pinned_by_kernel: pinned,
        affinity: cpus(aff),
        cgroup: cgroup.into(),
    };
    let mut w = drift::TaskWatch::new();
    let start = [
        task(1, "0", "/cpushield-system", false),
        task(2, "1", "/cpushield-shield", false),
        task(3, "1", "/", true),
    ];
    assert_eq!(w.observe(&start, &cpus("1")), drift::TaskLook::default());
    let mut later = start.to_vec();
    later.push(task(4, "0-1", "/", false));
    later.push(task(5, "1", "/kubepods/burstable/pod1/c1", false));
    let look = w.observe(&later, &cpus("1"));
    let d = &look.drifts;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].tid, d[0].cause), (4, Cause::TaskNew));
    assert_eq!(
        look.pods.iter().map(|p| p.tid).collect::<Vec<_>>(),
        [5],
        "a pod's task is named apart, not as drift"
    );
    assert_eq!(
        w.observe(&later, &cpus("1")),
        drift::TaskLook::default(),
        "unchanged since: neither again"
    );
}

/// Adds a task of a Kubernetes pod (cgroupfs driver layout) to a
/// [`machine`]: thread `tid` with `affinity`, in `/kubepods/pod1/c1`.
fn add_pod_task(k: &FakeKernel, tid: i32, affinity: &str) {
    let base = format!("/proc/{tid}/task/{tid}");
    k.set_file(
        format!("{base}/stat"),
        format!("{tid} (pod{tid}) S 1 {tid} {tid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 1000 + tid),
    );
    k.set_file(format!("{base}/cgroup"), "3:cpuset:/kubepods/pod1/c1\n");
    k.set_thread_affinity(tid, cpus(affinity));
    for (file, value) in [
        ("tasks", format!("{tid}\n")),
        ("cgroup.procs", format!("{tid}\n")),
        ("cpuset.cpus", format!("{affinity}\n")),
        ("cpuset.mems", "0\n".into()),
    ] {
        k.set_file(format!("{ROOT}/kubepods/pod1/c1/{file}"), value);
    }
    for dir in ["kubepods", "kubepods/pod1"] {
        k.set_file(format!("{ROOT}/{dir}/cpuset.cpus"), "0-3\n");
        k.set_file(format!("{ROOT}/{dir}/cpuset.mems"), "0\n");
        k.set_file(format!("{ROOT}/{dir}/tasks"), "");
        k.set_file(format!("{ROOT}/{dir}/cgroup.procs"), "");
    }
}

#[test]
fn a_pod_task_on_a_shielded_cpu_gets_its_own_line_and_no_reshield() {
    let k = machine("0-3", &[(100, "0-3")]);
    // Pinned to CPU 3 by the kubelet's static CPU manager.
    add_pod_task(&k, 200, "3");
    let store = state::MemoryStore::new();
    let host = shield_up(&k, &store, "3");
    assert_eq!(
        k.affinities()[&200],
        cpus("3"),
        "the shield leaves pods alone"
    );
    let shared = Shared::new("0");
    let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT_OPTIONS);
    let writes = store.writes();
    let files = k.files();
    let log = agent.tick().unwrap();
    let pod_lines: Vec<&String> = log.iter().filter(|l| l.contains("task 200")).collect();
    assert_eq!(pod_lines.len(), 1, "{log:?}");
    assert!(
        pod_lines[0].starts_with(
            "task 200 (pod200) of a Kubernetes pod (cgroup /kubepods/pod1/c1) has affinity 3 on shielded CPU 3: pods belong to the kubelet's CPU manager"
        ),
        "{}",
        pod_lines[0]
    );
    assert!(!log.iter().any(|l| l.starts_with("correction")), "{log:?}");
    assert!(
        !log.iter().any(|l| l.contains("the shield cannot move it")),
        "{log:?}"
    );
    assert_eq!(store.writes(), writes, "the shield was re-applied");
    assert_eq!(k.files(), files, "a file was written");
    assert_eq!(k.affinities()[&200], cpus("3"));
    let metrics = lock(&shared.metrics).render();
    assert!(
        metrics.contains("cpushield_pod_tasks_on_shield 1"),
        "{metrics}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&lock(&shared.conditions).to_json()).unwrap();
    assert_eq!(status["conditions"][1]["type"], "Corrected");
    assert_eq!(status["conditions"][1]["status"], "False");
    // Named once, not at every look.
    assert!(agent.tick().unwrap().is_empty());
}

#[test]
fn corrected_is_true_after_a_look_that_corrected_and_false_after_one_that_did_not() {
    let k = machine("0-3", &[(100, "0-3"), (101, "1")]);
    let store = state::MemoryStore::new();
    let host = shield_up(&k, &store, "3");
    let shared = Shared::new("0");
    let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT_OPTIONS);
    let corrected = || -> serde_json::Value {
        let status: serde_json::Value =
            serde_json::from_str(&lock(&shared.conditions).to_json()).unwrap();
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Corrected")
            .cloned()
            .unwrap_or_else(|| panic!("no Corrected condition: {status}"))
    };
    agent.tick().unwrap();
    let quiet = corrected();
    assert_eq!(
        (quiet["status"].as_str(), quiet["reason"].as_str()),
        (Some("False"), Some("NoDrift")),
        "{quiet}"
    );
    escape_to_root(&k, 101);
    agent.tick().unwrap();
    let after = corrected();
    assert_eq!(
        (after["status"].as_str(), after["reason"].as_str()),
        (Some("True"), Some("DriftCorrected")),
        "{after}"
    );
    assert!(
        after["message"]
            .as_str()
            .unwrap()
            .contains("(task_widened)"),
        "{after}"
    );
    agent.tick().unwrap();
    let again = corrected();
    assert_eq!(again["status"], "False", "{again}");
    assert_ne!(
        again["lastTransitionTime"], quiet["lastTransitionTime"],
        "the transition back is a new time"
    );
}

#[test]
fn on_threshold_runs_its_command_once_per_crossing_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ran");
    let mut hook = OnThreshold::new(Some(format!(
        "echo \"$CPUSHIELD_REASON\" >> {}",
        out.display()
    )));
    assert!(hook.see(None).is_none());
    let line = hook.see(Some("latency 120 us".into())).unwrap();
    assert!(
        line.starts_with("threshold crossed (latency 120 us): started"),
        "{line}"
    );
    assert!(
        hook.see(Some("latency 130 us".into())).is_none(),
        "still the same crossing"
    );
    assert!(hook.see(None).is_none());
    assert!(hook.see(Some("finding".into())).is_some(), "a new crossing");
    for _ in 0..100 {
        if std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The two commands run on their own: either may write first.
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["finding", "latency 120 us"]);
}

#[test]
fn a_latency_crossing_lasts_until_a_burst_stays_under_the_limit() {
    let k = fake();
    let store = state::MemoryStore::new();
    let shared = Shared::new("0");
    let host = Host::fake(&k, &store);
    let agent = Agent::new(&host, Arc::clone(&shared), Options::default());
    assert_eq!(agent.crossed(), None);
    shared.latency_over.store(150_000, Ordering::SeqCst);
    let why = agent.crossed().unwrap();
    assert!(why.contains("150 us, above the limit"), "{why}");
    assert_eq!(
        agent.crossed().as_deref(),
        Some(why.as_str()),
        "still crossing at the next look"
    );
    shared.latency_over.store(0, Ordering::SeqCst);
    assert_eq!(agent.crossed(), None);
}

#[test]
fn an_irq_whose_mask_the_applied_shield_left_as_it_was_is_not_a_correction() {
    let d = drift::Drift {
        irq: 42,
        name: String::new(),
        mask_text: "2".into(),
        on: cpus("1"),
        cause: Cause::IrqRewritten,
    };
    let (line, corrected) = irq_drift_line(&d, "2", &Ok(()));
    assert!(!corrected);
    assert!(
        line.starts_with("IRQ 42 (?) stays on shielded CPU 1"),
        "{line}"
    );
    let (line, corrected) = irq_drift_line(&d, "1", &Ok(()));
    assert!(corrected);
    assert!(
        line.ends_with("re-applied the shield, mask now 1"),
        "{line}"
    );
    // A failed shield is a correction attempted, whatever the mask says.
    let (line, corrected) = irq_drift_line(&d, "2", &Err("refused".into()));
    assert!(corrected);
    assert!(
        line.ends_with("re-applying the shield failed: refused"),
        "{line}"
    );
}

#[test]
fn a_task_whose_affinity_the_applied_shield_left_as_it_was_is_not_a_correction() {
    let d = drift::TaskDrift {
        tid: 77,
        comm: "app".into(),
        affinity: cpus("0-1"),
        on: cpus("1"),
        cause: Cause::TaskWidened,
    };
    let (line, corrected) = task_drift_line(&d, &cpus("0-1"), &Ok(()));
    assert!(!corrected);
    assert!(
        line.starts_with("task 77 (app) stays on shielded CPU 1"),
        "{line}"
    );
    let (line, corrected) = task_drift_line(&d, &cpus("0"), &Ok(()));
    assert!(corrected);
    assert!(line.contains("affinity now 0"), "{line}");
}

#[test]
fn the_corrected_condition_names_the_first_cause_or_says_no_drift() {
    assert_eq!(
        corrected_message(Some("irq_new")),
        "the last look found drift (irq_new) and re-applied the shield"
    );
    assert_eq!(
        corrected_message(None),
        "the last look found no IRQ, task or CPU to correct"
    );
    assert!(online_line(&cpus("3"), &cpus("0-3"), &Ok(()))
        .ends_with("re-applied the shield, online CPUs now 0-3"));
}

#[test]
fn a_look_between_full_reads_finds_a_task_of_a_cgroup_on_the_shield_and_the_full_read_any_other() {
    let k = machine("0-3", &[(100, "0-3"), (101, "0-3"), (102, "0-3")]);
    let store = state::MemoryStore::new();
    let host = shield_up(&k, &store, "3");
    let shared = Shared::new("0");
    let mut agent = Agent::new(&host, Arc::clone(&shared), ROOT_OPTIONS).scan_every(3);
    let task_lines = |log: Vec<String>| -> Vec<String> {
        log.into_iter().filter(|l| l.contains("task 1")).collect()
    };
    // Look 0 reads every task.
    assert_eq!(task_lines(agent.tick().unwrap()), Vec::<String>::new());
    // Task 100 stays in the housekeeping cpuset, whose CPUs (0-2) exclude
    // the shield, yet reaches CPU 3: what the kernel's cpuset checks let
    // through only for a task the kernel itself places (a kernel thread).
    k.set_thread_affinity(100, cpus("0-3"));
    escape_to_root(&k, 101);
    // A task born since the last full read, in the root cpuset.
    add_task(&k, 103, "0-3");
    let look1 = task_lines(agent.tick().unwrap());
    assert_eq!(look1.len(), 2, "{look1:?}");
    assert!(
        look1[0].starts_with("correction: task 101 (task101) affinity 0-3 reached shielded CPU 3"),
        "{look1:?}"
    );
    assert!(look1[0].contains("[cause task_widened]"), "{look1:?}");
    assert!(
        look1[1].starts_with("correction: task 103 (task103) affinity 0-3 reached shielded CPU 3"),
        "{look1:?}"
    );
    assert!(look1[1].contains("[cause task_new]"), "{look1:?}");
    // The correction read every task, task 100 too, and re-applied the
    // shield, which set task 100 back as well: give it the shield again.
    k.set_thread_affinity(100, cpus("0-3"));
    assert_eq!(task_lines(agent.tick().unwrap()), Vec::<String>::new());
    assert_eq!(task_lines(agent.tick().unwrap()), Vec::<String>::new());
    let full = task_lines(agent.tick().unwrap());
    assert_eq!(full.len(), 1, "{full:?}");
    assert!(
        full[0].starts_with("correction: task 100 (task100) affinity 0-3 reached shielded CPU 3"),
        "{full:?}"
    );
    assert_eq!(k.affinities()[&100], cpus("0-2"));
}

/// Adds process `tid` of one thread with `affinity` to the root cpuset of a
/// [`machine`], as the kernel shows a task born after the shield.
fn add_task(k: &FakeKernel, tid: i32, affinity: &str) {
    let base = format!("/proc/{tid}/task/{tid}");
    k.set_file(
        format!("{base}/stat"),
        format!("{tid} (task{tid}) S 1 {tid} {tid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 1000 + tid),
    );
    k.set_file(
        format!("/proc/{tid}/status"),
        format!("Name:\ttask{tid}\nTgid:\t{tid}\n"),
    );
    k.set_file(format!("{base}/cgroup"), "3:cpuset:/\n");
    k.set_thread_affinity(tid, cpus(affinity));
    k.write(
        std::path::Path::new(&format!("{ROOT}/tasks")),
        &tid.to_string(),
    )
    .unwrap();
}
