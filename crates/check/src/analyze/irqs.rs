//! Device IRQs and a checked CPU: what each one is to the shield (a move the
//! kernel has not completed yet, an IRQ the shield did not move and why, a
//! kernel-managed one), and the finding with what is left to do.

use super::{join, CheckInput, Count};
use crate::facts::Managed;
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::target::{ShieldInForce, ShieldKind};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths::{INTERRUPTS, IRQ_DIR};
use cpushield_parse::irq_affinity::IrqAffinity;

/// Why a kernel-managed IRQ is taken for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ManagedBy {
    /// debugfs says IRQD_AFFINITY_MANAGED.
    Debugfs,
    /// The shield's write was refused: the mask it left still has the CPU.
    Refused,
    /// A block-queue interrupt and no shield tried to move it.
    QueueName,
}

/// What an IRQ is to a checked CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IrqClass {
    /// Its move off the CPU was pending at the start and is complete: the
    /// interrupt that arrived there (at most one) completed it.
    MoveCompleted,
    /// Its move off the CPU is pending: its next interrupt still arrives there.
    MovePending,
    /// Its mask excludes the CPU, yet more interrupts arrived there than a
    /// pending move explains.
    MoveStuck,
    /// Its mask changed during the interval, away from the CPU.
    MovedDuring,
    /// The kernel manages its affinity; only a boot parameter moves it.
    Managed(ManagedBy),
    /// The CPU is not shielded from interrupts (no shield, or not there).
    NotShielded,
    /// It appeared after the shield went up.
    AppearedSince,
    /// Its mask was changed after the shield set it (irqbalance, a user);
    /// `widened`: the new mask has CPUs outside the shield, so applying the
    /// shield again moves it (Brosky's rule on the new request).
    Rewritten {
        /// The new mask has CPUs outside the shield.
        widened: bool,
    },
    /// It asked only for shielded CPUs: Brosky's rule keeps it there.
    RequestedHere,
    /// Its affinity could not be read.
    Unknown,
}

/// What `irq` is to `cpu`: from its affinity at the start and at the end of
/// the interval, the interrupts that `arrived` on the CPU in between, what is
/// known of its management, and the shield in force. `None`: it neither
/// arrived nor may arrive there.
pub(crate) fn classify(
    irq: u32,
    cpu: usize,
    before: Option<&IrqAffinity>,
    after: Option<&IrqAffinity>,
    arrived: u64,
    managed: Managed,
    shield: Option<&ShieldInForce>,
) -> Option<IrqClass> {
    let pending_before = before.is_some_and(|a| a.is_pending_off(cpu));
    let pending_now = after.is_some_and(|a| a.is_pending_off(cpu));
    let allowed_now = after.is_some_and(|a| a.requested.contains(cpu));
    if pending_now || (pending_before && !allowed_now) {
        return match arrived {
            0 if pending_now => Some(IrqClass::MovePending),
            0 => None,
            1 if pending_now => Some(IrqClass::MovePending),
            1 => Some(IrqClass::MoveCompleted),
            _ => Some(IrqClass::MoveStuck),
        };
    }
    let Some(now) = after else {
        return (arrived > 0).then_some(IrqClass::Unknown);
    };
    if !allowed_now {
        return (arrived > 0).then_some(IrqClass::MovedDuring);
    }
    if arrived == 0 && !now.delivered_to().contains(cpu) {
        return None;
    }
    if managed == Managed::Yes {
        return Some(IrqClass::Managed(ManagedBy::Debugfs));
    }
    // A shield whose state is gone knows no IRQ's request: it cannot tell
    // why an IRQ is still there.
    let Some(shield) = shield.filter(|s| s.masks.irqs.contains(cpu) && s.state_lost.is_none())
    else {
        return Some(if managed == Managed::Likely {
            IrqClass::Managed(ManagedBy::QueueName)
        } else {
            IrqClass::NotShielded
        });
    };
    let Some(requested) = shield.irq_requested.get(&irq) else {
        return Some(IrqClass::AppearedSince);
    };
    // What the shield left on it: read back after its last change, or (older
    // states) the request itself when the mask still reads so.
    let left = shield.irq_set.get(&irq).unwrap_or(requested);
    Some(if now.requested != *left {
        IrqClass::Rewritten {
            widened: !now.requested.is_subset(&shield.masks.irqs),
        }
    } else if requested.is_subset(&shield.masks.irqs) {
        IrqClass::RequestedHere
    } else {
        IrqClass::Managed(ManagedBy::Refused)
    })
}

