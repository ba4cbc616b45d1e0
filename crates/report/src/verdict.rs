//! The verdict: the shield judged on what it controls.
//!
//! When the loaded and shielded scenarios were traced, every sample above the
//! threshold has been split into time caused inside the guest (IRQs,
//! softirqs, tasks, kernel threads, throttling) and time the vCPU did not run
//! at all (the host's steal, firmware). The shield is judged on the first,
//! and on its causes rather than on one ratio, so that the host's noise
//! cannot flip it:
//!
//! - **leaks**: something the shield should have kept away still reached the
//!   shielded CPU (a task in its scope, an IRQ check says it should have
//!   moved);
//! - **cannot-judge**: the run cannot show what the shield removed, because
//!   the host's stalls blur the loaded figure or the load barely disturbed
//!   the CPU; the line says how much longer to run or to repeat;
//! - **works**: nothing the shield controls reached it, and the load's
//!   in-guest interference is at least [`EFFECT_NEEDED`] times what remains;
//! - **works-with-remaining**: the same, and what remains is named with what
//!   removes it (a boot parameter, a wider scope, the kubelet, a setting, a
//!   quieter host), each with its fix.
//!
//! The loaded / shielded ratio of the guest-caused worst cases stays as the
//! effect size, with its low end (the host's possible share counted out)
//! and its spread over the determinism runs. Time outside the guest is shown
//! beside it and never blamed on the shield. Without a trace, the raw maxima
//! are judged against the papers' ratios (`works` or `falls-short`).
//!
//! Each anchor (cyclictest; rtla timerlat where the kernel has the tracer)
//! is checked in the verdict's own terms: its wakeups traced and split the
//! same way, then judged by the same rules ([`anchor_outcome`]), so it can
//! refute "works" as well as confirm it.

use crate::model::{
    fmt_ratio, Anchor, AnchorCheck, AttributionSummary, CauseRow, CompareReport, Remains,
    ScenarioResult, Spread, Verdict,
};
use cpushield_cpuset::fmt_ns;

/// The load's guest-caused worst case must be at least this many times the
/// shielded one for the run to show what the shield removed.
pub const EFFECT_NEEDED: f64 = 2.0;
/// Raw figures, without a trace: Brosky & Rotolo's shielded-vs-loaded claim.
pub const RAW_RATIO_NEEDED: f64 = 20.0;
/// The cause kind of a task outside the experiment's PID namespace.
pub const OTHER_NAMESPACE_KIND: &str = "other-ns";
/// The cause kind of a task of a Kubernetes pod.
pub const POD_KIND: &str = "pod";
/// Shielded guest-caused jitter at or below this % passes whatever the loaded one.
pub const JITTER_FLOOR_PCT: f64 = 2.0;
/// check's topic of an IRQ whose move off the shielded CPU was pending: the
/// kernel completes it at the IRQ's next interrupt, which still arrives
/// there (at most one), so it is no leak of the shield.
pub const PENDING_IRQ_TOPIC: &str = "irq-pending";

/// Category: nothing the shield controls reached the CPU, nothing remains.
pub const WORKS: &str = "works";
/// Category: nothing the shield controls reached the CPU; what remains
/// needs something else ([`Remains`]).
pub const WORKS_WITH_REMAINING: &str = "works-with-remaining";
/// Category: something the shield should have kept away still arrives.
pub const LEAKS: &str = "leaks";
/// Category: the run cannot show what the shield removed.
pub const CANNOT_JUDGE: &str = "cannot-judge";
/// Category of raw figures short of the papers' ratios.
pub const FALLS_SHORT: &str = "falls-short";

/// What removes a cause the shield does not control: a reboot.
pub const NEEDS_BOOT: &str = "a boot parameter";
/// What removes tasks outside a namespace-scoped shield.
pub const NEEDS_SCOPE: &str = "a wider scope";
/// What places a Kubernetes pod's tasks.
pub const NEEDS_KUBELET: &str = "the kubelet's CPU manager";
/// What removes RT throttling and the like.
pub const NEEDS_SETTING: &str = "a setting";
/// What removes time outside the guest.
pub const NEEDS_QUIETER_HOST: &str = "a quieter host";

/// A cause is named among what remains when it took at least this share of
/// the shielded guest-caused worst case from one sample.
const REMAINS_SHARE: f64 = 0.1;

