//! cpushield-rt: the seed 003 (RTLinuxPro) programming model for Rust programs on a
//! shielded CPU: clocks, thread placement and scheduling, memory locking, periodic
//! loops with "advance", and a lock-free queue between real-time and other threads.
//!
//! `clock` and `sched` are the primitives every real-time thread in cpushield uses,
//! the latency probes of `cpushield measure` included.

pub mod clock;
pub mod sched;