/// The facts of one IRQ on one CPU.
struct Seen<'a> {
    irq: u32,
    name: String,
    before: Option<&'a IrqAffinity>,
    after: Option<&'a IrqAffinity>,
}

impl Seen<'_> {
    fn label(&self) -> String {
        if self.name.is_empty() {
            format!("IRQ {}", self.irq)
        } else {
            format!("IRQ {} ({})", self.irq, self.name)
        }
    }

    /// `/proc/irq/N/smp_affinity_list 0, effective 1` at the end, and the
    /// start when it differed.
    fn affinity_evidence(&self) -> String {
        let show = |a: Option<&IrqAffinity>| match a {
            Some(a) => format!(
                "smp_affinity_list {}{}",
                a.requested.to_list(),
                a.effective
                    .as_ref()
                    .map(|e| format!(", effective {}", e.to_list()))
                    .unwrap_or_default()
            ),
            None => "smp_affinity_list ?".into(),
        };
        let now = show(self.after);
        match self.before {
            Some(b) if Some(b) != self.after => format!(
                "{IRQ_DIR}/{}/: at the start {}; at the end {now}",
                self.irq,
                show(Some(b))
            ),
            _ => format!("{IRQ_DIR}/{}/{now}", self.irq),
        }
    }
}

fn housekeeping_mask_remedy(input: &CheckInput<'_>, irq: u32) -> Remedy {
    Remedy::runtime(format!(
        "echo {} > /proc/irq/{irq}/smp_affinity (CPUs {})",
        input.housekeeping().to_mask(),
        input.housekeeping().to_list()
    ))
}

fn pending_boot_remedy(input: &CheckInput<'_>) -> Option<Remedy> {
    let hk = input.housekeeping();
    (!hk.is_empty()).then(|| {
        Remedy::boot(format!(
            "{} (IRQs start on the housekeeping CPUs, so no move is left pending when the shield goes up)",
            cpushield_shield::irq_moves::boot_remedy(&hk)
        ))
    })
}

fn managed_boot_remedy(list: &str) -> Remedy {
    Remedy::boot(format!("isolcpus=managed_irq,{list}"))
}

/// "once" or "N times".
fn times(count: u64) -> String {
    if count == 1 {
        "once".to_string()
    } else {
        format!("{count} times")
    }
}

/// The title of a kernel-managed IRQ's finding and why it is taken for one.
fn managed_title(by: ManagedBy, label: &str, cpu: usize) -> (String, &'static str) {
    match by {
        ManagedBy::Debugfs => (
            format!("{label} is kernel-managed and arrives on CPU {cpu}: its affinity can only change at boot"),
            "; debugfs: IRQD_AFFINITY_MANAGED",
        ),
        ManagedBy::Refused => (
            format!("{label} is kernel-managed and arrives on CPU {cpu}: its affinity can only change at boot"),
            "; the shield asked the kernel to move it off the shielded CPU and the mask stayed (the kernel refuses run-time changes of a managed IRQ)",
        ),
        ManagedBy::QueueName => (
            format!("{label} arrives on CPU {cpu}; it is a block-queue interrupt, which the kernel usually manages (then only a boot parameter moves it)"),
            "; whether the kernel manages it is not shown here (no /sys/kernel/debug/irq/irqs: CONFIG_GENERIC_IRQ_DEBUGFS, debugfs mounted)",
        ),
    }
}

/// A device IRQ that arrived on a CPU, with what every finding about it says.
struct Arrival<'a, 'b> {
    input: &'a CheckInput<'b>,
    cpu: usize,
    irq: u32,
    /// `IRQ N (name)`.
    label: String,
    /// How often it arrived, in words.
    times: String,
    /// The count and the affinity, as read.
    evidence: String,
}