impl CompareReport {
    /// Puts determinism on the common ideal ([`Self::use_common_ideal`]), then
    /// computes the ratios and the verdict: on the guest-caused figures and
    /// their causes when the loaded and shielded scenarios were traced, else
    /// on the raw ones; then checks it against each anchor; then the sharing
    /// experiment on its own line ([`crate::sharing`]).
    pub fn judge(&mut self) {
        self.use_common_ideal();
        let raw_max =
            |s: Option<&ScenarioResult>| s.map(|s| s.latency.max_ns as f64).filter(|m| *m > 0.0);
        let jitter = |s: Option<&ScenarioResult>| {
            s.and_then(|s| s.determinism.as_ref()).map(|d| d.jitter_pct)
        };
        let (idle, loaded, shielded) = (
            self.scenario("idle"),
            self.scenario("loaded"),
            self.scenario("shielded"),
        );
        let mut v = Verdict {
            loaded_over_shielded: raw_max(loaded).zip(raw_max(shielded)).map(|(l, s)| l / s),
            shielded_over_idle: raw_max(shielded).zip(raw_max(idle)).map(|(s, i)| s / i),
            jitter_shielded_over_loaded: jitter(shielded)
                .zip(jitter(loaded))
                .filter(|(_, l)| *l > 0.0)
                .map(|(s, l)| s / l),
            anchor_loaded_over_shielded: loaded
                .and_then(|l| l.anchor.as_ref())
                .zip(shielded.and_then(|s| s.anchor.as_ref()))
                .filter(|(_, s)| s.max_ns > 0)
                .map(|(l, s)| l.max_ns as f64 / s.max_ns as f64),
            ..Verdict::default()
        };
        match (loaded, shielded) {
            (Some(l), Some(s)) if l.attribution.is_some() && s.attribution.is_some() => {
                judge_traced(&mut v, l, s, idle, self.duration_s)
            }
            (Some(_), Some(_)) => judge_raw(&mut v, idle, loaded, shielded),
            _ => v.line = "no verdict: the run lacks the loaded or shielded scenario".into(),
        }
        if let Some(s) = self.scenario("shielded") {
            for f in s.findings.iter().filter(|f| f.topic == PENDING_IRQ_TOPIC) {
                let fix = f
                    .remedies
                    .first()
                    .map(|r| format!(" (avoided at boot: {r})"))
                    .unwrap_or_default();
                v.notes.push(format!(
                    "not counted against the shield, a move the kernel completes at the IRQ's next interrupt: {}{fix}",
                    f.title
                ));
            }
        }
        if let (Some(l), Some(s)) = (loaded, shielded) {
            let pairs = [
                ("cyclictest", l.anchor.as_ref(), s.anchor.as_ref()),
                ("rtla timerlat", l.rtla.as_ref(), s.rtla.as_ref()),
            ];
            for (tool, la, sa) in pairs {
                if let (Some(la), Some(sa)) = (la, sa) {
                    v.anchors
                        .push(check_anchor(tool, &v, la, sa, &s.measured_cpus));
                    own_bugs_beside_anchor(&mut v, tool, sa, &s.measured_cpus);
                }
            }
        }
        v.anchor_agrees = if v.anchors.iter().any(|a| a.agrees == Some(false)) {
            Some(false)
        } else if v.anchors.iter().any(|a| a.agrees == Some(true)) {
            Some(true)
        } else {
            None
        };
        for a in v.anchors.iter().filter(|a| a.agrees == Some(false)) {
            v.notes.push(format!(
                "the verdict disagrees with its {} anchor ({}): this is a bug in cpushield; please report it with report.json",
                a.tool, a.line
            ));
        }
        self.verdict = v;
        self.sharing = crate::sharing::summarize(self);
    }
}

/// The papers' ratios on the raw maxima (no trace to separate the host).
fn judge_raw(
    v: &mut Verdict,
    idle: Option<&ScenarioResult>,
    loaded: Option<&ScenarioResult>,
    shielded: Option<&ScenarioResult>,
) {
    let checks = [
        v.loaded_over_shielded.map(|r| r >= RAW_RATIO_NEEDED),
        v.shielded_over_idle.map(|r| r <= 1.5),
        v.jitter_shielded_over_loaded.map(|r| r <= 1.0 / 3.0),
    ];
    let known: Vec<bool> = checks.iter().flatten().copied().collect();
    v.pass = !known.is_empty() && known.iter().all(|b| *b);
    v.category = if v.pass { WORKS } else { FALLS_SHORT }.into();
    let (Some(l), Some(s)) = (loaded, shielded) else {
        return;
    };
    let (lmax, smax) = (l.latency.max_ns, s.latency.max_ns);
    v.line = format!(
        "{}: shielded worst case {} vs loaded {} ({}x better), {}x idle; determinism jitter ratio {} (raw figures: the run was not traced, so time outside the guest is not separated)",
        if v.pass { "SHIELD WORKS" } else { "SHIELD FALLS SHORT" },
        fmt_ns(smax),
        fmt_ns(lmax),
        fmt_ratio(v.loaded_over_shielded),
        fmt_ratio(v.shielded_over_idle),
        fmt_ratio(v.jitter_shielded_over_loaded)
    );
    if let Some(i) = idle {
        let imax = i.latency.max_ns as f64;
        if imax > 0.0 && smax as f64 <= 1.5 * imax && (lmax as f64 / smax as f64) < RAW_RATIO_NEEDED
        {
            v.notes.push(format!(
                "latency: the shielded CPU is as good as the idle one ({} vs {}): the floor is the unloaded machine's own worst case, so loaded / shielded cannot exceed about {:.1} on this run; run with tracing (the default) to see how much of it came from outside the guest",
                fmt_ns(smax),
                fmt_ns(i.latency.max_ns),
                lmax as f64 / imax
            ));
        }
    }
    if let (Some(ji), Some(jl)) = (
        idle.and_then(|i| i.determinism.as_ref())
            .map(|d| d.jitter_pct),
        l.determinism.as_ref().map(|d| d.jitter_pct),
    ) {
        if jl > 0.0 && ji > jl / 3.0 {
            v.notes.push(format!(
                "determinism: with no load and no shield the jitter is already {ji:.1}% ({jl:.1}% loaded): the variation comes from outside the kernel's scheduling (the host, frequency, shared caches), which a shield does not remove"
            ));
        }
    }
}

/// What a shielded guest cause is to the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Class {
    /// The experiment's own threads, placed there on purpose.
    Ours,
    /// One of cpushield's own threads that belongs on the housekeeping CPUs
    /// (the main thread, the tracer's reader, the load's supervisor): a bug
    /// of cpushield's, not of the shield.
    OwnBug,
    /// The shield should have kept it away.
    Leak,
    /// The shield does not control it: this removes it, with this fix.
    Remains(&'static str, String),
}

/// Whether a task cause names one of the threads the experiment puts on the
/// measured CPU on purpose (the probe's measuring thread, the idle poller),
/// or one of `also` (an anchor's own process).
fn own_thread(name: &str, also: &[&str]) -> bool {
    name.starts_with("cpushield-cpu")
        || name.starts_with("cpushield-poll")
        || also.iter().any(|p| name.starts_with(p))
}

