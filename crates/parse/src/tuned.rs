//! tuned's files (tuned 2.x, the daemon RHEL and its rebuilds set up
//! isolation with): a profile's `tuned.conf`, a variables file such as
//! `/etc/tuned/cpu-partitioning-variables.conf`, `/etc/tuned/active_profile`
//! and `/etc/tuned/bootcmdline`.
//!
//! tuned reads `tuned.conf` and variables files with Python's `ConfigParser`
//! (`delimiters=('=')`, `inline_comment_prefixes=('#')`, `strict=False`), a
//! variables file as if under one section header. So, as there:
//! - a line whose first non-blank character is `#` or `;` is a comment;
//! - `#` after whitespace starts a comment inside a line;
//! - `key = value`, both trimmed; quotes are kept as part of the value;
//! - an indented line continues the value above it;
//! - a key given twice: the last one counts;
//! - in a variables file a line without `=` is a key with no value.

use cpushield_cpuset::CpuSet;

/// One `key = value` of a tuned file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The `[section]` it is in (empty before any header, as in a variables file).
    pub section: String,
    /// The key, as written (tuned keeps the case).
    pub key: String,
    /// The value, trimmed, continuation lines joined with a newline.
    pub value: String,
    /// 1-based line of the key.
    pub line: usize,
}

/// A parsed tuned file: its entries in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TunedFile {
    /// Every entry, in order (a key given twice appears twice).
    pub entries: Vec<Entry>,
}

impl TunedFile {
    /// The entry that counts for `key` in `section` (the last one).
    pub fn get(&self, section: &str, key: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.section == section && e.key == key)
    }

    /// The entries of `section`, in order.
    pub fn section<'a>(&'a self, section: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.section == section)
    }
}

/// A line of a tuned file that tuned itself would not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub problem: String,
}

/// Parses a profile's `tuned.conf` (sections required before keys, as tuned's
/// parser requires them).
pub fn parse_conf(text: &str) -> Result<TunedFile, LineError> {
    parse(text, false)
}

/// Parses a variables file (`/etc/tuned/cpu-partitioning-variables.conf`):
/// keys without a section header; a key without `=` has an empty value.
pub fn parse_variables(text: &str) -> Result<TunedFile, LineError> {
    parse(text, true)
}

fn strip_inline_comment(value: &str) -> &str {
    let bytes = value.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && i > 0 && bytes[i - 1].is_ascii_whitespace() {
            return &value[..i];
        }
    }
    value
}

fn parse(text: &str, headerless: bool) -> Result<TunedFile, LineError> {
    let mut file = TunedFile::default();
    let mut section: Option<String> = headerless.then(String::new);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let indented = raw.starts_with([' ', '\t']);
        if indented {
            if let Some(last) = file.entries.last_mut() {
                let more = strip_inline_comment(trimmed).trim();
                if !more.is_empty() {
                    if !last.value.is_empty() {
                        last.value.push('\n');
                    }
                    last.value.push_str(more);
                }
                continue;
            }
        }
        if trimmed.starts_with('[') {
            let Some(name) = trimmed
                .strip_prefix('[')
                .and_then(|t| strip_inline_comment(t).trim().strip_suffix(']'))
            else {
                return Err(LineError {
                    line,
                    problem: format!("{trimmed:?} opens a section header it does not close"),
                });
            };
            section = Some(name.trim().to_string());
            continue;
        }
        let Some(section) = section.clone() else {
            return Err(LineError {
                line,
                problem: format!("{trimmed:?} comes before any [section] header"),
            });
        };
        let (key, value) = match trimmed.split_once('=') {
            Some((k, v)) => (k.trim(), strip_inline_comment(v).trim()),
            None if headerless => (strip_inline_comment(trimmed).trim(), ""),
            None => {
                return Err(LineError {
                    line,
                    problem: format!("{trimmed:?} is not `key = value`"),
                })
            }
        };
        if key.is_empty() {
            return Err(LineError {
                line,
                problem: format!("{trimmed:?} has no key before `=`"),
            });
        }
        file.entries.push(Entry {
            section,
            key: key.to_string(),
            value: value.to_string(),
            line,
        });
    }
    Ok(file)
}

/// Why a tuned `isolated_cores` value is not a CPU list cpushield can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoresProblem {
    /// The value is computed by tuned when it loads the profile
    /// (`${f:calc_isolated_cores:1}`, `${isolated_cores}`).
    Computed(String),
    /// Empty.
    Empty,
    /// Not a CPU list.
    NotAList(String),
}

impl std::fmt::Display for CoresProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Computed(v) => write!(
                f,
                "{v:?} is computed by tuned when it loads the profile, not a CPU list"
            ),
            Self::Empty => write!(f, "is empty"),
            Self::NotAList(v) => write!(f, "{v:?} is not a CPU list"),
        }
    }
}

