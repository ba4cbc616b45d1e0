//! Why a probe could not run.

use std::io;

/// An error that stopped a probe (bad configuration, or the system refused
/// something the measurement cannot do without).
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The configuration is invalid; the message names the input and the remedy.
    #[error("{0}")]
    Config(String),
    /// Reading system state failed. The underlying error is part of the
    /// message, not a `source()`: a printer that shows the chain of causes
    /// would print it twice.
    #[error("{what}: {error}")]
    System {
        /// What was being read.
        what: String,
        /// The underlying error (with the path).
        error: io::Error,
    },
    /// `measure net --peer`: the peer did not answer.
    #[error("{what} with peer {peer}: {error}: start `cpushield measure net --listen {port}` on that machine, and let UDP and TCP port {port} through its firewall", port = peer.port())]
    Peer {
        /// The exchange that failed.
        what: String,
        /// The peer's address.
        peer: std::net::SocketAddr,
        /// The error (connection refused, no reply).
        error: io::Error,
    },
    /// A measuring thread could not be pinned to its CPU.
    #[error("could not pin the measuring thread to CPU {cpu} ({source}): check that CPU {cpu} is online and in this process's cpuset; if `cpushield shield` fenced it off, run with the CPUSHIELD_STATE_DIR that shield used")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// The error from sched_setaffinity.
        source: io::Error,
    },
    /// The measured CPUs could not be kept polling (`idle_poll`).
    #[error("{0}: run as root, or measure without --idle-poll")]
    IdlePoll(#[from] cpushield_rt::idle_poll::PollerError),
    /// A measuring thread could not be started.
    #[error("could not start a measuring thread: {0}")]
    Spawn(io::Error),
    /// A measuring thread failed unexpectedly.
    #[error("{0}")]
    Thread(String),
}