/// Whether a task cause names any other thread or process of cpushield (its
/// main thread `cpushield`, `cpushield-trace`, `cpushield-load`...): none of
/// them belongs on a measured CPU.
fn cpushield_thread(name: &str) -> bool {
    name.starts_with("cpushield-") || name == "cpushield" || name.starts_with("cpushield ")
}

/// Whether a fix is a kernel command-line parameter (`isolcpus=managed_irq,1`,
/// `nohz_full=1 (...)`).
fn is_boot_parameter(fix: &str) -> bool {
    let word = fix.split_whitespace().next().unwrap_or("");
    word.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
    })
}

/// What a guest cause on the shielded CPUs is to the verdict. `own` names
/// the threads of the measuring tool besides ours (an anchor's).
fn classify(c: &CauseRow, cpus: &str, own: &[&str]) -> Class {
    let fix = c.fix.clone();
    let boot_line = || format!("cpushield boot-params --all {cpus}");
    match c.kind.as_str() {
        "self" => Class::Ours,
        "task" if own_thread(&c.name, own) => Class::Ours,
        "task" if cpushield_thread(&c.name) => Class::OwnBug,
        "task" => Class::Leak,
        POD_KIND => Class::Remains(
            NEEDS_KUBELET,
            fix.unwrap_or_else(|| "the kubelet's static CPU manager".into()),
        ),
        OTHER_NAMESPACE_KIND => Class::Remains(
            NEEDS_SCOPE,
            fix.unwrap_or_else(|| "compare --system".into()),
        ),
        "throttled" => Class::Remains(
            NEEDS_SETTING,
            fix.unwrap_or_else(|| "sysctl kernel.sched_rt_runtime_us=-1".into()),
        ),
        _ => match fix {
            Some(f) if f.starts_with("cpushield ") && f.contains("compare --system") => {
                Class::Remains(NEEDS_SCOPE, f)
            }
            // A shield command the shield did not apply: its business.
            Some(f) if f.starts_with("cpushield shield") || f.starts_with("taskset ") => {
                Class::Leak
            }
            Some(f) if is_boot_parameter(&f) => Class::Remains(NEEDS_BOOT, f),
            Some(f) => Class::Remains(NEEDS_SETTING, f),
            None => Class::Remains(NEEDS_BOOT, boot_line()),
        },
    }
}

/// Adds `what` (worst `worst_ns`) to the entry for (`needs`, `fix`).
fn add_remains(list: &mut Vec<Remains>, needs: &str, fix: String, what: String, worst_ns: u64) {
    match list.iter_mut().find(|r| r.needs == needs && r.fix == fix) {
        Some(r) => {
            if !r.what.contains(&what) {
                r.what.push(what);
            }
            r.worst_ns = r.worst_ns.max(worst_ns);
        }
        None => list.push(Remains {
            needs: needs.into(),
            fix,
            what: vec![what],
            worst_ns,
        }),
    }
}

/// How a run judged by these rules comes out: the verdict's own scenarios,
/// or an anchor's.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Something the shield should have kept away reached the CPU (named).
    Leaks(Vec<String>),
    /// The host's stalls blur the loaded figure: the effect's low end is
    /// short of [`EFFECT_NEEDED`], its high end is not.
    Blurred,
    /// The load's guest-caused worst case is not [`EFFECT_NEEDED`] times the
    /// shielded one.
    NoEffect,
    /// Nothing the shield controls reached the CPU, and the effect shows.
    Works,
}

/// The effect of the shield on guest-caused worst cases: loaded / shielded,
/// and its low end with the host's possible share of the loaded figure
/// counted out.
fn effect(loaded: &AttributionSummary, shielded: &AttributionSummary) -> (f64, f64) {
    let s = shielded.guest_worst_ns.max(1) as f64;
    let low = loaded
        .guest_worst_low_ns
        .unwrap_or(loaded.guest_worst_ns)
        .min(loaded.guest_worst_ns);
    (loaded.guest_worst_ns as f64 / s, low as f64 / s)
}

/// The rules the verdict applies, on an anchor's traced wakeups: the tasks
/// of the shielded run the shield should have kept away (its own process's
/// threads, named by `own`, left out), then the effect.
pub fn anchor_outcome(
    loaded: &AttributionSummary,
    shielded: &AttributionSummary,
    cpus: &str,
    own: &[&str],
) -> Outcome {
    let leaks: Vec<String> = shielded
        .causes
        .iter()
        .filter(|c| c.guest && classify(c, cpus, own) == Class::Leak)
        .map(|c| c.name.clone())
        .collect();
    outcome(leaks, effect(loaded, shielded))
}

fn outcome(leaks: Vec<String>, (high, low): (f64, f64)) -> Outcome {
    if !leaks.is_empty() {
        Outcome::Leaks(leaks)
    } else if high < EFFECT_NEEDED {
        Outcome::NoEffect
    } else if low < EFFECT_NEEDED {
        Outcome::Blurred
    } else {
        Outcome::Works
    }
}

/// Each slice of the loaded probe's guest-caused worst case over the
/// shielded worst case: how the effect moves with the load's worst moments.
fn effect_over_slices(
    loaded: &AttributionSummary,
    shielded: &AttributionSummary,
) -> Option<Spread> {
    let s = shielded.guest_worst_ns.max(1) as f64;
    let mut ratios: Vec<f64> = loaded
        .guest_worst_by_slice_ns
        .iter()
        .map(|l| *l as f64 / s)
        .collect();
    if ratios.len() < 2 {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: ratios[0],
        max: ratios[n - 1],
        count: n,
    })
}

