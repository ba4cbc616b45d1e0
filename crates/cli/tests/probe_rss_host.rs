//! The latency probe's peak resident memory stays within 1.5x cyclictest's
//! (issue 14), measured here side by side as bench/measure-vs-cyclictest.sh
//! does. The probe keeps its resident code small because the linker puts the
//! functions it runs first in .text (crates/cli/build.rs,
//! crates/cli/symbol-order.txt): when a toolchain, dependency or code change
//! renames enough of them, start-up touches ~2 MiB of scattered code again
//! and this test fails, naming the script that regenerates the list.

use std::process::Command;

mod support;
use support::{bin, skip};

/// Peak RSS in KiB of `cmd` (GNU time's %M), run on CPU 1 at SCHED_FIFO 95.
fn peak_rss_kib(cmd: &[&str]) -> u64 {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "peak-rss-kib %M"])
        .args(cmd)
        .output()
        .expect("run /usr/bin/time");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("peak-rss-kib ")?.trim().parse().ok())
        .expect("GNU time's peak RSS line")
}

#[test]
fn the_latency_probes_peak_rss_is_at_most_one_and_a_half_times_cyclictests() {
    if let Err(why) = support::can_shield_here(&["cyclictest", "/usr/bin/time"]) {
        skip(&why);
        return;
    }
    // Two runs each, the lower kept: a run's peak moves by ~0.3 MiB.
    let ours = (0..2)
        .map(|_| {
            peak_rss_kib(&[
                bin(),
                "measure",
                "latency",
                "--cpus",
                "1",
                "--interval",
                "1ms",
                "--priority",
                "95",
                "--duration",
                "1s",
            ])
        })
        .min()
        .unwrap();
    let cyclictest = (0..2)
        .map(|_| {
            peak_rss_kib(&[
                "cyclictest",
                "-m",
                "-p",
                "95",
                "-i",
                "1000",
                "-a",
                "1",
                "-t",
                "1",
                "-q",
                "-D",
                "1",
                "-h",
                "20000",
            ])
        })
        .min()
        .unwrap();
    eprintln!("peak RSS: measure latency {ours} KiB, cyclictest {cyclictest} KiB");
    assert!(
        ours * 2 <= cyclictest * 3,
        "measure latency peaked at {ours} KiB, cyclictest at {cyclictest} KiB: more than 1.5x. \
         If crates/cli/symbol-order.txt no longer names the functions the probe runs (a new \
         toolchain, dependency or code change renamed them), regenerate it with \
         scripts/gen-symbol-order.sh (root, valgrind) and commit it"
    );
}