/// The CPUs of an `isolated_cores` value as tuned reads a CPU list
/// (`2-3,6`; tuned also accepts spaces after commas). A value that
/// tuned computes (`${...}`) is not a list here.
pub fn isolated_cores(value: &str) -> Result<CpuSet, CoresProblem> {
    let value = value.trim();
    if value.contains("${") {
        return Err(CoresProblem::Computed(value.to_string()));
    }
    if value.is_empty() {
        return Err(CoresProblem::Empty);
    }
    let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    CpuSet::parse_list(&compact).map_err(|_| CoresProblem::NotAList(value.to_string()))
}

/// The profile names of `/etc/tuned/active_profile` (tuned may merge several,
/// separated by spaces); empty when tuned is off (`tuned-adm off`).
pub fn active_profiles(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// The profiles a `tuned.conf` includes (`[main] include=a,b` or spaces),
/// in order.
pub fn includes(conf: &TunedFile) -> Vec<String> {
    conf.get("main", "include")
        .map(|e| {
            e.value
                .split([',', ' ', '\t', '\n'])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The boot parameters tuned's bootloader plugin asks for, from
/// `/etc/tuned/bootcmdline` (`TUNED_BOOT_CMDLINE="nohz_full=3 ..."`), split
/// into words; empty when the line is absent or empty.
pub fn boot_cmdline(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("TUNED_BOOT_CMDLINE="))
        .next_back()
        .map(|v| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            v.split_whitespace().map(str::to_string).collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's tuned 2.20 ships this file.
    const DEBIAN_VARIABLES: &str = "# Examples:\n# isolated_cores=2,4-7\n# isolated_cores=2-23\n#\n# Reserve 1 core per socket for housekeeping, isolate the rest.\nisolated_cores=${f:calc_isolated_cores:1}\n\n# To disable the kernel load balancing in certain isolated CPUs:\n# no_balance_cores=5-10\n";

    #[test]
    fn the_shipped_variables_file_is_read_and_its_computed_value_is_named() {
        let f = parse_variables(DEBIAN_VARIABLES).unwrap();
        let e = f.get("", "isolated_cores").unwrap();
        assert_eq!(e.line, 6);
        assert_eq!(
            isolated_cores(&e.value),
            Err(CoresProblem::Computed("${f:calc_isolated_cores:1}".into()))
        );
    }

    #[test]
    fn the_last_key_counts_and_comments_after_whitespace_are_dropped() {
        let f =
            parse_variables("isolated_cores=1\nisolated_cores = 2-3, 6   # the RT CPUs\nflag\n")
                .unwrap();
        let e = f.get("", "isolated_cores").unwrap();
        assert_eq!((e.line, e.value.as_str()), (2, "2-3, 6"));
        assert_eq!(isolated_cores(&e.value).unwrap().to_list(), "2-3,6");
        assert_eq!(f.get("", "flag").unwrap().value, "");
    }

    #[test]
    fn a_quoted_or_garbled_list_is_not_a_list() {
        assert_eq!(
            isolated_cores("\"2-3\""),
            Err(CoresProblem::NotAList("\"2-3\"".into()))
        );
        assert_eq!(isolated_cores(" "), Err(CoresProblem::Empty));
    }

    #[test]
    fn a_profile_has_sections_includes_and_continuation_lines() {
        let conf = "[main]\nsummary=x\ninclude=cpu-partitioning, network-latency\n\n[variables]\ninclude=/etc/tuned/cpu-partitioning-variables.conf\n[bootloader]\ncmdline=+nohz=on\n    nohz_full=3\n[script]\nscript=${i:PROFILE_DIR}/script.sh\n";
        let f = parse_conf(conf).unwrap();
        assert_eq!(includes(&f), ["cpu-partitioning", "network-latency"]);
        assert_eq!(
            f.get("bootloader", "cmdline").unwrap().value,
            "+nohz=on\nnohz_full=3"
        );
        assert_eq!(f.section("script").count(), 1);
    }

    #[test]
    fn a_key_before_any_section_or_a_broken_header_names_its_line() {
        assert_eq!(parse_conf("a=1\n").unwrap_err().line, 1);
        assert_eq!(parse_conf("[main]\n[oops\n").unwrap_err().line, 2);
        assert_eq!(parse_conf("[main]\nno equals\n").unwrap_err().line, 2);
        assert_eq!(parse_variables("=3\n").unwrap_err().line, 1);
    }

    #[test]
    fn active_profile_and_bootcmdline() {
        assert_eq!(active_profiles("cpushield\n"), ["cpushield"]);
        assert!(active_profiles("\n").is_empty());
        let words = boot_cmdline(
            "TUNED_BOOT_CMDLINE=\"nohz=on nohz_full=3 rcu_nocbs=3\"\nTUNED_BOOT_INITRD_ADD=\"\"\n",
        );
        assert_eq!(words, ["nohz=on", "nohz_full=3", "rcu_nocbs=3"]);
        assert!(boot_cmdline("TUNED_BOOT_CMDLINE=\n").is_empty());
    }
}
