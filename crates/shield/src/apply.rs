//! Carries out a plan through the kernel door. Tasks that exit meanwhile are
//! fine; kernel-managed IRQs and best-effort settings become notes; anything
//! else required stops the run with the path and the errno.

use crate::steps::{Note, Plan, Severity, Step, TaskAffinity, WriteKind};
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
}

impl Outcome {
    /// Adds what a later pass did.
    pub fn add(&mut self, later: Outcome) {
        self.applied += later.applied;
        self.moved += later.moved;
        self.affinities += later.affinities;
        self.irqs += later.irqs;
        self.vanished += later.vanished;
        self.notes.extend(later.notes);
    }
}

fn errno(e: &io::Error) -> i32 {
    cpushield_kernel::os_errno(e).unwrap_or(0)
}

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
    let pause = || {
        if let Some(pause) = step_delay {
            std::thread::sleep(pause);
        }
    };
    for step in &plan.steps {
        match step {
            Step::Moves { to, ids } => {
                // The tasks file is opened once for the run (each ID is still
                // its own write: the kernel takes one per write).
                let mut writer = kernel.open_for_writes(to).ok();
                for &id in ids {
                    pause();
                    let moved = match writer.as_mut() {
                        Some(writer) => writer.write(&id.to_string()),
                        // Where the file cannot be opened, a plain write gives the error.
                        None => kernel.write(to, &id.to_string()),
                    };
                    match moved {
                        Ok(()) => out.moved += 1,
                        Err(e) if errno(&e) == libc::ESRCH => out.vanished += 1,
                        Err(e) => out.notes.push(Note {
                            severity: Severity::Warn,
                            text: format!(
                                "{} could not be moved to {}: {e}",
                                crate::snapshot::task_label(kernel, id, ""),
                                to.display()
                            ),
                            remedy: None,
                        }),
                    }
                }
                out.applied += ids.len();
            }
            Step::Affinities(tasks) => {
                for task in tasks {
                    pause();
                    apply_affinity(kernel, task, &mut out);
                }
                out.applied += tasks.len();
            }
            other => {
                pause();
                apply_one(kernel, other, &mut out)?;
                out.applied += 1;
            }
        }
    }
    Ok(out)
}

/// Applies one step that is not a run of moves or affinities.
fn apply_one(kernel: &dyn Kernel, step: &Step, out: &mut Outcome) -> io::Result<()> {
    match step {
        Step::Mkdir(dir) => match kernel.mkdir(dir) {
            Err(e) if errno(&e) != libc::EEXIST && e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(cpushield_kernel::with_path(e, dir));
            }
            // Marked as ours: reset removes only cgroups that carry the mark.
            Ok(()) => {
                let _ = kernel.set_xattr(dir, crate::layout::CGROUP_MARK, b"1");
            }
            Err(_) => {}
        },
        Step::Write { path, value, kind } => {
            if let Err(e) = kernel.write(path, value) {
                match kind {
                    WriteKind::Required | WriteKind::IsolatedPartition => {
                        return Err(cpushield_kernel::with_path(e, path))
                    }
                    WriteKind::Irq { irq, name } => out.notes.push(irq_note(*irq, name, &e)),
                    WriteKind::BestEffort(why) => out.notes.push(Note {
                        severity: Severity::Warn,
                        text: format!("{why}: writing '{value}' to {} failed: {e}", path.display()),
                        remedy: None,
                    }),
                }
            } else if matches!(kind, WriteKind::Irq { .. }) {
                out.irqs += 1;
            } else if matches!(kind, WriteKind::IsolatedPartition) {
                out.notes.extend(
                    crate::partition::settle_isolated(kernel, path)
                        .ok()
                        .flatten(),
                );
            }
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
        Step::Moves { .. } | Step::Affinities(_) => unreachable!("applied as runs by apply"),
    }
    Ok(())
}

/// Ensures one task's affinity (see [`ensure_affinity`]), counting the
/// outcome in `out`.
fn apply_affinity(kernel: &dyn Kernel, task: &TaskAffinity, out: &mut Outcome) {
    let TaskAffinity { tid, cpus } = task;
    let tid = *tid;
    match ensure_affinity(kernel, tid, cpus) {
        Ok(()) => out.affinities += 1,
        Err(e) if errno(&e) == libc::ESRCH => out.vanished += 1,
        Err(e) => out.notes.push(Note {
            severity: Severity::Warn,
            text: format!(
                "{} refused affinity {cpus}: {e}",
                crate::snapshot::task_label(kernel, tid, "")
            ),
            remedy: None,
        }),
    }
}

