//! The catalogue: which workloads exist, what one op of each is, and the
//! profiles (named groups) the seeds ran. Pure data and name parsing.

use crate::error::LoadError;
use serde::{Deserialize, Serialize};

/// One built-in background workload. Each is a real piece of work that counts
/// what it does (see [`Workload::unit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// NFS-COMPILE: repeated builds of a generated C project with `cc`.
    Compile,
    /// TTCP: bulk TCP send/receive between two processes over 127.0.0.1.
    Ttcp,
    /// FIFOS_MMAP: FIFO ping-pong between two processes alternating with work on an mmap'd file.
    FifosMmap,
    /// P3_FPU: floating-point matrix multiplication.
    Fpu,
    /// FS: large files with holes, truncated and extended, fsync'd.
    Fs,
    /// CRASHME: children execute random bytes and die by signal.
    Crashme,
    /// Seed 000's disknoise script: recursive `cat * > f`.
    Disknoise,
    /// Seed 002's launch script: run a trivial executable that prints a little.
    Launch,
    /// Seed 002's find script: walk the root file system.
    Find,
    /// Seed 002's file-move script: copy two large files over each other.
    Filemove,
    /// Seed 004's ionet / `ping -f`: a datagram flood over loopback.
    Netflood,
    /// Seed 004's ioctl load: a tight loop of lock-taking ioctls and syscalls.
    Ioctl,
    /// Seed 004's iodisk: continuous direct reads and writes on the disk.
    Iodisk,
    /// Seed 004's computing load: a loop without system calls, one per CPU.
    Compute,
}

impl Workload {
    /// Every workload, in catalogue order.
    pub const ALL: [Workload; 14] = [
        Workload::Compile,
        Workload::Ttcp,
        Workload::FifosMmap,
        Workload::Fpu,
        Workload::Fs,
        Workload::Crashme,
        Workload::Disknoise,
        Workload::Launch,
        Workload::Find,
        Workload::Filemove,
        Workload::Netflood,
        Workload::Ioctl,
        Workload::Iodisk,
        Workload::Compute,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Compile => "compile",
            Workload::Ttcp => "ttcp",
            Workload::FifosMmap => "fifos-mmap",
            Workload::Fpu => "fpu",
            Workload::Fs => "fs",
            Workload::Crashme => "crashme",
            Workload::Disknoise => "disknoise",
            Workload::Launch => "launch",
            Workload::Find => "find",
            Workload::Filemove => "filemove",
            Workload::Netflood => "netflood",
            Workload::Ioctl => "ioctl",
            Workload::Iodisk => "iodisk",
            Workload::Compute => "compute",
        }
    }

    /// The workload with this name, if any.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// What one counted op is.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Compile => "cc runs",
            Workload::Ttcp => "64 KiB buffers received",
            Workload::FifosMmap => "fifo round trips + mmap passes",
            Workload::Fpu => "96x96 matrix multiplies",
            Workload::Fs => "file ops",
            Workload::Crashme => "crashed children",
            Workload::Disknoise => "files concatenated",
            Workload::Launch => "launches",
            Workload::Find => "entries visited",
            Workload::Filemove => "file copies",
            Workload::Netflood => "datagrams received",
            Workload::Ioctl => "lock loops (9 syscalls)",
            Workload::Iodisk => "64 KiB blocks",
            Workload::Compute => "2^20-iteration loops",
        }
    }

    /// One line on what the workload does, for `--list`.
    pub fn about(self) -> &'static str {
        match self {
            Workload::Compile => {
                "repeated builds of a generated C project (fork/exec, page cache, CPU)"
            }
            Workload::Ttcp => "bulk TCP send/receive over 127.0.0.1 between two processes",
            Workload::FifosMmap => {
                "FIFO ping-pong between two processes, alternating with mmap'd-file work"
            }
            Workload::Fpu => "floating-point matrix multiplication",
            Workload::Fs => {
                "large files written whole, then holes: truncated, extended, punched; read back"
            }
            Workload::Crashme => {
                "children run random bytes (in seccomp strict mode) and die by signal"
            }
            Workload::Disknoise => "the recursive `cat * > f` script, each file fdatasync'd",
            Workload::Launch => {
                "launch a trivial executable (echo) over and over, reading what it prints"
            }
            Workload::Find => {
                "walk the root file system (one device, no symlinks) looking for a name"
            }
            Workload::Filemove => "copy two large files over each other",
            Workload::Netflood => "64-byte UDP datagram flood over 127.0.0.1 (softirq traffic)",
            Workload::Ioctl => {
                "tight loop of ioctls, fcntl/flock locks and mmap/munmap (kernel locks)"
            }
            Workload::Iodisk => "continuous O_DIRECT writes and reads of 64 KiB blocks",
            Workload::Compute => "a loop without system calls, one pinned to each CPU",
        }
    }

    /// Where in the seeds the workload comes from.
    pub fn seed(self) -> &'static str {
        match self {
            Workload::Compile
            | Workload::Ttcp
            | Workload::FifosMmap
            | Workload::Fpu
            | Workload::Fs
            | Workload::Crashme => "000 §6.1, 001 (stress-kernel)",
            Workload::Disknoise => "000 §5.1",
            Workload::Launch | Workload::Find | Workload::Filemove => "002",
            Workload::Netflood | Workload::Ioctl | Workload::Iodisk | Workload::Compute => {
                "004 §6.1-6.2"
            }
        }
    }

    /// Bytes one instance may occupy under the run directory, given the
    /// per-workload size cap (`--size`).
    pub fn disk_bytes(self, size_cap: u64) -> u64 {
        const MIB: u64 = 1 << 20;
        match self {
            Workload::Compile => 8 * MIB,
            Workload::FifosMmap => 4 * MIB + 64 * 1024,
            Workload::Fs | Workload::Disknoise | Workload::Filemove | Workload::Iodisk => size_cap,
            Workload::Ioctl | Workload::Launch => 64 * 1024,
            Workload::Ttcp
            | Workload::Fpu
            | Workload::Crashme
            | Workload::Find
            | Workload::Netflood
            | Workload::Compute => 0,
        }
    }

    /// Whether the workload runs one instance per CPU (pinned) rather than
    /// `scale` instances confined to the load's CPUs.
    pub fn per_cpu(self) -> bool {
        self == Workload::Compute
    }

    /// Whether the workload needs a C compiler.
    pub fn needs_cc(self) -> bool {
        self == Workload::Compile
    }

    /// Whether the workload runs an external trivial executable (`echo`).
    pub fn needs_echo(self) -> bool {
        self == Workload::Launch
    }
}

