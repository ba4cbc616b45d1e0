//! A set of CPU numbers, parsed from and printed to both formats the kernel uses:
//! the list format (`0-3,8`, as in `/sys/devices/system/cpu/online`) and the
//! comma-grouped hex mask (`ff,00000001`, as in `/proc/irq/*/smp_affinity`).
//!
//! Every piece of cpushield passes CPU sets around as [`CpuSet`], never as strings.
//!
//! Beside it, at the bottom of the workspace so that every crate that prints a
//! latency can use it: the one way a duration is written for people
//! ([`fmt_ns`]).

mod duration;
pub use duration::{fmt_ns, parse_duration_arg, MAX_DURATION};

use smallvec::SmallVec;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The highest CPU number accepted (the kernel's NR_CPUS upper bound is 8192).
pub const MAX_CPUS: usize = 8192;

/// Why a CPU list or mask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input was empty (or only whitespace).
    #[error("empty CPU list")]
    Empty,
    /// A token was neither a number, a range, nor hex digits.
    #[error("'{0}' is not a CPU number, range (2-5) or hex mask (0x8)")]
    BadToken(String),
    /// A range whose end is below its start.
    #[error("range '{0}' is backwards")]
    Backwards(String),
    /// A CPU number beyond [`MAX_CPUS`].
    #[error("CPU {0} is out of range (max {max})", max = MAX_CPUS - 1)]
    OutOfRange(usize),
}

/// The words a [`CpuSet`] holds without a heap allocation: 128 CPUs. A
/// shield keeps several sets per task (affinity, requested, set), so on a
/// machine of up to 128 CPUs 50,000 tasks cost no allocation for them.
type Words = SmallVec<[u64; 2]>;

