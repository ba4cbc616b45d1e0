//! The host side: which threads are the guest's vCPUs, a trace of their host
//! CPUs, and the answers to the guest on QEMU's virtio-serial chardev.

use crate::protocol::{self, HostFacts, MAX_REQUEST_BYTES};
use crate::timeline::{Limits, Timeline};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, Procfs, TracePipe};
use cpushield_parse::qemu_thread::vcpu_of_thread_name;
use cpushield_trace::event::parse_line;
use cpushield_trace::settings::SettingsGuard;
use cpushield_trace::TracefsUse;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A guest's vCPU thread on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VcpuThread {
    /// QEMU's cpu-index (the guest's CPU number).
    pub vcpu: u32,
    /// The host thread ID.
    pub tid: i32,
}

/// The host side could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The vCPU threads could not be found.
    #[error("{0}")]
    Vcpus(String),
    /// tracefs could not be set up.
    #[error("{0}")]
    Trace(String),
}

/// The vCPU threads from QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`):
/// `query-cpus-fast` gives each vCPU's `thread-id`.
pub fn vcpus_from_qmp(socket: &Path, timeout: Duration) -> Result<Vec<VcpuThread>, HostError> {
    let err = |what: String| {
        HostError::Vcpus(format!(
            "{}: {what}; pass QEMU's QMP socket (-qmp unix:PATH,server=on,wait=off) or --pid QEMU_PID",
            socket.display()
        ))
    };
    let stream = UnixStream::connect(socket).map_err(|e| err(format!("cannot connect: {e}")))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| err(e.to_string()))?;
    let mut writer = stream.try_clone().map_err(|e| err(e.to_string()))?;
    // A QMP answer is one line; the greeting and events are skipped. Bounded
    // so that a wrong socket cannot make us read forever.
    let mut reader = BufReader::new(stream.take(1 << 20));
    let mut answer = |cmd: &str| -> Result<serde_json::Value, HostError> {
        writer
            .write_all(format!("{{\"execute\":\"{cmd}\"}}\n").as_bytes())
            .map_err(|e| err(format!("cannot write: {e}")))?;
        loop {
            let mut line = String::new();
            if reader
                .read_line(&mut line)
                .map_err(|e| err(format!("no answer to {cmd}: {e}")))?
                == 0
            {
                return Err(err(format!("closed before answering {cmd}")));
            }
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| err(format!("not QMP ({e})")))?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(err(format!("{cmd} failed: {e}")));
            }
        }
    };
    answer("qmp_capabilities")?;
    let cpus = answer("query-cpus-fast")?;
    parse_query_cpus_fast(&cpus)
        .ok_or_else(|| err("query-cpus-fast gave no cpu-index/thread-id list".into()))
}

/// `query-cpus-fast`'s return value: `[{"cpu-index":0,"thread-id":1234,...},...]`.
pub fn parse_query_cpus_fast(v: &serde_json::Value) -> Option<Vec<VcpuThread>> {
    let list = v.as_array()?;
    let out: Option<Vec<VcpuThread>> = list
        .iter()
        .map(|c| {
            Some(VcpuThread {
                vcpu: u32::try_from(c.get("cpu-index")?.as_u64()?).ok()?,
                tid: i32::try_from(c.get("thread-id")?.as_i64()?).ok()?,
            })
        })
        .collect();
    out.filter(|l| !l.is_empty())
}

/// The vCPU threads of QEMU process `pid` by their names (`CPU N/KVM`,
/// `CPU N/TCG`: QEMU names them with `-name ...,debug-threads=on`).
pub fn vcpus_by_name(
    kernel: &dyn Kernel,
    proc_root: &Path,
    pid: i32,
) -> Result<Vec<VcpuThread>, HostError> {
    let proc = Procfs::at(kernel, proc_root);
    let tasks = match proc.threads(pid) {
        Ok(Some(tids)) => tids,
        Ok(None) => {
            let dir = proc.process_dir(pid).join("task");
            return Err(HostError::Vcpus(format!(
                "{}: no such process; is {pid} QEMU's pid?",
                dir.display()
            )));
        }
        Err(e) => return Err(HostError::Vcpus(format!("{e}; is {pid} QEMU's pid?"))),
    };
    let mut out: Vec<VcpuThread> = tasks
        .into_iter()
        .filter_map(|tid| {
            let comm = proc.thread_file(pid, tid, "comm").ok()??;
            Some(VcpuThread {
                vcpu: vcpu_of_thread_name(comm.trim_end_matches('\n'))?,
                tid,
            })
        })
        .collect();
    out.sort_by_key(|v| v.vcpu);
    if out.is_empty() {
        return Err(HostError::Vcpus(format!(
            "process {pid} has no thread named 'CPU N/KVM' or 'CPU N/TCG': start QEMU with -name NAME,debug-threads=on, or pass --qmp SOCKET"
        )));
    }
    Ok(out)
}

