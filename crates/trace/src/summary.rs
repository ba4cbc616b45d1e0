//! What a trace session found: all spike attributions and the top causes.

use super::attribute::{phase_word, Attribution, CauseKind};
use cpushield_cpuset::fmt_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One cause summed over all spikes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CauseTotal {
    /// What kind.
    pub kind: CauseKind,
    /// Its name.
    pub name: String,
    /// Time summed over the spikes, ns.
    pub total_ns: u64,
    /// Spikes it appeared in.
    pub spikes: usize,
    /// The most it took in one spike, ns.
    pub max_ns: u64,
}

/// The result of a trace session.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceSummary {
    /// Spikes marked.
    pub spikes_marked: u64,
    /// Spikes that could not be queued (queue full).
    pub spikes_dropped: u64,
    /// Attributions, in the order they were made.
    pub attributions: Vec<Attribution>,
    /// Causes over all spikes, largest total first.
    pub top_causes: Vec<CauseTotal>,
    /// Trace lines parsed.
    pub events: u64,
    /// Lines that did not parse.
    pub unparsed_lines: u64,
    /// Events the kernel lost (ring buffer overruns and `[LOST N EVENTS]`).
    pub lost_events: u64,
    /// Trace clock minus CLOCK_MONOTONIC measured at start with a marker, ns.
    pub clock_offset_ns: Option<i64>,
    /// Events enabled.
    pub events_enabled: Vec<String>,
    /// The tracefs instance used (None: the top-level buffer).
    pub instance: Option<String>,
    /// Whether tracefs was mounted by the session (unmounted at the end by
    /// the last cpushield process still tracing, see [`crate::mount`]).
    pub mounted_tracefs: bool,
    /// Where the raw trace windows were saved.
    pub trace_dir: Option<String>,
    /// The tracer run in the instance (`timerlat`), if any.
    pub tracer: Option<String>,
    /// Whether the osnoise events were enabled (the kernel has them; they
    /// fire only while the timerlat or osnoise tracer runs).
    pub osnoise_events: bool,
    /// The watched threads' wakeups ([`crate::TraceOptions::watch`]).
    pub watched: Option<crate::watch::WatchedWakeups>,
    /// Problems met while tracing or restoring (empty when all went well).
    pub errors: Vec<String>,
    /// cpushield ran in a nested PID namespace, whose /proc cannot look up
    /// the trace's task IDs: tasks other than the measured one were charged
    /// as outside its view ([`NESTED_NAMESPACE`]).
    pub nested_namespace: bool,
}

/// Said once when a trace ran from a nested PID namespace.
pub const NESTED_NAMESPACE: &str = "attribution by task scope is limited: cpushield runs in a nested PID namespace, whose /proc cannot name the tasks the trace shows (their IDs are the initial namespace's), so no task is blamed as a leak of the shield; run cpushield from the initial PID namespace (in Kubernetes, a pod with hostPID: true) for it";

/// The one line a summary carries when the kernel has no osnoise events.
pub const OSNOISE_ABSENT: &str = "osnoise events: none in this kernel (built without CONFIG_OSNOISE_TRACER and CONFIG_TIMERLAT_TRACER): spikes are attributed from the irq, softirq and sched events alone";

/// Sums causes over attributions.
pub fn top_causes(attrs: &[Attribution]) -> Vec<CauseTotal> {
    let mut map: BTreeMap<(CauseKind, String), CauseTotal> = BTreeMap::new();
    for a in attrs {
        let mut per_spike: BTreeMap<(CauseKind, String), u64> = BTreeMap::new();
        for c in &a.causes {
            *per_spike.entry((c.kind, c.name.clone())).or_insert(0) += c.ns;
        }
        for ((kind, name), ns) in per_spike {
            let t = map.entry((kind, name.clone())).or_insert(CauseTotal {
                kind,
                name,
                total_ns: 0,
                spikes: 0,
                max_ns: 0,
            });
            t.total_ns += ns;
            t.spikes += 1;
            t.max_ns = t.max_ns.max(ns);
        }
    }
    let mut v: Vec<CauseTotal> = map.into_values().collect();
    v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    v
}

/// Text for a terminal: the top causes, then each of the `largest` biggest
/// spikes with its causes and notes.
pub fn render_summary(s: &TraceSummary, top: usize, largest: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Trace: {} spikes attributed ({} marked, {} dropped), {} events read, {} lost{}",
        s.attributions.len(),
        s.spikes_marked,
        s.spikes_dropped,
        s.events,
        s.lost_events,
        s.clock_offset_ns
            .map(|o| format!(", trace clock - CLOCK_MONOTONIC = {:.1} us", o as f64 / 1e3))
            .unwrap_or_default()
    );
    if !s.osnoise_events && !s.events_enabled.is_empty() {
        let _ = writeln!(o, "{OSNOISE_ABSENT}");
    }
    if !s.top_causes.is_empty() {
        let _ = writeln!(o, "Top causes (time summed over spikes):");
        for c in s.top_causes.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:>10}  {:<9} {}  (in {} spike{}, max {})",
                fmt_ns(c.total_ns),
                c.kind.word(),
                c.name,
                c.spikes,
                if c.spikes == 1 { "" } else { "s" },
                fmt_ns(c.max_ns)
            );
        }
    }
    let mut biggest: Vec<&Attribution> = s.attributions.iter().collect();
    biggest.sort_by_key(|a| std::cmp::Reverse(a.latency_ns));
    for a in biggest.into_iter().take(largest) {
        let _ = writeln!(o, "{}", render_attribution(a));
    }
    if let Some(d) = &s.trace_dir {
        let _ = writeln!(o, "Raw trace windows: {d}");
    }
    for e in &s.errors {
        let _ = writeln!(o, "warning: {e}");
    }
    o
}

/// Text for one attribution.
pub fn render_attribution(a: &Attribution) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Spike {} on CPU {} (tid {}): {} late (user latency); kernel latency (interrupt entry) +{}, woken at +{}, switched in at +{}",
        a.spike.seq,
        a.spike.cpu,
        a.spike.tid,
        fmt_ns(a.latency_ns),
        a.irq_entry_after_ns
            .map(fmt_ns)
            .unwrap_or_else(|| "?".into()),
        a.wakeup_after_ns.map(fmt_ns).unwrap_or_else(|| "?".into()),
        a.switch_in_after_ns
            .map(fmt_ns)
            .unwrap_or_else(|| "?".into()),
    );
    for c in &a.causes {
        let _ = writeln!(
            o,
            "  {:>10}  {:<9} {}  [{}]",
            fmt_ns(c.ns),
            c.kind.word(),
            c.name,
            phase_word(c.phase)
        );
    }
    for n in &a.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    if let Some(f) = &a.trace_file {
        let _ = writeln!(o, "  trace: {f}");
    }
    o
}