impl Arrival<'_, '_> {
    /// A finding on the CPU; each says what the IRQ shield already did there.
    fn finding(&self, sev: Severity, topic: Topic, title: String, why: &str) -> Finding {
        Finding::new(
            sev,
            topic,
            Some(self.cpu),
            title,
            format!("{}{why}", self.evidence),
        )
        .in_place(self.input.in_place(ShieldKind::Irqs, self.cpu))
    }

    /// A move the kernel completes at the next interrupt: only booting with
    /// the IRQs on the housekeeping CPUs avoids it.
    fn pending(&self, sev: Severity, topic: Topic, title: String) -> Finding {
        self.finding(sev, topic, title, "")
            .remedy_if(pending_boot_remedy(self.input))
    }

    /// A kernel-managed IRQ: the boot parameter first, since the shield's
    /// write of a managed IRQ's mask is refused; only where the kernel does
    /// not say so is the write worth a try.
    fn managed(&self, by: ManagedBy) -> Finding {
        let (title, why) = managed_title(by, &self.label, self.cpu);
        let try_shield = (by == ManagedBy::QueueName)
            .then(|| self.input.shield_remedy(ShieldKind::Irqs))
            .flatten()
            .map(|r| {
                Remedy::cpushield(format!(
                    "{} (moves it if the kernel does not manage it)",
                    r.action
                ))
            });
        self.finding(Severity::BreaksShield, Topic::Irq, title, why)
            .remedy(managed_boot_remedy(&self.input.list()))
            .remedy_if(try_shield)
    }

    /// The finding for what the IRQ is to the CPU.
    fn classified(&self, class: IrqClass) -> Finding {
        let (input, cpu, irq) = (self.input, self.cpu, self.irq);
        let (label, times) = (&self.label, &self.times);
        let list = input.list();
        match class {
            IrqClass::MoveCompleted => self.pending(
                Severity::Warn,
                Topic::IrqPending,
                format!("{label} arrived {times} on CPU {cpu} and so completed its pending move off it: the kernel moves such an IRQ at its next interrupt, which still arrives on the old CPU; none will follow"),
            ),
            IrqClass::MovePending => self.pending(
                Severity::Warn,
                Topic::IrqPending,
                format!("{label} arrived {times} on CPU {cpu}; its move off CPU {cpu} is still pending (the kernel retries it at the next interrupt)"),
            ),
            IrqClass::MoveStuck => self.pending(
                Severity::BreaksShield,
                Topic::Irq,
                format!("{label} arrived {times} on CPU {cpu} although its mask excludes CPU {cpu}: more than the one interrupt that completes a pending move"),
            ),
            IrqClass::MovedDuring => self.finding(
                Severity::Warn,
                Topic::Irq,
                format!("{label} arrived {times} on CPU {cpu} before its mask changed during the check to leave CPU {cpu} out"),
                "",
            ),
            IrqClass::Managed(by) => self.managed(by),
            IrqClass::NotShielded | IrqClass::Unknown => self
                .finding(
                    Severity::BreaksShield,
                    Topic::Irq,
                    format!("{label} arrives on CPU {cpu}"),
                    "",
                )
                .remedy_if(input.shield_remedy(ShieldKind::Irqs)),
            IrqClass::AppearedSince => self.finding(
                Severity::BreaksShield,
                Topic::Irq,
                format!("{label} arrives on CPU {cpu}; it appeared after the shield went up, so the shield has not moved it"),
                "",
            )
            .remedy(Remedy::cpushield(format!(
                "cpushield shield --irqs {list} (applies the shield again, to the IRQs that appeared since)"
            ))),
            IrqClass::Rewritten { widened: true } => self.finding(
                Severity::BreaksShield,
                Topic::Irq,
                format!("{label} arrives on CPU {cpu}: its mask was changed after the shield set it (irqbalance, or a write to smp_affinity)"),
                "",
            )
            .remedy(Remedy::cpushield(format!(
                "cpushield shield --irqs {list} (applies Brosky's rule again, to IRQ {irq}'s new mask)"
            ))),
            IrqClass::Rewritten { widened: false } => self.finding(
                Severity::Warn,
                Topic::Irq,
                format!("{label} arrives on CPU {cpu}: its mask was set to shielded CPUs only after the shield went up, and a shield keeps such a request (if it is not your real-time device's interrupt, move it)"),
                "",
            )
            .remedy(housekeeping_mask_remedy(input, irq)),
            IrqClass::RequestedHere => self.finding(
                Severity::Warn,
                Topic::Irq,
                format!("{label} asked only for shielded CPUs and arrives on CPU {cpu}; a shield keeps it there (if it is not your real-time device's interrupt, move it)"),
                "",
            )
            .remedy(housekeeping_mask_remedy(input, irq)),
        }
    }
}