/// A set of CPU numbers. Ordered, so printing is deterministic.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    bits: Words,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set holding exactly the given CPUs.
    pub fn from_cpus<I: IntoIterator<Item = usize>>(cpus: I) -> Self {
        let mut set = Self::new();
        for cpu in cpus {
            set.insert(cpu);
        }
        set
    }

    /// A set from 64-bit words, CPU `64 * i + b` being bit `b` of word `i`
    /// (the layout of a kernel `cpumask`, as sched_getaffinity fills it).
    pub fn from_words(words: &[u64]) -> Self {
        let mut set = Self {
            bits: Words::from_slice(words),
        };
        set.trim();
        set
    }

    /// A set of the CPUs `0..n`.
    pub fn first_n(n: usize) -> Self {
        Self::from_cpus(0..n)
    }

    /// Parses the kernel's list format (Documentation/admin-guide/kernel-parameters,
    /// "cpu lists"): `0-3,8`, `1`, `0-15:2/4` (in each group of 4 CPUs from 0 to 15,
    /// the first 2), plus cpushield's stride shorthand `0-7:2`; an empty string
    /// is the empty set (as cgroup files print it).
    pub fn parse_list(text: &str) -> Result<Self, ParseError> {
        let text = text.trim();
        let mut set = Self::new();
        if text.is_empty() {
            return Ok(set);
        }
        for token in text.split(',') {
            let token = token.trim();
            // (used, group): `u/g` as the kernel; `s` alone is a stride (1 of every s).
            let (range, used, group) = match token.split_once(':') {
                Some((r, spec)) => match spec.split_once('/') {
                    Some((u, g)) => {
                        let (u, g) = (parse_num(u, token)?, parse_num(g, token)?);
                        if g == 0 || u > g {
                            return Err(ParseError::BadToken(token.to_string()));
                        }
                        (r, u, g)
                    }
                    None => (r, 1, parse_num(spec, token)?.max(1)),
                },
                None => (token, 1, 1),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_num(a, token)?, parse_num(b, token)?),
                None => {
                    let n = parse_num(range, token)?;
                    (n, n)
                }
            };
            if hi < lo {
                return Err(ParseError::Backwards(token.to_string()));
            }
            if hi >= MAX_CPUS {
                return Err(ParseError::OutOfRange(hi));
            }
            if used == group {
                // A plain range: whole words at once (a task's affinity of
                // every CPU is 512 inserts otherwise).
                set.insert_range(lo, hi);
                continue;
            }
            for base in (lo..=hi).step_by(group) {
                for cpu in base..(base + used).min(hi + 1) {
                    set.insert(cpu);
                }
            }
        }
        Ok(set)
    }

    /// Parses the kernel's hex mask format: `ff,00000001` (32-bit groups of at
    /// most 8 hex digits, most significant first; the first may be short, as in
    /// `1,00000000` = CPU 32), with or without a `0x` prefix. Without commas the
    /// whole string is one hex number. `0` is the empty set.
    pub fn parse_mask(text: &str) -> Result<Self, ParseError> {
        let text = text.trim();
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        if digits.is_empty() {
            return Err(ParseError::Empty);
        }
        let groups: Vec<&str> = digits.split(',').collect();
        let mut set = Self::new();
        // When the input has commas each group is 32 bits; without commas the whole
        // string is one hex number.
        let width = if groups.len() > 1 {
            32
        } else {
            4 * digits.len()
        };
        for (index, group) in groups.iter().rev().enumerate() {
            if group.is_empty()
                || (groups.len() > 1 && group.len() > 8)
                || !group.chars().all(|c| c.is_ascii_hexdigit())
            {
                return Err(ParseError::BadToken(text.to_string()));
            }
            for (nibble_index, c) in group.bytes().rev().enumerate() {
                let value = (c as char).to_digit(16).expect("checked hex digit");
                if value == 0 {
                    continue;
                }
                let first = index.saturating_mul(width).saturating_add(nibble_index * 4);
                if first.saturating_add(3) < MAX_CPUS {
                    // A nibble at a time: a kernel mask of 512 CPUs is 512
                    // bits, and IRQ masks and task affinities are read by the
                    // thousand.
                    set.insert_bits(first, u64::from(value));
                    continue;
                }
                for bit in 0..4 {
                    if value & (1 << bit) != 0 {
                        return Err(ParseError::OutOfRange(first.saturating_add(bit)));
                    }
                }
            }
        }
        Ok(set)
    }

    /// Parses what a user typed: a hex mask when it starts with `0x`, contains
    /// hex letters, or is comma groups of exactly 8 hex digits after a first
    /// group of 1 to 8 (the kernel's own mask print, e.g. `1,00000000`); the
    /// list format otherwise. An empty input is an error here (a user never
    /// means "no CPUs").
    pub fn parse_user(text: &str) -> Result<Self, ParseError> {
        Self::parse_user_reading(text).map(|(set, _)| set)
    }

    /// [`CpuSet::parse_user`], also telling which reading was taken.
    pub fn parse_user_reading(text: &str) -> Result<(Self, Reading), ParseError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(ParseError::Empty);
        }
        let reading = user_reading(t);
        let set = match reading {
            Reading::List => Self::parse_list(t)?,
            Reading::PrefixedMask | Reading::BareMask => Self::parse_mask(t)?,
        };
        Ok((set, reading))
    }

    /// What a user typed as CPUs for an option, read by [`CpuSet::parse_user`]
    /// against the `online` CPUs (`None`: unknown): refused, in one line
    /// naming the forms that work, when negative, unreadable or naming no
    /// CPU, and when a mask typed without `0x` (`abc`, `1,00000000`) names
    /// CPUs that are not online (with the reading that was taken).
    pub fn parse_user_for(text: &str, online: Option<&CpuSet>) -> Result<Self, String> {
        if text.trim_start().starts_with('-') {
            return Err(format!(
                "'{text}' is negative: CPU numbers start at 0; use a list like 1,3-4 or a mask like 0x8"
            ));
        }
        let (set, reading) = CpuSet::parse_user_reading(text)
            .map_err(|e| format!("{e}; use a list like 1,3-4 or a mask like 0x8"))?;
        if set.is_empty() {
            let t = text.trim();
            let read = match reading {
                Reading::List => format!("read '{t}' as a CPU list, which names no CPU"),
                Reading::PrefixedMask => format!("read '{t}' as a hex mask with no bit set"),
                Reading::BareMask => format!("read '{t}' as the hex mask 0x{t}, with no bit set"),
            };
            return Err(format!(
                "{read}: name at least one CPU, with a list like 1,3-4 or a mask like 0x8"
            ));
        }
        if reading == Reading::BareMask {
            if let Some(online) = online {
                let missing = set.difference(online);
                if !missing.is_empty() {
                    let why = reading.explain(text, &set).unwrap_or_default();
                    return Err(format!(
                        "CPU(s) {missing} not online (online: {online}): {why}"
                    ));
                }
            }
        }
        Ok(set)
    }

    /// A CPU set typed as a command-line option's value, where the online
    /// CPUs are not known: [`CpuSet::parse_user_for`] without them. The
    /// options the library crates declare take this parser; the `cpushield`
    /// binary reads every CPU set option against the online CPUs instead.
    pub fn parse_arg(text: &str) -> Result<Self, String> {
        Self::parse_user_for(text, None)
    }

    /// Adds a CPU.
    pub fn insert(&mut self, cpu: usize) {
        let word = cpu / 64;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (cpu % 64);
    }

    /// Adds the CPUs `first + i` for each bit `i` set in `nibble` (at most
    /// four bits, all within one word: `first` is a multiple of 4).
    fn insert_bits(&mut self, first: usize, nibble: u64) {
        let word = first / 64;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= nibble << (first % 64);
    }

    /// Adds the CPUs `lo` to `hi` (inclusive), a word at a time.
    fn insert_range(&mut self, lo: usize, hi: usize) {
        if self.bits.len() <= hi / 64 {
            self.bits.resize(hi / 64 + 1, 0);
        }
        for word in lo / 64..=hi / 64 {
            let from = if word == lo / 64 { lo % 64 } else { 0 };
            let to = if word == hi / 64 { hi % 64 } else { 63 };
            // Bits from..=to of the word.
            let mask = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.bits[word] |= mask;
        }
    }

    /// Removes a CPU.
    pub fn remove(&mut self, cpu: usize) {
        if let Some(w) = self.bits.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
        }
        self.trim();
    }

    /// Whether the CPU is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.bits
            .get(cpu / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().flat_map(|(i, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let b = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    i * 64 + b
                })
            })
        })
    }

    /// The lowest CPU, if any.
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }

    /// The highest CPU, if any.
    pub fn last(&self) -> Option<usize> {
        self.iter().last()
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &Self) -> Self {
        let mut out = Self {
            bits: self
                .bits
                .iter()
                .zip(&other.bits)
                .map(|(a, b)| a & b)
                .collect(),
        };
        out.trim();
        out
    }

    /// CPUs in either set.
    pub fn union(&self, other: &Self) -> Self {
        let len = self.bits.len().max(other.bits.len());
        let mut out = Self {
            bits: (0..len)
                .map(|i| self.bits.get(i).unwrap_or(&0) | other.bits.get(i).unwrap_or(&0))
                .collect(),
        };
        out.trim();
        out
    }

    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let mut out = Self {
            bits: self
                .bits
                .iter()
                .enumerate()
                .map(|(i, a)| a & !other.bits.get(i).unwrap_or(&0))
                .collect(),
        };
        out.trim();
        out
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        // Word by word, without building the difference (planners ask this
        // once per task).
        self.bits
            .iter()
            .enumerate()
            .all(|(i, a)| a & !other.bits.get(i).unwrap_or(&0) == 0)
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &Self) -> bool {
        self.bits.iter().zip(&other.bits).any(|(a, b)| a & b != 0)
    }

    /// The list format: `0-3,8`; empty string for the empty set.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        self.write_list(&mut out)
            .expect("writing to a String cannot fail");
        out
    }

    /// Writes the list format (see [`CpuSet::to_list`]) without building it
    /// first: runs of CPUs as `start-end`, found a word at a time (a set of
    /// 512 CPUs is 8 words, not 512 bits).
    fn write_list(&self, out: &mut impl fmt::Write) -> fmt::Result {
        let mut first = true;
        let mut at = 0;
        while let Some(start) = self.next_bit(at, true) {
            let end = self.next_bit(start, false).unwrap_or(self.bits.len() * 64) - 1;
            at = end + 1;
            if !first {
                out.write_char(',')?;
            }
            first = false;
            if start == end {
                write!(out, "{start}")?;
            } else {
                write!(out, "{start}-{end}")?;
            }
        }
        Ok(())
    }

    /// The first CPU from `from` on that is in the set (`set`) or not, within
    /// the set's words.
    fn next_bit(&self, from: usize, set: bool) -> Option<usize> {
        (from / 64..self.bits.len()).find_map(|w| {
            let word = if set { self.bits[w] } else { !self.bits[w] };
            let word = if w == from / 64 {
                word & (u64::MAX << (from % 64))
            } else {
                word
            };
            (word != 0).then(|| w * 64 + word.trailing_zeros() as usize)
        })
    }

    /// The kernel's hex mask format with 32-bit groups: `ff,00000001`; `0` when empty.
    /// `width_cpus` pads the mask to the number of groups the kernel would print for
    /// that many possible CPUs (pass `nr_cpu_ids`), so output is byte-identical to
    /// what `/proc/irq/*/smp_affinity` shows.
    pub fn to_mask_padded(&self, width_cpus: usize) -> String {
        let highest = self.last().map(|c| c + 1).unwrap_or(0);
        let cpus = highest.max(width_cpus).max(1);
        let groups = cpus.div_ceil(32);
        let mut out = Vec::with_capacity(groups);
        for g in (0..groups).rev() {
            let word = self.bits.get(g / 2).copied().unwrap_or(0);
            let group = if g % 2 == 0 {
                word as u32
            } else {
                (word >> 32) as u32
            };
            out.push(group);
        }
        let mut text: Vec<String> = Vec::with_capacity(groups);
        for (i, group) in out.iter().enumerate() {
            if i == 0 {
                // The kernel prints the first group with only as many digits as
                // the CPU count needs.
                let first_bits = cpus - (groups - 1) * 32;
                let digits = first_bits.div_ceil(4);
                text.push(format!("{group:0digits$x}"));
            } else {
                text.push(format!("{group:08x}"));
            }
        }
        text.join(",")
    }

    /// The shortest hex mask: `0x8` style without prefix, grouped by 32 bits.
    pub fn to_mask(&self) -> String {
        let highest = self.last().map(|c| c + 1).unwrap_or(1);
        let groups = highest.div_ceil(32);
        let mut parts = Vec::new();
        for g in (0..groups).rev() {
            let word = self.bits.get(g / 2).copied().unwrap_or(0);
            let group = if g % 2 == 0 {
                word as u32
            } else {
                (word >> 32) as u32
            };
            if parts.is_empty() {
                parts.push(format!("{group:x}"));
            } else {
                parts.push(format!("{group:08x}"));
            }
        }
        parts.join(",")
    }

    fn trim(&mut self) {
        while self.bits.last() == Some(&0) {
            self.bits.pop();
        }
    }
}

