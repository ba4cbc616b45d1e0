//! A config's `[runtime]` section, in one place: the machine's setting files
//! ([`machine`]), what the section means on them ([`settings`]), and making
//! it true with each file's value journaled in the shield's saved state
//! first, so that `reset` writes it back ([`apply`], which `cpushield apply`
//! runs with the shield's own changes). The journal itself is part of the
//! shield's state (`cpushield_shield::runtime`), which `reset` restores.
//! `tune` builds its knob catalog on the same [`machine::Machine`] and
//! writes its winners as such a section.

pub mod apply;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod machine;
pub mod settings;
