//! `cpushield install` and `uninstall`: the systemd units (embedded in the
//! binary) and the default config file, put under a root directory and
//! recorded in a manifest, so that uninstall removes exactly what install
//! put.
//!
//! [`files`] is the file door (the real one under a root, or one in
//! memory), [`plan`] the pure planners and the manifest; [`install`] and
//! [`uninstall`] run a plan and, on a machine where systemd runs, the
//! `systemctl` calls around it.

pub mod files;
pub mod plan;

use files::RootFiles;
use plan::{execute, plan_install, plan_uninstall, Step};
use std::io;
use std::path::{Path, PathBuf};

/// The boot unit: `cpushield apply` at start, `cpushield reset` at stop.
pub const SERVICE_UNIT: &str = include_str!("../../../dist/systemd/cpushield.service");
/// The agent's unit.
pub const AGENT_UNIT: &str = include_str!("../../../dist/systemd/cpushield-agent.service");
/// The default config file, installed only where none is.
pub const DEFAULT_CONFIG: &str = include_str!("../../../dist/cpushield.toml");
/// The binary path the shipped units name; `install` puts the running binary's path there.
pub const UNIT_BINARY: &str = "/usr/bin/cpushield";
/// The manifest of what `install` put, relative to the root.
pub const MANIFEST: &str = "var/lib/cpushield/install-manifest";
/// Where units go by default (the admin's unit directory), relative to the root.
pub const DEFAULT_UNIT_DIR: &str = "/etc/systemd/system";
/// The config file, relative to the root.
pub const CONFIG_PATH: &str = "etc/cpushield/cpushield.toml";

/// Why install or uninstall stopped: one line with what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--root` names no directory.
    #[error("--root {}: no such directory: name an existing directory (or / for this system)", .0.display())]
    NoRoot(PathBuf),
    /// The running binary's path is unknown.
    #[error("cannot tell this binary's path ({0}): pass --bin PATH")]
    NoBinary(io::Error),
    /// The manifest cannot be read as one.
    #[error("the install manifest {} is damaged at {line}: remove the files it lists by hand, then the manifest", path.display())]
    DamagedManifest {
        /// The manifest.
        path: PathBuf,
        /// The line that is not a manifest line.
        line: String,
    },
    /// A file or directory could not be read or changed for want of rights.
    #[error("{0}: run it as root, or name a writable --root DIR")]
    Denied(io::Error),
    /// A file or directory could not be read or changed.
    #[error("{0}: fix the path named above and run it again (the steps done so far stay)")]
    Io(io::Error),
    /// systemctl could not be started.
    #[error("cannot run systemctl {args}: {error}")]
    NoSystemctl {
        /// Its arguments.
        args: String,
        /// Why it did not start.
        error: io::Error,
    },
    /// systemctl failed.
    #[error("systemctl {args} failed ({status}); the files are in place, run it by hand")]
    Systemctl {
        /// Its arguments.
        args: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
}

impl Error {
    /// An I/O failure with the remedy that fits it.
    pub fn from_io(error: io::Error) -> Self {
        if error.kind() == io::ErrorKind::PermissionDenied {
            Error::Denied(error)
        } else {
            Error::Io(error)
        }
    }
}

/// Where and how to install (`cpushield install`'s options).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct InstallRequest {
    /// Install under this directory instead of / (an image being prepared, a test).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR", default_value = "/"))]
    pub root: PathBuf,
    /// The unit directory under the root (/lib/systemd/system for a package).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR", default_value = DEFAULT_UNIT_DIR))]
    pub unit_dir: PathBuf,
    /// The cpushield binary the units run (default: this one).
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub bin: Option<PathBuf>,
    /// Print what would be done, one step a line, and change nothing.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dry_run: bool,
}

/// What to uninstall (`cpushield uninstall`'s options).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct UninstallRequest {
    /// Uninstall from under this directory instead of /.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR", default_value = "/"))]
    pub root: PathBuf,
    /// Print what would be done, one step a line, and change nothing.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dry_run: bool,
}

/// Whether systemd is the running init (sd_booted's test), for `root` = /.
fn systemd_running(root: &Path) -> bool {
    root == Path::new("/") && Path::new("/run/systemd/system").is_dir()
}

fn systemctl(args: &[&str]) -> Result<(), Error> {
    let joined = args.join(" ");
    let status = std::process::Command::new("systemctl")
        .args(args)
        .status()
        .map_err(|error| Error::NoSystemctl {
            args: joined.clone(),
            error,
        })?;
    if !status.success() {
        return Err(Error::Systemctl {
            args: joined,
            status,
        });
    }
    Ok(())
}

fn check_root_dir(root: &Path) -> Result<(), Error> {
    if !root.is_dir() {
        return Err(Error::NoRoot(root.to_path_buf()));
    }
    Ok(())
}

fn report(steps: &[Step], dry_run: bool, say: &mut dyn FnMut(String)) {
    for step in steps {
        say(format!(
            "{}{}",
            if dry_run { "would " } else { "" },
            step.line()
        ));
    }
}

/// Installs as `request` says, telling `say` each step (before it is done,
/// so a failure leaves the steps done so far on record) and what to do next.
pub fn install(request: &InstallRequest, say: &mut dyn FnMut(String)) -> Result<(), Error> {
    check_root_dir(&request.root)?;
    let bin = match &request.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().map_err(Error::NoBinary)?,
    };
    let files = RootFiles {
        root: request.root.clone(),
    };
    let steps = plan_install(&files, &request.unit_dir, &bin).map_err(Error::from_io)?;
    report(&steps, request.dry_run, say);
    if request.dry_run {
        return Ok(());
    }
    execute(&files, &steps).map_err(Error::from_io)?;
    if systemd_running(&request.root) {
        systemctl(&["daemon-reload"])?;
        say("systemctl daemon-reload: done".into());
    }
    say(format!(
        "next: edit /{CONFIG_PATH}, then systemctl enable --now cpushield.service \
         (and cpushield-agent.service for the agent)"
    ));
    Ok(())
}

/// Uninstalls what the manifest under the request's root lists, telling
/// `say` each step; where systemd runs, the units are stopped and disabled
/// first (stopping cpushield.service resets the shield).
pub fn uninstall(request: &UninstallRequest, say: &mut dyn FnMut(String)) -> Result<(), Error> {
    let (root, dry_run) = (request.root.as_path(), request.dry_run);
    check_root_dir(root)?;
    let files = RootFiles {
        root: root.to_path_buf(),
    };
    let steps = plan_uninstall(&files)?;
    if steps.is_empty() {
        say(format!(
            "nothing to uninstall: no /{MANIFEST} (cpushield install was not run here)"
        ));
        return Ok(());
    }
    let running = systemd_running(root);
    let disable = [
        "disable",
        "--now",
        "cpushield-agent.service",
        "cpushield.service",
    ];
    if running {
        say(format!(
            "{}systemctl {}",
            if dry_run { "would run " } else { "" },
            disable.join(" ")
        ));
    }
    report(&steps, dry_run, say);
    if dry_run {
        return Ok(());
    }
    if running {
        systemctl(&disable)?;
    }
    execute(&files, &steps).map_err(Error::from_io)?;
    if running {
        systemctl(&["daemon-reload"])?;
    }
    Ok(())
}
