//! `cpushield install` and `uninstall`: the systemd units (embedded in the binary)
//! and the default config file, under a root directory.
//!
//! The planners are pure: they look at what is there (through [`Files`]) and
//! return the steps; [`execute`] carries them out. Install records what it put
//! in a manifest (path and CRC-32 of each file, each directory it created), so
//! `uninstall` removes exactly that: a file edited since (a user's config) is
//! left in place and named.

use crate::args::EXIT_OK;
use clap::Args;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The boot unit: `cpushield apply` at start, `cpushield reset` at stop.
pub const SERVICE_UNIT: &str = include_str!("../../../../dist/systemd/cpushield.service");
/// The agent's unit.
pub const AGENT_UNIT: &str = include_str!("../../../../dist/systemd/cpushield-agent.service");
/// The default config file, installed only where none is.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../dist/cpushield.toml");
/// The binary path the shipped units name; `install` puts the running binary's path there.
pub const UNIT_BINARY: &str = "/usr/bin/cpushield";
/// The manifest of what `install` put, relative to the root.
pub const MANIFEST: &str = "var/lib/cpushield/install-manifest";
/// Where units go by default (the admin's unit directory), relative to the root.
pub const DEFAULT_UNIT_DIR: &str = "/etc/systemd/system";
/// The config file, relative to the root.
pub const CONFIG_PATH: &str = "etc/cpushield/cpushield.toml";

