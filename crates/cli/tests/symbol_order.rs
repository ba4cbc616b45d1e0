//! crates/cli/symbol-order.txt still names the release binary's functions.
//!
//! The linker puts the functions listed there first in .text (crates/cli/build.rs),
//! which keeps `measure latency`'s resident code to a few hundred KiB. The
//! names carry hashes that a new Rust toolchain, a dependency update or a
//! change to the release profile renames; the linker then ignores them
//! silently and the binary's start-up touches ~2 MiB of scattered code again.

use std::collections::HashSet;

#[test]
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(target_feature = "crt-static")
))]
#[cfg_attr(
    debug_assertions,
    ignore = "the listed names are those of the release profile"
)]
fn the_symbol_order_file_names_functions_of_the_release_binary() {
    let bin = env!("CARGO_BIN_EXE_cpushield");
    let order = concat!(env!("CARGO_MANIFEST_DIR"), "/symbol-order.txt");
    let listed: Vec<String> = std::fs::read_to_string(order)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    assert!(listed.len() > 100, "{order}: only {} names", listed.len());
    // The symbol table's names are NUL-terminated strings in .strtab.
    let bytes = std::fs::read(bin).unwrap();
    let strings: HashSet<&[u8]> = bytes.split(|&b| b == 0).collect();
    let missing: Vec<&String> = listed
        .iter()
        .filter(|n| !strings.contains(n.as_bytes()))
        .collect();
    assert!(
        missing.len() * 10 <= listed.len(),
        "{} of the {} functions in {order} are not in {bin} (first: {}): a new toolchain, \
         dependency or release profile renamed them; regenerate the file with \
         scripts/gen-symbol-order.sh (root, valgrind) and commit it",
        missing.len(),
        listed.len(),
        missing[0]
    );
}
