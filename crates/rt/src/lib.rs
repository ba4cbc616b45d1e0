//! cpushield-rt: Sherer's (RTLinuxPro) programming model for Rust programs on a
//! shielded CPU: clocks, thread placement and scheduling, memory locking, periodic
//! loops with "advance", and a lock-free queue between real-time and other threads.
//!
//! `clock` and `sched` are the primitives every real-time thread in cpushield uses,
//! the latency probes of `cpushield measure` included.
//!
//! - [`thread::RtThread`]: spawn a thread on chosen CPUs with a policy, optionally
//!   reserving them ([`reserve`]);
//! - [`periodic::Periodic`]: absolute-deadline loop with advance, overruns and
//!   worst deviation;
//! - [`spsc`]: bounded wait-free single-producer/single-consumer queue;
//! - [`irq::bind_irq`]: send an IRQ to the task's CPUs, old mask restored on drop;
//! - [`idle_poll::IdlePoller`]: keep CPUs polling instead of halting into a hypervisor;
//! - [`launch`]: start a command placed before it runs;
//! - [`run::RtRun`]: a whole run on shielded CPUs (`cpushield run`, `cps_place`):
//!   spawn or adopt, place, policy, mlock, IRQs, reservation, idle poll, restore;
//! - `capi`: the same for C (`include/cpushield.h`).

pub mod clock;
pub mod guard;
pub mod idle_poll;
pub mod irq;
pub mod launch;
pub mod periodic;
pub mod program;
pub mod reserve;
pub mod run;
pub mod sched;
pub mod shield_placer;
pub mod spsc;
pub mod thread;

#[cfg(not(loom))]
pub mod capi;
#[cfg(not(loom))]
pub mod demo;
mod sync;
