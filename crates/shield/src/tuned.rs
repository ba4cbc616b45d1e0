//! Living beside tuned: what the loaded tuned profile sets of what the shield
//! also sets, so that neither tool undoes the other.
//!
//! tuned's `cpu-partitioning` and `realtime` profiles (and any profile that
//! includes them) set, from `isolated_cores`: sysctls (`vm.stat_interval`,
//! `kernel.timer_migration`, ...) and sysfs files (the unbound workqueue
//! cpumask) with their sysctl and sysfs plugins, the boot line with their
//! bootloader plugin (recorded in `/etc/tuned/bootcmdline`), and, where its
//! scheduler plugin loads (it needs the `perf` Python module: RHEL has it,
//! Debian does not), every IRQ's affinity and `/proc/irq/default_smp_affinity`.
//! tuned saves what it found and writes it back when the profile is unloaded.
//!
//! The rule here:
//! - a file the profile writes (a `[sysctl]` key, a `[sysfs]` path, and
//!   `default_smp_affinity` where the scheduler plugin moved IRQs) is tuned's:
//!   the shield neither writes nor restores it ([`TunedClaim::owns_file`],
//!   applied when the snapshot is taken);
//! - IRQ masks, which both set where tuned's scheduler plugin runs: the shield
//!   applies Brosky's rule over what it finds, and `reset` writes back its
//!   original with tuned's rule applied ([`leave_to_tuned`]), so a reset while
//!   tuned's profile is loaded leaves the IRQs off tuned's CPUs;
//! - [`who_set_what`] tells `check` which tool set each of them.
//!
//! tuned's claim is in force only while its daemon runs (`/run/tuned/tuned.pid`
//! names a live process) with a profile loaded (`/etc/tuned/active_profile`
//! not empty): a stopped tuned has written its originals back. tuned starts
//! first (its script plugin runs cpushield last; cpushield.service is ordered
//! after tuned.service), so at stop cpushield's reset runs first.

use crate::snapshot::{Snapshot, DEFAULT_IRQ_AFFINITY, WORKQUEUE_CPUMASK};
use crate::state::SavedState;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{paths, Kernel};
use cpushield_parse::tuned as parse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The names of the profiles tuned has loaded (empty: `tuned-adm off`).
pub const ACTIVE_PROFILE: &str = "/etc/tuned/active_profile";
/// The tuned daemon's PID file.
pub const PID_FILE: &str = "/run/tuned/tuned.pid";
/// The boot parameters tuned's bootloader plugin asked for.
pub const BOOT_CMDLINE: &str = "/etc/tuned/bootcmdline";
/// What tuned saved to restore at unload (a Python pickle).
pub const SAVE_FILE: &str = "/run/tuned/save.pickle";
/// The class tuned's scheduler plugin saves IRQ affinities in: named in
/// [`SAVE_FILE`] once that plugin has moved IRQs.
const SAVED_IRQS_CLASS: &[u8] = b"IRQAffinities";
/// Where tuned looks for a profile, in order (the first one found is used).
pub const PROFILE_DIRS: [&str; 2] = ["/etc/tuned", "/usr/lib/tuned"];

/// What tuned's loaded profile sets that the shield also sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TunedClaim {
    /// The loaded profile(s), as `/etc/tuned/active_profile` names them.
    pub profile: String,
    /// `isolated_cores`, when the profile's variables give it as a CPU list.
    pub isolated: Option<CpuSet>,
    /// Why `isolated_cores` is not known (computed by tuned, unset, no list).
    pub isolated_problem: Option<String>,
    /// tuned's scheduler plugin moved IRQs and `default_smp_affinity` off the
    /// isolated CPUs (a `[scheduler]` section sets `isolated_cores`, and its
    /// save file holds IRQ affinities).
    pub moves_irqs: bool,
    /// The files the profile writes: `[sysctl]` keys as /proc/sys paths,
    /// `[sysfs]` paths, and `default_smp_affinity` when it moves IRQs.
    pub files: std::collections::BTreeSet<PathBuf>,
    /// `[sysctl]` settings with a literal value, as /proc/sys paths.
    pub sysctls: BTreeMap<PathBuf, String>,
    /// The boot parameters tuned asked the bootloader for.
    pub boot_line: Vec<String>,
}

