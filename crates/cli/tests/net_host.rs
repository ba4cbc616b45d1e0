//! `cpushield measure net` end to end on this machine: loopback UDP and TCP
//! ping-pong gives timed round trips for every size; `--veth` makes its two
//! network namespaces for the run and removes them when it ends (also on
//! SIGINT); `--listen` serves a `--peer` client; bad input exits 1 first.
//! Both ends run on CPU 1 (CPU 0 belongs to the machine), SCHED_OTHER, for
//! fractions of a second. Run under /tmp/cpushield-hosttest.lock.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cpushield(args: &[&str]) -> Output {
    Command::new(support::bin())
        .args(args)
        .output()
        .expect("run cpushield")
}

/// Runs `measure net` with `args` and the JSON on stdout; returns the report.
fn net_json(args: &[&str]) -> Value {
    let mut all = vec!["measure", "net", "--cpus", "1,1", "--json", "-"];
    all.extend_from_slice(args);
    let out = cpushield(&all);
    assert!(
        out.status.success(),
        "measure net {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// (protocol, size sent, timed round trips) of every result.
fn results(report: &Value) -> Vec<(String, u64, u64)> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["protocol"].as_str().unwrap().to_string(),
                r["size_bytes"].as_u64().unwrap(),
                r["rtt"]["summary"]["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Our namespaces (`cpushield-net-<pid>-c/s`) that exist now.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("cpushield-net-{pid}-")))
        .map(str::to_string)
        .collect()
}

fn can_use_netns() -> Result<(), String> {
    support::can_shield_here(&["ip"])
}

/// Kills the child on drop if a test fails before it ends.
struct Reap(Option<Child>);

impl Reap {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child still held")
    }

    /// Waits for the child to end and collects its output.
    fn output(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn sigint(child: &Child) {
    // SAFETY: kill on the PID of our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
}

#[test]
fn loopback_udp_and_tcp_ping_pong_time_round_trips_for_every_size() {
    let report = net_json(&[
        "--sizes",
        "64,1K,64K",
        "--duration",
        "100ms",
        "--warmup",
        "10",
    ]);
    assert_eq!(report["kind"], "net");
    assert_eq!(report["settings"]["link"]["kind"], "loopback");
    let got = results(&report);
    let shape: Vec<(&str, u64)> = got.iter().map(|(p, s, _)| (p.as_str(), *s)).collect();
    assert_eq!(
        shape,
        [
            ("udp", 64),
            ("udp", 1024),
            ("udp", 65507),
            ("tcp", 64),
            ("tcp", 1024),
            ("tcp", 65536)
        ],
        "UDP sends 64K as the largest datagram"
    );
    for (p, s, n) in &got {
        assert!(*n > 10, "{p} {s}: only {n} round trips in 100 ms");
    }
    for r in report["results"].as_array().unwrap() {
        let p50 = r["rtt"]["summary"]["percentiles"]["p50_ns"]
            .as_u64()
            .unwrap();
        assert!(p50 > 0, "{r}");
        assert!(r["bytes_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn the_text_report_has_one_line_per_protocol_and_size() {
    let out = cpushield(&[
        "measure",
        "net",
        "--cpus",
        "1",
        "--sizes",
        "64,4K",
        "--protocols",
        "tcp",
        "--duration",
        "50ms",
        "--warmup",
        "10",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("tcp ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains(" 64 ") && lines[1].contains(" 4K "),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("udp ")), "{text}");
}

#[test]
fn veth_run_creates_its_namespaces_and_removes_them_at_the_end() {
    if let Err(why) = can_use_netns() {
        return support::skip(&why);
    }
    let child = Command::new(support::bin())
        .args([
            "measure",
            "net",
            "--cpus",
            "1,1",
            "--veth",
            "--sizes",
            "64,64K",
            "--duration",
            "300ms",
            "--warmup",
            "10",
            "--json",
            "-",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut child = Reap(Some(child));
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && child.child().try_wait().unwrap().is_none() {
        let now = namespaces_of(pid);
        if now.len() == 2 {
            seen = now;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    seen.sort();
    assert_eq!(
        seen,
        [
            format!("cpushield-net-{pid}-c"),
            format!("cpushield-net-{pid}-s")
        ],
        "both namespaces exist while it runs"
    );
    assert!(namespaces_of(pid).is_empty(), "namespaces left behind");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["settings"]["link"]["kind"], "veth");
    for (p, s, n) in results(&report) {
        assert!(n > 0, "{p} {s}: no round trip over the veth pair");
    }
}

#[test]
fn sigint_ends_a_veth_run_with_what_was_measured_and_removes_the_namespaces() {
    if let Err(why) = can_use_netns() {
        return support::skip(&why);
    }
    let child = Command::new(support::bin())
        .args([
            "measure",
            "net",
            "--cpus",
            "1,1",
            "--veth",
            "--sizes",
            "64",
            "--protocols",
            "udp",
            "--duration",
            "30s",
            "--warmup",
            "10",
            "--json",
            "-",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut child = Reap(Some(child));
    let deadline = Instant::now() + Duration::from_secs(20);
    while namespaces_of(pid).len() < 2 {
        assert!(Instant::now() < deadline, "namespaces never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    sigint(child.child());
    let out = child.output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        namespaces_of(pid).is_empty(),
        "namespaces left after SIGINT"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["run"]["interrupted"], true);
    assert!(results(&report)[0].2 > 0);
}

#[test]
fn a_listening_server_answers_a_peer_client_and_reports_what_it_echoed() {
    let port = 47000 + (std::process::id() % 1000) as u16;
    let server = Command::new(support::bin())
        .args([
            "measure",
            "net",
            "--cpus",
            "1",
            "--listen",
            &port.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut server = Reap(Some(server));
    let mut ready = String::new();
    BufReader::new(server.child().stderr.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert!(ready.contains("echoing UDP on 0.0.0.0:"), "{ready}");
    let peer = format!("127.0.0.1:{port}");
    let report = net_json(&[
        "--peer",
        &peer,
        "--sizes",
        "64,16K",
        "--duration",
        "100ms",
        "--warmup",
        "10",
    ]);
    assert_eq!(report["settings"]["link"]["kind"], "peer");
    assert_eq!(report["settings"]["server_cpu"], Value::Null);
    for (p, s, n) in results(&report) {
        assert!(n > 0, "{p} {s}: the peer did not answer");
    }
    sigint(server.child());
    let out = server.output();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("served "), "{text}");
    assert!(!text.starts_with("served 0 UDP"), "{text}");
}

#[test]
fn bad_net_arguments_exit_1_with_the_remedy_before_anything_runs() {
    for (args, expect) in [
        (vec!["--cpus", "1", "--sizes", "4"], "8 B to 65536 B"),
        (vec!["--cpus", "1,2,3"], "e.g. --cpus 1,1"),
        (vec!["--cpus", "1", "--peer", "nohost"], "HOST:PORT"),
        (vec!["--cpus", "1,4096"], "not online"),
        (vec!["--cpus", "1", "--duration", "0s"], "--duration"),
        (
            vec!["--cpus", "1", "--peer", "127.0.0.1:0"],
            "--peer 127.0.0.1:0: port 0 reaches no server: give the port `cpushield measure net --listen PORT`",
        ),
    ] {
        let mut all = vec!["measure", "net"];
        all.extend(args.iter());
        let out = cpushield(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[test]
fn a_peer_that_does_not_answer_is_named_once_with_the_listen_side_to_start() {
    // A free port nothing listens on: every datagram is refused.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let peer = format!("127.0.0.1:{port}");
    let out = cpushield(&[
        "measure",
        "net",
        "--cpus",
        "1",
        "--peer",
        &peer,
        "--duration",
        "1s",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(
        err.matches("refused").count(),
        1,
        "the cause printed twice: {err}"
    );
    assert!(
        err.contains(&format!(
            "with peer {peer}: Connection refused (os error 111): start `cpushield measure net --listen {port}` on that machine"
        )),
        "{err}"
    );
}