/// A ratio in two significant figures: `0.6`, `4.2`, `41`.
fn short_ratio(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.0}")
    }
}

/// `40.9x; 12-41x over 10 slices of the loaded probe`.
fn effect_words(high: f64, spread: Option<&Spread>) -> String {
    match spread {
        Some(s) => format!(
            "{high:.1}x; {}-{}x over {} slices of the loaded probe",
            short_ratio(s.min),
            short_ratio(s.max),
            s.count
        ),
        None => format!("{high:.1}x"),
    }
}

/// The shield judged on the guest-caused figures of traced runs and on the
/// causes that still reached the shielded CPUs.
fn judge_traced(
    v: &mut Verdict,
    loaded: &ScenarioResult,
    shielded: &ScenarioResult,
    idle: Option<&ScenarioResult>,
    duration_s: f64,
) {
    let (la, sa) = match (&loaded.attribution, &shielded.attribution) {
        (Some(l), Some(s)) => (l, s),
        _ => return,
    };
    let cpus = shielded.measured_cpus.as_str();
    let (lg, sg) = (la.guest_worst_ns, sa.guest_worst_ns.max(1));
    let (high, low) = effect(la, sa);
    v.guest_loaded_over_shielded = Some(high);
    v.guest_loaded_over_shielded_low = Some(low);
    v.effect_slices = effect_over_slices(la, sa);
    v.guest_jitter_shielded_over_loaded = guest_jitter(shielded)
        .zip(guest_jitter(loaded))
        .filter(|(_, l)| *l > 0.0)
        .map(|(s, l)| s / l);
    let pending = pending_irqs(shielded);
    let (leaks, mut remains) = reaching(shielded, sa, &pending, &mut v.notes);
    let outside = sa.outside_worst_ns.max(la.outside_worst_ns);
    v.host_noisy = outside > sa.threshold_ns.max(sg);
    host_remains(&mut remains, shielded, sa);
    jitter_remains(&mut remains, loaded, shielded);
    // Causes inside the guest first, the largest first; the host last.
    remains.sort_by_key(|r| (r.needs == NEEDS_QUIETER_HOST, std::cmp::Reverse(r.worst_ns)));
    v.remaining = leaks.clone();
    v.remaining.extend(
        remains
            .iter()
            .map(|r| format!("{}: needs {} (fix: {})", r.what.join(", "), r.needs, r.fix)),
    );
    let host = host_clause(v.host_noisy, outside, la, sa);
    let figures = format!(
        "the worst case caused inside the guest: {} loaded, {} shielded ({})",
        fmt_ns(lg),
        fmt_ns(sa.guest_worst_ns),
        effect_words(high, v.effect_slices.as_ref())
    );
    let longer = (duration_s * 2.0).max(10.0).round();
    let result = outcome(leaks.clone(), (high, low));
    v.category = match (&result, remains.is_empty()) {
        (Outcome::Leaks(_), _) => LEAKS,
        (Outcome::Blurred | Outcome::NoEffect, _) => CANNOT_JUDGE,
        (Outcome::Works, true) => WORKS,
        (Outcome::Works, false) => WORKS_WITH_REMAINING,
    }
    .into();
    v.pass = matches!(result, Outcome::Works);
    v.remains = remains;
    v.line = match result {
        Outcome::Leaks(_) => format!(
            "SHIELD LEAKS on CPU {cpus}: the shield should have kept this away: {}; {figures}{host}",
            leaks.join("; ")
        ),
        Outcome::Blurred => format!(
            "CANNOT JUDGE THE SHIELD on CPU {cpus}: the host's stalls blur the loaded figure: run again with --duration {longer:.0}s so that more samples come without a stall, or repeat when the host is quieter; caused inside the guest {} loaded, of which up to {} may be the host's ({} of its {} samples above {} also lost time outside the guest), → {} shielded ({low:.1}-{high:.1}x, needs {EFFECT_NEEDED:.0}x)",
            fmt_ns(lg),
            fmt_ns(lg.saturating_sub(la.guest_worst_low_ns.unwrap_or(lg))),
            la.samples_with_outside,
            la.samples_above,
            fmt_ns(la.threshold_ns),
            fmt_ns(sa.guest_worst_ns),
        ),
        Outcome::NoEffect => format!(
            "CANNOT JUDGE THE SHIELD on CPU {cpus}: the load did not disturb it beyond what remains under the shield: run longer (--duration {longer:.0}s) or with a heavier load (--load stress-kernel); caused inside the guest {} loaded → {} shielded ({high:.1}x; the effect needs {EFFECT_NEEDED:.0}x to show what the shield removed); still reaching it: {}",
            fmt_ns(lg),
            fmt_ns(sa.guest_worst_ns),
            top_causes(sa, &pending)
        ),
        Outcome::Works if v.remains.is_empty() => format!(
            "SHIELD WORKS on CPU {cpus}: nothing the shield controls reached it; {figures}{host}"
        ),
        Outcome::Works => {
            let mut needs: Vec<&str> = Vec::new();
            for r in &v.remains {
                if !needs.contains(&r.needs.as_str()) {
                    needs.push(&r.needs);
                }
            }
            format!(
                "SHIELD WORKS on CPU {cpus}: nothing the shield controls reached it; what remains needs {}; {figures}",
                words_list(&needs)
            )
        }
    };
    traced_notes(v, loaded, shielded, idle, high);
}

