//! /proc/mounts (/proc/self/mounts) and /proc/self/mountinfo: which file
//! system is mounted where, with which options.

use std::path::PathBuf;

/// One mounted file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted (octal escapes such as `\040` decoded).
    pub mount_point: PathBuf,
    /// Its type: `cgroup`, `cgroup2`, `tracefs`, `proc`…
    pub fs_type: String,
    /// The file system's options (`rw,cpuset` for a v1 cpuset hierarchy).
    pub options: Vec<String>,
}

impl Mount {
    /// Whether `option` is among the options.
    pub fn has_option(&self, option: &str) -> bool {
        self.options.iter().any(|o| o == option)
    }
}

/// Parses /proc/mounts lines: `source mount_point type options dump pass`.
/// Lines with fewer than four fields are skipped.
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            (w.len() >= 4).then(|| mount(w[1], w[2], w[3]))
        })
        .collect()
}

/// Parses /proc/self/mountinfo lines: `id parent major:minor root
/// mount_point options [optional fields] - type source super_options`; the
/// options kept are the super options (the file system's own). Lines
/// without the ` - ` separator or with too few fields are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let right: Vec<&str> = right.split_whitespace().collect();
            (left.len() >= 5 && right.len() >= 3).then(|| mount(left[4], right[0], right[2]))
        })
        .collect()
}

fn mount(mount_point: &str, fs_type: &str, options: &str) -> Mount {
    Mount {
        mount_point: PathBuf::from(unescape(mount_point)),
        fs_type: fs_type.to_string(),
        options: options.split(',').map(str::to_string).collect(),
    }
}

/// Decodes the kernel's octal escapes of space, tab, newline and backslash
/// (`\040`, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_name_each_file_systems_type_place_and_options() {
        let text = "\
tracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,nodev,noexec,relatime,cpuset 0 0
none /mnt/with\\040space tmpfs rw 0 0
short line
";
        let m = parse_mounts(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].fs_type, "tracefs");
        assert_eq!(m[0].mount_point, PathBuf::from("/sys/kernel/tracing"));
        assert!(m[1].has_option("cpuset") && !m[0].has_option("cpuset"));
        assert_eq!(m[2].mount_point, PathBuf::from("/mnt/with space"));
    }

    #[test]
    fn mountinfo_keeps_the_file_systems_own_options() {
        let text = "\
25 30 0:22 / /sys/fs/cgroup rw shared:9 - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpuset rw,relatime shared:10 - cgroup cgroup rw,cpuset
27 25 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
no separator here
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].fs_type, "cgroup");
        assert_eq!(m[1].mount_point, PathBuf::from("/sys/fs/cgroup/cpuset"));
        assert!(m[1].has_option("cpuset"));
        assert!(
            !m[1].has_option("relatime"),
            "the mount's options are not the file system's"
        );
        assert_eq!(m[2].fs_type, "cgroup2");
    }
}
