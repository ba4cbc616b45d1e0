//! Carries out a plan through the kernel door. Tasks that exit meanwhile are
//! fine; kernel-managed IRQs and best-effort settings become notes; anything
//! else required stops the run with the path and the errno.

use crate::plan::{Note, Plan, Severity, Step, WriteKind};
use cpushield_kernel::Kernel;
use std::io;
use std::path::Path;

/// What applying a plan did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Outcome {
    /// Steps carried out.
    pub applied: usize,
    /// Tasks moved between cgroups.
    pub moved: usize,
    /// Affinities set.
    pub affinities: usize,
    /// IRQs whose affinity changed.
    pub irqs: usize,
    /// Tasks that exited while the plan ran.
    pub vanished: usize,
    /// Things that could not be done, with the reason and the remedy.
    pub notes: Vec<Note>,
    /// The affinity each affinity step left on its task, as read (by the
    /// step, or once more after a set): what a read back would find.
    #[serde(skip)]
    pub affinities_left: Vec<(i32, cpushield_cpuset::CpuSet)>,
}

fn errno(e: &io::Error) -> i32 {
    cpushield_kernel::os_errno(e).unwrap_or(0)
}

/// Extended attribute set on each cgroup cpushield creates (kernfs keeps
/// `trusted.*` attributes on cgroup v1 and v2 directories).
pub const CGROUP_MARK: &str = "trusted.cpushield";

/// Test hook: microseconds to pause after each step, so that a crash test can
/// SIGKILL a shield reliably while it is half applied. Unset in normal use.
pub const STEP_DELAY_ENV: &str = "CPUSHIELD_TEST_STEP_DELAY_US";

