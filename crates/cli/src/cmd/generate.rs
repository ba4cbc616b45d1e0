//! `cpushield generate man|completions DIR` (hidden): the man pages
//! (clap_mangen) and shell completions (clap_complete) the .deb ships, made
//! from the same clap definition as the binary, so they never drift.

use crate::args::EXIT_OK;
use clap::{Args, ValueEnum};
use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What to generate.
#[derive(Clone, Copy, ValueEnum)]
pub enum What {
    /// cpushield.1 and one cpushield-VERB.1 per subcommand.
    Man,
    /// bash, zsh and fish completion scripts.
    Completions,
}

/// Arguments of `cpushield generate`.
#[derive(Args)]
pub struct GenerateArgs {
    /// Man pages or completions.
    what: What,
    /// The directory to write them to (created if missing).
    dir: PathBuf,
}

fn man_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let page = dir.join(format!("{}.1", cmd.get_name()));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    std::fs::write(&page, out)?;
    written.push(page);
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        // clap names are &'static str; a handful of short strings, once per process.
        let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
        let sub = sub.clone().name(static_name);
        let page = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(sub).render(&mut out)?;
        std::fs::write(&page, out)?;
        written.push(page);
    }
    Ok(written)
}

/// Runs `cpushield generate`; `cmd` is the binary's whole clap command.
pub fn generate(args: GenerateArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot create {} ({e}): name a writable directory",
            args.dir.display()
        )
    })?;
    cmd.build();
    let written = match args.what {
        What::Man => man_pages(&cmd, &args.dir)?,
        What::Completions => {
            let mut written = Vec::new();
            for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
                written.push(clap_complete::generate_to(
                    shell,
                    &mut cmd,
                    "cpushield",
                    &args.dir,
                )?);
            }
            written
        }
    };
    for path in written {
        println!("{}", path.display());
    }
    Ok(ExitCode::from(EXIT_OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> clap::Command {
        clap::Command::new("cpushield")
            .about("shield")
            .subcommand(clap::Command::new("apply").about("apply the file"))
            .subcommand(clap::Command::new("generate").hide(true))
    }

    #[test]
    fn man_pages_are_one_per_visible_subcommand_and_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let written = generate(
            GenerateArgs {
                what: What::Man,
                dir: dir.path().into(),
            },
            demo(),
        );
        assert!(written.is_ok());
        let page = std::fs::read_to_string(dir.path().join("cpushield-apply.1")).unwrap();
        assert!(page.starts_with(".ie"), "roff: {page}");
        assert!(page.contains("cpushield\\-apply"), "{page}");
        assert!(dir.path().join("cpushield.1").is_file());
        assert!(!dir.path().join("cpushield-generate.1").exists());
    }

    #[test]
    fn completions_are_written_for_bash_zsh_and_fish() {
        let dir = tempfile::tempdir().unwrap();
        generate(
            GenerateArgs {
                what: What::Completions,
                dir: dir.path().into(),
            },
            demo(),
        )
        .unwrap();
        let bash = std::fs::read_to_string(dir.path().join("cpushield.bash")).unwrap();
        assert!(bash.contains("apply"));
        assert!(dir.path().join("_cpushield").is_file());
        assert!(dir.path().join("cpushield.fish").is_file());
    }
}
