//! Link options for the `cpushield` binary: less resident memory for every
//! command (the latency probe's peak RSS is compared with cyclictest's,
//! docs/PERFORMANCE.md).
//!
//! - `-z pack-relative-relocs` stores the binary's relative relocations as
//!   DT_RELR bitmaps (glibc 2.36+) instead of one 24-byte RELA entry each:
//!   the dynamic loader reads a few KiB instead of ~340 KiB at every start.
//! - `--symbol-ordering-file=symbol-order.txt` (lld, the default linker of
//!   Rust 1.90+ on x86_64 Linux) puts the functions `measure latency` runs
//!   first in .text, next to each other: scattered, each costs 64 KiB (the
//!   kernel maps the pages around a faulting code page). The file is made by
//!   scripts/gen-symbol-order.sh; names it lists that the binary lacks are
//!   ignored (tests/probe_rss_host.rs fails when the probe's peak RSS is no
//!   longer within 1.5x cyclictest's, and names the script).
//!
//! The static build (crt-static, the guest tests) links as before; so does a
//! build whose RUSTFLAGS choose the linker.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if !linux_gnu || static_crt {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    let own_linker = var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    let order = format!("{}/symbol-order.txt", var("CARGO_MANIFEST_DIR"));
    let lld =
        var("TARGET") == "x86_64-unknown-linux-gnu" && !own_linker && rustc_minor() >= Some(90);
    if lld && std::path::Path::new(&order).exists() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// The minor version of the compiler building this crate (`rustc -V`:
/// "rustc 1.95.0 (...)"), or `None` if it cannot be read.
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-V").output().ok()?;
    let version = String::from_utf8(out.stdout).ok()?;
    version
        .split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
