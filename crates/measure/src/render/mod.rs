//! Rendering, separate from measuring: human text, the papers' bucket table and
//! cyclictest's `-h` histogram format. JSON is in [`crate::json`].

pub mod cyclictest;
pub mod net;
pub mod table;
pub mod text;
pub mod units;
