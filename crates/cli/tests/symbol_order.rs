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
    // One group of names per build ("# build: cargo build ..." lines): each
    // build unifies dependency features differently, so its names differ.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in std::fs::read_to_string(order).unwrap().lines() {
        if let Some(build) = line.strip_prefix("# build: ") {
            groups.push((build.to_owned(), Vec::new()));
        } else if !line.is_empty() && !line.starts_with('#') {
            let (_, names) = groups
                .last_mut()
                .expect("a name before the first \"# build:\" line");
            names.push(line.to_owned());
        }
    }
    assert!(!groups.is_empty(), "{order}: no \"# build:\" group");
    // The symbol table's names are NUL-terminated strings in .strtab.
    let bytes = std::fs::read(bin).unwrap();
    let strings: HashSet<&[u8]> = bytes.split(|&b| b == 0).collect();
    let missing = |names: &[String]| {
        names
            .iter()
            .filter(|n| !strings.contains(n.as_bytes()))
            .count()
    };
    let best = groups
        .iter()
        .map(|(build, names)| (build, names.len(), missing(names)))
        .min_by_key(|&(_, listed, missing)| missing * 1000 / listed.max(1))
        .unwrap();
    let (build, listed, missing) = best;
    assert!(listed > 100, "{order}: only {listed} names for `{build}`");
    assert!(
        missing * 20 <= listed,
        "{missing} of the {listed} functions {order} lists for `{build}` (its closest build) are \
         not in {bin}: a new toolchain, dependency or release profile renamed them; regenerate \
         the file with scripts/gen-symbol-order.sh (root, valgrind) and commit it"
    );
}