/// What still reaches the shielded CPUs from inside the guest: check's
/// findings that break the shield, then the traced causes (IRQs with a move
/// still pending left out), each classified. Returns the leaks and what
/// remains; cpushield's own threads are a note, not a leak.
fn reaching(
    shielded: &ScenarioResult,
    sa: &AttributionSummary,
    pending: &[u32],
    notes: &mut Vec<String>,
) -> (Vec<String>, Vec<Remains>) {
    let cpus = shielded.measured_cpus.as_str();
    let mut leaks = Vec::new();
    let mut remains: Vec<Remains> = Vec::new();
    for f in shielded
        .findings
        .iter()
        .filter(|f| f.severity == "breaks-shield")
    {
        let fix = f.remedies.first().cloned();
        if f.runtime_fix {
            leaks.push(match &fix {
                Some(r) => format!("{} (fix: {r})", f.title),
                None => f.title.clone(),
            });
        } else {
            let fix = fix.unwrap_or_else(|| format!("cpushield boot-params --all {cpus}"));
            let needs = if is_boot_parameter(&fix) {
                NEEDS_BOOT
            } else {
                NEEDS_SETTING
            };
            add_remains(&mut remains, needs, fix, f.title.clone(), 0);
        }
    }
    for c in sa.causes.iter().filter(|c| c.guest) {
        if cause_irq(&c.name).is_some_and(|irq| pending.contains(&irq)) {
            continue;
        }
        match classify(c, cpus, &[]) {
            Class::Ours => {}
            Class::OwnBug => notes.push(format!(
                "cpushield's own thread {} ran on the shielded CPU during {} samples (worst {}): a bug in cpushield, not a leak of the shield; please report it with report.json",
                c.name,
                c.count,
                fmt_ns(c.worst_ns)
            )),
            Class::Leak => {
                let fix = c
                    .fix
                    .as_ref()
                    .map(|f| format!("; fix: {f}"))
                    .unwrap_or_default();
                leaks.push(if c.kind == "task" {
                    format!(
                        "task {} ran on the shielded CPU during {} samples (worst {}{fix})",
                        c.name,
                        c.count,
                        fmt_ns(c.worst_ns)
                    )
                } else {
                    format!(
                        "{} reached the shielded CPU in {} samples (worst {}{fix})",
                        c.name,
                        c.count,
                        fmt_ns(c.worst_ns)
                    )
                });
            }
            Class::Remains(needs, fix) => {
                if (c.worst_ns as f64) >= REMAINS_SHARE * sa.guest_worst_ns as f64 {
                    add_remains(
                        &mut remains,
                        needs,
                        fix,
                        format!("{} (worst {})", c.name, fmt_ns(c.worst_ns)),
                        c.worst_ns,
                    );
                }
            }
        }
    }
    (leaks, remains)
}

/// Time outside the guest in the shielded worst case itself, above the
/// threshold and the guest's own worst: it needs a quieter host.
fn host_remains(remains: &mut Vec<Remains>, shielded: &ScenarioResult, sa: &AttributionSummary) {
    let shielded_outside = shielded.latency.max_ns.saturating_sub(sa.guest_worst_ns);
    if shielded_outside > sa.threshold_ns.max(sa.guest_worst_ns.max(1)) {
        add_remains(
            remains,
            NEEDS_QUIETER_HOST,
            "bare metal, or a host that runs nothing else on this vCPU's CPU".into(),
            format!(
                "time outside the guest, {} of the shielded worst case (steal {})",
                fmt_ns(shielded_outside),
                fmt_ns(sa.steal_ns)
            ),
            shielded_outside,
        );
    }
}

/// The verdict line's clause on time outside the guest: how much, when the
/// host was noisy, else that nothing of it mattered.
fn host_clause(
    noisy: bool,
    outside: u64,
    la: &AttributionSummary,
    sa: &AttributionSummary,
) -> String {
    if noisy {
        format!(
            "; separately, up to {} per sample came from outside the guest (the vCPU was not running; steal {} loaded, {} shielded), which no shield can remove and which is not counted against it",
            fmt_ns(outside),
            fmt_ns(la.steal_ns),
            fmt_ns(sa.steal_ns)
        )
    } else {
        format!(
            "; nothing that mattered came from outside the guest (steal {})",
            fmt_ns(la.steal_ns.max(sa.steal_ns))
        )
    }
}

/// The notes of a traced verdict: a raw ratio lowered by the host, a host
/// that delays the vCPU even idle, tasks of other PID namespaces and of
/// Kubernetes pods on the shielded CPU, and a split left uncertain by
/// causes not named.
fn traced_notes(
    v: &mut Verdict,
    loaded: &ScenarioResult,
    shielded: &ScenarioResult,
    idle: Option<&ScenarioResult>,
    high: f64,
) {
    let Some(sa) = &shielded.attribution else {
        return;
    };
    if let Some(r) = v.loaded_over_shielded {
        if r * 2.0 < high && high >= EFFECT_NEEDED {
            v.notes.push(format!(
                "the raw ratio ({r:.1}x) is low because of time outside the guest, not because of the shield: {}",
                outside_summary(loaded, shielded)
            ));
        }
    }
    if let Some(i) = idle.and_then(|i| i.attribution.as_ref()) {
        if i.outside_worst_ns > i.guest_worst_ns {
            v.notes.push(format!(
                "even idle, the worst sample was mostly outside the guest ({} of {}): this machine's host delays a vCPU on its own",
                fmt_ns(i.outside_worst_ns),
                fmt_ns(idle.map(|s| s.latency.max_ns).unwrap_or(0))
            ));
        }
    }
    let foreign: Vec<String> = sa
        .causes
        .iter()
        .filter(|c| c.kind == OTHER_NAMESPACE_KIND)
        .map(|c| format!("{} (worst {})", c.name, fmt_ns(c.worst_ns)))
        .collect();
    if !foreign.is_empty() {
        v.notes.push(format!(
            "tasks outside this experiment's private PID namespace ran on the shielded CPU: {}; a namespace-scoped shield leaves them alone (compare --system shields the whole machine)",
            foreign.join(", ")
        ));
    }
    let pods: Vec<String> = sa
        .causes
        .iter()
        .filter(|c| c.kind == POD_KIND)
        .map(|c| match &c.fix {
            Some(f) => format!("{} (worst {}; fix: {f})", c.name, fmt_ns(c.worst_ns)),
            None => format!("{} (worst {})", c.name, fmt_ns(c.worst_ns)),
        })
        .collect();
    if !pods.is_empty() {
        v.notes.push(format!(
            "tasks of Kubernetes pods ran on the shielded CPU: {}; the shield leaves pods to the kubelet's CPU manager, so they are not counted against it",
            pods.join(", ")
        ));
    }
    if sa.named_pct() < 95.0 {
        v.notes.push(format!(
            "only {:.1}% of the shielded latency above {} was charged to a named cause (lost trace events: {}): the split is less certain",
            sa.named_pct(),
            fmt_ns(sa.threshold_ns),
            sa.lost_events
        ));
    }
}

