//! examples/periodic.c, compiled with gcc against the C API (through the
//! pkg-config template) and run on CPU 1: it prints its worst deviation, passes
//! every sample through the queue, and a reservation it holds is refused to
//! others and released when it is SIGKILLed.

use cpushield_cpuset::CpuSet;
use cpushield_rt::reserve::ReserveDir;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where cargo put libcpushield_rt.{so,a} for this test: beside the test binary.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    assert!(
        dir.join("libcpushield_rt.so").exists() && dir.join("libcpushield_rt.a").exists(),
        "cdylib/staticlib missing in {}",
        dir.display()
    );
    dir
}

/// Writes cpushield.pc from the template into `dir`, pointing at this build.
fn write_pc(dir: &Path) {
    let template = std::fs::read_to_string(repo().join("crates/rt/cpushield.pc.in")).unwrap();
    let pc = template
        .replace("@LIBDIR@", lib_dir().to_str().unwrap())
        .replace(
            "@INCLUDEDIR@",
            repo()
                .join("include")
                .canonicalize()
                .unwrap()
                .to_str()
                .unwrap(),
        )
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"));
    std::fs::write(dir.join("cpushield.pc"), pc).unwrap();
}

fn pkg_config(dir: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("cpushield")
        .env("PKG_CONFIG_PATH", dir)
        .output()
        .expect("pkg-config is installed");
    assert!(
        out.status.success(),
        "pkg-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn gcc(args: &[String]) {
    let out = Command::new("gcc")
        .args(args)
        .output()
        .expect("gcc is installed");
    assert!(
        out.status.success(),
        "gcc {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the example linked dynamically through pkg-config.
fn build_dynamic(dir: &Path) -> PathBuf {
    write_pc(dir);
    let exe = dir.join("periodic");
    let mut args = vec![
        "-Wall".to_string(),
        "-Werror".into(),
        "-O2".into(),
        repo().join("examples/periodic.c").to_str().unwrap().into(),
        "-o".into(),
        exe.to_str().unwrap().into(),
    ];
    args.extend(pkg_config(dir, &["--cflags", "--libs"]));
    args.push(format!("-Wl,-rpath,{}", lib_dir().display()));
    args.push("-lpthread".into());
    gcc(&args);
    exe
}

fn run(exe: &Path, reserve_dir: &Path, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .env("CPUSHIELD_RESERVE_DIR", reserve_dir)
        .output()
        .unwrap()
}

/// The number after `key` in the example's output.
fn number_after(text: &str, key: &str) -> u64 {
    let rest = &text[text
        .find(key)
        .unwrap_or_else(|| panic!("'{key}' in:\n{text}"))
        + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The number just before `key` in the example's output.
fn number_before(text: &str, key: &str) -> u64 {
    let head = &text[..text
        .find(key)
        .unwrap_or_else(|| panic!("'{key}' in:\n{text}"))];
    let digits = head.len() - head.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    head[head.len() - digits..].parse().unwrap()
}

#[test]
fn the_c_example_prints_its_worst_deviation_on_cpu_1() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dynamic(dir.path());
    let out = run(
        &exe,
        dir.path(),
        &["-c", "1", "-p", "1000", "-a", "20", "-n", "500"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let worst = number_after(&stdout, "worst deviation: ");
    assert!(worst < 1_000_000_000, "a deviation, in ns: {worst}");
    assert_eq!(number_after(&stdout, "advance "), 20);
    let cycles = number_before(&stdout, " cycles");
    assert_eq!(cycles, 500, "{stdout}");
    let received = number_after(&stdout, "queue: ");
    let dropped = number_after(&stdout, "received, ");
    assert_eq!(
        received + dropped,
        cycles,
        "every cycle's sample accounted for"
    );
    assert_eq!(
        dropped, 0,
        "the main thread drains every 1 ms, the queue holds 1024"
    );
    if !stderr.is_empty() {
        // Not permitted FIFO (or mlock): the example says so and still runs.
        assert!(stderr.contains("warning:"), "{stderr}");
    }
}

#[test]
fn the_static_library_links_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    write_pc(dir.path());
    let exe = dir.path().join("periodic-static");
    let mut args = vec![
        repo()
            .join("examples/periodic.c")
            .to_str()
            .unwrap()
            .to_string(),
        "-o".into(),
        exe.to_str().unwrap().into(),
    ];
    args.extend(pkg_config(dir.path(), &["--cflags"]));
    args.push(lib_dir().join("libcpushield_rt.a").to_str().unwrap().into());
    // The static library's own dependencies, from Libs.private.
    args.extend(
        pkg_config(dir.path(), &["--static", "--libs-only-l"])
            .into_iter()
            .filter(|l| l != "-lcpushield_rt"),
    );
    gcc(&args);
    let ldd = Command::new("ldd").arg(&exe).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libcpushield_rt"),
        "linked statically"
    );
    let out = run(&exe, dir.path(), &["-c", "1", "-p", "500", "-n", "50"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("worst deviation: "));
}

#[test]
fn a_reservation_held_by_the_example_is_refused_to_others_and_freed_by_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dynamic(dir.path());
    let reserve_dir = dir.path().join("reserve");
    let rd = ReserveDir::new(&reserve_dir);
    let cpu1 = CpuSet::from_cpus([1]);
    let mut child = Command::new(&exe)
        .args(["-c", "1", "-p", "1000", "-n", "60000", "-r"])
        .env("CPUSHIELD_RESERVE_DIR", &reserve_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "reserved CPU 1");

    let holder = rd.holder(1).unwrap().expect("held by the example");
    assert_eq!(holder.pid, child.id() as i32);
    assert!(holder.command.contains("periodic"), "{holder:?}");
    let err = rd.check(&cpu1, std::process::id() as i32).unwrap_err();
    assert!(
        err.to_string().contains(&format!("PID {}", child.id())),
        "{err}"
    );
    // A second C program asking for the CPU is refused, naming the holder.
    let out = run(&exe, &reserve_dir, &["-c", "1", "-n", "1", "-r"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("reserved by PID {}", child.id())),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    child.kill().unwrap(); // SIGKILL: no cleanup code runs in the holder
    child.wait().unwrap();
    assert_eq!(rd.holder(1).unwrap(), None, "the kernel dropped the lock");
    rd.check(&cpu1, std::process::id() as i32).unwrap();
}

#[test]
fn without_permission_for_fifo_the_example_warns_and_runs_at_sched_other() {
    // As root, drop to nobody for the run; as anyone else FIFO is (normally)
    // already refused.
    // SAFETY: geteuid cannot fail and touches no memory.
    let is_root = unsafe { libc::geteuid() } == 0;
    let dir = tempfile::tempdir().unwrap();
    let exe = build_dynamic(dir.path());
    let mut cmd = if is_root {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.args(["-c", "1", "-n", "50"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("worst deviation: "), "{stdout}");
    if is_root {
        assert!(
            stderr.contains("warning: cannot set SCHED_FIFO priority 80")
                && stderr.contains("running at SCHED_OTHER"),
            "{stderr}"
        );
    }
}