impl TunedClaim {
    /// Whether `path` is a setting the shield leaves to tuned entirely.
    pub fn owns_file(&self, path: &Path) -> bool {
        self.files.contains(path)
    }

    /// The CPUs tuned keeps IRQs and workqueues off, when it moves them.
    fn isolating(&self) -> Option<&CpuSet> {
        self.isolated.as_ref().filter(|c| !c.is_empty())
    }

    /// One line naming the profile and its CPUs.
    pub fn describe(&self) -> String {
        match (&self.isolated, &self.isolated_problem) {
            (Some(c), _) => format!("tuned profile {} (isolated_cores {c})", self.profile),
            (None, Some(p)) => format!("tuned profile {} (isolated_cores: {p})", self.profile),
            (None, None) => format!("tuned profile {}", self.profile),
        }
    }
}

/// A sysctl key of a `[sysctl]` section (`kernel.timer_migration`) as its path.
fn sysctl_path(key: &str) -> PathBuf {
    paths::sysctl::path(key)
}

/// The profile `name` and the profiles it includes, parents first.
fn profile_chain(kernel: &dyn Kernel, name: &str, depth: usize, out: &mut Vec<parse::TunedFile>) {
    if depth > 16 || name.contains(['$', '/']) || name.is_empty() {
        return;
    }
    let Some(conf) = PROFILE_DIRS.iter().find_map(|dir| {
        let text = kernel
            .read(&Path::new(dir).join(name).join("tuned.conf"))
            .ok()?;
        parse::parse_conf(&text).ok()
    }) else {
        return;
    };
    for parent in parse::includes(&conf) {
        profile_chain(kernel, &parent, depth + 1, out);
    }
    out.push(conf);
}

/// Reads tuned's claim through the kernel door: `None` when tuned is not
/// running or has no profile loaded.
pub fn read_claim(kernel: &dyn Kernel) -> Option<TunedClaim> {
    let profiles = parse::active_profiles(&kernel.read(Path::new(ACTIVE_PROFILE)).ok()?);
    if profiles.is_empty() {
        return None;
    }
    let pid: u32 = kernel.read(Path::new(PID_FILE)).ok()?.trim().parse().ok()?;
    if !kernel.exists(&cpushield_kernel::Procfs::new(kernel).process_dir(pid as i32)) {
        return None;
    }
    let mut chain = Vec::new();
    for name in &profiles {
        profile_chain(kernel, name, 0, &mut chain);
    }
    let mut claim = TunedClaim {
        profile: profiles.join(" "),
        ..Default::default()
    };
    let mut variables: BTreeMap<String, String> = BTreeMap::new();
    let mut schedules = false;
    for conf in &chain {
        for e in conf.section("variables") {
            if e.key == "include" {
                let Ok(text) = kernel.read(Path::new(e.value.trim())) else {
                    continue;
                };
                if let Ok(vars) = parse::parse_variables(&text) {
                    for v in vars.entries {
                        variables.insert(v.key, v.value);
                    }
                }
            } else if e.value.trim() != format!("${{{}}}", e.key) {
                variables.insert(e.key.clone(), e.value.clone());
            }
        }
        for e in conf.section("sysctl") {
            let path = sysctl_path(&e.key);
            if !e.value.contains("${") {
                claim
                    .sysctls
                    .insert(path.clone(), e.value.trim().to_string());
            }
            claim.files.insert(path);
        }
        for e in conf.section("sysfs") {
            let path = e.key.trim();
            let in_sysfs = path
                .strip_prefix(paths::SYS)
                .is_some_and(|rest| rest.starts_with('/'));
            if in_sysfs && !path.contains(['*', '?', '[']) {
                claim.files.insert(PathBuf::from(path));
            }
        }
        schedules |= conf.get("scheduler", "isolated_cores").is_some();
    }
    let saved_irqs = kernel.read_bytes(Path::new(SAVE_FILE)).is_ok_and(|b| {
        b.windows(SAVED_IRQS_CLASS.len())
            .any(|w| w == SAVED_IRQS_CLASS)
    });
    claim.moves_irqs = schedules && saved_irqs;
    if claim.moves_irqs {
        claim.files.insert(PathBuf::from(DEFAULT_IRQ_AFFINITY));
    }
    match variables
        .get("isolated_cores")
        .map(|v| parse::isolated_cores(v))
    {
        Some(Ok(cpus)) => claim.isolated = Some(cpus),
        Some(Err(p)) => claim.isolated_problem = Some(p.to_string()),
        None if schedules => claim.isolated_problem = Some("not set".into()),
        None => {}
    }
    if let Ok(text) = kernel.read(Path::new(BOOT_CMDLINE)) {
        claim.boot_line = parse::boot_cmdline(&text);
    }
    Some(claim)
}

