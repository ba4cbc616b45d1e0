//! The verdict: the shield judged on what it controls.
//!
//! When the loaded and shielded scenarios were traced, every sample above the
//! threshold has been split into time caused inside the guest (IRQs,
//! softirqs, tasks, kernel threads, throttling) and time the vCPU did not run
//! at all (the host's steal, firmware). The shield is judged on the first;
//! the second is shown beside it and never blamed on the shield. Without a
//! trace, the raw maxima are judged against the papers' ratios.

use crate::model::{fmt_ratio, human_ns, CompareReport, ScenarioResult, Verdict};

/// The guest-caused worst case must improve at least this much under the shield.
pub const GUEST_RATIO_NEEDED: f64 = 10.0;
/// Raw figures, without a trace: Brosky & Rotolo's shielded-vs-loaded claim.
pub const RAW_RATIO_NEEDED: f64 = 20.0;
/// The anchor shows the shield working at this loaded / shielded ratio.
pub const ANCHOR_RATIO_WORKS: f64 = 10.0;
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

impl CompareReport {
    /// Puts determinism on the common ideal ([`Self::use_common_ideal`]), then
    /// computes the ratios and the verdict: on the guest-caused figures when
    /// the loaded and shielded scenarios were traced, else on the raw ones;
    /// then the sharing experiment on its own line ([`crate::sharing`]).
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
                judge_traced(&mut v, l, s, idle)
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
        if let Some(a) = v.anchor_loaded_over_shielded {
            // cyclictest sees raw wakeups, as our probe does: it cannot tell the
            // guest's causes from the host's steal. So it checks the probe's raw
            // figures; a verdict stricter than both is no contradiction.
            let raw_works = v
                .loaded_over_shielded
                .is_some_and(|r| r >= ANCHOR_RATIO_WORKS);
            let agrees = a < ANCHOR_RATIO_WORKS || v.pass || raw_works;
            v.anchor_agrees = Some(agrees);
            if !agrees {
                v.notes.push(format!(
                    "the verdict disagrees with its cyclictest anchor ({a:.1}x loaded / shielded, {}x in this run's raw figures): this is a bug in cpushield; please report it with report.json",
                    fmt_ratio(v.loaded_over_shielded)
                ));
            } else if !v.pass {
                v.notes.push(format!(
                    "cyclictest sees {a:.1}x loaded / shielded, as this run's raw figures do ({}x): like them it counts the time the vCPU did not run (the host's steal), which the verdict leaves out",
                    fmt_ratio(v.loaded_over_shielded)
                ));
            }
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
    let (Some(l), Some(s)) = (loaded, shielded) else {
        return;
    };
    let (lmax, smax) = (l.latency.max_ns, s.latency.max_ns);
    v.line = format!(
        "{}: shielded worst case {} vs loaded {} ({}x better), {}x idle; determinism jitter ratio {} (raw figures: the run was not traced, so time outside the guest is not separated)",
        if v.pass { "SHIELD WORKS" } else { "SHIELD FALLS SHORT" },
        human_ns(smax),
        human_ns(lmax),
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
                human_ns(smax),
                human_ns(i.latency.max_ns),
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

/// The shield judged on the guest-caused figures of traced runs.
fn judge_traced(
    v: &mut Verdict,
    loaded: &ScenarioResult,
    shielded: &ScenarioResult,
    idle: Option<&ScenarioResult>,
) {
    let (la, sa) = match (&loaded.attribution, &shielded.attribution) {
        (Some(l), Some(s)) => (l, s),
        _ => return,
    };
    let (lg, sg) = (la.guest_worst_ns, sa.guest_worst_ns.max(1));
    let guest_ratio = lg as f64 / sg as f64;
    v.guest_loaded_over_shielded = Some(guest_ratio);
    let guest_jitter = |s: &ScenarioResult| s.determinism.as_ref().and_then(|d| d.guest_jitter_pct);
    v.guest_jitter_shielded_over_loaded = guest_jitter(shielded)
        .zip(guest_jitter(loaded))
        .filter(|(_, l)| *l > 0.0)
        .map(|(s, l)| s / l);
    let jitter_ok = match (guest_jitter(shielded), guest_jitter(loaded)) {
        (Some(s), Some(l)) => s <= JITTER_FLOOR_PCT || s <= l / 3.0,
        _ => true,
    };
    // What still reaches the shielded CPUs from inside the guest.
    let mut removable = Vec::new();
    for f in shielded
        .findings
        .iter()
        .filter(|f| f.severity == "breaks-shield")
    {
        let fix = f
            .remedies
            .first()
            .map(|r| format!(" (fix: {r})"))
            .unwrap_or_default();
        let line = format!("{}{fix}", f.title);
        if f.runtime_fix {
            removable.push(line.clone());
        }
        v.remaining.push(line);
    }
    // Our own threads (probe, idle poller) are placed there on purpose.
    for c in sa
        .causes
        .iter()
        .filter(|c| c.kind == "task" && !c.name.starts_with("cpushield-"))
    {
        let line = format!(
            "task {} ran on the shielded CPU during {} samples (worst {})",
            c.name,
            c.count,
            human_ns(c.worst_ns)
        );
        removable.push(line.clone());
        v.remaining.push(line);
    }
    let steal = la.steal_ns.max(sa.steal_ns);
    let outside = sa.outside_worst_ns.max(la.outside_worst_ns);
    v.host_noisy = outside > sa.threshold_ns.max(sg);
    v.pass = guest_ratio >= GUEST_RATIO_NEEDED && removable.is_empty() && jitter_ok;
    let cpus = &shielded.measured_cpus;
    let host = if v.host_noisy {
        format!(
            "; separately, up to {} per sample came from outside the guest (the vCPU was not running; steal {} loaded, {} shielded), which no shield can remove and which is not counted against it",
            human_ns(outside),
            human_ns(la.steal_ns),
            human_ns(sa.steal_ns)
        )
    } else {
        format!(
            "; nothing that mattered came from outside the guest (steal {})",
            human_ns(steal)
        )
    };
    let raw = format!(
        "raw {} → {} ({}x)",
        human_ns(loaded.latency.max_ns),
        human_ns(shielded.latency.max_ns),
        fmt_ratio(v.loaded_over_shielded)
    );
    // How much of the shielded worst case itself was outside the guest.
    let shielded_outside = shielded.latency.max_ns.saturating_sub(sa.guest_worst_ns);
    v.line = if v.pass {
        if shielded_outside > sa.threshold_ns.max(sg) {
            format!(
                "SHIELD WORKS: the shield removed {} of {} of in-guest interference on CPU {cpus} ({guest_ratio:.0}x; {raw}); the remaining {} of the shielded worst case came from outside the guest (steal {}): the host, not the shield",
                human_ns(lg.saturating_sub(sa.guest_worst_ns)),
                human_ns(lg),
                human_ns(shielded_outside),
                human_ns(sa.steal_ns)
            )
        } else {
            format!(
                "SHIELD WORKS: worst case caused inside the guest {} loaded → {} shielded on CPU {cpus} ({guest_ratio:.0}x; {raw}){host}",
                human_ns(lg),
                human_ns(sa.guest_worst_ns)
            )
        }
    } else if !removable.is_empty() {
        format!(
            "SHIELD LEAKS: worst case caused inside the guest {} loaded → {} shielded on CPU {cpus} ({guest_ratio:.1}x), but the shield should have kept this away: {}{host}",
            human_ns(lg),
            human_ns(sa.guest_worst_ns),
            removable.join("; ")
        )
    } else if guest_ratio < GUEST_RATIO_NEEDED {
        let pending = pending_irqs(shielded);
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
                    Some(f) => format!(
                        "{} ({what}worst {}; fix: {f})",
                        c.name,
                        human_ns(c.worst_ns)
                    ),
                    None => format!("{} ({what}worst {})", c.name, human_ns(c.worst_ns)),
                }
            })
            .collect();
        format!(
            "SHIELD FALLS SHORT: worst case caused inside the guest {} loaded → {} shielded on CPU {cpus} ({guest_ratio:.1}x, needs {GUEST_RATIO_NEEDED:.0}x); still reaching it: {}{host}",
            human_ns(lg),
            human_ns(sa.guest_worst_ns),
            if top.is_empty() {
                "no named guest cause above the threshold".to_string()
            } else {
                top.join("; ")
            }
        )
    } else {
        format!(
            "SHIELD FALLS SHORT on determinism: guest-caused jitter {:.1}% shielded vs {:.1}% loaded (needs a third, or under {JITTER_FLOOR_PCT:.0}%); latency {guest_ratio:.0}x better{host}",
            guest_jitter(shielded).unwrap_or(0.0),
            guest_jitter(loaded).unwrap_or(0.0)
        )
    };
    if let Some(r) = v.loaded_over_shielded {
        if r < GUEST_RATIO_NEEDED && guest_ratio >= GUEST_RATIO_NEEDED {
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
                human_ns(i.outside_worst_ns),
                human_ns(idle.map(|s| s.latency.max_ns).unwrap_or(0))
            ));
        }
    }
    let foreign: Vec<String> = sa
        .causes
        .iter()
        .filter(|c| c.kind == OTHER_NAMESPACE_KIND)
        .map(|c| format!("{} (worst {})", c.name, human_ns(c.worst_ns)))
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
            Some(f) => format!("{} (worst {}; fix: {f})", c.name, human_ns(c.worst_ns)),
            None => format!("{} (worst {})", c.name, human_ns(c.worst_ns)),
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
            human_ns(sa.threshold_ns),
            sa.lost_events
        ));
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
                    human_ns(s.latency.max_ns),
                    human_ns(a.outside_worst_ns),
                    human_ns(a.steal_ns)
                )
            })
            .unwrap_or_default()
    };
    format!("{}; {}", part(loaded), part(shielded))
}
