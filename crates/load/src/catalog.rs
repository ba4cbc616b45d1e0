//! The catalogue: which workloads exist, what one op of each is, and the
//! profiles (named groups) the papers ran. Pure data and name parsing.

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
    /// Brosky & Rotolo's disknoise script: recursive `cat * > f`.
    Disknoise,
    /// Webber's launch script: run a trivial executable that prints a little.
    Launch,
    /// Webber's find script: walk the root file system.
    Find,
    /// Webber's file-move script: copy two large files over each other.
    Filemove,
    /// The Hyades paper's ionet / `ping -f`: a datagram flood over loopback.
    Netflood,
    /// The Hyades paper's ioctl load: a tight loop of lock-taking ioctls and syscalls.
    Ioctl,
    /// The Hyades paper's iodisk: continuous direct reads and writes on the disk.
    Iodisk,
    /// The Hyades paper's computing load: a loop without system calls, one per CPU.
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
        if name == "ionet" {
            // The Hyades paper's name for it.
            return Some(Workload::Netflood);
        }
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// What one counted op is.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Compile => "cc runs",
            Workload::Ttcp => "64 KiB buffers received (with --peer: sent)",
            Workload::FifosMmap => "fifo round trips + mmap passes",
            Workload::Fpu => "96x96 matrix multiplies",
            Workload::Fs => "file ops",
            Workload::Crashme => "crashed children",
            Workload::Disknoise => "files concatenated",
            Workload::Launch => "launches",
            Workload::Find => "entries visited",
            Workload::Filemove => "file copies",
            Workload::Netflood => {
                "datagrams received (with --peer: datagrams and echo requests sent)"
            }
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
            Workload::Ttcp => {
                "bulk TCP send/receive over 127.0.0.1 between two processes; --peer/--listen: to or from another machine"
            }
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
            Workload::Netflood => {
                "64-byte UDP datagram flood over 127.0.0.1 (softirq traffic); alias ionet; --peer floods another machine, --listen counts its flood"
            }
            Workload::Ioctl => {
                "tight loop of ioctls, fcntl/flock locks and mmap/munmap (kernel locks)"
            }
            Workload::Iodisk => "continuous O_DIRECT writes and reads of 64 KiB blocks",
            Workload::Compute => "a loop without system calls, one pinned to each CPU",
        }
    }

    /// The paper (and section) the workload comes from, for `--list`.
    pub fn source(self) -> &'static str {
        match self {
            Workload::Compile
            | Workload::Ttcp
            | Workload::FifosMmap
            | Workload::Fpu
            | Workload::Fs
            | Workload::Crashme => "Brosky & Rotolo 2003 §6.1, Brosky 2004 (stress-kernel)",
            Workload::Disknoise => "Brosky & Rotolo 2003 §5.1",
            Workload::Launch | Workload::Find | Workload::Filemove => {
                "Webber 2002 (realfeel loads)"
            }
            Workload::Netflood | Workload::Ioctl | Workload::Iodisk | Workload::Compute => {
                "the Hyades paper §6.1-6.2 (ARTiS loads)"
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

/// A named group of workloads, as the papers ran them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Red Hat stress-kernel as in Brosky & Rotolo 2003 §6.1 and Brosky 2004
    /// (the default).
    StressKernel,
    /// Disk traffic: disknoise and fs (Brosky & Rotolo 2003 §5.1).
    Disk,
    /// Webber's find, launch and file-move scripts (his realfeel loads).
    /// Named `seed002` before; that name is still accepted (also in saved
    /// JSON) but no longer listed.
    #[serde(alias = "seed002")]
    FindLaunchMove,
    /// The Hyades paper's ARTiS loads: compute per CPU, iodisk, ionet, ioctl.
    Artis,
    /// Every workload at once.
    All,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 5] = [
        Profile::StressKernel,
        Profile::Disk,
        Profile::FindLaunchMove,
        Profile::Artis,
        Profile::All,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::StressKernel => "stress-kernel",
            Profile::Disk => "disk",
            Profile::FindLaunchMove => "find-launch-move",
            Profile::Artis => "artis",
            Profile::All => "all",
        }
    }

    /// The profile with this name, if any. Old names stay accepted as hidden
    /// aliases (not listed), so saved commands and configs keep working.
    pub fn from_name(name: &str) -> Option<Profile> {
        if name == "seed002" {
            return Some(Profile::FindLaunchMove);
        }
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The workloads the profile runs.
    pub fn workloads(self) -> &'static [Workload] {
        use Workload::*;
        match self {
            Profile::StressKernel => &[Compile, Ttcp, FifosMmap, Fpu, Fs, Crashme],
            Profile::Disk => &[Disknoise, Fs],
            Profile::FindLaunchMove => &[Find, Launch, Filemove],
            Profile::Artis => &[Compute, Iodisk, Netflood, Ioctl],
            Profile::All => &Workload::ALL,
        }
    }

    /// One line on where the profile comes from, for `--list`.
    pub fn about(self) -> &'static str {
        match self {
            Profile::StressKernel => {
                "Red Hat stress-kernel, Brosky & Rotolo 2003 §6.1 / Brosky 2004 (default)"
            }
            Profile::Disk => "disk interrupt traffic, Brosky & Rotolo 2003 §5.1",
            Profile::FindLaunchMove => "Webber 2002's realfeel loads: find, launch, file move",
            Profile::Artis => {
                "the Hyades paper's ARTiS loads (compute per CPU, iodisk, ionet, ioctl)"
            }
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
    fn the_old_seed002_name_still_selects_find_launch_move() {
        assert_eq!(Profile::from_name("seed002"), Some(Profile::FindLaunchMove));
        assert_eq!(
            parse_selection(&["seed002"]).unwrap(),
            parse_selection(&["find-launch-move"]).unwrap()
        );
        assert_eq!(
            parse_selection(&["find-launch-move"]).unwrap(),
            vec![Workload::Launch, Workload::Find, Workload::Filemove]
        );
        // Saved JSON with the old name still reads; new JSON has the new name.
        let old: Profile = serde_json::from_str("\"seed002\"").unwrap();
        assert_eq!(old, Profile::FindLaunchMove);
        assert_eq!(
            serde_json::to_string(&Profile::FindLaunchMove).unwrap(),
            "\"find-launch-move\""
        );
        // The alias is hidden: no listed name is the old one.
        assert!(Profile::ALL.iter().all(|p| p.name() != "seed002"));
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