/// tuned's rule for an IRQ mask and `default_smp_affinity`: the CPUs of
/// `mask` that are not isolated, or every CPU that is not when none is left.
fn tuned_irq_rule(mask: &CpuSet, housekeeping: &CpuSet) -> CpuSet {
    let kept = mask.intersection(housekeeping);
    if kept.is_empty() {
        housekeeping.clone()
    } else {
        kept
    }
}

/// Makes `reset` leave what tuned set: the files tuned's profile writes are
/// not restored (a state saved before tuned loaded its profile may hold
/// them), and where tuned's scheduler plugin moves IRQs each IRQ's original
/// becomes what tuned's rule gives from it. Returns a note naming what was
/// left to tuned, or `None` when nothing was.
pub fn leave_to_tuned(
    saved: &mut SavedState,
    claim: &TunedClaim,
    snap: &Snapshot,
) -> Option<String> {
    let mut left = Vec::new();
    if let Some(isolated) = claim.isolating().filter(|_| claim.moves_irqs) {
        let housekeeping = snap.online.difference(isolated);
        let mut irqs = 0;
        for text in saved.irqs.values_mut().filter(|_| !housekeeping.is_empty()) {
            let Ok(orig) = CpuSet::parse_mask(text) else {
                continue;
            };
            let want = tuned_irq_rule(&orig, &housekeeping);
            if want.intersection(&snap.online) != orig.intersection(&snap.online) {
                *text = want.to_mask_padded(snap.possible);
                irqs += 1;
            }
        }
        if irqs > 0 {
            left.push(format!("{irqs} IRQ mask(s)"));
        }
    }
    let owned: Vec<PathBuf> = saved
        .files
        .keys()
        .filter(|p| claim.owns_file(p))
        .cloned()
        .collect();
    for path in owned {
        saved.files.remove(&path);
    }
    for path in crate::snapshot::candidate_files(&saved.layout) {
        if claim.owns_file(&path) {
            left.push(path.display().to_string());
        }
    }
    (!left.is_empty()).then(|| {
        format!(
            "left as the {} sets them: {}",
            claim.describe(),
            left.join(", ")
        )
    })
}

/// Which tool set one setting.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SetBy {
    /// The setting (`IRQ affinity`, `default_smp_affinity`, a sysctl, `boot line`).
    pub setting: String,
    /// `cpushield`, `tuned`, `cpushield over tuned`, or `neither`.
    pub by: String,
    /// What it is now, or which objects (IRQ numbers, boot words).
    pub detail: String,
}

/// Which tool set each setting both tools set, for `check`: the shield's
/// state says what the shield changed (its original differs from what is
/// there now); tuned's claim says what tuned's profile writes. `files` holds
/// the current text of the files either may write (the snapshot leaves out
/// tuned's), `cmdline` is /proc/cmdline. Empty when neither tuned nor a
/// shield is in force.
pub fn who_set_what(
    claim: Option<&TunedClaim>,
    saved: Option<&SavedState>,
    snap: &Snapshot,
    files: &BTreeMap<PathBuf, String>,
    cmdline: &str,
) -> Vec<SetBy> {
    if claim.is_none() && saved.is_none() {
        return Vec::new();
    }
    let mut out = irqs_set_by(claim, saved, snap);
    out.extend(files_set_by(claim, saved, &snap.online, files));
    out.extend(claim.and_then(|c| boot_line_set_by(c, cmdline)));
    out
}

/// Who set a setting, from whether the shield changed it and whether
/// tuned's profile sets it.
fn by(shield_changed: bool, tuned_sets: bool) -> &'static str {
    match (shield_changed, tuned_sets) {
        (true, true) => "cpushield over tuned",
        (true, false) => "cpushield",
        (false, true) => "tuned",
        (false, false) => "neither",
    }
}