/// The events traced, where the kernel has them.
pub const EVENTS: &[&str] = &[
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_migrate_task",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "kvm/kvm_exit",
    "kvm/kvm_entry",
];

/// How to trace.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// tracefs mount point.
    pub tracefs: PathBuf,
    /// Where the cpushield processes that use tracefs agree on who unmounts
    /// it (`cpushield_trace::mount`): the shield's state directory.
    pub state_dir: PathBuf,
    /// Ring buffer per traced CPU, KiB.
    pub buffer_kb: u32,
    /// How often the reader drains the pipes.
    pub poll: Duration,
    /// The timeline's bounds.
    pub limits: Limits,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            // tracefs' usual mount point, an option the user may change; not a fact read.
            tracefs: PathBuf::from("/sys/kernel/tracing"),
            state_dir: cpushield_kernel::shield_state_dir(),
            buffer_kb: 4096,
            poll: Duration::from_millis(20),
            limits: Limits::default(),
        }
    }
}

/// Each traced CPU's trace pipe.
type Pipes = Vec<(usize, Box<dyn TracePipe>)>;

/// A trace of the vCPU threads' host CPUs feeding a [`Timeline`]. Dropping
/// it stops tracing, restores every tracefs setting and removes its instance.
pub struct VcpuWatch {
    timeline: Arc<Mutex<Timeline>>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    kernel: Arc<dyn Kernel>,
    guard: SettingsGuard,
    instance: Option<PathBuf>,
    /// This watch's use of tracefs, ended last: the last user unmounts.
    mount: Option<TracefsUse>,
    vcpus: u32,
    retention_ns: u64,
    now: fn() -> u64,
    answered: std::sync::atomic::AtomicU64,
    /// The traced host CPUs.
    pub cpus: CpuSet,
    /// The events enabled.
    pub events: Vec<String>,
}

