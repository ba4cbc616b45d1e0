//! Support for the property/fuzz suite of cpushield's parsers (`tests/parsers.rs`):
//! seed corpora of real kernel files (`crates/fuzz/corpus/<target>/` at the repository
//! root), proptest strategies that mutate them byte by byte, and the case count.
//!
//! Nightly Rust (cargo-fuzz) is not used: proptest runs on stable, inside
//! `cargo test`. `CPUSHIELD_FUZZ_CASES` raises the number of cases per target
//! (scripts/test.sh runs the suite once more with a larger count).

use proptest::prelude::*;
use proptest::test_runner::Config;
use std::path::PathBuf;

/// Cases per property when `CPUSHIELD_FUZZ_CASES` is not set.
pub const DEFAULT_CASES: u32 = 2000;

/// The number of cases per property: `CPUSHIELD_FUZZ_CASES` or [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    std::env::var("CPUSHIELD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_CASES)
}

/// The proptest configuration of the suite: [`cases`] cases, no regression
/// files written into the source tree (a failure prints its minimal input).
pub fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The directory of a target's seed corpus.
pub fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// Every seed file of a target. Panics when there is none: a target without
/// seeds would only be fuzzed with random bytes, which seldom reach deep.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// Byte strings that parsers find hard: numbers at the edges of their types,
/// separators, signs, brackets, NUL and invalid UTF-8.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"4294967295",
    b"4294967296",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"8191",
    b"8192",
    b",",
    b"-",
    b":",
    b"/",
    b" ",
    b"\n",
    b"\t",
    b"0x",
    b"[",
    b"]",
    b" [3] ",
    b"=",
    b"\"",
    b"--",
    b"ff,",
    b",00000000",
    b"\0",
    b"\xff\xfe",
    b"\xc3",
    b"\xe2\x82",
];

/// Numbers at the edges of the integer types, to replace a whole number with.
const EDGE_NUMBERS: &[&[u8]] = &[
    b"0",
    b"1",
    b"255",
    b"256",
    b"65535",
    b"2147483647",
    b"2147483648",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-1",
    b"-9223372036854775808",
];

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    /// Replace the byte at a position.
    Set(usize, u8),
    /// Insert a byte.
    Insert(usize, u8),
    /// Insert one of [`TOKENS`].
    Token(usize, usize),
    /// Remove up to `len` bytes.
    Remove(usize, usize),
    /// Copy a chunk to another position.
    Duplicate(usize, usize, usize),
    /// Cut the input here.
    Truncate(usize),
    /// Replace the whole number (run of digits) at or after a position with
    /// one of [`EDGE_NUMBERS`].
    Number(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Set(p, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Insert(p, b)),
        1 => (any::<usize>(), 0..TOKENS.len()).prop_map(|(p, t)| Edit::Token(p, t)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(p, n)| Edit::Remove(p, n)),
        1 => (any::<usize>(), 1usize..32, any::<usize>()).prop_map(|(p, n, q)| Edit::Duplicate(
            p, n, q
        )),
        1 => any::<usize>().prop_map(Edit::Truncate),
        3 => (any::<usize>(), 0..EDGE_NUMBERS.len()).prop_map(|(p, n)| Edit::Number(p, n)),
    ]
}

fn apply(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = data.len();
        let at = |p: usize| if len == 0 { 0 } else { p % (len + 1) };
        match *e {
            Edit::Set(p, b) if len > 0 => data[p % len] = b,
            Edit::Set(..) => {}
            Edit::Insert(p, b) => data.insert(at(p), b),
            Edit::Token(p, t) => {
                let p = at(p);
                data.splice(p..p, TOKENS[t].iter().copied());
            }
            Edit::Remove(p, n) => {
                let p = at(p);
                let end = (p + n).min(len);
                data.drain(p..end);
            }
            Edit::Duplicate(p, n, q) => {
                let p = at(p);
                let chunk: Vec<u8> = data[p..(p + n).min(len)].to_vec();
                let q = at(q);
                data.splice(q..q, chunk);
            }
            Edit::Truncate(p) => data.truncate(at(p)),
            Edit::Number(p, n) => {
                let p = at(p);
                if let Some(start) = data[p..].iter().position(u8::is_ascii_digit) {
                    let start = p + start;
                    let end = data[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(data.len(), |e| start + e);
                    data.splice(start..end, EDGE_NUMBERS[n].iter().copied());
                }
            }
        }
    }
    data
}

/// A seed of `target` with 1 to 8 random edits.
pub fn mutated(target: &str) -> BoxedStrategy<Vec<u8>> {
    let seeds = seeds(target);
    (0..seeds.len(), prop::collection::vec(edit(), 1..8))
        .prop_map(move |(i, edits)| apply(seeds[i].clone(), &edits))
        .boxed()
}

/// Inputs for a parser of `target`: mostly mutated seeds, some unchanged
/// seeds, some fully random bytes.
pub fn input(target: &str) -> BoxedStrategy<Vec<u8>> {
    let seeds = seeds(target);
    prop_oneof![
        6 => mutated(target),
        1 => (0..seeds.len()).prop_map(move |i| seeds[i].clone()),
        2 => prop::collection::vec(any::<u8>(), 0..256),
    ]
    .boxed()
}

/// [`input`] as text the way the kernel door reads it (invalid UTF-8 replaced).
pub fn text(target: &str) -> BoxedStrategy<String> {
    input(target)
        .prop_map(|b| String::from_utf8_lossy(&b).into_owned())
        .boxed()
}

/// Each line of a seed file as its own seed (for line parsers), mutated.
pub fn mutated_line(target: &str) -> BoxedStrategy<String> {
    let lines: Vec<Vec<u8>> = seeds(target)
        .iter()
        .flat_map(|s| s.split(|b| *b == b'\n').map(<[u8]>::to_vec))
        .filter(|l| !l.is_empty())
        .collect();
    assert!(!lines.is_empty(), "no lines in the {target} corpus");
    (0..lines.len(), prop::collection::vec(edit(), 0..6))
        .prop_map(move |(i, edits)| {
            String::from_utf8_lossy(&apply(lines[i].clone(), &edits)).into_owned()
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_edit_replaces_a_whole_number() {
        let out = apply(b"cpu0 12 34".to_vec(), &[Edit::Number(5, 11)]);
        assert_eq!(out, b"cpu0 18446744073709551615 34");
    }

    #[test]
    fn edits_stay_in_bounds_on_empty_and_short_inputs() {
        let all = [
            Edit::Set(7, 1),
            Edit::Insert(99, 2),
            Edit::Token(3, 0),
            Edit::Remove(5, 9),
            Edit::Duplicate(1, 30, 8),
            Edit::Truncate(2),
            Edit::Number(0, 11),
        ];
        for start in [Vec::new(), b"a".to_vec(), b"0-3,8".to_vec()] {
            let _ = apply(start, &all);
        }
    }
}
