//! The planners of install and uninstall, pure over [`Files`]: they look
//! at what is there and return the steps; [`execute`] carries them out.
//! Install records what it put in a manifest (path and CRC-32 of each file,
//! each directory it created), so uninstall removes exactly that: a file
//! edited since (a user's config) is left in place and named.

use crate::files::Files;
use crate::{Error, AGENT_UNIT, CONFIG_PATH, DEFAULT_CONFIG, MANIFEST, SERVICE_UNIT, UNIT_BINARY};
use std::io;
use std::path::{Path, PathBuf};

/// One step of an install or uninstall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create a directory (recorded: uninstall removes it if empty).
    Mkdir(PathBuf),
    /// Write a file (recorded with its CRC-32).
    Write {
        /// Absolute path (under the root).
        path: PathBuf,
        /// The content.
        data: String,
        /// Whether a file was there before (a unit being updated).
        replaces: bool,
    },
    /// A file left as it is, and why.
    Keep {
        /// Absolute path (under the root).
        path: PathBuf,
        /// Why it is left.
        why: String,
    },
    /// Remove a file.
    Remove(PathBuf),
    /// Remove a directory if it is empty.
    Rmdir(PathBuf),
    /// Write the manifest (install) or remove it (uninstall, `None`).
    Manifest(Option<String>),
}

impl Step {
    /// The step as one line for the user.
    pub fn line(&self) -> String {
        match self {
            Step::Mkdir(p) => format!("create directory {}", p.display()),
            Step::Write { path, replaces, .. } => {
                let verb = if *replaces { "update" } else { "install" };
                format!("{verb} {}", path.display())
            }
            Step::Keep { path, why } => format!("keep {}: {why}", path.display()),
            Step::Remove(p) => format!("remove {}", p.display()),
            Step::Rmdir(p) => format!("remove directory {} if empty", p.display()),
            Step::Manifest(Some(_)) => format!("record what was installed in /{MANIFEST}"),
            Step::Manifest(None) => format!("remove /{MANIFEST}"),
        }
    }
}

/// One manifest line: `file CRC PATH` or `dir - PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    crc: Option<u32>,
    path: PathBuf,
}

fn crc(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

fn render_manifest(entries: &[Entry]) -> String {
    let mut out =
        String::from("# cpushield install manifest: what `cpushield uninstall` removes\n");
    for e in entries {
        match e.crc {
            Some(c) => out.push_str(&format!("file {c:08x} {}\n", e.path.display())),
            None => out.push_str(&format!("dir - {}\n", e.path.display())),
        }
    }
    out
}

fn parse_manifest(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let (kind, sum, path) = (parts.next(), parts.next(), parts.next());
        let entry = match (kind, sum, path) {
            (Some("file"), Some(sum), Some(path)) => {
                u32::from_str_radix(sum, 16).ok().map(|c| Entry {
                    crc: Some(c),
                    path: path.into(),
                })
            }
            (Some("dir"), Some("-"), Some(path)) => Some(Entry {
                crc: None,
                path: path.into(),
            }),
            _ => None,
        };
        match entry {
            Some(e) if e.path.is_absolute() => entries.push(e),
            _ => return Err(format!("line {}: {line:?}", n + 1)),
        }
    }
    Ok(entries)
}

/// The units with the binary path they run set to `bin`.
pub fn units(bin: &Path) -> Vec<(&'static str, String)> {
    let bin = bin.display().to_string();
    [
        ("cpushield.service", SERVICE_UNIT),
        ("cpushield-agent.service", AGENT_UNIT),
    ]
    .into_iter()
    .map(|(name, text)| (name, text.replace(UNIT_BINARY, &bin)))
    .collect()
}

