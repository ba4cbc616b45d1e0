//! Run-time settings beyond the shield, changed by `cpushield tune` while it
//! measures and by `apply` from a config's `[runtime]` section: the value
//! each file had before the first change, journaled in the shield's saved
//! state before the change (so `reset` restores it, also after a SIGKILL),
//! and written back by reset, last changed first, before the shield itself
//! is undone.

use crate::steps::{Note, Severity};
use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// Where debugfs is mounted (the preemption model file is there).
pub use cpushield_kernel::paths::DEBUGFS;
use cpushield_kernel::paths::{self, sysctl};

/// One file's value before the first run-time change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeFile {
    /// The file.
    pub path: PathBuf,
    /// What it held, in the form it is written back.
    pub original: String,
}

/// The run-time settings changed, in the order first changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RuntimeJournal {
    /// One entry per file, first change first.
    pub files: Vec<RuntimeFile>,
}

impl RuntimeJournal {
    /// Nothing journaled.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The value `path` had before its first change, if journaled.
    pub fn original(&self, path: &Path) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.original.as_str())
    }

    /// Journals `path`'s value unless it is journaled already (the first
    /// value is the one to restore). Returns whether it was added.
    pub fn record(&mut self, path: &Path, original: &str) -> bool {
        if self.original(path).is_some() {
            return false;
        }
        self.files.push(RuntimeFile {
            path: path.to_path_buf(),
            original: original.to_string(),
        });
        true
    }

    /// Forgets `path` (once its value is written back).
    pub fn forget(&mut self, path: &Path) {
        self.files.retain(|f| f.path != path);
    }

    /// Each entry no machine could restore: a file cpushield does not
    /// change at run time, or a value the file does not take.
    pub fn problems(&self) -> Vec<String> {
        self.files
            .iter()
            .filter_map(|f| match setting_of(&f.path) {
                None => Some(format!(
                    "run-time setting {}: not a file tune or apply changes",
                    f.path.display()
                )),
                Some(kind) if !kind.takes(&f.original) => Some(format!(
                    "run-time setting {}: saved value '{}' is not a value it takes",
                    f.path.display(),
                    f.original
                )),
                Some(_) => None,
            })
            .collect()
    }
}

/// The kinds of file a run-time setting may be, by the values they take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    /// 0 or 1.
    Flag,
    /// An integer (-1 included).
    Integer,
    /// A word of letters, digits and `_`.
    Word,
}

impl Setting {
    fn takes(self, value: &str) -> bool {
        match self {
            Setting::Flag => value == "0" || value == "1",
            Setting::Integer => value.parse::<i64>().is_ok(),
            Setting::Word => {
                !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            }
        }
    }
}

/// The kind of a run-time setting file, `None` for any other file.
fn setting_of(path: &Path) -> Option<Setting> {
    let text = path.to_str()?;
    match text {
        // The run-time setting files the journal accepts: reset writes back only these.
        sysctl::RT_RUNTIME | sysctl::STAT_INTERVAL => return Some(Setting::Integer),
        sysctl::TIMER_MIGRATION => return Some(Setting::Flag),
        paths::PREEMPT => return Some(Setting::Word),
        _ => {}
    }
    let (_, leaf) = paths::cpu_and_leaf(text)?;
    match leaf {
        "online" => Some(Setting::Flag),
        "cpufreq/scaling_governor" | "cpufreq/energy_performance_preference" => Some(Setting::Word),
        _ => {
            let state = leaf
                .strip_prefix("cpuidle/state")?
                .strip_suffix("/disable")?;
            state.parse::<u32>().ok().map(|_| Setting::Flag)
        }
    }
}

/// Whether `path` is a file `tune` and `apply` may change at run time.
pub fn is_runtime_file(path: &Path) -> bool {
    setting_of(path).is_some()
}

/// Where the kernel says its lockdown mode: the word in brackets
/// (`none [integrity] confidentiality`).
pub use cpushield_kernel::paths::LOCKDOWN;

/// The kernel's lockdown mode when it is on (`integrity`,
/// `confidentiality`); `None` when it is off or the file is not there.
pub fn lockdown(kernel: &dyn Kernel) -> Option<String> {
    let text = kernel.read(Path::new(LOCKDOWN)).ok()?;
    let mode = text
        .split_once('[')?
        .1
        .split_once(']')?
        .0
        .trim()
        .to_string();
    (mode != "none").then_some(mode)
}

