//! cpushield-vm: blame proved from both sides of a VM.
//!
//! Inside a guest, cpushield can only infer "time outside the guest" from what
//! its own trace does not show. The host sees what the guest cannot: when a
//! vCPU's thread stopped running, what ran on its host CPU instead, and
//! whether the vCPU had halted (the guest idled) or was runnable and not run.
//!
//! - [`timeline`]: a pure, bounded record of "vCPU k not running from T1 to
//!   T2, because X", built from host trace events ([`cpushield_trace::event`]
//!   parses them).
//! - [`protocol`]: the guest↔host messages (JSON lines, version 1, bounded),
//!   and the host's answer to each over a [`timeline::Timeline`].
//! - [`host`]: the host side: finds the guest's vCPU threads (QMP
//!   `query-cpus-fast`, else thread names), traces their host CPUs through a
//!   private tracefs instance, serves the guest on QEMU's virtio-serial chardev.
//! - [`metrics`]: each vCPU's held-off time by cause, for node_exporter's
//!   textfile collector (`vm watch --textfile`).
//! - [`guest`]: the guest side: finds the port, estimates the clock offset by
//!   ping-pong, collects the host's view while a measurement runs, and matches
//!   it to spikes.
//!
//! The protocol is described in docs/ARCHITECTURE.md ("VM blame channel").

pub mod blame;
pub mod guest;
pub mod host;
pub mod metrics;
pub mod protocol;
pub mod timeline;
pub mod watch;