/// Plans an install: the manifest first (joined with an earlier one, so a
/// second install keeps the record of the first's config), then the
/// directories that are missing, both units (written or updated), and the
/// config only if there is none.
pub fn plan_install(files: &dyn Files, unit_dir: &Path, bin: &Path) -> io::Result<Vec<Step>> {
    let unit_dir = Path::new("/").join(unit_dir);
    let mut steps = Vec::new();
    let mut entries = match files.read(&Path::new("/").join(MANIFEST))? {
        Some(bytes) => parse_manifest(&String::from_utf8_lossy(&bytes)).unwrap_or_default(),
        None => Vec::new(),
    };
    fn record(entries: &mut Vec<Entry>, entry: Entry) {
        entries.retain(|e| e.path != entry.path);
        entries.push(entry);
    }
    let mkdirs = |steps: &mut Vec<Step>, entries: &mut Vec<Entry>, dir: &Path| {
        let mut missing = Vec::new();
        let mut at = dir.to_path_buf();
        while !files.is_dir(&at) && !steps.contains(&Step::Mkdir(at.clone())) {
            missing.push(at.clone());
            match at.parent() {
                Some(p) => at = p.to_path_buf(),
                None => break,
            }
        }
        for d in missing.into_iter().rev() {
            steps.push(Step::Mkdir(d.clone()));
            record(entries, Entry { crc: None, path: d });
        }
    };
    // The manifest goes first (its directories, then the manifest itself, inserted here
    // once complete): an install that fails part-way can still be uninstalled.
    let manifest = Path::new("/").join(MANIFEST);
    mkdirs(
        &mut steps,
        &mut entries,
        manifest.parent().unwrap_or(Path::new("/")),
    );
    let manifest_at = steps.len();
    mkdirs(&mut steps, &mut entries, &unit_dir);
    for (name, text) in units(bin) {
        let path = unit_dir.join(name);
        let before = files.read(&path)?;
        if before.as_deref() == Some(text.as_bytes()) {
            steps.push(Step::Keep {
                path: path.clone(),
                why: "already installed".into(),
            });
        } else {
            steps.push(Step::Write {
                path: path.clone(),
                data: text.clone(),
                replaces: before.is_some(),
            });
        }
        record(
            &mut entries,
            Entry {
                crc: Some(crc(text.as_bytes())),
                path,
            },
        );
    }
    let config = Path::new("/").join(CONFIG_PATH);
    match files.read(&config)? {
        Some(_) => steps.push(Step::Keep {
            path: config,
            why: "a config file is there (never overwritten)".into(),
        }),
        None => {
            mkdirs(
                &mut steps,
                &mut entries,
                config.parent().unwrap_or(Path::new("/")),
            );
            steps.push(Step::Write {
                path: config.clone(),
                data: DEFAULT_CONFIG.into(),
                replaces: false,
            });
            record(
                &mut entries,
                Entry {
                    crc: Some(crc(DEFAULT_CONFIG.as_bytes())),
                    path: config,
                },
            );
        }
    }
    // Directories after files in the manifest, so uninstall empties them last.
    let (dirs, mut all): (Vec<Entry>, Vec<Entry>) =
        entries.into_iter().partition(|e| e.crc.is_none());
    all.extend(dirs);
    steps.insert(manifest_at, Step::Manifest(Some(render_manifest(&all))));
    Ok(steps)
}

/// Plans an uninstall from the manifest: each recorded file still as it was
/// installed is removed, an edited one is kept and named; recorded
/// directories are removed if empty, deepest first; then the manifest.
pub fn plan_uninstall(files: &dyn Files) -> Result<Vec<Step>, Error> {
    let manifest = Path::new("/").join(MANIFEST);
    let Some(bytes) = files.read(&manifest).map_err(Error::from_io)? else {
        return Ok(Vec::new());
    };
    let entries = parse_manifest(&String::from_utf8_lossy(&bytes)).map_err(|line| {
        Error::DamagedManifest {
            path: manifest.clone(),
            line,
        }
    })?;
    let mut steps = Vec::new();
    let mut dirs = Vec::new();
    for e in entries {
        match e.crc {
            None => dirs.push(e.path),
            Some(want) => match files.read(&e.path).map_err(Error::from_io)? {
                None => {}
                Some(now) if crc(&now) == want => steps.push(Step::Remove(e.path)),
                Some(_) => steps.push(Step::Keep {
                    path: e.path,
                    why: "changed since it was installed (remove it by hand if unwanted)".into(),
                }),
            },
        }
    }
    steps.push(Step::Manifest(None));
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    steps.extend(dirs.into_iter().map(Step::Rmdir));
    Ok(steps)
}

