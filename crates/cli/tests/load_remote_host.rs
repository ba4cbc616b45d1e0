//! `cpushield load ionet|ttcp --peer / --listen`: the network workloads
//! flooding another machine, or counting its flood, tried here with both ends
//! on this machine over loopback (the guest test `nic-irq` floods a real
//! virtio NIC). Loads run on CPU 1 for a second or two.

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