/// The finding for a device IRQ that arrived on `cpu` during the interval.
pub(super) fn arrived(input: &CheckInput<'_>, cpu: usize, irq: u32, c: &Count) -> Finding {
    let seen = Seen {
        irq,
        name: c.name.clone(),
        before: input.before.irq_affinity.get(&irq),
        after: input.after.irq_affinity.get(&irq),
    };
    let class = classify(
        irq,
        cpu,
        seen.before,
        seen.after,
        c.count,
        managed_by_kernel(input, irq),
        input.shield,
    )
    .unwrap_or(IrqClass::Unknown);
    let arrival = Arrival {
        input,
        cpu,
        irq,
        label: seen.label(),
        times: times(c.count),
        evidence: format!(
            "{INTERRUPTS}: {} on CPU {cpu} in {:.1} s ({:.1}/s); {}",
            c.count,
            input.interval_s(),
            c.per_s,
            seen.affinity_evidence()
        ),
    };
    arrival.classified(class)
}

/// Whether the kernel manages `irq`'s affinity, as far as is known.
fn managed_by_kernel(input: &CheckInput<'_>, irq: u32) -> Managed {
    input
        .facts
        .irqs
        .get(&irq)
        .map(|f| f.managed)
        .unwrap_or(Managed::Unknown)
}

/// The IRQs that may be delivered to a CPU without having arrived, by kind
/// of finding.
#[derive(Debug, Default, PartialEq)]
struct Deliverable {
    /// Moves off the CPU still pending.
    pending: Vec<u32>,
    /// Movable IRQs no shield keeps off the CPU.
    movable: Vec<u32>,
    /// Kernel-managed IRQs.
    managed: Vec<u32>,
    /// IRQs that asked for shielded CPUs only, which the shield keeps.
    kept: Vec<u32>,
    /// IRQs that appeared or changed after the shield: applying it again moves them.
    again: Vec<u32>,
}

impl Deliverable {
    /// Files `irq` under the finding its class calls for (none for the rest).
    fn add(&mut self, irq: u32, class: Option<IrqClass>) {
        let list = match class {
            Some(IrqClass::MovePending) => &mut self.pending,
            Some(IrqClass::NotShielded) => &mut self.movable,
            Some(IrqClass::Managed(_)) => &mut self.managed,
            Some(IrqClass::RequestedHere | IrqClass::Rewritten { widened: false }) => {
                &mut self.kept
            }
            Some(IrqClass::AppearedSince | IrqClass::Rewritten { widened: true }) => {
                &mut self.again
            }
            _ => return,
        };
        list.push(irq);
    }
}

/// "s" for a list of more than one IRQ.
fn plural(v: &[u32]) -> &'static str {
    if v.len() == 1 {
        ""
    } else {
        "s"
    }
}