/// How [`CpuSet::parse_user`] read a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// As a CPU list (`0-3,8`).
    List,
    /// As a hex mask with a `0x` prefix: unambiguous.
    PrefixedMask,
    /// As a hex mask without a prefix (hex letters such as `abc`, or kernel
    /// comma groups such as `1,00000000`): a user may have meant something else.
    BareMask,
}

impl Reading {
    /// For a bare mask, the sentence that says how `text` was read, e.g.
    /// "read 'abc' as the hex mask 0xabc = CPUs 0-1,3,5,7,9,11; write 0xabc or a list";
    /// `None` for the unambiguous readings.
    pub fn explain(&self, text: &str, set: &CpuSet) -> Option<String> {
        if *self != Reading::BareMask {
            return None;
        }
        let t = text.trim();
        let cpus = if set.is_empty() {
            "no CPU".to_string()
        } else {
            format!("CPUs {set}")
        };
        Some(format!(
            "read '{t}' as the hex mask 0x{t} = {cpus}; write 0x{t} or a list"
        ))
    }
}

fn user_reading(t: &str) -> Reading {
    if t.starts_with("0x") || t.starts_with("0X") {
        return Reading::PrefixedMask;
    }
    let hex_letters = t
        .chars()
        .any(|c| c.is_ascii_hexdigit() && !c.is_ascii_digit());
    let groups: Vec<&str> = t.split(',').collect();
    let kernel_groups = groups.len() > 1
        && (1..=8).contains(&groups[0].len())
        && groups[1..].iter().all(|g| g.len() == 8)
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()));
    if hex_letters || kernel_groups {
        Reading::BareMask
    } else {
        Reading::List
    }
}

