//! Link options for the `cpushield` binary.
//!
//! `-z pack-relative-relocs` stores the binary's relative relocations as
//! DT_RELR bitmaps (glibc 2.36+) instead of one 24-byte RELA entry each: the
//! dynamic loader reads a few KiB instead of ~340 KiB at every start, which
//! is that much less resident memory for every command (the latency probe's
//! peak RSS is compared with cyclictest's, docs/PERFORMANCE.md). The static
//! build (crt-static, the guest tests) links without it.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let static_crt = features.split(',').any(|f| f == "crt-static");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && !static_crt {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
