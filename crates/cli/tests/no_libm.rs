//! The binary does not load glibc's libm.so.6: the C math functions it calls
//! are defined in crates/cli/src/libm_shim.rs (loading libm.so.6 costs every
//! command ~300-500 KiB of resident memory).

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(target_feature = "crt-static")
))]
fn the_binary_does_not_need_libm() {
    let bin = env!("CARGO_BIN_EXE_cpushield");
    let bytes = std::fs::read(bin).unwrap();
    // A DT_NEEDED entry names its library in .dynstr; the binary's own
    // text never spells this name.
    assert!(
        contains(&bytes, b"libc.so.6"),
        "{bin}: no libc.so.6 in it, so this check cannot see a DT_NEEDED name"
    );
    assert!(
        !contains(&bytes, b"libm.so.6"),
        "{bin} needs libm.so.6: a libm function it calls is missing from \
         crates/cli/src/libm_shim.rs (`nm -D --undefined-only {bin}` lists it; add it there)"
    );
}