/// Carries out the steps through the file door.
pub fn execute(files: &dyn Files, steps: &[Step]) -> io::Result<()> {
    let manifest = Path::new("/").join(MANIFEST);
    let with = |e: io::Error, p: &Path| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
    for step in steps {
        match step {
            Step::Mkdir(p) => files.mkdir(p).map_err(|e| with(e, p))?,
            Step::Write { path, data, .. } => files
                .write(path, data.as_bytes())
                .map_err(|e| with(e, path))?,
            Step::Keep { .. } => {}
            Step::Remove(p) => files.remove(p).map_err(|e| with(e, p))?,
            Step::Rmdir(p) => files.rmdir_if_empty(p).map_err(|e| with(e, p))?,
            Step::Manifest(Some(text)) => files
                .write(&manifest, text.as_bytes())
                .map_err(|e| with(e, &manifest))?,
            Step::Manifest(None) => files.remove(&manifest).map_err(|e| with(e, &manifest))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{MemoryFiles, RootFiles};
    use crate::{DEFAULT_UNIT_DIR, SERVICE_UNIT};

    fn root() -> (tempfile::TempDir, RootFiles) {
        let dir = tempfile::tempdir().unwrap();
        let files = RootFiles {
            root: dir.path().to_path_buf(),
        };
        (dir, files)
    }

    fn install_into(files: &dyn Files) -> Vec<Step> {
        let steps = plan_install(files, Path::new(DEFAULT_UNIT_DIR), Path::new("/opt/cs")).unwrap();
        execute(files, &steps).unwrap();
        steps
    }

    fn uninstall_from(files: &dyn Files) -> Vec<Step> {
        let steps = plan_uninstall(files).unwrap();
        execute(files, &steps).unwrap();
        steps
    }

    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(base: &Path, at: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(at).unwrap() {
                let p = e.unwrap().path();
                out.push(p.strip_prefix(base).unwrap().display().to_string());
                if p.is_dir() {
                    walk(base, &p, out);
                }
            }
        }
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    #[test]
    fn shipped_units_start_apply_and_stop_with_reset_as_a_oneshot() {
        assert!(SERVICE_UNIT.contains("Type=oneshot"));
        assert!(SERVICE_UNIT.contains("RemainAfterExit=yes"));
        assert!(SERVICE_UNIT.contains("ExecStart=/usr/bin/cpushield apply\n"));
        assert!(SERVICE_UNIT.contains("ExecStop=/usr/bin/cpushield reset\n"));
        assert!(AGENT_UNIT.contains("ExecStart=/usr/bin/cpushield agent\n"));
        assert!(AGENT_UNIT.contains("Restart=on-failure"));
        assert!(AGENT_UNIT.contains("After=cpushield.service"));
    }

    #[test]
    fn install_puts_units_naming_the_binary_and_the_default_config_under_the_root() {
        let (dir, files) = root();
        install_into(&files);
        let unit = std::fs::read_to_string(dir.path().join("etc/systemd/system/cpushield.service"))
            .unwrap();
        assert!(unit.contains("ExecStart=/opt/cs apply\n"), "{unit}");
        assert!(unit.contains("ExecStop=/opt/cs reset\n"));
        assert!(!unit.contains(UNIT_BINARY));
        let config = std::fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();
        assert_eq!(config, DEFAULT_CONFIG);
        assert!(dir
            .path()
            .join("etc/systemd/system/cpushield-agent.service")
            .is_file());
    }

    #[test]
    fn uninstall_after_install_leaves_the_root_as_it_was() {
        let (dir, files) = root();
        std::fs::create_dir_all(dir.path().join("etc/systemd/system")).unwrap();
        std::fs::write(dir.path().join("etc/systemd/system/other.service"), "x").unwrap();
        let before = tree(dir.path());
        install_into(&files);
        assert_ne!(tree(dir.path()), before);
        uninstall_from(&files);
        assert_eq!(tree(dir.path()), before);
    }

    #[test]
    fn install_never_overwrites_a_users_config() {
        let files = MemoryFiles::new();
        files.put("/etc/cpushield/cpushield.toml", "[shield]\nprocs = \"3\"\n");
        let steps = install_into(&files);
        assert!(steps
            .iter()
            .any(|s| matches!(s, Step::Keep { path, .. } if path.ends_with("cpushield.toml"))));
        let config = files.text("/etc/cpushield/cpushield.toml");
        assert_eq!(config.as_deref(), Some("[shield]\nprocs = \"3\"\n"));
        // Uninstall leaves it too: install did not put it there.
        uninstall_from(&files);
        assert_eq!(files.text("/etc/cpushield/cpushield.toml"), config);
    }

    #[test]
    fn uninstall_keeps_a_config_edited_after_install_and_names_it() {
        let files = MemoryFiles::new();
        install_into(&files);
        files.put("/etc/cpushield/cpushield.toml", "[shield]\nirqs = \"1\"\n");
        let steps = uninstall_from(&files);
        let keep = steps.iter().find_map(|s| match s {
            Step::Keep { path, .. } => Some(path.clone()),
            _ => None,
        });
        assert_eq!(keep, Some(Path::new("/").join(CONFIG_PATH)));
        assert_eq!(
            files.tree(),
            [
                "/",
                "/etc/",
                "/etc/cpushield/",
                "/etc/cpushield/cpushield.toml",
            ],
            "the units, the manifest and the directories install made go; the edited config stays"
        );
    }

    #[test]
    fn a_second_install_changes_nothing_and_still_records_the_first_ones_config() {
        let files = MemoryFiles::new();
        install_into(&files);
        let before = files.tree();
        let steps = install_into(&files);
        assert!(!steps
            .iter()
            .any(|s| matches!(s, Step::Write { .. } | Step::Mkdir(_))));
        assert_eq!(files.tree(), before);
        uninstall_from(&files);
        assert_eq!(files.tree(), ["/"]);
    }

    #[test]
    fn a_plan_changes_nothing_until_it_is_executed() {
        let files = MemoryFiles::new();
        let steps = plan_install(&files, Path::new(DEFAULT_UNIT_DIR), Path::new("/x")).unwrap();
        assert!(steps
            .iter()
            .any(|s| s.line().starts_with("install /etc/systemd")));
        assert_eq!(files.tree(), ["/"]);
    }

    #[test]
    fn packages_unit_dir_is_honoured() {
        let files = MemoryFiles::new();
        let steps = plan_install(
            &files,
            Path::new("/lib/systemd/system"),
            Path::new("/usr/bin/cpushield"),
        )
        .unwrap();
        execute(&files, &steps).unwrap();
        assert_eq!(
            files
                .text("/lib/systemd/system/cpushield.service")
                .as_deref(),
            Some(SERVICE_UNIT)
        );
        assert!(files
            .text("/etc/systemd/system/cpushield.service")
            .is_none());
    }

    #[test]
    fn the_manifest_is_written_before_any_file_it_lists() {
        let files = MemoryFiles::new();
        let steps = plan_install(&files, Path::new(DEFAULT_UNIT_DIR), Path::new("/x")).unwrap();
        let manifest = steps
            .iter()
            .position(|s| matches!(s, Step::Manifest(Some(_))))
            .unwrap();
        let first_write = steps
            .iter()
            .position(|s| matches!(s, Step::Write { .. }))
            .unwrap();
        assert!(manifest < first_write, "{steps:?}");
    }

    #[test]
    fn an_install_that_stopped_after_its_manifest_is_uninstalled_cleanly() {
        let files = MemoryFiles::new();
        let steps = plan_install(&files, Path::new(DEFAULT_UNIT_DIR), Path::new("/x")).unwrap();
        let upto = steps
            .iter()
            .position(|s| matches!(s, Step::Manifest(Some(_))))
            .unwrap();
        execute(&files, &steps[..=upto]).unwrap();
        uninstall_from(&files);
        assert_eq!(files.tree(), ["/"]);
    }

    #[test]
    fn uninstall_without_a_manifest_does_nothing() {
        assert!(plan_uninstall(&MemoryFiles::new()).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_manifest_is_refused_with_its_path() {
        let files = MemoryFiles::new();
        files.put(&format!("/{MANIFEST}"), "file zz relative\n");
        let err = plan_uninstall(&files).unwrap_err().to_string();
        assert_eq!(
            err,
            "the install manifest /var/lib/cpushield/install-manifest is damaged at line 1: \"file zz relative\": remove the files it lists by hand, then the manifest"
        );
    }
}
