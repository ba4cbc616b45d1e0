//! The parsers `check` reads kernel text with: all of them live in
//! `cpushield_parse` (one module per file format). These re-exports keep
//! the paths `check::parse::…` that the tracer and outside tests use; new
//! code names `cpushield_parse` directly.

pub use cpushield_parse::{diskstats, interrupts, softirqs, stat, ParseError};

/// The kernel command line and build configuration.
pub mod cmdline {
    pub use cpushield_parse::cmdline::{cpu_param, param};
    pub use cpushield_parse::kconfig::parse_kconfig;
}

/// A thread's stat, schedstat and status files.
pub mod task {
    pub use cpushield_parse::pid_stat::{
        parse_thread_stat, ThreadStat, PF_KTHREAD, PF_NO_SETAFFINITY,
    };
    pub use cpushield_parse::pid_status::parse_nspid;
    pub use cpushield_parse::schedstat::parse_schedstat_runtime;
}