/// IRQ affinities, one line per who set them (none for "neither" unless
/// tuned isolates CPUs).
fn irqs_set_by(
    claim: Option<&TunedClaim>,
    saved: Option<&SavedState>,
    snap: &Snapshot,
) -> Vec<SetBy> {
    let online = &snap.online;
    let tuned_isolated = claim.and_then(|c| c.isolating().filter(|_| c.moves_irqs));
    let mut irqs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for irq in &snap.irqs {
        let changed = saved
            .and_then(|s| s.irqs.get(&irq.irq))
            .and_then(|t| CpuSet::parse_mask(t).ok())
            .is_some_and(|o| o.intersection(online) != irq.affinity.intersection(online));
        let tuned = tuned_isolated.is_some_and(|iso| irq.affinity.intersection(iso).is_empty());
        irqs.entry(by(changed, tuned))
            .or_default()
            .push(irq.irq.to_string());
    }
    irqs.into_iter()
        .filter(|(who, _)| *who != "neither" || tuned_isolated.is_some())
        .map(|(who, list)| SetBy {
            setting: "IRQ affinity".into(),
            by: who.to_string(),
            detail: format!("IRQ {}", list.join(" ")),
        })
        .collect()
}

/// A file's current text as shown: a mask under /proc/irq or /sys as the
/// online CPUs it names.
fn file_detail(path: &Path, now: Option<&String>, online: &CpuSet) -> String {
    match now {
        Some(text) if path.starts_with(paths::IRQ_DIR) || path.starts_with(paths::SYS) => {
            match CpuSet::parse_mask(text) {
                Ok(cpus) => format!("CPUs {}", cpus.intersection(online)),
                Err(_) => text.trim().to_string(),
            }
        }
        Some(text) => text.trim().to_string(),
        None => "(absent)".into(),
    }
}

/// A file's setting as named: a sysctl by its key, anything else by path.
fn setting_name(path: &Path) -> String {
    paths::sysctl::key(path).unwrap_or_else(|| path.display().to_string())
}

/// The files either tool writes that either changed or sets.
fn files_set_by(
    claim: Option<&TunedClaim>,
    saved: Option<&SavedState>,
    online: &CpuSet,
    files: &BTreeMap<PathBuf, String>,
) -> Vec<SetBy> {
    let mut paths: Vec<PathBuf> = files.keys().cloned().collect();
    if let Some(c) = claim {
        paths.extend(c.files.iter().cloned());
    }
    paths.sort();
    paths.dedup();
    let mut out = Vec::new();
    for path in paths {
        let tuned = claim.is_some_and(|c| c.owns_file(&path));
        let now = files.get(&path);
        let shield = saved
            .and_then(|s| s.files.get(&path))
            .zip(now)
            .is_some_and(|(o, n)| o.trim() != n.trim());
        if !tuned && !shield {
            continue;
        }
        out.push(SetBy {
            setting: setting_name(&path),
            by: by(shield, tuned).into(),
            detail: file_detail(&path, now, online),
        });
    }
    out
}

