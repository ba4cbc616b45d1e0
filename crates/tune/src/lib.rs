//! `cpushield tune`: this machine's best run-time settings for a shielded
//! CPU, found by measurement. Each knob of the [`knob`] catalog is tried
//! against the starting point in interleaved trials on the shielded CPU
//! under load ([`schedule`], [`session`]); [`decide`] keeps a knob only when
//! it beats the starting point with stated confidence ([`stats`]), and the
//! kept set only when it wins as a whole; [`render`] writes the table, the
//! report and the winning set as a config file `apply` applies
//! (`cpushield_runtime`, which also reads the machine's files the knobs are
//! built on).

pub mod command;
pub mod decide;
pub mod knob;
pub mod real;
pub mod render;
pub mod schedule;
pub mod session;
pub mod settings;
pub mod stats;

pub use decide::{Arm, Decision, Trial, TrialSample, Verdict};
pub use knob::{Change, Knob, KnobId, Machine};