/// `error`, an access to `path` in debugfs, with its cause named when the
/// kernel's lockdown refused it: EPERM then reads as a want of root, while
/// the kernel's log names the lockdown ("Lockdown: …: debugfs access is
/// restricted").
pub fn debugfs_error(kernel: &dyn Kernel, path: &Path, error: io::Error) -> io::Error {
    match (cpushield_kernel::os_errno(&error), lockdown(kernel)) {
        (Some(libc::EPERM), Some(mode)) if path.starts_with(DEBUGFS) => {
            cpushield_kernel::with_path_and_remedy(
                error,
                path,
                format!(
                    "the kernel's lockdown ({mode}, {LOCKDOWN}) restricts debugfs, as its log says; \
                     boot without lockdown to change this at run time, or choose the preemption \
                     model at boot (preempt=full on the kernel command line)"
                ),
            )
        }
        _ => cpushield_kernel::with_path(error, path),
    }
}

/// debugfs mounted at [`DEBUGFS`] by this guard (for the preemption model
/// file of `tune` and `apply`), unmounted when the guard is dropped.
pub struct MountedDebugfs(std::sync::Arc<dyn Kernel>);

impl MountedDebugfs {
    /// Mounts debugfs at [`DEBUGFS`]; the error says what stands in the way
    /// (lockdown, no permission).
    pub fn mount(kernel: std::sync::Arc<dyn Kernel>) -> io::Result<Self> {
        let at = Path::new(DEBUGFS);
        kernel
            .mount("debugfs", at)
            .map_err(|e| debugfs_error(kernel.as_ref(), at, e))?;
        Ok(Self(kernel))
    }
}

impl Drop for MountedDebugfs {
    fn drop(&mut self) {
        let _ = self.0.unmount(Path::new(DEBUGFS));
    }
}

/// Writes `value` to a run-time setting file; a debugfs file when debugfs is
/// not mounted is reached by mounting it for the write, then unmounting it.
pub fn write_setting(kernel: &dyn Kernel, path: &Path, value: &str) -> io::Result<()> {
    let debugfs = Path::new(DEBUGFS);
    if path.starts_with(debugfs) && !kernel.exists(path) {
        kernel
            .mount("debugfs", debugfs)
            .map_err(|e| debugfs_error(kernel, debugfs, e))?;
        let written = kernel.write(path, value);
        let unmounted = kernel.unmount(debugfs);
        written.map_err(|e| debugfs_error(kernel, path, e))?;
        return unmounted.map_err(|e| cpushield_kernel::with_path(e, debugfs));
    }
    kernel
        .write(path, value)
        .map_err(|e| debugfs_error(kernel, path, e))
}