/// Arguments of `cpushield install`.
#[derive(Args)]
pub struct InstallArgs {
    /// Install under this directory instead of / (an image being prepared, a test).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The unit directory under the root (/lib/systemd/system for a package).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_UNIT_DIR)]
    unit_dir: PathBuf,
    /// The cpushield binary the units run (default: this one).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// Print what would be done, one step a line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Arguments of `cpushield uninstall`.
#[derive(Args)]
pub struct UninstallArgs {
    /// Uninstall from under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Print what would be done, one step a line, and change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The file door of install and uninstall: every read and change of the
/// installed files goes through it (a real one under a root, or a test's).
pub trait Files {
    /// The file's bytes, `None` if there is no such file.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Whether a directory is there.
    fn is_dir(&self, path: &Path) -> bool;
    /// Writes a file whole (temp file + rename), mode 0644.
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Creates one directory (its parent exists).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory; a directory with files, or none, is left (Ok).
    fn rmdir_if_empty(&self, path: &Path) -> io::Result<()>;
}

/// [`Files`] on the real filesystem, every path taken under `root`.
pub struct RootFiles {
    /// The directory the plan's absolute paths are taken under.
    pub root: PathBuf,
}

impl RootFiles {
    fn at(&self, path: &Path) -> PathBuf {
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }
}

impl Files for RootFiles {
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.at(path)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.at(path).is_dir()
    }
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let target = self.at(path);
        let dir = target.parent().unwrap_or(Path::new("/"));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(data)?;
        tmp.as_file().sync_all()?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        tmp.persist(&target).map_err(|e| e.error)?;
        Ok(())
    }
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(self.at(path))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(self.at(path))
    }
    fn rmdir_if_empty(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_dir(self.at(path)) {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => Ok(()),
            // Listed by an install that failed before making it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

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
pub fn plan_uninstall(files: &dyn Files) -> anyhow::Result<Vec<Step>> {
    let manifest = Path::new("/").join(MANIFEST);
    let Some(bytes) = files.read(&manifest)? else {
        return Ok(Vec::new());
    };
    let entries = parse_manifest(&String::from_utf8_lossy(&bytes)).map_err(|line| {
        anyhow::anyhow!(
            "the install manifest {} is damaged at {line}: remove the files it lists by hand, \
             then the manifest",
            manifest.display()
        )
    })?;
    let mut steps = Vec::new();
    let mut dirs = Vec::new();
    for e in entries {
        match e.crc {
            None => dirs.push(e.path),
            Some(want) => match files.read(&e.path)? {
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

/// Whether systemd is the running init (sd_booted's test), for `root` = /.
fn systemd_running(root: &Path) -> bool {
    root == Path::new("/") && Path::new("/run/systemd/system").is_dir()
}

fn systemctl(args: &[&str]) -> anyhow::Result<()> {
    let status = std::process::Command::new("systemctl")
        .args(args)
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run systemctl {}: {e}", args.join(" ")))?;
    anyhow::ensure!(
        status.success(),
        "systemctl {} failed ({status}); the files are in place, run it by hand",
        args.join(" ")
    );
    Ok(())
}

fn print_steps(steps: &[Step], dry_run: bool) {
    for step in steps {
        let prefix = if dry_run { "would " } else { "" };
        println!("{prefix}{}", step.line());
    }
}

/// An I/O failure of install/uninstall with what to do about it.
fn remedy(e: io::Error) -> anyhow::Error {
    let what = if e.kind() == io::ErrorKind::PermissionDenied {
        "run it as root, or name a writable --root DIR"
    } else {
        "fix the path named above and run it again (the steps done so far stay)"
    };
    anyhow::anyhow!("{e}: {what}")
}

fn check_root_dir(root: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        root.is_dir(),
        "--root {}: no such directory: name an existing directory (or / for this system)",
        root.display()
    );
    Ok(())
}

/// Runs `cpushield install`.
pub fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    check_root_dir(&args.root)?;
    let bin = match args.bin {
        Some(b) => b,
        None => std::env::current_exe().map_err(|e| {
            anyhow::anyhow!("cannot tell this binary's path ({e}): pass --bin PATH")
        })?,
    };
    let files = RootFiles {
        root: args.root.clone(),
    };
    let steps = plan_install(&files, &args.unit_dir, &bin)?;
    print_steps(&steps, args.dry_run);
    if args.dry_run {
        return Ok(ExitCode::from(EXIT_OK));
    }
    execute(&files, &steps).map_err(remedy)?;
    if systemd_running(&args.root) {
        systemctl(&["daemon-reload"])?;
        println!("systemctl daemon-reload: done");
    }
    println!(
        "next: edit /{CONFIG_PATH}, then systemctl enable --now cpushield.service \
         (and cpushield-agent.service for the agent)"
    );
    Ok(ExitCode::from(EXIT_OK))
}

/// Runs `cpushield uninstall`.
pub fn uninstall(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    check_root_dir(&args.root)?;
    let files = RootFiles {
        root: args.root.clone(),
    };
    let steps = plan_uninstall(&files)?;
    if steps.is_empty() {
        println!("nothing to uninstall: no /{MANIFEST} (cpushield install was not run here)");
        return Ok(ExitCode::from(EXIT_OK));
    }
    let running = systemd_running(&args.root);
    if running {
        let line = "systemctl disable --now cpushield-agent.service cpushield.service";
        println!("{}{line}", if args.dry_run { "would run " } else { "" });
    }
    print_steps(&steps, args.dry_run);
    if args.dry_run {
        return Ok(ExitCode::from(EXIT_OK));
    }
    if running {
        // Stopping cpushield.service resets the shield (its ExecStop).
        systemctl(&[
            "disable",
            "--now",
            "cpushield-agent.service",
            "cpushield.service",
        ])?;
    }
    execute(&files, &steps).map_err(remedy)?;
    if running {
        systemctl(&["daemon-reload"])?;
    }
    Ok(ExitCode::from(EXIT_OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, RootFiles) {
        let dir = tempfile::tempdir().unwrap();
        let files = RootFiles {
            root: dir.path().to_path_buf(),
        };
        (dir, files)
    }

    fn install_into(files: &RootFiles) -> Vec<Step> {
        let steps = plan_install(files, Path::new(DEFAULT_UNIT_DIR), Path::new("/opt/cs")).unwrap();
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
    fn install_never_overwrites_a_users_config() {
        let (dir, files) = root();
        std::fs::create_dir_all(dir.path().join("etc/cpushield")).unwrap();
        std::fs::write(dir.path().join(CONFIG_PATH), "[shield]\nprocs = \"3\"\n").unwrap();
        let steps = install_into(&files);
        assert!(steps
            .iter()
            .any(|s| matches!(s, Step::Keep { path, .. } if path.ends_with("cpushield.toml"))));
        let config = std::fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap();
        assert_eq!(config, "[shield]\nprocs = \"3\"\n");
        // Uninstall leaves it too: install did not put it there.
        execute(&files, &plan_uninstall(&files).unwrap()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(CONFIG_PATH)).unwrap(),
            "[shield]\nprocs = \"3\"\n"
        );
    }

    #[test]
    fn uninstall_after_install_leaves_the_root_as_it_was() {
        let (dir, files) = root();
        std::fs::create_dir_all(dir.path().join("etc/systemd/system")).unwrap();
        std::fs::write(dir.path().join("etc/systemd/system/other.service"), "x").unwrap();
        let before = tree(dir.path());
        install_into(&files);
        assert_ne!(tree(dir.path()), before);
        execute(&files, &plan_uninstall(&files).unwrap()).unwrap();
        assert_eq!(tree(dir.path()), before);
    }

    #[test]
    fn uninstall_keeps_a_config_edited_after_install_and_names_it() {
        let (dir, files) = root();
        install_into(&files);
        std::fs::write(dir.path().join(CONFIG_PATH), "[shield]\nirqs = \"1\"\n").unwrap();
        let steps = plan_uninstall(&files).unwrap();
        let keep = steps.iter().find_map(|s| match s {
            Step::Keep { path, .. } => Some(path.clone()),
            _ => None,
        });
        assert_eq!(keep, Some(Path::new("/").join(CONFIG_PATH)));
        execute(&files, &steps).unwrap();
        assert!(dir.path().join(CONFIG_PATH).is_file());
        assert!(!dir
            .path()
            .join("etc/systemd/system/cpushield.service")
            .exists());
        assert!(!dir.path().join(MANIFEST).exists());
        assert!(!dir.path().join("var").exists(), "the manifest's dirs go");
    }

    #[test]
    fn a_second_install_changes_nothing_and_still_records_the_first_ones_config() {
        let (dir, files) = root();
        install_into(&files);
        let before = tree(dir.path());
        let steps = install_into(&files);
        assert!(!steps
            .iter()
            .any(|s| matches!(s, Step::Write { .. } | Step::Mkdir(_))));
        assert_eq!(tree(dir.path()), before);
        execute(&files, &plan_uninstall(&files).unwrap()).unwrap();
        assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));
    }

    #[test]
    fn dry_run_plan_touches_nothing() {
        let (dir, files) = root();
        let steps = plan_install(&files, Path::new(DEFAULT_UNIT_DIR), Path::new("/x")).unwrap();
        assert!(steps
            .iter()
            .any(|s| s.line().starts_with("install /etc/systemd")));
        assert!(tree(dir.path()).is_empty());
    }

    #[test]
    fn packages_unit_dir_is_honoured() {
        let (dir, files) = root();
        let steps = plan_install(
            &files,
            Path::new("/lib/systemd/system"),
            Path::new("/usr/bin/cpushield"),
        )
        .unwrap();
        execute(&files, &steps).unwrap();
        let unit = std::fs::read_to_string(dir.path().join("lib/systemd/system/cpushield.service"))
            .unwrap();
        assert_eq!(unit, SERVICE_UNIT);
    }

    #[test]
    fn the_manifest_is_written_before_any_file_it_lists() {
        let (_dir, files) = root();
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
        let (dir, files) = root();
        let steps = plan_install(&files, Path::new(DEFAULT_UNIT_DIR), Path::new("/x")).unwrap();
        let upto = steps
            .iter()
            .position(|s| matches!(s, Step::Manifest(Some(_))))
            .unwrap();
        execute(&files, &steps[..=upto]).unwrap();
        execute(&files, &plan_uninstall(&files).unwrap()).unwrap();
        assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));
    }

    #[test]
    fn uninstall_without_a_manifest_does_nothing() {
        let (_dir, files) = root();
        assert!(plan_uninstall(&files).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_manifest_is_refused_with_its_path() {
        let (dir, files) = root();
        std::fs::create_dir_all(dir.path().join("var/lib/cpushield")).unwrap();
        std::fs::write(dir.path().join(MANIFEST), "file zz relative\n").unwrap();
        let err = plan_uninstall(&files).unwrap_err().to_string();
        assert!(
            err.contains("install-manifest") && err.contains("line 1"),
            "{err}"
        );
    }
}