impl VcpuWatch {
    /// Traces `cpus` (the host CPUs the threads may run on) for `threads`.
    /// `now` is the host's CLOCK_MONOTONIC (the trace clock `mono` is the same).
    pub fn start(
        kernel: Arc<dyn Kernel>,
        threads: &[VcpuThread],
        cpus: &CpuSet,
        opts: WatchOptions,
        now: fn() -> u64,
    ) -> Result<VcpuWatch, HostError> {
        if threads.is_empty() || cpus.is_empty() {
            return Err(HostError::Vcpus("no vCPU thread to watch".into()));
        }
        let k = kernel.as_ref();
        let root = &opts.tracefs;
        let mount =
            TracefsUse::acquire(kernel.clone(), root, &opts.state_dir).map_err(HostError::Trace)?;
        if !k.exists(&root.join("instances")) {
            // Dropping the use unmounts what it mounted.
            drop(mount);
            return Err(HostError::Trace(format!(
                "{}: no tracefs instances there: mount tracefs (mount -t tracefs nodev {}) and run as root",
                root.display(),
                root.display()
            )));
        }
        remove_stale_instances(k, root);
        let inst = root
            .join("instances")
            .join(format!("cpushield-vm-{}", std::process::id()));
        match k.mkdir(&inst) {
            Ok(()) => {}
            // Our own pid's: left by an earlier watch of this process that
            // could not remove it; taken over, and removed at the end.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(HostError::Trace(format!(
                    "{}: cannot create the trace instance: {e}",
                    inst.display()
                )))
            }
        }
        let mut w = VcpuWatch {
            timeline: Arc::new(Mutex::new(Timeline::with_limits(
                threads.iter().map(|t| (t.tid, t.vcpu)),
                opts.limits,
            ))),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            kernel: kernel.clone(),
            guard: SettingsGuard::new(kernel.clone()),
            instance: Some(inst.clone()),
            mount: Some(mount),
            vcpus: threads.iter().map(|t| t.vcpu + 1).max().unwrap_or(0),
            retention_ns: opts.limits.retention_ns,
            now,
            answered: Default::default(),
            cpus: cpus.clone(),
            events: Vec::new(),
        };
        let pipes = w.configure(&inst, &opts).map_err(HostError::Trace)?;
        w.timeline.lock().expect("timeline").started(now());
        let (tl, stop, poll) = (w.timeline.clone(), w.stop.clone(), opts.poll);
        let reader = std::thread::Builder::new()
            .name("cpushield-vm-trace".into())
            .spawn(move || read_loop(pipes, tl, stop, poll, now))
            .map_err(|e| HostError::Trace(format!("cannot start the trace reader: {e}")))?;
        w.reader = Some(reader);
        Ok(w)
    }

    fn configure(&mut self, dir: &Path, opts: &WatchOptions) -> Result<Pipes, String> {
        let k = self.kernel.clone();
        let k = k.as_ref();
        let g = &mut self.guard;
        let p = |f: &str| dir.join(f);
        g.set(&p("tracing_on"), "0").map_err(|e| e.to_string())?;
        // trace clock mono is CLOCK_MONOTONIC: the times the guest's ping
        // sees and the trace's are one clock.
        g.set(&p("trace_clock"), "mono")
            .map_err(|e| e.to_string())?;
        let possible = cpushield_kernel::possible_cpus(k).unwrap_or_else(|_| self.cpus.clone());
        let width = possible.last().map(|c| c + 1).unwrap_or(1);
        g.set(&p("tracing_cpumask"), &self.cpus.to_mask_padded(width))
            .map_err(|e| e.to_string())?;
        for cpu in self.cpus.iter() {
            g.set(
                &p(&format!("per_cpu/cpu{cpu}/buffer_size_kb")),
                &opts.buffer_kb.to_string(),
            )
            .map_err(|e| e.to_string())?;
        }
        for ev in EVENTS {
            let f = dir.join("events").join(ev).join("enable");
            if k.exists(&f) {
                g.set(&f, "1").map_err(|e| e.to_string())?;
                self.events.push(ev.to_string());
            }
        }
        if !self.events.iter().any(|e| e == "sched/sched_switch") {
            return Err(format!(
                "{}: no sched_switch event: this kernel's tracefs lacks the scheduler events",
                dir.join("events").display()
            ));
        }
        let mut pipes = Vec::new();
        for cpu in self.cpus.iter() {
            let pipe = k
                .open_trace_pipe(&p(&format!("per_cpu/cpu{cpu}/trace_pipe")))
                .map_err(|e| e.to_string())?;
            pipes.push((cpu, pipe));
        }
        g.set(&p("tracing_on"), "1").map_err(|e| e.to_string())?;
        Ok(pipes)
    }

    /// The timeline (shared with the reader).
    pub fn timeline(&self) -> Arc<Mutex<Timeline>> {
        self.timeline.clone()
    }

    /// The answer to one request line from the guest.
    pub fn answer(&self, line: &[u8]) -> protocol::Reply {
        let facts = HostFacts {
            vcpus: self.vcpus,
            retention_ns: self.retention_ns,
            now_ns: (self.now)(),
        };
        let tl = self.timeline.lock().expect("timeline");
        self.answered.fetch_add(1, Ordering::Relaxed);
        protocol::answer(line, &tl, facts)
    }

    /// Requests answered so far (refusals too).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Stops tracing and restores tracefs; errors while restoring, one line each.
    pub fn finish(mut self) -> Vec<String> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let mut errors = self.guard.restore();
        if let Some(dir) = self.instance.take() {
            errors.extend(cpushield_trace::remove_instance(self.kernel.as_ref(), &dir));
        }
        if let Some(mut mount) = self.mount.take() {
            errors.extend(mount.release());
        }
        errors
    }
}

impl Drop for VcpuWatch {
    fn drop(&mut self) {
        let _ = self.stop_now();
    }
}

/// Instances of host sides that died without cleaning up (SIGKILL).
fn remove_stale_instances(k: &dyn Kernel, root: &Path) {
    let dir = root.join("instances");
    for name in k.read_dir(&dir).unwrap_or_default() {
        let Some(pid) = name
            .strip_prefix("cpushield-vm-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !k.exists(&Procfs::new(k).process_dir(pid as i32)) {
            let _ = k.rmdir(&dir.join(&name));
        }
    }
}

/// Drains every pipe each `poll`, feeds the events in time order.
fn read_loop(
    mut pipes: Pipes,
    timeline: Arc<Mutex<Timeline>>,
    stop: Arc<AtomicBool>,
    poll: Duration,
    now: fn() -> u64,
) {
    let mut carry: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    let mut buf = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let drained_at = now();
        let mut events = Vec::new();
        for (cpu, pipe) in pipes.iter_mut() {
            buf.clear();
            if pipe.read_available(&mut buf).is_err() {
                continue;
            }
            let c = carry.entry(*cpu).or_default();
            c.extend_from_slice(&buf);
            let Some(end) = c.iter().rposition(|b| *b == b'\n') else {
                continue;
            };
            let text = String::from_utf8_lossy(&c[..end]).into_owned();
            c.drain(..=end);
            events.extend(text.lines().filter_map(parse_line));
        }
        // Across CPUs: a wakeup on one and the switch on another, in order.
        events.sort_by_key(|e| e.ts_ns);
        {
            let mut tl = timeline.lock().expect("timeline");
            for e in &events {
                tl.feed(e);
            }
            tl.read_up_to(drained_at);
        }
        std::thread::sleep(poll);
    }
}