/// Gives a thread the affinity `cpus` unless it has it already: moving a
/// task into a cpuset sets its affinity to the cpuset's CPUs, which is
/// most often what the plan wants, and a set would also replace the
/// kernel's record of what the task itself asked for.
fn ensure_affinity(
    kernel: &dyn Kernel,
    tid: i32,
    cpus: &cpushield_cpuset::CpuSet,
) -> io::Result<()> {
    match kernel.get_affinity(tid) {
        Ok(now) if now == *cpus => Ok(()),
        _ => kernel.set_affinity(tid, cpus),
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

/// How long [`drain`] keeps moving tasks that keep appearing (children of a
/// process that forks as it is moved) before it gives up.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Moves every task left in `from` to the tasks file `to`, until it stays
/// empty. A round that still found tasks is followed by a pause of 1 ms
/// (growing to 10 ms), so a forking process gets moved rather than outrun.
fn drain(kernel: &dyn Kernel, from: &Path, to: &Path) -> io::Result<()> {
    if !kernel.exists(from) {
        return Ok(());
    }
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    for round in 0.. {
        if round > 0 {
            if start.elapsed() >= DRAIN_LIMIT {
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(10));
        }
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
        "{}: tasks kept appearing in the cgroup for {} s; stop what forks there and run reset again",
        from.display(),
        DRAIN_LIMIT.as_secs()
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

    fn affinity(tid: i32, cpus: &str) -> TaskAffinity {
        TaskAffinity {
            tid,
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
            steps: vec![Step::Affinities(vec![affinity(7, "0"), affinity(8, "0")])],
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
    fn a_drain_moves_tasks_born_while_it_runs_until_the_cgroup_stays_empty() {
        let fake = FakeKernel::new();
        fake.mkdir(Path::new("/cg/a")).unwrap();
        // 6 is forked by 5 while 5 is moved; then the list stays empty.
        fake.set_file_sequence("/cg/a/tasks", &["5\n", "6\n", ""]);
        fake.set_file("/cg/tasks", "");
        drain(&fake, Path::new("/cg/a"), Path::new("/cg/tasks")).unwrap();
        assert_eq!(fake.file("/cg/tasks").unwrap(), "5\n6\n");
    }

    #[test]
    fn a_drain_outrun_for_its_time_limit_names_the_cgroup_and_gives_up() {
        let fake = FakeKernel::new();
        fake.mkdir(Path::new("/cg/a")).unwrap();
        fake.set_file("/cg/a/tasks", "9\n");
        fake.set_file("/cg/tasks", "");
        let start = std::time::Instant::now();
        let e = drain(&fake, Path::new("/cg/a"), Path::new("/cg/tasks")).unwrap_err();
        let took = start.elapsed();
        assert!(took >= DRAIN_LIMIT && took < DRAIN_LIMIT * 2, "{took:?}");
        assert!(
            e.to_string()
                .starts_with("/cg/a: tasks kept appearing in the cgroup for 2 s"),
            "{e}"
        );
    }

    #[test]
    fn moves_to_one_tasks_file_write_one_id_each_in_order() {
        let fake = FakeKernel::new();
        fake.set_file("/cg/tasks", "");
        let k = RecordingKernel::new(&fake);
        let to = std::path::PathBuf::from("/cg/tasks");
        let plan = Plan {
            steps: vec![Step::Moves {
                to: to.clone(),
                ids: vec![1, 2, 3],
            }],
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
        let mut tasks: Vec<TaskAffinity> = tids.iter().map(|&t| affinity(t, "1")).collect();
        // Refused (an empty set): named in step order.
        tasks[100] = affinity(1100, "");
        tasks[900] = affinity(1900, "");
        let plan = Plan {
            steps: vec![Step::Affinities(tasks)],
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

    #[test]
    fn outcomes_of_passes_add_up_field_by_field() {
        let pass = |n: usize| Outcome {
            applied: n,
            moved: n + 1,
            affinities: n + 2,
            irqs: n + 3,
            vanished: n + 4,
            notes: vec![Note {
                severity: Severity::Info,
                text: format!("pass {n}"),
                remedy: None,
            }],
        };
        let mut total = pass(1);
        total.add(pass(10));
        assert_eq!(
            (
                total.applied,
                total.moved,
                total.affinities,
                total.irqs,
                total.vanished
            ),
            (11, 13, 15, 17, 19)
        );
        assert_eq!(total.notes.len(), 2);
        assert_eq!(total.notes[1].text, "pass 10");
    }
}
