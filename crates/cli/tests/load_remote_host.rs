//! `cpushield load ionet|ttcp --peer / --listen`: the network workloads
//! flooding another machine, or counting its flood, tried here with both ends
//! on this machine over loopback (the guest test `nic-irq` floods a real
//! virtio NIC). Loads run on CPU 1 for a second or two.

mod support;

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_cpushield");

/// The ops column of the JSON report's only workload.
fn ops(out: &Output) -> u64 {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    v["workloads"][0]["ops"]
        .as_u64()
        .unwrap_or_else(|| panic!("no ops in {v}"))
}

/// Runs a receiver with `--listen PORT` and a sender with `--peer
/// 127.0.0.1:PORT` for `workload`; returns (received, sent) ops.
fn flood(workload: &str, port: u16) -> (u64, u64) {
    let port = port.to_string();
    let receiver = Command::new(BIN)
        .args([
            "load",
            workload,
            "--cpus",
            "1",
            "--duration",
            "3s",
            "--listen",
            &port,
        ])
        .args(["--json", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn receiver");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let peer = format!("127.0.0.1:{port}");
    let sender = Command::new(BIN)
        .args([
            "load",
            workload,
            "--cpus",
            "1",
            "--duration",
            "1s",
            "--peer",
            &peer,
        ])
        .args(["--json", "-"])
        .output()
        .expect("run sender");
    let received = receiver.wait_with_output().expect("receiver ends");
    (ops(&received), ops(&sender))
}

#[test]
fn ionet_listen_counts_the_datagrams_a_peer_floods_it_with() {
    let (received, sent) = flood("ionet", 46000 + (std::process::id() % 1000) as u16);
    assert!(sent > 1000, "sent {sent}");
    assert!(received > 0, "received nothing of {sent}");
    assert!(received <= sent, "received {received} of {sent}");
}

#[test]
fn ttcp_listen_receives_every_buffer_a_peer_sends() {
    let (received, sent) = flood("ttcp", 45000 + (std::process::id() % 1000) as u16);
    assert!(sent > 0 && received > 0, "sent {sent}, received {received}");
    // A buffer the sender wrote may still be in flight when it is stopped.
    assert!(received <= sent + 16, "received {received} of {sent}");
}

#[test]
fn peer_and_listen_refuse_workloads_without_a_network() {
    for args in [
        vec!["load", "compute", "--peer", "192.0.2.7"],
        vec!["load", "--listen", "5001"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("name ionet (netflood) or ttcp"),
            "{args:?}: {err}"
        );
    }
}

/// A network namespace with a veth pair to it (10.214.0.1 here, 10.214.0.2
/// there), removed on drop.
struct PeerNamespace {
    name: String,
}

impl PeerNamespace {
    fn create() -> Result<PeerNamespace, String> {
        let pid = std::process::id();
        let ns = PeerNamespace {
            name: format!("cpushield-loadtest-{pid}"),
        };
        let (here, there) = (format!("cpslt{pid}a"), format!("cpslt{pid}b"));
        let n = ns.name.as_str();
        for args in [
            vec!["netns", "add", n],
            vec![
                "link", "add", &here, "type", "veth", "peer", "name", &there, "netns", n,
            ],
            vec!["addr", "add", "10.214.0.1/30", "dev", &here],
            vec!["link", "set", &here, "up"],
            vec!["-n", n, "addr", "add", "10.214.0.2/30", "dev", &there],
            vec!["-n", n, "link", "set", &there, "up"],
        ] {
            let out = Command::new("ip")
                .args(&args)
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(ns)
    }

    /// The namespace's ICMP InEchos counter (/proc/net/snmp seen from inside).
    fn echo_requests_received(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "cat", "/proc/net/snmp"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut icmp = text.lines().filter(|l| l.starts_with("Icmp:"));
        let (names, values) = (icmp.next().unwrap(), icmp.next().unwrap());
        let at = names
            .split_whitespace()
            .position(|n| n == "InEchos")
            .unwrap();
        values.split_whitespace().nth(at).unwrap().parse().unwrap()
    }
}

impl Drop for PeerNamespace {
    fn drop(&mut self) {
        // Deleting the namespace deletes the pair.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

#[test]
fn ionet_peer_floods_a_non_loopback_peer_with_icmp_echo_requests_too() {
    if let Err(why) = support::can_shield_here(&["ip"]) {
        return support::skip(&why);
    }
    let ns = PeerNamespace::create().expect("make the peer namespace");
    let before = ns.echo_requests_received();
    let out = Command::new(BIN)
        .args(["load", "ionet", "--cpus", "1", "--duration", "1s"])
        .args(["--peer", "10.214.0.2", "--json", "-"])
        .output()
        .unwrap();
    let sent = ops(&out);
    let echoes = ns.echo_requests_received() - before;
    assert!(echoes > 100, "the peer got {echoes} echo requests");
    assert!(
        sent > echoes,
        "ops {sent} count the datagrams and the {echoes} echo requests"
    );
}
