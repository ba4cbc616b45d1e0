//! `cpushield install` / `uninstall` / `generate` through the binary, always under a
//! temporary `--root` (never this machine's /, so no systemctl runs).

use std::path::Path;
use std::process::{Command, Output};

fn cpushield(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cpushield"))
        .args(args)
        .output()
        .expect("run cpushield")
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn install_then_uninstall_under_a_root_leaves_it_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    std::fs::create_dir_all(root.path().join("etc/systemd/system")).unwrap();
    let before = files_under(root.path());

    let out = cpushield(&["install", "--root", r, "--bin", "/usr/sbin/cs"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit =
        std::fs::read_to_string(root.path().join("etc/systemd/system/cpushield.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/sbin/cs apply\n"), "{unit}");
    assert!(root.path().join("etc/cpushield/cpushield.toml").is_file());
    assert!(String::from_utf8_lossy(&out.stdout).contains("systemctl enable --now cpushield"));

    let out = cpushield(&["uninstall", "--root", r]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files_under(root.path()), before);
}

#[test]
fn install_dry_run_prints_each_step_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let out = cpushield(&[
        "install",
        "--root",
        root.path().to_str().unwrap(),
        "--dry-run",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("would install /etc/systemd/system/cpushield.service"),
        "{text}"
    );
    assert!(
        text.contains("would install /etc/cpushield/cpushield.toml"),
        "{text}"
    );
    assert!(files_under(root.path()).is_empty());
}

#[test]
fn install_into_a_missing_root_is_refused_in_one_line_with_exit_1() {
    let out = cpushield(&["install", "--root", "/nonexistent/cpushield-root"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--root /nonexistent/cpushield-root"), "{err}");
    assert!(!Path::new("/nonexistent/cpushield-root").exists());
}

#[test]
fn generate_writes_man_pages_and_completions_from_the_real_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(cpushield(&["generate", "man", d]).status.success());
    assert!(cpushield(&["generate", "completions", d]).status.success());
    let page = std::fs::read_to_string(dir.path().join("cpushield-install.1")).unwrap();
    assert!(page.contains("\\-\\-root"), "{page}");
    assert!(dir.path().join("cpushield.1").is_file());
    assert!(!dir.path().join("cpushield-generate.1").exists());
    let bash = std::fs::read_to_string(dir.path().join("cpushield.bash")).unwrap();
    assert!(bash.contains("uninstall"));
}