/// Jitter inside the guest that the shield left (above the floor and more
/// than a third of the loaded run's): it needs boot parameters.
fn jitter_remains(remains: &mut Vec<Remains>, loaded: &ScenarioResult, shielded: &ScenarioResult) {
    let ok = match (guest_jitter(shielded), guest_jitter(loaded)) {
        (Some(s), Some(l)) => s <= JITTER_FLOOR_PCT || s <= l / 3.0,
        _ => true,
    };
    if !ok {
        add_remains(
            remains,
            NEEDS_BOOT,
            format!("cpushield boot-params --all {}", shielded.measured_cpus),
            format!(
                "other code inside the guest still took up to {:.1}% of a determinism run ({:.1}% loaded)",
                guest_jitter(shielded).unwrap_or(0.0),
                guest_jitter(loaded).unwrap_or(0.0)
            ),
            0,
        );
    }
}

/// The share of a determinism run that other code inside the guest took.
fn guest_jitter(s: &ScenarioResult) -> Option<f64> {
    s.determinism.as_ref().and_then(|d| d.guest_jitter_pct)
}

/// `a, b and c`.
fn words_list(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The shielded scenario's three largest guest causes, each with its fix.
fn top_causes(sa: &AttributionSummary, pending: &[u32]) -> String {
    let top: Vec<String> = sa
        .causes
        .iter()
        .filter(|c| c.guest && c.kind != "self")
        .take(3)
        .map(|c| {
            let what = if cause_irq(&c.name).is_some_and(|irq| pending.contains(&irq)) {
                "the interrupt that completed its pending move off the shielded CPU; "
            } else {
                ""
            };
            match &c.fix {
                Some(f) => format!("{} ({what}worst {}; fix: {f})", c.name, fmt_ns(c.worst_ns)),
                None => format!("{} ({what}worst {})", c.name, fmt_ns(c.worst_ns)),
            }
        })
        .collect();
    if top.is_empty() {
        "no named guest cause above the threshold".to_string()
    } else {
        top.join("; ")
    }
}

/// The threads of an anchor's own process on the measured CPU: cyclictest's
/// main thread, rtla. The `cpushield run` that starts cyclictest is not one:
/// it waits on the housekeeping CPUs (its idle pollers, `cpushield-poll`,
/// are ours anyway), so seen on the measured CPU it is cpushield's bug.
fn anchor_own_threads(tool: &str) -> &'static [&'static str] {
    match tool {
        "cyclictest" => &["cyclictest"],
        _ => &["rtla", "timerlat/"],
    }
}

/// Notes each of cpushield's own threads (other than the measuring ones)
/// that an anchor's trace saw on the shielded CPUs as what it is: a bug in
/// cpushield, never the shield's leak nor the anchor's own time.
fn own_bugs_beside_anchor(v: &mut Verdict, tool: &str, shielded: &Anchor, cpus: &str) {
    let Some(sa) = &shielded.attribution else {
        return;
    };
    for c in sa.causes.iter().filter(|c| c.guest) {
        if classify(c, cpus, anchor_own_threads(tool)) == Class::OwnBug {
            v.notes.push(format!(
                "cpushield's own thread {} ran on the shielded CPU while the {tool} anchor measured, during {} samples (worst {}): a bug in cpushield, not a leak of the shield; please report it with report.json",
                c.name,
                c.count,
                fmt_ns(c.worst_ns)
            ));
        }
    }
}