/// Findings for the device IRQs that may be delivered to `cpu` although
/// none arrived during the interval, one per kind.
pub(super) fn may_be_delivered(input: &CheckInput<'_>, cpu: usize) -> Vec<Finding> {
    let mut d = Deliverable::default();
    let lines = input.irq_lines();
    for (irq, after) in &input.after.irq_affinity {
        if lines.arrived(*irq, cpu) > 0 {
            continue; // a finding of its own
        }
        let class = classify(
            *irq,
            cpu,
            input.before.irq_affinity.get(irq),
            Some(after),
            0,
            managed_by_kernel(input, *irq),
            input.shield,
        );
        d.add(*irq, class);
    }
    let irqs_in_place = input.in_place(ShieldKind::Irqs, cpu);
    [
        pending_moves(input, cpu, &d.pending, &irqs_in_place),
        movable(input, cpu, &d.movable),
        managed(input, cpu, &d.managed, &irqs_in_place),
        kept(input, cpu, &d.kept, &irqs_in_place),
        changed_since(input, cpu, &d.again, &irqs_in_place),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Moves off the CPU the kernel has not completed.
fn pending_moves(
    input: &CheckInput<'_>,
    cpu: usize,
    pending: &[u32],
    irqs_in_place: &Option<String>,
) -> Option<Finding> {
    (!pending.is_empty()).then(|| {
        Finding::new(
            Severity::Warn,
            Topic::IrqPending,
            Some(cpu),
            format!(
                "move pending for IRQ{} {} off CPU {cpu}: {}",
                plural(pending),
                join(pending),
                cpushield_shield::irq_moves::meaning(&CpuSet::from_cpus([cpu]))
            ),
            format!(
                "their smp_affinity_list leaves CPU {cpu} out, their effective_affinity_list still names it; no interrupt of theirs arrived in the interval"
            ),
        )
        .in_place(irqs_in_place.clone())
        .remedy_if(pending_boot_remedy(input))
    })
}

/// Movable IRQs no shield keeps off the CPU.
fn movable(input: &CheckInput<'_>, cpu: usize, movable: &[u32]) -> Option<Finding> {
    (!movable.is_empty()).then(|| {
        Finding::new(
            Severity::Warn,
            Topic::Irq,
            Some(cpu),
            format!(
                "{} movable IRQ{} may be delivered to CPU {cpu}",
                movable.len(),
                plural(movable)
            ),
            format!(
                "IRQs {} have CPU {cpu} in effective_affinity_list (or smp_affinity_list)",
                join(movable)
            ),
        )
        .remedy_if(input.shield_remedy(ShieldKind::Irqs))
    })
}

/// Kernel-managed IRQs: only a boot parameter moves them.
fn managed(
    input: &CheckInput<'_>,
    cpu: usize,
    managed: &[u32],
    irqs_in_place: &Option<String>,
) -> Option<Finding> {
    (!managed.is_empty()).then(|| {
        Finding::new(
            Severity::Warn,
            Topic::Irq,
            Some(cpu),
            format!(
                "kernel-managed IRQ{} {} can be delivered to CPU {cpu}; run time cannot move them",
                plural(managed),
                join(managed)
            ),
            "managed affinity (debugfs IRQD_AFFINITY_MANAGED; without debugfs a block-queue interrupt, or one whose mask the shield could not change)".to_string(),
        )
        .in_place(irqs_in_place.clone())
        .remedy(managed_boot_remedy(&input.list()))
    })
}

/// IRQs that asked for shielded CPUs only: the shield keeps such a request.
fn kept(
    input: &CheckInput<'_>,
    cpu: usize,
    kept: &[u32],
    irqs_in_place: &Option<String>,
) -> Option<Finding> {
    if kept.is_empty() {
        return None;
    }
    let f = Finding::new(
        Severity::Warn,
        Topic::Irq,
        Some(cpu),
        format!(
            "IRQ{} {} asked for shielded CPUs only and may be delivered to CPU {cpu}; a shield keeps such a request (move them if they are not your real-time device's)",
            plural(kept),
            join(kept)
        ),
        format!("their smp_affinity_list names only shielded CPUs, CPU {cpu} among them"),
    )
    .in_place(irqs_in_place.clone());
    Some(
        kept.iter()
            .fold(f, |f, irq| f.remedy(housekeeping_mask_remedy(input, *irq))),
    )
}

/// IRQs that appeared, or whose masks changed, after the shield went up.
fn changed_since(
    input: &CheckInput<'_>,
    cpu: usize,
    again: &[u32],
    irqs_in_place: &Option<String>,
) -> Option<Finding> {
    (!again.is_empty()).then(|| {
        Finding::new(
            Severity::Warn,
            Topic::Irq,
            Some(cpu),
            format!(
                "IRQ{} {} may be delivered to CPU {cpu}: they appeared, or their masks changed, after the shield went up",
                plural(again),
                join(again)
            ),
            format!("CPU {cpu} in their effective_affinity_list; the shield's saved state has another mask, or none, for them"),
        )
        .in_place(irqs_in_place.clone())
        .remedy(Remedy::cpushield(format!(
            "cpushield shield --irqs {} (applies the shield again, to these IRQs' current masks)",
            input.list()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_shield::snapshot::Scope;
    use cpushield_shield::ShieldMasks;
    use std::collections::BTreeMap;

    fn aff(mask: &str, eff: &str) -> IrqAffinity {
        IrqAffinity {
            requested: CpuSet::parse_list(mask).unwrap(),
            effective: Some(CpuSet::parse_list(eff).unwrap()),
        }
    }

    /// A shield of CPU 1 from everything; IRQ 42 asked for 0-1 and was set to 0.
    fn shield() -> ShieldInForce {
        let set = |pairs: &[(u32, &str)]| -> BTreeMap<u32, CpuSet> {
            pairs
                .iter()
                .map(|(i, m)| (*i, CpuSet::parse_list(m).unwrap()))
                .collect()
        };
        ShieldInForce {
            masks: ShieldMasks::all(&CpuSet::from_cpus([1])),
            scope: Scope::System,
            irq_requested: set(&[(42, "0-1"), (36, "0-1"), (50, "1")]),
            irq_set: set(&[(42, "0"), (36, "0-1"), (50, "1")]),
            state_lost: None,
        }
    }

    fn class(
        before: &IrqAffinity,
        after: &IrqAffinity,
        arrived: u64,
        shield: Option<&ShieldInForce>,
    ) -> Option<IrqClass> {
        classify(
            42,
            1,
            Some(before),
            Some(after),
            arrived,
            Managed::Unknown,
            shield,
        )
    }

    #[test]
    fn a_move_pending_at_the_start_that_one_interrupt_completed_is_not_a_leak() {
        let s = shield();
        assert_eq!(
            class(&aff("0", "1"), &aff("0", "0"), 1, Some(&s)),
            Some(IrqClass::MoveCompleted)
        );
        // Nothing arrived and it moved: nothing to say about CPU 1.
        assert_eq!(class(&aff("0", "1"), &aff("0", "0"), 0, Some(&s)), None);
    }

    #[test]
    fn a_move_still_pending_is_named_pending_with_no_more_than_one_interrupt() {
        let s = shield();
        for arrived in [0, 1] {
            assert_eq!(
                class(&aff("0", "1"), &aff("0", "1"), arrived, Some(&s)),
                Some(IrqClass::MovePending)
            );
        }
        assert_eq!(
            class(&aff("0", "1"), &aff("0", "1"), 2, Some(&s)),
            Some(IrqClass::MoveStuck)
        );
        assert_eq!(
            class(&aff("0", "1"), &aff("0", "0"), 3, Some(&s)),
            Some(IrqClass::MoveStuck)
        );
        // Without any shield, a pending move is still what it is.
        assert_eq!(
            class(&aff("0", "1"), &aff("0", "1"), 0, None),
            Some(IrqClass::MovePending)
        );
    }

    #[test]
    fn an_irq_the_shield_did_not_move_is_told_apart_by_why() {
        let s = shield();
        let here = aff("0-1", "1");
        // No shield, or not shielded from interrupts there.
        assert_eq!(class(&here, &here, 3, None), Some(IrqClass::NotShielded));
        let mut procs_only = shield();
        procs_only.masks.irqs = CpuSet::new();
        assert_eq!(
            class(&here, &here, 3, Some(&procs_only)),
            Some(IrqClass::NotShielded)
        );
        // IRQ 42: the shield set 0, someone wrote 0-1 since.
        assert_eq!(
            class(&here, &here, 3, Some(&s)),
            Some(IrqClass::Rewritten { widened: true })
        );
        let only_one = aff("1", "1");
        assert_eq!(
            class(&only_one, &only_one, 3, Some(&s)),
            Some(IrqClass::Rewritten { widened: false })
        );
        // IRQ 36: the shield asked, the kernel kept 0-1: managed.
        assert_eq!(
            classify(
                36,
                1,
                Some(&here),
                Some(&here),
                3,
                Managed::Unknown,
                Some(&s)
            ),
            Some(IrqClass::Managed(ManagedBy::Refused))
        );
        // IRQ 50 asked for CPU 1 only: Brosky's rule keeps it.
        assert_eq!(
            classify(
                50,
                1,
                Some(&only_one),
                Some(&only_one),
                3,
                Managed::Unknown,
                Some(&s)
            ),
            Some(IrqClass::RequestedHere)
        );
        // IRQ 77 is not in the saved state.
        assert_eq!(
            classify(
                77,
                1,
                Some(&here),
                Some(&here),
                3,
                Managed::Unknown,
                Some(&s)
            ),
            Some(IrqClass::AppearedSince)
        );
        // debugfs knows best; a block queue unshielded is likely managed.
        assert_eq!(
            classify(42, 1, Some(&here), Some(&here), 3, Managed::Yes, None),
            Some(IrqClass::Managed(ManagedBy::Debugfs))
        );
        assert_eq!(
            classify(42, 1, Some(&here), Some(&here), 3, Managed::Likely, None),
            Some(IrqClass::Managed(ManagedBy::QueueName))
        );
    }

    #[test]
    fn an_irq_delivered_elsewhere_that_did_not_arrive_is_nothing_to_the_cpu() {
        let s = shield();
        let elsewhere = aff("0-1", "0");
        assert_eq!(class(&elsewhere, &elsewhere, 0, Some(&s)), None);
        assert_eq!(class(&aff("0", "0"), &aff("0", "0"), 0, Some(&s)), None);
        assert_eq!(
            class(&aff("0-1", "1"), &aff("0", "0"), 2, Some(&s)),
            Some(IrqClass::MovedDuring)
        );
    }

    #[test]
    fn irqs_that_may_be_delivered_are_filed_by_the_finding_their_class_calls_for() {
        let mut d = Deliverable::default();
        d.add(1, Some(IrqClass::MovePending));
        d.add(2, Some(IrqClass::NotShielded));
        d.add(3, Some(IrqClass::Managed(ManagedBy::Refused)));
        d.add(4, Some(IrqClass::RequestedHere));
        d.add(5, Some(IrqClass::Rewritten { widened: false }));
        d.add(6, Some(IrqClass::AppearedSince));
        d.add(7, Some(IrqClass::Rewritten { widened: true }));
        d.add(8, Some(IrqClass::MoveCompleted));
        d.add(9, None);
        assert_eq!(
            d,
            Deliverable {
                pending: vec![1],
                movable: vec![2],
                managed: vec![3],
                kept: vec![4, 5],
                again: vec![6, 7],
            }
        );
    }

    #[test]
    fn a_single_arrival_reads_once_and_a_single_irq_has_no_plural() {
        assert_eq!(times(1), "once");
        assert_eq!(times(3), "3 times");
        assert_eq!(plural(&[1]), "");
        assert_eq!(plural(&[1, 2]), "s");
    }

    #[test]
    fn a_managed_irq_says_how_it_is_known_to_be_managed() {
        assert!(managed_title(ManagedBy::Debugfs, "IRQ 5", 1)
            .1
            .contains("IRQD_AFFINITY_MANAGED"));
        assert!(managed_title(ManagedBy::Refused, "IRQ 5", 1)
            .1
            .contains("refuses"));
        assert!(managed_title(ManagedBy::QueueName, "IRQ 5", 1)
            .0
            .contains("block-queue"));
    }
}