/// A named group of workloads, as the seeds ran them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Red Hat stress-kernel as in seeds 000 §6.1 and 001 (the default).
    StressKernel,
    /// Disk traffic: disknoise and fs (seed 000 §5.1).
    Disk,
    /// Seed 002's find, launch and file-move scripts.
    Seed002,
    /// Seed 004's ARTiS loads: compute per CPU, iodisk, ionet, ioctl.
    Artis,
    /// Every workload at once.
    All,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 5] = [
        Profile::StressKernel,
        Profile::Disk,
        Profile::Seed002,
        Profile::Artis,
        Profile::All,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::StressKernel => "stress-kernel",
            Profile::Disk => "disk",
            Profile::Seed002 => "seed002",
            Profile::Artis => "artis",
            Profile::All => "all",
        }
    }

    /// The profile with this name, if any.
    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The workloads the profile runs.
    pub fn workloads(self) -> &'static [Workload] {
        use Workload::*;
        match self {
            Profile::StressKernel => &[Compile, Ttcp, FifosMmap, Fpu, Fs, Crashme],
            Profile::Disk => &[Disknoise, Fs],
            Profile::Seed002 => &[Find, Launch, Filemove],
            Profile::Artis => &[Compute, Iodisk, Netflood, Ioctl],
            Profile::All => &Workload::ALL,
        }
    }

    /// One line on where the profile comes from, for `--list`.
    pub fn about(self) -> &'static str {
        match self {
            Profile::StressKernel => "Red Hat stress-kernel, seed 000 §6.1 / seed 001 (default)",
            Profile::Disk => "disk interrupt traffic, seed 000 §5.1",
            Profile::Seed002 => "realfeel loads of seed 002",
            Profile::Artis => "ARTiS loads of seed 004 (compute per CPU, iodisk, ionet, ioctl)",
            Profile::All => "every workload",
        }
    }
}

/// The default profile when no name is given.
pub const DEFAULT_PROFILE: Profile = Profile::StressKernel;

/// Turns command-line names (profiles and workloads, mixed) into the workloads
/// to run, in catalogue order without duplicates. No names means the default
/// profile.
pub fn parse_selection<S: AsRef<str>>(names: &[S]) -> Result<Vec<Workload>, LoadError> {
    let mut chosen = Vec::new();
    if names.is_empty() {
        chosen.extend_from_slice(DEFAULT_PROFILE.workloads());
    }
    for name in names {
        let name = name.as_ref().trim();
        if let Some(profile) = Profile::from_name(name) {
            chosen.extend_from_slice(profile.workloads());
        } else if let Some(workload) = Workload::from_name(name) {
            chosen.push(workload);
        } else {
            return Err(LoadError::UnknownName(name.to_string()));
        }
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_name_round_trips() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        for p in Profile::ALL {
            assert_eq!(Profile::from_name(p.name()), Some(p));
        }
    }

    #[test]
    fn no_name_selects_the_stress_kernel_profile() {
        let none: [&str; 0] = [];
        assert_eq!(
            parse_selection(&none).unwrap(),
            Profile::StressKernel.workloads().to_vec()
        );
    }

    #[test]
    fn profiles_and_workloads_mix_without_duplicates() {
        let got = parse_selection(&["disk", "fs", "ttcp"]).unwrap();
        assert_eq!(got, vec![Workload::Ttcp, Workload::Fs, Workload::Disknoise]);
    }

    #[test]
    fn unknown_name_is_refused_with_the_remedy() {
        let err = parse_selection(&["fpu", "bogus"]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("'bogus'"), "{msg}");
        assert!(msg.contains("--list"), "{msg}");
    }

    #[test]
    fn all_profile_holds_every_workload() {
        assert_eq!(parse_selection(&["all"]).unwrap(), Workload::ALL.to_vec());
    }

    #[test]
    fn only_file_workloads_need_disk_space() {
        let cap = 100 << 20;
        assert_eq!(Workload::Fpu.disk_bytes(cap), 0);
        assert_eq!(Workload::Fs.disk_bytes(cap), cap);
        assert!(Workload::Compile.disk_bytes(cap) > 0);
    }
}