/// Brosky's affinity rule ("Shielded CPUs"): a task's effective CPUs are its requested CPUs
/// minus the shielded ones, unless that would leave nothing, in which case the
/// request stands (a task that asks only for shielded CPUs runs there).
pub fn shielded_affinity(requested: &CpuSet, online: &CpuSet, shielded: &CpuSet) -> CpuSet {
    let wanted = requested.intersection(online);
    let wanted = if wanted.is_empty() {
        online.clone()
    } else {
        wanted
    };
    let outside = wanted.difference(shielded);
    if outside.is_empty() {
        wanted
    } else {
        outside
    }
}

/// Groups CPUs by what is said of each: every distinct `key` with the set
/// of CPUs that have it, in the order of each key's first CPU. A report of a
/// machine of 512 CPUs then prints one line per group (`CPU 2-255: idle`),
/// its CPUs as a range list, instead of one per CPU.
pub fn group_cpus<K: Eq + std::hash::Hash + Clone>(
    items: impl IntoIterator<Item = (usize, K)>,
) -> Vec<(CpuSet, K)> {
    let mut groups: Vec<(CpuSet, K)> = Vec::new();
    let mut index: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for (cpu, key) in items {
        match index.get(&key) {
            Some(&i) => groups[i].0.insert(cpu),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((CpuSet::from_cpus([cpu]), key));
            }
        }
    }
    groups
}