/// Applies every step in order. Returns the first required failure as an error.
pub fn apply(kernel: &dyn Kernel, plan: &Plan) -> io::Result<Outcome> {
    let mut out = Outcome::default();
    let step_delay = std::env::var(STEP_DELAY_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(std::time::Duration::from_micros);
    // The tasks file of the last Move, held open for the next ones: moving
    // thousands of tasks opens it once (each ID is still its own write).
    let mut mover: Option<(&Path, Box<dyn cpushield_kernel::KernelWriter + '_>)> = None;
    // CPUSHIELD_TIMING: time per kind of step.
    let mut times: Option<[std::time::Duration; 5]> =
        crate::timing::enabled().then_some(Default::default());
    let mut next = 0;
    while let Some(step) = plan.steps.get(next) {
        next += 1;
        let started = times.map(|_| std::time::Instant::now());
        // A long run of affinities (a reset of thousands of tasks) is read
        // and set on two threads: each task's is independent of the others'.
        let run = plan.steps[next - 1..]
            .iter()
            .take_while(|s| matches!(s, Step::Affinity { .. }))
            .count();
        if step_delay.is_none() && run >= PARALLEL_AFFINITIES_FROM {
            mover = None;
            let done = affinities_on_two_threads(kernel, &plan.steps[next - 1..next - 1 + run]);
            out.affinities += done.affinities;
            out.vanished += done.vanished;
            out.notes.extend(done.notes);
            out.affinities_left.extend(done.affinities_left);
            out.applied += run;
            next += run - 1;
            if let (Some(times), Some(started)) = (times.as_mut(), started) {
                times[1] += started.elapsed();
            }
            continue;
        }
        if let Some(pause) = step_delay {
            std::thread::sleep(pause);
        }
        if !matches!(step, Step::Move { .. }) {
            mover = None;
        }
        match step {
            Step::Mkdir(dir) => match kernel.mkdir(dir) {
                Err(e) if errno(&e) != libc::EEXIST && e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(cpushield_kernel::with_path(e, dir));
                }
                // Marked as ours: reset removes only cgroups that carry the mark.
                Ok(()) => {
                    let _ = kernel.set_xattr(dir, CGROUP_MARK, b"1");
                }
                Err(_) => {}
            },
            Step::Write { path, value, kind } => {
                if let Err(e) = kernel.write(path, value) {
                    match kind {
                        WriteKind::Required => return Err(cpushield_kernel::with_path(e, path)),
                        WriteKind::Irq { irq, name } => out.notes.push(irq_note(*irq, name, &e)),
                        WriteKind::BestEffort(why) => out.notes.push(Note {
                            severity: Severity::Warn,
                            text: format!(
                                "{why}: writing '{value}' to {} failed: {e}",
                                path.display()
                            ),
                            remedy: None,
                        }),
                    }
                } else if matches!(kind, WriteKind::Irq { .. }) {
                    out.irqs += 1;
                }
            }
            Step::Move { id, comm, to } => match move_task(kernel, &mut mover, to, *id) {
                Ok(()) => out.moved += 1,
                Err(e) if errno(&e) == libc::ESRCH => out.vanished += 1,
                Err(e) => out.notes.push(Note {
                    severity: Severity::Warn,
                    text: format!(
                        "{} could not be moved to {}: {e}",
                        crate::snapshot::task_label(kernel, *id, comm),
                        to.display()
                    ),
                    remedy: None,
                }),
            },
            Step::Affinity { tid, comm, cpus } => {
                apply_affinity(kernel, *tid, comm, cpus, &mut out)
            }
            Step::Sched {
                tid,
                comm,
                policy,
                priority,
                nice,
                flags,
                deadline,
            } => {
                let params = cpushield_kernel::SchedParams {
                    policy: *policy,
                    flags: *flags,
                    nice: *nice,
                    priority: *priority,
                    runtime: deadline[0],
                    deadline: deadline[1],
                    period: deadline[2],
                };
                match kernel.set_sched(*tid, &params) {
                    Ok(()) => {}
                    Err(e) if errno(&e) == libc::ESRCH => out.vanished += 1,
                    Err(e) => out.notes.push(Note {
                        severity: Severity::Warn,
                        text: format!(
                            "task {tid} ({comm}): its scheduling policy {policy} (priority {priority}, nice {nice}) could not be restored: {e}"
                        ),
                        remedy: Some(format!("chrt -p -o 0 {tid} (or the policy it had) by hand")),
                    }),
                }
            }
            Step::Drain { from, to } => drain(kernel, from, to)?,
            Step::Rmdir(dir) => remove_cgroup(kernel, dir)?,
        }
        if let (Some(times), Some(started)) = (times.as_mut(), started) {
            let kind = match step {
                Step::Move { .. } => 0,
                Step::Affinity { .. } => 1,
                Step::Write {
                    kind: WriteKind::Irq { .. },
                    ..
                } => 2,
                Step::Sched { .. } => 3,
                _ => 4,
            };
            times[kind] += started.elapsed();
        }
        out.applied += 1;
    }
    if let Some(times) = times {
        for (name, took) in [
            "moves",
            "affinities",
            "IRQs",
            "scheduling policies",
            "cgroups and files",
        ]
        .iter()
        .zip(times)
        {
            crate::timing::print(&format!("  apply: {name}"), took);
        }
    }
    Ok(out)
}

/// Runs of affinity steps at least this long are applied on two threads.
const PARALLEL_AFFINITIES_FROM: usize = 512;

/// Applies a run of [`Step::Affinity`] steps, the two halves on two threads
/// where there are two CPUs; the notes come in the steps' order.
fn affinities_on_two_threads(kernel: &dyn Kernel, steps: &[Step]) -> Outcome {
    let halves =
        crate::halves::on_two_threads(steps, PARALLEL_AFFINITIES_FROM, "cpushield-apply", |part| {
            let mut out = Outcome::default();
            for step in part {
                if let Step::Affinity { tid, comm, cpus } = step {
                    apply_affinity(kernel, *tid, comm, cpus, &mut out);
                }
            }
            out
        });
    let mut out = Outcome::default();
    for half in halves {
        out.affinities += half.affinities;
        out.vanished += half.vanished;
        out.notes.extend(half.notes);
        out.affinities_left.extend(half.affinities_left);
    }
    out
}

/// Ensures one task's affinity (see [`ensure_affinity`]), counting the
/// outcome in `out`.
fn apply_affinity(
    kernel: &dyn Kernel,
    tid: i32,
    comm: &str,
    cpus: &cpushield_cpuset::CpuSet,
    out: &mut Outcome,
) {
    match ensure_affinity(kernel, tid, cpus) {
        Ok(left) => {
            out.affinities += 1;
            out.affinities_left.extend(left.map(|left| (tid, left)));
        }
        Err(e) if errno(&e) == libc::ESRCH => out.vanished += 1,
        Err(e) => out.notes.push(Note {
            severity: Severity::Warn,
            text: format!(
                "{} refused affinity {cpus}: {e}",
                crate::snapshot::task_label(kernel, tid, comm)
            ),
            remedy: None,
        }),
    }
}

/// Gives a thread the affinity `cpus` unless it has it already: moving a
/// task into a cpuset sets its affinity to the cpuset's CPUs, which is
/// most often what the plan wants, and sched_getaffinity costs less than
/// sched_setaffinity (it also leaves the kernel's record of what the task
/// itself asked for as it was).
///
/// Returns the affinity left, as read: the one found, or the one read after
/// setting (the kernel narrows a set to the task's cpuset); `None` when
/// that read failed.
fn ensure_affinity(
    kernel: &dyn Kernel,
    tid: i32,
    cpus: &cpushield_cpuset::CpuSet,
) -> io::Result<Option<cpushield_cpuset::CpuSet>> {
    match kernel.get_affinity(tid) {
        Ok(now) if now == *cpus => Ok(Some(now)),
        _ => {
            kernel.set_affinity(tid, cpus)?;
            Ok(kernel.get_affinity(tid).ok())
        }
    }
}

/// Writes `id` to the tasks file `to` through the writer held open for it
/// (opened here when it is another file); where the file cannot be opened, a
/// plain write gives the error.
fn move_task<'k, 'p>(
    kernel: &'k dyn Kernel,
    mover: &mut Option<(&'p Path, Box<dyn cpushield_kernel::KernelWriter + 'k>)>,
    to: &'p Path,
    id: i32,
) -> io::Result<()> {
    if mover.as_ref().is_none_or(|(path, _)| *path != to) {
        *mover = kernel.open_for_writes(to).ok().map(|w| (to, w));
    }
    match mover {
        Some((_, writer)) => writer.write(&id.to_string()),
        None => kernel.write(to, &id.to_string()),
    }
}

fn irq_note(irq: u32, name: &str, e: &io::Error) -> Note {
    let label = if name.is_empty() {
        String::new()
    } else {
        format!(" ({name})")
    };
    if errno(e) == libc::EIO || errno(e) == libc::EPERM {
        Note {
            severity: Severity::Warn,
            text: format!("IRQ {irq}{label} is kernel-managed or per-CPU: the kernel refuses affinity changes at runtime"),
            remedy: Some("its affinity can only change at boot: see `cpushield boot-params` (isolcpus=managed_irq,…)".into()),
        }
    } else {
        Note {
            severity: Severity::Warn,
            text: format!("IRQ {irq}{label}: affinity change failed: {e}"),
            remedy: None,
        }
    }
}

/// Moves every task left in `from` to the tasks file `to`, until it stays empty.
fn drain(kernel: &dyn Kernel, from: &Path, to: &Path) -> io::Result<()> {
    if !kernel.exists(from) {
        return Ok(());
    }
    for _ in 0..100 {
        let mut left = 0;
        // A threaded v2 cgroup cannot list cgroup.procs; cgroup.threads names
        // every thread in it (a TID written to cgroup.procs moves its process).
        for file in ["tasks", "cgroup.procs", "cgroup.threads"] {
            let Ok(text) = kernel.read(&from.join(file)) else {
                continue;
            };
            for id in text.split_whitespace() {
                left += 1;
                // A task that exited meanwhile is fine; others are retried.
                let _ = kernel.write(to, id);
            }
        }
        if left == 0 {
            return Ok(());
        }
    }
    Err(io::Error::other(format!(
        "{}: tasks keep appearing in the cgroup; stop what forks there and run reset again",
        from.display()
    )))
}

fn remove_cgroup(kernel: &dyn Kernel, dir: &Path) -> io::Result<()> {
    for attempt in 0..50 {
        match kernel.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if errno(&e) == libc::EBUSY && attempt < 49 => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(cpushield_kernel::with_path(e, dir)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_cpuset::CpuSet;
    use cpushield_kernel::{Change, FakeKernel, RecordingKernel};

    fn affinity(tid: i32, cpus: &str) -> Step {
        Step::Affinity {
            tid,
            comm: format!("t{tid}"),
            cpus: CpuSet::parse_list(cpus).unwrap(),
        }
    }

    #[test]
    fn an_affinity_already_in_place_is_not_set_again_but_a_different_one_is() {
        let fake = FakeKernel::new();
        fake.set_thread_affinity(7, CpuSet::parse_list("0").unwrap());
        fake.set_thread_affinity(8, CpuSet::parse_list("0-1").unwrap());
        let k = RecordingKernel::new(&fake);
        let plan = Plan {
            steps: vec![affinity(7, "0"), affinity(8, "0")],
            ..Plan::default()
        };
        let out = apply(&k, &plan).unwrap();
        assert_eq!(out.affinities, 2, "both tasks have the planned affinity");
        assert_eq!(
            k.changes(),
            vec![Change::Affinity(8, CpuSet::parse_list("0").unwrap())]
        );
        assert_eq!(fake.affinities()[&8], CpuSet::parse_list("0").unwrap());
    }

    #[test]
    fn moves_to_one_tasks_file_write_one_id_each_in_order() {
        let fake = FakeKernel::new();
        fake.set_file("/cg/tasks", "");
        let k = RecordingKernel::new(&fake);
        let to = std::path::PathBuf::from("/cg/tasks");
        let mv = |id| Step::Move {
            id,
            comm: format!("t{id}"),
            to: to.clone(),
        };
        let plan = Plan {
            steps: vec![mv(1), mv(2), mv(3)],
            ..Plan::default()
        };
        let out = apply(&k, &plan).unwrap();
        assert_eq!(out.moved, 3);
        assert_eq!(fake.file("/cg/tasks").unwrap(), "1\n2\n3\n");
        assert_eq!(
            k.changes(),
            (1..=3)
                .map(|id| Change::Write(to.clone(), id.to_string()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_long_run_of_affinities_sets_each_once_and_notes_refusals_in_order() {
        let fake = FakeKernel::new();
        let tids: Vec<i32> = (1000..2000).collect();
        for &tid in &tids {
            // 1500 has exited; every other task is on CPU 0-1.
            if tid != 1500 {
                fake.set_thread_affinity(tid, CpuSet::parse_list("0-1").unwrap());
            }
        }
        let mut steps: Vec<Step> = tids.iter().map(|&t| affinity(t, "1")).collect();
        // Refused (an empty set): one in each half, named in step order.
        steps[100] = affinity(1100, "");
        steps[900] = affinity(1900, "");
        let plan = Plan {
            steps,
            ..Plan::default()
        };
        let out = apply(&fake, &plan).unwrap();
        assert_eq!(out.applied, 1000);
        assert_eq!(out.affinities, 997);
        assert_eq!(out.vanished, 1);
        let named: Vec<&str> = out.notes.iter().map(|n| n.text.as_str()).collect();
        assert_eq!(named.len(), 2, "{named:?}");
        assert!(named[0].starts_with("task 1100 ") && named[1].starts_with("task 1900 "));
        let now = fake.affinities();
        assert!(tids
            .iter()
            .filter(|t| ![1100, 1500, 1900].contains(*t))
            .all(|t| now[t] == CpuSet::parse_list("1").unwrap()));
    }
}