/// One anchor set beside the verdict: in the verdict's own terms when its
/// wakeups were traced in both scenarios (judged by the same rules, then
/// compared), else raw.
fn check_anchor(
    tool: &str,
    v: &Verdict,
    loaded: &Anchor,
    shielded: &Anchor,
    cpus: &str,
) -> AnchorCheck {
    let works = matches!(v.category.as_str(), WORKS | WORKS_WITH_REMAINING);
    let traced = loaded
        .attribution
        .as_ref()
        .zip(shielded.attribution.as_ref());
    let Some((la, sa)) = traced else {
        let ratio = (shielded.max_ns > 0).then(|| loaded.max_ns as f64 / shielded.max_ns as f64);
        let r = fmt_ratio(ratio);
        let (agrees, line) = if v.guest_loaded_over_shielded.is_some() {
            (
                None,
                format!("raw {r}x: counts the host's stalls; not compared"),
            )
        } else {
            // Both raw: the same terms, the same bar.
            let anchor_works = ratio.is_some_and(|a| a >= RAW_RATIO_NEEDED);
            if anchor_works == v.pass {
                (
                    Some(true),
                    format!("raw {r}x, as the verdict's raw figures: agrees"),
                )
            } else {
                (
                    Some(false),
                    format!(
                        "raw {r}x against the verdict's raw {}x (needs {RAW_RATIO_NEEDED:.0}x): DISAGREES",
                        fmt_ratio(v.loaded_over_shielded)
                    ),
                )
            }
        };
        return AnchorCheck {
            tool: tool.into(),
            terms: "raw".into(),
            loaded_ns: loaded.max_ns,
            shielded_ns: shielded.max_ns,
            ratio,
            agrees,
            line,
        };
    };
    let (high, low) = effect(la, sa);
    let result = anchor_outcome(la, sa, cpus, anchor_own_threads(tool));
    let (agrees, line) = match (v.category.as_str(), &result) {
        (_, Outcome::Works) if works => (Some(true), format!("in the guest {high:.1}x: agrees")),
        (_, Outcome::Leaks(tasks)) if works => (
            Some(false),
            format!(
                "in the guest {high:.1}x, but {} reached CPU {cpus} while it ran: DISAGREES (the verdict says nothing the shield controls did)",
                tasks.join(", ")
            ),
        ),
        (_, Outcome::NoEffect) if works => (
            Some(false),
            format!(
                "in the guest {high:.1}x: DISAGREES (the verdict says the shield works; it needs {EFFECT_NEEDED:.0}x)"
            ),
        ),
        (_, Outcome::Blurred) => (
            None,
            format!("in the guest {low:.1}-{high:.1}x: blurred by the host's stalls, not compared"),
        ),
        (LEAKS, Outcome::Leaks(tasks)) => (
            Some(true),
            format!(
                "in the guest {high:.1}x, and {} reached CPU {cpus} while it ran too: agrees",
                tasks.join(", ")
            ),
        ),
        (LEAKS, _) => (
            None,
            format!("in the guest {high:.1}x: saw nothing the shield should have removed while it ran (the verdict's came while the probe ran); not compared"),
        ),
        _ => (
            None,
            format!("in the guest {high:.1}x: not compared (the verdict could not judge)"),
        ),
    };
    AnchorCheck {
        tool: tool.into(),
        terms: "in the guest".into(),
        loaded_ns: la.guest_worst_ns,
        shielded_ns: sa.guest_worst_ns,
        ratio: Some(high),
        agrees,
        line,
    }
}