fn parse_num(s: &str, token: &str) -> Result<usize, ParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::BadToken(token.to_string()));
    }
    // Digits only: a failure is a number too large for usize, far past MAX_CPUS.
    s.parse::<usize>()
        .map_err(|_| ParseError::OutOfRange(usize::MAX))
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_list(f)
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list())
    }
}

impl FromStr for CpuSet {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_user(s)
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        Self::from_cpus(iter)
    }
}

impl From<&CpuSet> for BTreeSet<usize> {
    fn from(set: &CpuSet) -> Self {
        set.iter().collect()
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written straight into the output, no String per set (a saved
        // state holds two per task).
        s.collect_str(self)
    }
}

/// Parses the list format from the text the deserializer holds, without
/// copying it into a String first.
struct ListVisitor;

impl serde::de::Visitor<'_> for ListVisitor {
    type Value = CpuSet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a CPU list such as 0-3,8")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<CpuSet, E> {
        CpuSet::parse_list(text).map_err(E::custom)
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_of_a_set_names_each_run_once_across_word_edges() {
        for cpus in [
            vec![],
            vec![0],
            vec![63, 64],
            vec![0, 2, 4],
            (0..128).collect(),
            (1..=130).chain([200, 255]).collect::<Vec<_>>(),
            (60..70).chain(127..129).collect(),
        ] {
            let set = CpuSet::from_cpus(cpus.iter().copied());
            // The list, built one CPU at a time.
            let mut want: Vec<String> = Vec::new();
            let mut i = 0;
            while i < cpus.len() {
                let mut j = i;
                while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                    j += 1;
                }
                want.push(if i == j {
                    cpus[i].to_string()
                } else {
                    format!("{}-{}", cpus[i], cpus[j])
                });
                i = j + 1;
            }
            assert_eq!(set.to_list(), want.join(","), "{cpus:?}");
        }
    }

    #[test]
    fn a_parsed_range_holds_exactly_its_cpus_across_word_edges() {
        for (lo, hi) in [
            (0, 0),
            (0, 63),
            (63, 64),
            (1, 130),
            (64, 127),
            (5, 511),
            (200, 200),
        ] {
            let parsed = CpuSet::parse_list(&format!("{lo}-{hi}")).unwrap();
            assert_eq!(parsed, CpuSet::from_cpus(lo..=hi), "{lo}-{hi}");
        }
        assert_eq!(
            CpuSet::parse_list("0-3,62-66,100").unwrap(),
            CpuSet::from_cpus([0, 1, 2, 3, 62, 63, 64, 65, 66, 100])
        );
    }

    #[test]
    fn a_negative_cpu_names_the_problem() {
        assert!(CpuSet::parse_user_for("-1", None)
            .unwrap_err()
            .contains("negative"));
    }

    #[test]
    fn a_bare_mask_naming_offline_cpus_says_how_it_was_read() {
        let online = CpuSet::first_n(2);
        let err = CpuSet::parse_user_for("abc", Some(&online)).unwrap_err();
        assert!(
            err.contains(
                "read 'abc' as the hex mask 0xabc = CPUs 2-5,7,9,11; write 0xabc or a list"
            ),
            "{err}"
        );
        let err = CpuSet::parse_user_for("1,00000000", Some(&online)).unwrap_err();
        assert!(err.contains("= CPUs 32;"), "{err}");
        // Unambiguous inputs pass through to the command's own check.
        let ok = |t: &str| CpuSet::parse_user_for(t, Some(&online)).unwrap().to_list();
        assert_eq!(ok("0x3"), "0-1");
        assert_eq!(ok("5"), "5");
        assert_eq!(ok("3"), "3");
    }

    #[test]
    fn cpus_with_the_same_key_group_into_one_range_list_in_first_cpu_order() {
        let keys = [
            (0, "busy"),
            (1, "idle"),
            (2, "idle"),
            (3, "idle"),
            (4, "busy"),
            (5, "idle"),
        ];
        let groups = group_cpus(keys);
        let shown: Vec<(String, &str)> = groups.iter().map(|(c, k)| (c.to_list(), *k)).collect();
        assert_eq!(
            shown,
            vec![("0,4".to_string(), "busy"), ("1-3,5".to_string(), "idle")]
        );
        let many = group_cpus((0..512).map(|cpu| (cpu, cpu < 2)));
        assert_eq!(many.len(), 2);
        assert_eq!(many[1].0.to_list(), "2-511");
    }

    #[test]
    fn a_set_of_up_to_128_cpus_is_held_without_a_heap_allocation() {
        let mut set: CpuSet = [0, 127].into_iter().collect();
        assert!(!set.bits.spilled());
        assert_eq!(
            std::mem::size_of::<CpuSet>(),
            std::mem::size_of::<Vec<u64>>()
        );
        set.insert(128);
        assert!(set.bits.spilled());
        assert_eq!(set.to_list(), "0,127-128");
    }

    #[test]
    fn from_words_reads_a_kernel_cpumask_and_equals_the_same_set_built_by_cpu() {
        let mut words = [0u64; 128];
        words[0] = 0b1011;
        words[1] = 1 << 63;
        let set = CpuSet::from_words(&words);
        assert_eq!(set, CpuSet::from_cpus([0, 1, 3, 127]));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 1, 3, 127]);
        assert_eq!(CpuSet::from_words(&[0; 4]), CpuSet::new());
    }

    #[test]
    fn list_format_round_trips_ranges_and_singles() {
        let set = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(set.to_list(), "0-3,8,10-11");
        assert_eq!(set.len(), 7);
    }

    #[test]
    fn list_format_accepts_strides_and_whitespace() {
        let set = CpuSet::parse_list(" 0-7:2 \n").unwrap();
        assert_eq!(set.to_list(), "0,2,4,6");
    }

    #[test]
    fn mask_format_parses_grouped_and_prefixed_masks() {
        assert_eq!(CpuSet::parse_mask("0x8").unwrap().to_list(), "3");
        assert_eq!(CpuSet::parse_mask("f,00000000").unwrap().to_list(), "32-35");
        assert_eq!(CpuSet::parse_mask("00000003").unwrap().to_list(), "0-1");
        assert!(CpuSet::parse_mask("0").unwrap().is_empty());
    }

    #[test]
    fn padded_mask_matches_kernel_output() {
        // A 2-CPU machine prints "3"; a 4-CPU one "f"; 40 CPUs "ff,ffffffff".
        assert_eq!(CpuSet::first_n(2).to_mask_padded(2), "3");
        assert_eq!(CpuSet::parse_list("3").unwrap().to_mask_padded(4), "8");
        assert_eq!(CpuSet::first_n(40).to_mask_padded(40), "ff,ffffffff");
        assert_eq!(CpuSet::new().to_mask_padded(8), "00");
        assert_eq!(
            CpuSet::parse_list("0").unwrap().to_mask_padded(64),
            "00000000,00000001"
        );
    }

    #[test]
    fn user_input_picks_the_right_format() {
        assert_eq!(CpuSet::parse_user("0x8").unwrap().to_list(), "3");
        assert_eq!(CpuSet::parse_user("f,00000000").unwrap().to_list(), "32-35");
        assert_eq!(CpuSet::parse_user("ff").unwrap().to_list(), "0-7");
        assert_eq!(CpuSet::parse_user("10").unwrap().to_list(), "10");
        assert_eq!(CpuSet::parse_user("2-3").unwrap().to_list(), "2-3");
    }

    #[test]
    fn malformed_input_is_rejected() {
        assert_eq!(CpuSet::parse_user(""), Err(ParseError::Empty));
        assert!(matches!(
            CpuSet::parse_user("3-1"),
            Err(ParseError::Backwards(_))
        ));
        assert!(matches!(
            CpuSet::parse_user("a-b"),
            Err(ParseError::BadToken(_))
        ));
        assert!(matches!(
            CpuSet::parse_user("0xg"),
            Err(ParseError::BadToken(_))
        ));
        assert!(matches!(
            CpuSet::parse_user("99999"),
            Err(ParseError::OutOfRange(_))
        ));
    }

    #[test]
    fn a_mask_bit_past_the_last_cpu_is_out_of_range_naming_the_first_such_cpu() {
        // 8192 = group 256's bit 0; CPU 8191 (group 255's top bit) is accepted.
        let mut groups = vec!["00000000"; 257];
        groups[0] = "3";
        assert_eq!(
            CpuSet::parse_mask(&groups.join(",")),
            Err(ParseError::OutOfRange(8192))
        );
        groups[0] = "2";
        assert_eq!(
            CpuSet::parse_mask(&groups.join(",")),
            Err(ParseError::OutOfRange(8193))
        );
        let top = CpuSet::parse_mask(&format!("80000000{}", ",00000000".repeat(255))).unwrap();
        assert_eq!(top, CpuSet::from_cpus([8191]));
        assert_eq!(
            CpuSet::parse_mask("f0,0000000f").unwrap(),
            CpuSet::from_cpus([0, 1, 2, 3, 36, 37, 38, 39])
        );
    }

    #[test]
    fn kernel_used_group_ranges_are_read_as_the_kernel_does() {
        // kernel-parameters.txt: "100-2550:2/25" = 100,101,125,126,...
        let set = CpuSet::parse_list("0-15:2/4").unwrap();
        assert_eq!(set.to_list(), "0-1,4-5,8-9,12-13");
        assert_eq!(
            CpuSet::parse_list("0-9:3/4").unwrap().to_list(),
            "0-2,4-6,8-9"
        );
        assert_eq!(CpuSet::parse_list("2-3:0/4").unwrap(), CpuSet::new());
        assert!(matches!(
            CpuSet::parse_list("0-7:5/4"),
            Err(ParseError::BadToken(_))
        ));
        assert!(matches!(
            CpuSet::parse_list("0-7:1/0"),
            Err(ParseError::BadToken(_))
        ));
    }

    #[test]
    fn a_kernel_mask_with_a_short_first_group_is_cpu_32_not_a_list() {
        let (set, reading) = CpuSet::parse_user_reading("1,00000000").unwrap();
        assert_eq!(set.to_list(), "32");
        assert_eq!(reading, Reading::BareMask);
        assert_eq!(
            CpuSet::parse_user("ff,0000000f").unwrap().to_list(),
            "0-3,32-39"
        );
        // A real list with commas stays a list.
        assert_eq!(CpuSet::parse_user("1,3").unwrap().to_list(), "1,3");
        // Groups after the first longer than 8 digits are not a kernel mask.
        assert!(CpuSet::parse_mask("1,123456789").is_err());
    }

    #[test]
    fn a_bare_mask_reading_is_explained_and_a_prefixed_one_is_not() {
        let (set, reading) = CpuSet::parse_user_reading("abc").unwrap();
        assert_eq!(set.to_list(), "2-5,7,9,11");
        assert_eq!(
            reading.explain("abc", &set).unwrap(),
            "read 'abc' as the hex mask 0xabc = CPUs 2-5,7,9,11; write 0xabc or a list"
        );
        let (set, reading) = CpuSet::parse_user_reading("0xabc").unwrap();
        assert_eq!(reading, Reading::PrefixedMask);
        assert!(reading.explain("0xabc", &set).is_none());
        let (set, reading) = CpuSet::parse_user_reading("10").unwrap();
        assert_eq!(reading, Reading::List);
        assert!(reading.explain("10", &set).is_none());
    }

    #[test]
    fn signs_and_huge_numbers_are_refused_in_lists() {
        assert!(CpuSet::parse_list("+3").is_err());
        assert!(CpuSet::parse_list("-1").is_err());
        assert!(matches!(
            CpuSet::parse_list("99999999999999999999999"),
            Err(ParseError::OutOfRange(_))
        ));
    }

    #[test]
    fn set_operations_behave_like_bit_masks() {
        let a = CpuSet::parse_list("0-3").unwrap();
        let b = CpuSet::parse_list("2-5").unwrap();
        assert_eq!(a.intersection(&b).to_list(), "2-3");
        assert_eq!(a.union(&b).to_list(), "0-5");
        assert_eq!(a.difference(&b).to_list(), "0-1");
        assert!(CpuSet::parse_list("1").unwrap().is_subset(&a));
        assert_eq!(a.difference(&a), CpuSet::new());
    }

    #[test]
    fn broskys_rule_removes_shielded_cpus_unless_nothing_would_remain() {
        let online = CpuSet::first_n(4);
        let shield = CpuSet::parse_list("3").unwrap();
        let rule = |r: &str| shielded_affinity(&CpuSet::parse_list(r).unwrap(), &online, &shield);
        assert_eq!(rule("0-3").to_list(), "0-2");
        assert_eq!(rule("3").to_list(), "3");
        assert_eq!(rule("2-3").to_list(), "2");
        assert_eq!(rule("1").to_list(), "1");
    }

    proptest::proptest! {
        #[test]
        fn subset_and_intersects_agree_with_difference_and_intersection_across_words(
            b in proptest::collection::btree_set(0usize..200, 0..120),
            keep in proptest::collection::vec(proptest::bool::ANY, 200),
            extra in proptest::option::of(0usize..200),
        ) {
            // `a` is a part of `b` (a subset), plus at times one CPU that may not be in it.
            let a: CpuSet = b
                .iter()
                .copied()
                .filter(|c| keep[*c])
                .chain(extra)
                .collect();
            let b: CpuSet = b.into_iter().collect();
            proptest::prop_assert_eq!(a.is_subset(&b), a.difference(&b).is_empty());
            proptest::prop_assert_eq!(a.intersects(&b), !a.intersection(&b).is_empty());
        }
    }

    #[test]
    fn broskys_rule_holds_on_many_random_masks() {
        // A small deterministic generator keeps the test reproducible.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..10_000 {
            let ncpus = (next() % 64 + 2) as usize;
            let online = CpuSet::first_n(ncpus);
            let requested: CpuSet = (0..ncpus).filter(|_| next() % 3 == 0).collect();
            let shield: CpuSet = (0..ncpus).filter(|_| next() % 4 == 0).collect();
            let eff = shielded_affinity(&requested, &online, &shield);
            let wanted = if requested.is_empty() {
                online.clone()
            } else {
                requested.clone()
            };
            assert!(!eff.is_empty());
            assert!(eff.is_subset(&wanted));
            if wanted.difference(&shield).is_empty() {
                assert_eq!(eff, wanted, "only-shielded requests stay");
            } else {
                assert!(!eff.intersects(&shield), "never on a shield when avoidable");
                assert_eq!(eff, wanted.difference(&shield));
            }
        }
    }

    #[test]
    fn mask_and_list_agree_on_random_sets() {
        let mut x = 88172645463325252u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let set: CpuSet = (0..128)
                .filter(|i| (x.rotate_left(*i as u32) & 1) == 1)
                .collect();
            assert_eq!(CpuSet::parse_mask(&set.to_mask_padded(128)).unwrap(), set);
            assert_eq!(CpuSet::parse_list(&set.to_list()).unwrap(), set);
        }
    }
}