/// Serves the guest on QEMU's chardev socket (`-chardev
/// socket,id=ID,path=PATH,server=on,wait=off` with a `virtserialport` on
/// it) until `stop`: connects (again, whenever QEMU drops the connection),
/// answers each request line, nothing else. Returns the requests answered.
pub fn serve(watch: &VcpuWatch, channel: &Path, stop: &AtomicBool) -> u64 {
    let mut answered = 0;
    while !stop.load(Ordering::SeqCst) {
        let Ok(stream) = UnixStream::connect(channel) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        answered += serve_one(watch, stream, stop);
    }
    answered
}

/// One connection: lines of at most [`MAX_REQUEST_BYTES`]; a longer one is
/// skipped to its newline and refused once.
fn serve_one(watch: &VcpuWatch, stream: UnixStream, stop: &AtomicBool) -> u64 {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut out) = stream.try_clone() else {
        return 0;
    };
    let mut input = stream;
    let mut line: Vec<u8> = Vec::with_capacity(MAX_REQUEST_BYTES + 1);
    let mut overlong = false;
    let mut chunk = [0u8; 4096];
    let mut answered = 0;
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let n = match input.read(&mut chunk) {
            Ok(0) => return answered,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // A guest that sent half a line and went quiet: drop it.
                if !line.is_empty() && idle_since.elapsed() > Duration::from_secs(5) {
                    line.clear();
                }
                continue;
            }
            Err(_) => return answered,
        };
        idle_since = Instant::now();
        for &b in &chunk[..n] {
            if b == b'\n' {
                let reply = if overlong {
                    protocol::Reply::error(
                        None,
                        format!("request longer than {MAX_REQUEST_BYTES} bytes refused"),
                    )
                } else {
                    watch.answer(&line)
                };
                overlong = false;
                line.clear();
                if out.write_all(reply.to_line().as_bytes()).is_err() {
                    return answered;
                }
                answered += 1;
            } else if !overlong {
                line.push(b);
                if line.len() > MAX_REQUEST_BYTES {
                    overlong = true;
                    line.clear();
                }
            }
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn query_cpus_fast_gives_each_vcpu_its_thread() {
        let v = serde_json::json!([
            {"cpu-index": 0, "thread-id": 1201, "qom-path": "/machine/unattached/device[0]", "target": "x86_64"},
            {"cpu-index": 1, "thread-id": 1202, "qom-path": "/machine/unattached/device[1]", "target": "x86_64"}
        ]);
        assert_eq!(
            parse_query_cpus_fast(&v).unwrap(),
            [
                VcpuThread { vcpu: 0, tid: 1201 },
                VcpuThread { vcpu: 1, tid: 1202 }
            ]
        );
        assert!(parse_query_cpus_fast(&serde_json::json!([])).is_none());
        assert!(parse_query_cpus_fast(&serde_json::json!([{"cpu-index": 0}])).is_none());
    }

    #[test]
    fn vcpu_threads_are_found_by_qemus_names() {
        let k = FakeKernel::new();
        k.set_file("/proc/500/task/500/comm", "qemu-system-x86\n");
        k.set_file("/proc/500/task/501/comm", "CPU 0/TCG\n");
        k.set_file("/proc/500/task/502/comm", "CPU 1/TCG\n");
        k.set_file("/proc/500/task/503/comm", "worker\n");
        let found = vcpus_by_name(&k, Path::new("/proc"), 500).unwrap();
        assert_eq!(
            found,
            [
                VcpuThread { vcpu: 0, tid: 501 },
                VcpuThread { vcpu: 1, tid: 502 }
            ]
        );
        k.set_file("/proc/600/task/600/comm", "qemu-system-x86\n");
        assert!(vcpus_by_name(&k, Path::new("/proc"), 600)
            .unwrap_err()
            .to_string()
            .contains("debug-threads=on"));
    }

    fn now() -> u64 {
        50_000_000
    }

    fn fake_tracefs(k: &FakeKernel) {
        let root = "/sys/kernel/tracing";
        k.set_file(
            "/proc/self/mounts",
            "tracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0\n",
        );
        k.set_file("/sys/devices/system/cpu/possible", "0-1\n");
        k.set_file("/sys/devices/system/cpu/online", "0-1\n");
        k.mkdir(Path::new(&format!("{root}/instances"))).unwrap();
        let inst = format!("{root}/instances/cpushield-vm-{}", std::process::id());
        for f in [
            "tracing_on",
            "trace_clock",
            "tracing_cpumask",
            "per_cpu/cpu1/buffer_size_kb",
            "per_cpu/cpu1/trace_pipe",
        ] {
            k.set_file(format!("{inst}/{f}"), "0\n");
        }
        k.set_file(format!("{inst}/per_cpu/cpu1/trace_pipe"), "");
        for ev in ["sched/sched_switch", "sched/sched_wakeup"] {
            k.set_file(format!("{inst}/events/{ev}/enable"), "0\n");
        }
    }

    #[test]
    fn the_watch_answers_the_guest_from_the_trace_and_restores_tracefs() {
        let k = Arc::new(FakeKernel::new());
        fake_tracefs(&k);
        let inst = format!(
            "/sys/kernel/tracing/instances/cpushield-vm-{}",
            std::process::id()
        );
        let threads = [
            VcpuThread { vcpu: 0, tid: 100 },
            VcpuThread { vcpu: 1, tid: 101 },
        ];
        let opts = WatchOptions {
            poll: Duration::from_millis(1),
            ..WatchOptions::default()
        };
        let w = VcpuWatch::start(
            k.clone(),
            &threads,
            &CpuSet::parse_list("1").unwrap(),
            opts,
            now,
        )
        .unwrap();
        assert_eq!(w.events, ["sched/sched_switch", "sched/sched_wakeup"]);
        assert_eq!(
            k.read(Path::new(&format!("{inst}/tracing_on")))
                .unwrap()
                .trim(),
            "1"
        );
        k.set_file(format!("{inst}/per_cpu/cpu1/trace_pipe"),
            "   CPU 1/TCG-101 [001] d..2. 1.000000: sched_switch: prev_comm=CPU 1/TCG prev_pid=101 prev_prio=120 prev_state=R+ ==> next_comm=stress-ng next_pid=4711 next_prio=49\n\
                stress-ng-4711 [001] d..2. 1.015100: sched_switch: prev_comm=stress-ng prev_pid=4711 prev_prio=49 prev_state=S ==> next_comm=CPU 1/TCG next_pid=101 next_prio=120\n",
        );
        std::thread::sleep(Duration::from_millis(100));
        // The guest's clock 1 s behind the host's.
        let r = w.answer(br#"{"v":1,"id":3,"op":"gaps","vcpu":1,"from_ns":0,"to_ns":1000000000,"offset_ns":1000000000,"err_ns":20000}"#);
        assert!(r.ok, "{:?}", r.error);
        let gaps = r.gaps.unwrap();
        assert_eq!(gaps.len(), 1);
        assert_eq!((gaps[0].from_ns, gaps[0].to_ns), (0, 15_100_000));
        assert_eq!(gaps[0].by[0].pid, Some(4711));
        assert_eq!(r.err_ns, Some(20_000));
        let errors = w.finish();
        // Every setting back as it was (the fake's rmdir refuses a directory
        // with files in it, which tracefs's does not).
        for f in [
            "tracing_on",
            "trace_clock",
            "events/sched/sched_switch/enable",
        ] {
            assert_eq!(k.file(format!("{inst}/{f}")).unwrap().trim(), "0", "{f}");
        }
        assert!(
            errors
                .iter()
                .all(|e| e.contains("could not remove the trace instance")),
            "{errors:?}"
        );
    }

    #[test]
    fn a_hostile_request_changes_nothing_on_the_host() {
        let k = Arc::new(FakeKernel::new());
        fake_tracefs(&k);
        let threads = [VcpuThread { vcpu: 0, tid: 100 }];
        let w = VcpuWatch::start(
            k.clone(),
            &threads,
            &CpuSet::parse_list("1").unwrap(),
            WatchOptions::default(),
            now,
        )
        .unwrap();
        let before = (k.files(), k.affinities(), k.scheds());
        for line in [
            &br#"{"v":1,"id":1,"op":"gaps","vcpu":7,"from_ns":0,"to_ns":1,"offset_ns":0,"err_ns":0}"#[..],
            br#"{"v":1,"id":1,"op":"write","path":"/proc/sys/kernel/panic","value":"1"}"#,
            b"\xff\xfe",
            &[b'{'; 5000],
        ] {
            assert!(!w.answer(line).ok);
        }
        assert!((k.files(), k.affinities(), k.scheds()) == before);
    }
}