/// tuned's boot words: those on the running command line, then those the
/// machine has not been booted with yet.
fn boot_line_set_by(claim: &TunedClaim, cmdline: &str) -> Option<SetBy> {
    if claim.boot_line.is_empty() {
        return None;
    }
    let on: Vec<&str> = cmdline.split_whitespace().collect();
    let (present, missing): (Vec<&String>, Vec<&String>) = claim
        .boot_line
        .iter()
        .partition(|w| on.contains(&w.as_str()));
    let join = |words: &[&String]| {
        words
            .iter()
            .map(|w| w.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut detail = join(&present);
    if !missing.is_empty() {
        detail = format!(
            "{detail}{}not yet booted with: {}",
            if detail.is_empty() { "" } else { "; " },
            join(&missing)
        );
    }
    Some(SetBy {
        setting: "boot line".into(),
        by: "tuned".into(),
        detail,
    })
}

/// Reads what [`who_set_what`] needs through the kernel door: tuned's claim,
/// the shield's saved state in `store` (none when absent or unreadable), a
/// snapshot, the files either tool writes and /proc/cmdline.
pub fn read_who_set_what(kernel: &dyn Kernel, store: &dyn crate::state::StateStore) -> Vec<SetBy> {
    let claim = read_claim(kernel);
    let saved = crate::state::load_from(store)
        .ok()
        .flatten()
        .map(|l| l.state);
    if claim.is_none() && saved.is_none() {
        return Vec::new();
    }
    let layout = match &saved {
        Some(s) => Some(s.layout.clone()),
        None => crate::layout::detect(kernel),
    };
    let Some(layout) = layout else {
        return Vec::new();
    };
    let Ok(snap) = crate::snapshot::take(kernel, &layout) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = vec![DEFAULT_IRQ_AFFINITY.into(), WORKQUEUE_CPUMASK.into()];
    paths.extend(crate::snapshot::LTMR_SYSCTLS.iter().map(PathBuf::from));
    if let Some(c) = &claim {
        paths.extend(c.files.iter().cloned());
    }
    let files = paths
        .into_iter()
        .filter_map(|p| kernel.read(&p).ok().map(|t| (p, t.trim().to_string())))
        .collect();
    let cmdline = cpushield_kernel::Procfs::new(kernel)
        .cmdline()
        .unwrap_or_default();
    who_set_what(claim.as_ref(), saved.as_ref(), &snap, &files, &cmdline)
}

/// The text block of `check` for [`who_set_what`]'s answer (empty for none).
pub fn render_set_by(set_by: &[SetBy]) -> String {
    if set_by.is_empty() {
        return String::new();
    }
    let width = set_by.iter().map(|s| s.setting.len()).max().unwrap_or(0);
    let by_width = set_by.iter().map(|s| s.by.len()).max().unwrap_or(0);
    let mut out =
        String::from("\nSet by (cpushield: its shield state; tuned: the loaded profile):\n");
    for s in set_by {
        out.push_str(&format!(
            "  {:width$}  {:by_width$}  {}\n",
            s.setting, s.by, s.detail
        ));
    }
    out
}

/// [`render_set_by`] in one line, for `check` before `--verbose`: which
/// settings each tool set ("" when tuned sets none of cpushield's).
pub fn render_set_by_line(set_by: &[SetBy]) -> String {
    if set_by.is_empty() {
        return String::new();
    }
    let mut tools: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in set_by {
        match tools.iter_mut().find(|(by, _)| *by == s.by) {
            Some((_, settings)) => settings.push(&s.setting),
            None => tools.push((&s.by, vec![&s.setting])),
        }
    }
    let parts: Vec<String> = tools
        .iter()
        .map(|(by, settings)| format!("{by}: {}", settings.join(", ")))
        .collect();
    format!("Set by {} (--verbose for each)\n", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_machine::v1_machine;
    use cpushield_kernel::FakeKernel;

    /// tuned 2.20's cpu-partitioning as Debian ships it, cut to what matters here.
    const CPU_PARTITIONING: &str = "[main]\ninclude=network-latency\n[variables]\ninclude=/etc/tuned/cpu-partitioning-variables.conf\nisolated_cores = ${isolated_cores}\nnot_isolated_cpumask=${f:cpulist2hex:${not_isolated_cores_expanded}}\n[sysctl]\nkernel.nmi_watchdog = 0\nvm.stat_interval = 10\nkernel.timer_migration = 0\n[sysfs]\n/sys/devices/virtual/workqueue/cpumask = ${not_isolated_cpumask}\n[scheduler]\nisolated_cores=${isolated_cores}\n";
    const CPUSHIELD_PROFILE: &str = include_str!("../../../dist/tuned/cpushield/tuned.conf");

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    /// A 4-CPU machine with tuned running profile `cpushield` over
    /// cpu-partitioning, isolated_cores `isolated`.
    fn with_tuned(k: &FakeKernel, isolated: &str) {
        k.set_file(ACTIVE_PROFILE, "cpushield\n");
        k.set_file(PID_FILE, "4242\n");
        k.set_file("/proc/4242/stat", "4242 (tuned) S");
        k.set_file("/usr/lib/tuned/cpushield/tuned.conf", CPUSHIELD_PROFILE);
        k.set_file(
            "/usr/lib/tuned/cpu-partitioning/tuned.conf",
            CPU_PARTITIONING,
        );
        k.set_file(
            "/usr/lib/tuned/network-latency/tuned.conf",
            "[main]\nsummary=x\n[sysctl]\nkernel.numa_balancing=0\n",
        );
        k.set_file(
            "/etc/tuned/cpu-partitioning-variables.conf",
            format!("isolated_cores={isolated}\n"),
        );
        k.set_file(
            BOOT_CMDLINE,
            "TUNED_BOOT_CMDLINE=\"nohz=on nohz_full=3 rcu_nocbs=3\"\n",
        );
        // tuned's save file, as its scheduler plugin leaves it once it moved IRQs.
        k.set_file_bytes(
            SAVE_FILE,
            b"\x80\x04\x95tuned.plugins.plugin_scheduler\x94\x8c\rIRQAffinities\x94".to_vec(),
        );
    }

    #[test]
    fn the_claim_of_the_shipped_profile_over_cpu_partitioning_is_read_from_its_files() {
        let k = v1_machine("0-3", &[]);
        assert_eq!(read_claim(&k), None, "no tuned, no claim");
        with_tuned(&k, "3");
        let claim = read_claim(&k).unwrap();
        assert_eq!(claim.profile, "cpushield");
        assert_eq!(claim.isolated, Some(cpus("3")));
        assert!(claim.moves_irqs);
        assert!(claim.owns_file(Path::new(WORKQUEUE_CPUMASK)));
        assert!(claim.owns_file(Path::new(DEFAULT_IRQ_AFFINITY)));
        assert!(claim.owns_file(Path::new("/proc/sys/kernel/timer_migration")));
        assert!(claim.owns_file(Path::new("/proc/sys/vm/stat_interval")));
        assert!(claim.owns_file(Path::new("/proc/sys/kernel/numa_balancing")));
        assert!(!claim.owns_file(Path::new("/proc/sys/kernel/watchdog_cpumask")));
        assert_eq!(claim.boot_line, ["nohz=on", "nohz_full=3", "rcu_nocbs=3"]);
        // Where the scheduler plugin did not load (Debian: no Python perf), tuned
        // moved no IRQ and default_smp_affinity is the shield's alone.
        k.set_file_bytes(SAVE_FILE, b"\x80\x04}\x94.".to_vec());
        let claim = read_claim(&k).unwrap();
        assert!(!claim.moves_irqs);
        assert!(!claim.owns_file(Path::new(DEFAULT_IRQ_AFFINITY)));
        assert!(claim.owns_file(Path::new(WORKQUEUE_CPUMASK)));
        // tuned off: no claim, whatever its files say.
        k.set_file(ACTIVE_PROFILE, "\n");
        assert_eq!(read_claim(&k), None);
        k.set_file(ACTIVE_PROFILE, "cpushield\n");
        k.set_file(PID_FILE, "4343\n");
        assert_eq!(read_claim(&k), None, "a PID file of a dead tuned");
    }

    #[test]
    fn a_computed_isolated_cores_is_named_not_guessed() {
        let k = v1_machine("0-3", &[]);
        with_tuned(&k, "${f:calc_isolated_cores:1}");
        let claim = read_claim(&k).unwrap();
        assert_eq!(claim.isolated, None);
        assert!(
            claim.describe().contains("computed by tuned"),
            "{}",
            claim.describe()
        );
    }

    #[test]
    fn check_is_told_which_tool_set_each_setting_both_set() {
        let k = v1_machine("0-3", &[]);
        with_tuned(&k, "3");
        k.set_file("/proc/interrupts", "CPU0 CPU1 CPU2 CPU3\n");
        // IRQ 10: the shield (of 2-3) moved it from 7 (tuned's) to 3;
        // IRQ 11: tuned's 7, untouched by the shield; IRQ 12: on every CPU.
        for (irq, mask) in [(10, "3"), (11, "7"), (12, "f")] {
            k.set_file(format!("/proc/irq/{irq}/smp_affinity"), format!("{mask}\n"));
        }
        let mut saved =
            crate::fake_machine::saved_state(crate::ShieldMasks::all(&cpus("2-3")), "0-3");
        saved.irqs.insert(10, "7".into());
        saved.irqs.insert(11, "7".into());
        saved.irqs.insert(12, "f".into());
        saved
            .files
            .insert("/proc/sys/kernel/watchdog_cpumask".into(), "0-3".into());
        let claim = read_claim(&k).unwrap();
        let snap = crate::snapshot::take(&k, &saved.layout).unwrap();
        let files: BTreeMap<PathBuf, String> = [
            (DEFAULT_IRQ_AFFINITY, "7"),
            (WORKQUEUE_CPUMASK, "7"),
            ("/proc/sys/kernel/timer_migration", "0"),
            ("/proc/sys/kernel/watchdog_cpumask", "0-1"),
            ("/proc/sys/vm/stat_interval", "10"),
        ]
        .into_iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
        let rows = who_set_what(
            Some(&claim),
            Some(&saved),
            &snap,
            &files,
            "BOOT_IMAGE=/vmlinuz nohz=on nohz_full=3 quiet",
        );
        let row = |setting: &str, by: &str| {
            rows.iter()
                .find(|r| r.setting == setting && r.by == by)
                .map(|r| r.detail.clone())
                .unwrap_or_else(|| panic!("no row {setting} by {by} in {rows:#?}"))
        };
        assert_eq!(row("IRQ affinity", "cpushield over tuned"), "IRQ 10");
        assert_eq!(row("IRQ affinity", "tuned"), "IRQ 11");
        assert_eq!(row("IRQ affinity", "neither"), "IRQ 12");
        assert_eq!(row(DEFAULT_IRQ_AFFINITY, "tuned"), "CPUs 0-2");
        assert_eq!(row(WORKQUEUE_CPUMASK, "tuned"), "CPUs 0-2");
        assert_eq!(row("kernel.timer_migration", "tuned"), "0");
        assert_eq!(row("vm.stat_interval", "tuned"), "10");
        assert_eq!(row("kernel.numa_balancing", "tuned"), "(absent)");
        assert_eq!(row("kernel.watchdog_cpumask", "cpushield"), "0-1");
        assert_eq!(
            row("boot line", "tuned"),
            "nohz=on nohz_full=3; not yet booted with: rcu_nocbs=3"
        );
        // Without tuned's scheduler plugin (Debian), the IRQs and
        // default_smp_affinity are the shield's alone.
        k.set_file_bytes(SAVE_FILE, b"\x80\x04}\x94.".to_vec());
        let debian = read_claim(&k).unwrap();
        let rows = who_set_what(Some(&debian), Some(&saved), &snap, &files, "");
        assert!(rows
            .iter()
            .all(|r| r.by != "tuned" || r.setting != "IRQ affinity"));
        assert!(!rows.iter().any(|r| r.setting == DEFAULT_IRQ_AFFINITY));
        // Neither tuned nor a shield: nothing to say.
        assert!(who_set_what(None, None, &snap, &files, "").is_empty());
        let text = render_set_by(&rows);
        assert!(text.contains("cpushield  IRQ 10"), "{text}");
    }

    #[test]
    fn a_setting_both_tools_set_is_the_shields_over_tuneds() {
        assert_eq!(by(true, true), "cpushield over tuned");
        assert_eq!(by(true, false), "cpushield");
        assert_eq!(by(false, true), "tuned");
        assert_eq!(by(false, false), "neither");
    }

    #[test]
    fn a_sysctl_is_named_by_key_and_a_mask_file_by_its_online_cpus() {
        assert_eq!(
            setting_name(Path::new("/proc/sys/kernel/timer_migration")),
            "kernel.timer_migration"
        );
        assert_eq!(
            setting_name(Path::new("/sys/devices/virtual/workqueue/cpumask")),
            "/sys/devices/virtual/workqueue/cpumask"
        );
        let online = CpuSet::parse_list("0-3").unwrap();
        let mask = "ff\n".to_string();
        assert_eq!(
            file_detail(
                Path::new("/proc/irq/default_smp_affinity"),
                Some(&mask),
                &online
            ),
            "CPUs 0-3"
        );
        assert_eq!(
            file_detail(Path::new("/proc/sys/kernel/x"), Some(&mask), &online),
            "ff"
        );
        assert_eq!(
            file_detail(Path::new("/proc/sys/kernel/x"), None, &online),
            "(absent)"
        );
    }
}
