//! `cpushield vm watch` on this machine as a VM's host: a QEMU whose one vCPU
//! runs guest code without end (a firmware of one `jmp $`), its vCPU thread
//! on host CPU 1, and a SCHED_FIFO task of the test that takes host CPU 1 from
//! it for 60 ms. The watch's node_exporter textfile charges that time to the
//! vCPU, as preempted, by a host task.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The value of the series that starts with `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn vm_watch_textfile_charges_a_host_task_that_took_a_vcpus_host_cpu_as_preempted_by_a_task() {
    if std::fs::read_to_string("/sys/devices/system/cpu/online").map_or(true, |o| o.trim() == "0") {
        support::skip("the host has no CPU 1");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The reset vector's instruction is `jmp $` (EB FE): the vCPU is always runnable.
    let mut firmware = vec![0u8; 64 * 1024];
    firmware[0xfff0] = 0xeb;
    firmware[0xfff1] = 0xfe;
    let bios = dir.path().join("spin.bin");
    std::fs::write(&bios, firmware).unwrap();
    let bios = bios.to_str().unwrap();
    let qemu = support::TestQemu::launch("cpushield-vm-test", 1, &["-m", "16", "-bios", bios]);
    let pid = qemu.pid();
    let vcpu = qemu.thread("CPU 0/TCG").unwrap().to_string();
    let pinned = Command::new("taskset")
        .args(["-pc", "1", &vcpu])
        .output()
        .unwrap();
    assert!(pinned.status.success(), "taskset: {pinned:?}");
    let textfile = dir.path().join("vm.prom");
    let mut watch = Command::new(support::bin())
        .args(["vm", "watch", "--pid", &pid.to_string(), "--duration", "4s"])
        .env("CPUSHIELD_STATE_DIR", dir.path().join("state"))
        .arg("--channel")
        .arg(dir.path().join("no-guest.sock"))
        .arg("--textfile")
        .arg(&textfile)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("watching vCPU 0 = thread"), "{first}");
    std::thread::sleep(Duration::from_millis(300));
    // The hog: a SCHED_FIFO shell loop on host CPU 1 (never CPU 0), killed
    // after 60 ms by a timeout that sleeps on CPU 0.
    let _ = Command::new("taskset")
        .args([
            "-c", "0", "timeout", "-s", "KILL", "0.06", "taskset", "-c", "1",
        ])
        .args(["chrt", "-f", "50", "sh", "-c", "while :; do :; done"])
        .status()
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let ended = watch.wait().unwrap();
    assert!(ended.success(), "vm watch: {ended:?}: {first}{rest}");
    let text = std::fs::read_to_string(&textfile).unwrap();
    let labels = "{vm=\"cpushield-vm-test\",vcpu=\"0\"";
    let preempted = value(
        &text,
        &format!("cpushield_vm_vcpu_held_off_seconds_total{labels},state=\"preempted\"}}"),
    );
    let by_task = value(
        &text,
        &format!("cpushield_vm_vcpu_held_off_by_seconds_total{labels},by=\"task\"}}"),
    );
    assert!(preempted >= 0.05, "preempted {preempted} s:\n{text}");
    assert!(by_task >= 0.05, "by a task {by_task} s:\n{text}");
    assert!(
        text.contains("# TYPE cpushield_vm_vcpu_held_off_seconds_total counter"),
        "{text}"
    );
}