/// The IRQ numbers of a scenario's pending-move findings (`IRQ 42 (...) ...`).
fn pending_irqs(s: &ScenarioResult) -> Vec<u32> {
    s.findings
        .iter()
        .filter(|f| f.topic == PENDING_IRQ_TOPIC)
        .filter_map(|f| {
            f.title
                .strip_prefix("IRQ ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// The IRQ number of a traced cause named `irq 42 virtio3-tx`.
fn cause_irq(name: &str) -> Option<u32> {
    name.strip_prefix("irq ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn outside_summary(loaded: &ScenarioResult, shielded: &ScenarioResult) -> String {
    let part = |s: &ScenarioResult| {
        s.attribution
            .as_ref()
            .map(|a| {
                format!(
                    "{} max {}, of which up to {} outside the guest (steal {})",
                    s.name,
                    fmt_ns(s.latency.max_ns),
                    fmt_ns(a.outside_worst_ns),
                    fmt_ns(a.steal_ns)
                )
            })
            .unwrap_or_default()
    };
    format!("{}; {}", part(loaded), part(shielded))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(kind: &str, name: &str, fix: Option<&str>) -> CauseRow {
        CauseRow {
            kind: kind.into(),
            name: name.into(),
            guest: true,
            count: 1,
            total_ns: 1,
            worst_ns: 1,
            fix: fix.map(Into::into),
        }
    }

    fn shielded_with(causes: Vec<CauseRow>) -> ScenarioResult {
        ScenarioResult {
            name: "shielded".into(),
            measured_cpus: "1".into(),
            attribution: Some(AttributionSummary {
                threshold_ns: 100_000,
                guest_worst_ns: 1_000_000,
                causes,
                ..AttributionSummary::default()
            }),
            ..ScenarioResult::default()
        }
    }

    #[test]
    fn what_reaches_the_shield_is_split_into_leaks_remains_and_own_bugs() {
        let mut softirq = cause("softirq", "softirq BLOCK", Some("isolcpus=managed_irq,1"));
        softirq.worst_ns = 600_000;
        let mut small = cause("vector", "local timer interrupt", None);
        small.worst_ns = 10_000;
        let s = shielded_with(vec![
            cause("task", "hog (812)", None),
            cause("task", "cpushield-trace (256)", None),
            softirq,
            small,
            cause("irq", "irq 38 virtio2-input.0", None),
        ]);
        let mut notes = Vec::new();
        let (leaks, remains) = reaching(&s, s.attribution.as_ref().unwrap(), &[38], &mut notes);
        assert_eq!(
            leaks,
            ["task hog (812) ran on the shielded CPU during 1 samples (worst 1 ns)"],
            "the IRQ with a pending move is no leak"
        );
        assert_eq!(
            remains.len(),
            1,
            "a cause under a tenth of the worst is left out"
        );
        assert_eq!(remains[0].what, ["softirq BLOCK (worst 600 us)"]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("cpushield's own thread cpushield-trace (256)"));
    }

    #[test]
    fn time_outside_the_guest_in_the_shielded_worst_case_needs_a_quieter_host() {
        let mut s = shielded_with(Vec::new());
        let mut remains = Vec::new();
        s.latency.max_ns = 1_050_000;
        host_remains(&mut remains, &s, s.attribution.as_ref().unwrap());
        assert!(remains.is_empty(), "50 us outside is under the threshold");
        s.latency.max_ns = 17_000_000;
        host_remains(&mut remains, &s, s.attribution.as_ref().unwrap());
        assert_eq!(remains[0].needs, NEEDS_QUIETER_HOST);
        assert_eq!(
            remains[0].what,
            ["time outside the guest, 16.0 ms of the shielded worst case (steal 0 ns)"]
        );
    }

    #[test]
    fn guest_jitter_the_shield_left_needs_boot_parameters() {
        let with_jitter = |pct: f64| ScenarioResult {
            measured_cpus: "1".into(),
            determinism: Some(crate::model::DeterminismSummary {
                guest_jitter_pct: Some(pct),
                ..crate::model::DeterminismSummary::default()
            }),
            ..ScenarioResult::default()
        };
        let mut remains = Vec::new();
        jitter_remains(&mut remains, &with_jitter(30.0), &with_jitter(9.0));
        assert!(remains.is_empty(), "under a third of the loaded jitter");
        jitter_remains(&mut remains, &with_jitter(12.0), &with_jitter(9.0));
        assert_eq!(remains.len(), 1);
        assert_eq!(
            (remains[0].needs.as_str(), remains[0].fix.as_str()),
            (NEEDS_BOOT, "cpushield boot-params --all 1")
        );
    }

    #[test]
    fn the_host_clause_gives_figures_only_when_the_host_was_noisy() {
        let la = AttributionSummary {
            steal_ns: 230_000_000,
            ..AttributionSummary::default()
        };
        let sa = AttributionSummary::default();
        assert_eq!(
            host_clause(false, 0, &la, &sa),
            "; nothing that mattered came from outside the guest (steal 230 ms)"
        );
        assert!(host_clause(true, 30_600_000, &la, &sa)
            .starts_with("; separately, up to 30.6 ms per sample came from outside the guest"));
    }

    #[test]
    fn traced_notes_name_pods_and_other_namespaces_and_an_uncertain_split() {
        let mut pod = cause(POD_KIND, "app (77)", Some("set the pod's CPUs"));
        pod.worst_ns = 2_000;
        let mut s = shielded_with(vec![pod, cause(OTHER_NAMESPACE_KIND, "sshd (9)", None)]);
        if let Some(a) = s.attribution.as_mut() {
            (a.latency_ns, a.named_ns) = (100, 90);
        }
        let mut v = Verdict::default();
        traced_notes(&mut v, &ScenarioResult::default(), &s, None, 1.0);
        assert_eq!(v.notes.len(), 3, "{:?}", v.notes);
        assert!(v.notes[0]
            .contains("private PID namespace ran on the shielded CPU: sshd (9) (worst 1 ns)"));
        assert!(v.notes[1].contains(
            "pods ran on the shielded CPU: app (77) (worst 2.00 us; fix: set the pod's CPUs)"
        ));
        assert!(v.notes[2].starts_with("only 90.0% of the shielded latency above 100 us"));
    }

    #[test]
    fn each_cause_is_classed_by_what_removes_it() {
        let c = |kind, name, fix| classify(&cause(kind, name, fix), "1", &[]);
        assert_eq!(c("task", "hog (812)", None), Class::Leak);
        assert_eq!(c("task", "cpushield-poll1 (90)", None), Class::Ours);
        assert_eq!(c("task", "cpushield-cpu1 (91)", None), Class::Ours);
        // cpushield's other threads are its own bug, never the shield's leak.
        assert_eq!(c("task", "cpushield (218)", None), Class::OwnBug);
        assert_eq!(c("task", "cpushield-trace (256)", None), Class::OwnBug);
        assert_eq!(c("task", "cpushield-load (300)", None), Class::OwnBug);
        assert_eq!(c("self", "the probe itself", None), Class::Ours);
        assert_eq!(
            c("softirq", "softirq BLOCK", Some("isolcpus=managed_irq,1")),
            Class::Remains(NEEDS_BOOT, "isolcpus=managed_irq,1".into())
        );
        assert_eq!(
            c("vector", "local timer interrupt", None),
            Class::Remains(NEEDS_BOOT, "cpushield boot-params --all 1".into())
        );
        assert_eq!(
            c(
                "irq",
                "irq 38 virtio2-input.0",
                Some("cpushield shield --irqs 1")
            ),
            Class::Leak
        );
        assert_eq!(
            c(
                "other-ns",
                "sshd (77)",
                Some("cpushield shield --procs 1 outside a PID namespace (compare --system): …")
            ),
            Class::Remains(
                NEEDS_SCOPE,
                "cpushield shield --procs 1 outside a PID namespace (compare --system): …".into()
            )
        );
        assert_eq!(
            c("throttled", "RT throttling: hog (5) ran", None),
            Class::Remains(NEEDS_SETTING, "sysctl kernel.sched_rt_runtime_us=-1".into())
        );
        assert!(matches!(
            c("pod", "w (4)", None),
            Class::Remains(NEEDS_KUBELET, _)
        ));
        // An anchor's own process is its business, not a leak.
        assert_eq!(
            classify(
                &cause("task", "cyclictest (811)", None),
                "1",
                &["cyclictest"]
            ),
            Class::Ours
        );
    }

    #[test]
    fn boot_parameters_are_told_from_commands() {
        assert!(is_boot_parameter("isolcpus=managed_irq,1"));
        assert!(is_boot_parameter(
            "irqaffinity=0 (IRQs start on the housekeeping CPUs)"
        ));
        assert!(!is_boot_parameter("sysctl kernel.sched_rt_runtime_us=-1"));
        assert!(!is_boot_parameter("cpushield shield --irqs 1"));
    }
}