/// Writes back every journaled value, last changed first. A file that
/// cannot be written back is a warning naming the value to write by hand;
/// the rest goes on.
pub fn restore(kernel: &dyn Kernel, journal: &RuntimeJournal) -> Vec<Note> {
    let mut notes = Vec::new();
    for f in journal.files.iter().rev() {
        if let Err(e) = write_setting(kernel, &f.path, &f.original) {
            notes.push(Note {
                severity: Severity::Warn,
                text: format!(
                    "the run-time setting {} could not be written back ({e})",
                    f.path.display()
                ),
                remedy: Some(format!(
                    "write {} to {} by hand",
                    f.original,
                    f.path.display()
                )),
            });
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn the_first_value_journaled_is_the_one_kept() {
        let mut j = RuntimeJournal::default();
        let p = Path::new("/proc/sys/kernel/timer_migration");
        assert!(j.record(p, "1"));
        assert!(!j.record(p, "0"));
        assert_eq!(j.original(p), Some("1"));
        j.forget(p);
        assert!(j.is_empty());
    }

    #[test]
    fn only_the_knobs_files_with_values_they_take_are_restorable() {
        let ok = [
            ("/proc/sys/kernel/sched_rt_runtime_us", "-1"),
            ("/proc/sys/kernel/timer_migration", "0"),
            ("/proc/sys/vm/stat_interval", "10"),
            ("/sys/kernel/debug/sched/preempt", "voluntary"),
            ("/sys/devices/system/cpu/cpu3/online", "1"),
            (
                "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
                "powersave",
            ),
            (
                "/sys/devices/system/cpu/cpu3/cpufreq/energy_performance_preference",
                "balance_performance",
            ),
            ("/sys/devices/system/cpu/cpu3/cpuidle/state2/disable", "0"),
        ];
        let bad = [
            ("/etc/passwd", "x"),
            ("/proc/sys/kernel/timer_migration", "2"),
            ("/proc/sys/vm/stat_interval", "ten"),
            ("/sys/kernel/debug/sched/preempt", "full; reboot"),
            ("/sys/devices/system/cpu/cpu3/../../../../etc/x", "1"),
            ("/sys/devices/system/cpu/cpuX/online", "1"),
            ("/sys/devices/system/cpu/cpu3/cpuidle/state2/latency", "0"),
        ];
        for (path, value) in ok {
            let mut j = RuntimeJournal::default();
            j.record(Path::new(path), value);
            assert!(
                j.problems().is_empty(),
                "{path} = {value}: {:?}",
                j.problems()
            );
        }
        for (path, value) in bad {
            let mut j = RuntimeJournal::default();
            j.record(Path::new(path), value);
            assert_eq!(j.problems().len(), 1, "{path} = {value}");
        }
    }

    #[test]
    fn restore_writes_back_last_first_and_mounts_debugfs_for_its_file() {
        let k = FakeKernel::new();
        let preempt = Path::new("/sys/kernel/debug/sched/preempt");
        k.set_unmounted_file(DEBUGFS, preempt, "full");
        k.set_file("/proc/sys/kernel/timer_migration", "0");
        let mut j = RuntimeJournal::default();
        j.record(preempt, "voluntary");
        j.record(Path::new("/proc/sys/kernel/timer_migration"), "1");
        let rec = cpushield_kernel::RecordingKernel::new(&k);
        let notes = restore(&rec, &j);
        assert!(notes.is_empty(), "{notes:?}");
        use cpushield_kernel::Change::*;
        assert_eq!(
            rec.changes(),
            vec![
                Write("/proc/sys/kernel/timer_migration".into(), "1".into()),
                Mount("debugfs".into(), DEBUGFS.into()),
                Write(preempt.into(), "voluntary".into()),
                Unmount(DEBUGFS.into()),
            ]
        );
        assert!(!k.is_mounted(DEBUGFS));
        k.mount("debugfs", Path::new(DEBUGFS)).unwrap();
        assert_eq!(k.read(preempt).unwrap(), "voluntary");
    }

    #[test]
    fn a_file_that_cannot_be_written_back_is_a_warning_and_the_rest_goes_on() {
        let k = FakeKernel::new();
        k.set_file("/proc/sys/kernel/timer_migration", "0");
        k.set_file("/proc/sys/vm/stat_interval", "120");
        k.refuse_writes("/proc/sys/vm/stat_interval");
        let mut j = RuntimeJournal::default();
        j.record(Path::new("/proc/sys/kernel/timer_migration"), "1");
        j.record(Path::new("/proc/sys/vm/stat_interval"), "10");
        let notes = restore(&k, &j);
        assert_eq!(notes.len(), 1);
        assert!(notes[0]
            .remedy
            .as_deref()
            .unwrap()
            .contains("write 10 to /proc/sys/vm/stat_interval"));
        assert_eq!(
            k.file("/proc/sys/kernel/timer_migration").as_deref(),
            Some("1")
        );
    }

    #[test]
    fn a_debugfs_write_the_lockdown_refuses_names_the_lockdown_not_just_eperm() {
        let k = FakeKernel::new();
        let preempt = "/sys/kernel/debug/sched/preempt";
        k.set_file(preempt, "none (voluntary) full");
        k.refuse_writes_with(preempt, libc::EPERM);
        let plain = write_setting(&k, Path::new(preempt), "full").unwrap_err();
        assert!(!plain.to_string().contains("lockdown"), "{plain}");
        k.set_file(LOCKDOWN, "none [integrity] confidentiality\n");
        let e = write_setting(&k, Path::new(preempt), "full").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("lockdown (integrity"), "{text}");
        assert!(text.contains("preempt=full"), "{text}");
        assert_eq!(cpushield_kernel::os_errno(&e), Some(libc::EPERM));
        k.set_file(LOCKDOWN, "[none] integrity confidentiality\n");
        let off = write_setting(&k, Path::new(preempt), "full").unwrap_err();
        assert!(!off.to_string().contains("lockdown"), "{off}");
    }
}
