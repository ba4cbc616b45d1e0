//! Why a load cannot start or stopped working. Every message is one line that
//! names the input and the remedy.

use std::path::PathBuf;

/// An error from planning, starting or running a load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A name that is neither a workload nor a profile.
    #[error("unknown workload or profile '{0}': run `cpushield load --list` to see them")]
    UnknownName(String),
    /// Nothing to run.
    #[error("no workload given: name a profile or workload (see `cpushield load --list`)")]
    Empty,
    /// `--scale` outside 1..=`max`.
    #[error("--scale {scale} is out of range: use 1 to {max}")]
    BadScale {
        /// What was asked.
        scale: u32,
        /// The largest scale.
        max: u32,
    },
    /// `--size` below the smallest workable cap.
    #[error("--size {size} bytes is too small: use at least {} MiB", min >> 20)]
    BadSizeCap {
        /// What was asked, bytes.
        size: u64,
        /// The smallest cap, bytes.
        min: u64,
    },
    /// `--cpus` names CPUs that are not online.
    #[error("--cpus {asked}: CPUs {missing} are not online (online: {online}); pick from the online CPUs")]
    CpusOffline {
        /// What was asked.
        asked: String,
        /// The CPUs that are not online.
        missing: String,
        /// The online CPUs.
        online: String,
    },
    /// `--cpus` is empty.
    #[error("--cpus is empty: give at least one online CPU, e.g. --cpus 0")]
    CpusEmpty,
    /// The directory for the load's files is unusable.
    #[error("--dir {}: {reason}; pick a writable directory, e.g. --dir /var/tmp", .dir.display())]
    BadDir {
        /// The directory.
        dir: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Not enough free space under the directory for the size caps.
    #[error("--dir {}: the load needs {need_mib} MiB but only {free_mib} MiB are free; lower --size or --scale, or pick another --dir", .dir.display())]
    NoSpace {
        /// The directory.
        dir: PathBuf,
        /// MiB needed.
        need_mib: u64,
        /// MiB free.
        free_mib: u64,
    },
    /// A tool a workload runs is missing.
    #[error("workload '{workload}' needs {tool}, which is not in PATH: {remedy}")]
    ToolMissing {
        /// The workload.
        workload: &'static str,
        /// The tool.
        tool: &'static str,
        /// How to get it, or what to do instead.
        remedy: &'static str,
    },
    /// `--stress-ng` given but stress-ng is not installed.
    #[error("--stress-ng: stress-ng is not in PATH; install it (apt-get install stress-ng) or use the built-in workloads")]
    StressNgMissing,
    /// stress-ng rejected the arguments.
    #[error("--stress-ng \"{args}\": stress-ng rejected them: {reason}; check `stress-ng --help`")]
    StressNgRejected {
        /// The arguments as given.
        args: String,
        /// stress-ng's complaint.
        reason: String,
    },
    /// A workload failed while setting up or running.
    #[error("workload {name} failed: {message}")]
    WorkerFailed {
        /// The workload instance (e.g. `ttcp#0`).
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The load did not come up in time or its supervisor failed.
    #[error("load could not start: {0}")]
    Start(String),
    /// A system call the load itself needs failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

impl LoadError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LoadError::Io {
            context: context.into(),
            source,
        }
    }
}
