//! The JSON form of the reports: a versioned envelope around the report's own
//! fields, documented in docs/measure-json.md.
//!
//! ```json
//! {"schema": "cpushield.measure", "version": 1, "kind": "latency", "settings": {...}, "run": {...}, "cpus": [...]}
//! ```

use crate::determinism::DeterminismReport;
use crate::latency::LatencyReport;
use crate::net::NetReport;
use crate::noise::NoiseReport;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The schema name every document carries.
pub const SCHEMA: &str = "cpushield.measure";
/// The schema version. Adding fields keeps it; renaming or removing one, or
/// changing a unit, raises it.
pub const VERSION: u32 = 1;

/// A report kind with its name in the envelope.
pub trait Kind: Serialize + DeserializeOwned {
    /// "latency", "determinism", "noise" or "net".
    const KIND: &'static str;
}

impl Kind for LatencyReport {
    const KIND: &'static str = "latency";
}
impl Kind for DeterminismReport {
    const KIND: &'static str = "determinism";
}
impl Kind for NoiseReport {
    const KIND: &'static str = "noise";
}
impl Kind for NetReport {
    const KIND: &'static str = "net";
}

#[derive(Serialize)]
struct Envelope<'a, R> {
    schema: &'static str,
    version: u32,
    kind: &'static str,
    #[serde(flatten)]
    report: &'a R,
}

/// Why a JSON document could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or fields missing or of the wrong type.
    #[error("not a cpushield measure document: {0}")]
    Parse(#[from] serde_json::Error),
    /// Another schema, version or kind.
    #[error("expected {expected}, found {found}")]
    Mismatch {
        /// What was expected.
        expected: String,
        /// What the document says.
        found: String,
    },
}

/// The report as JSON with the envelope, on one line (pipe it through `jq .`
/// to read it).
pub fn to_string<R: Kind>(report: &R) -> String {
    let envelope = Envelope {
        schema: SCHEMA,
        version: VERSION,
        kind: R::KIND,
        report,
    };
    serde_json::to_string(&envelope).expect("reports serialize") + "\n"
}

/// Reads a report back, checking schema, version and kind.
pub fn from_str<R: Kind>(text: &str) -> Result<R, JsonError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let field = |name: &str| {
        value
            .get(name)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "nothing".into())
    };
    let expected = format!("\"{SCHEMA}\" version {VERSION} kind \"{}\"", R::KIND);
    let found = format!(
        "{} version {} kind {}",
        field("schema"),
        field("version"),
        field("kind")
    );
    if value.get("schema").and_then(|v| v.as_str()) != Some(SCHEMA)
        || value.get("version").and_then(|v| v.as_u64()) != Some(VERSION as u64)
        || value.get("kind").and_then(|v| v.as_str()) != Some(R::KIND)
    {
        return Err(JsonError::Mismatch { expected, found });
    }
    Ok(serde_json::from_value(value)?)
}
