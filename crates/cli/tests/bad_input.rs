//! Bad input is refused before any work: exit 1, one line naming the input
//! and the remedy, no panic (exit 101), nothing changed or created. Every
//! case here is an input a user once gave. None of them runs anything, so
//! this file needs no lock.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cpushield");

fn cpushield(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run cpushield")
}

/// Runs `args`, expects exit 1 within a second with exactly one line on
/// stderr and nothing on stdout, and returns that line.
fn refused(args: &[&str]) -> String {
    let started = Instant::now();
    let out = cpushield(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{args:?} was refused only after {:?}",
        started.elapsed()
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(
        out.stdout.is_empty(),
        "{args:?} printed on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

#[test]
fn a_command_line_clap_rejects_is_one_line_naming_the_word_and_the_help() {
    for (args, names, help) in [
        (
            &["shield", "--foo"][..],
            "unexpected argument '--foo' for 'shield'",
            "cpushield shield --help",
        ),
        (
            &["shield", "--al", "3"][..],
            "did you mean '--all'?",
            "cpushield shield --help",
        ),
        (&["shiel"][..], "'shiel'", "cpushield --help"),
        (&[][..], "needs a command: shield,", "cpushield --help"),
        (
            &["measure"][..],
            "needs a command: latency, determinism, noise, net",
            "cpushield measure --help",
        ),
        (
            &["measure", "latency", "--cpus", "1", "--source", "xyz"][..],
            "possible values: auto, timer, rtc, hpet",
            "cpushield measure latency --help",
        ),
        (&["run"][..], "--cpus <CPUS>", "cpushield run --help"),
        (
            &["run", "--cpus", "1", "--bogus", "--", "true"][..],
            "'--bogus'",
            "cpushield run --help",
        ),
        (
            &["shield", "--all", "1", "--all", "2"][..],
            "'--all <CPUS>' cannot be used multiple times",
            "cpushield shield --help",
        ),
        (
            &["check", "--json=3"][..],
            "unexpected value '3' for '--json'",
            "cpushield check --help",
        ),
    ] {
        let err = refused(args);
        assert!(err.starts_with("cpushield: error: "), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(err.contains(&format!("(see: {help})")), "{args:?}: {err}");
    }
}

#[test]
fn help_and_version_still_print_on_stdout_and_exit_0() {
    for args in [
        &["--help"][..],
        &["shield", "--help"][..],
        &["--version"][..],
    ] {
        let out = cpushield(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty() && out.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn huge_durations_are_refused_naming_the_option_and_the_range() {
    for (args, flag) in [
        (&["check", "--interval", "1e20"][..], "--interval"),
        (
            &["measure", "latency", "--cpus", "1", "--duration", "1e30"][..],
            "--duration",
        ),
        (
            &["measure", "determinism", "--cpus", "1", "--work", "1e30"][..],
            "--work",
        ),
    ] {
        let err = refused(args);
        assert!(err.contains(flag) && err.contains("0 to 365 days"), "{err}");
    }
}

#[test]
fn a_rate_faster_than_a_timer_is_refused_at_once() {
    let err = refused(&[
        "measure",
        "latency",
        "--cpus",
        "1",
        "--rate",
        "4000000000",
        "--duration",
        "1s",
    ]);
    assert!(err.contains("--rate 100000 or less"), "{err}");
    let err = refused(&[
        "compare",
        "--cpus",
        "1",
        "--rate",
        "4000000000",
        "--duration",
        "1s",
    ]);
    assert!(err.contains("--rate 100000 or less"), "{err}");
}

#[test]
fn negative_values_name_their_option() {
    for (args, flag) in [
        (&["shield", "--all", "-1"][..], "--all"),
        (
            &["run", "--cpus", "1", "--rr", "-5", "--", "true"][..],
            "--rr",
        ),
        (
            &["measure", "latency", "--cpus", "1", "--duration", "-1s"][..],
            "--duration",
        ),
        (
            &["measure", "latency", "--cpus", "1", "--rate", "-5"][..],
            "--rate",
        ),
        (&["run", "--cpus", "1", "--pid", "-5"][..], "--pid"),
    ] {
        let err = refused(args);
        assert!(err.contains(&format!("'{flag} ")), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{err}");
    }
}

#[test]
fn a_bare_hex_mask_that_names_offline_cpus_says_how_it_was_read() {
    // The CLI declares `shield --all`; cpushield-load and cpushield-rt declare
    // `load --cpus` and `run --cpus`. Each case also carries an input its
    // command would refuse later, so that an option read without the online
    // CPUs fails here with another message instead of starting anything.
    for args in [
        &["shield", "--all", "abc"][..],
        &["load", "--cpus", "abc", "--stress-ng", ""][..],
        &["run", "--cpus", "abc", "--", "/nonexistent/program"][..],
    ] {
        let err = refused(args);
        assert!(
            err.contains("read 'abc' as the hex mask 0xabc"),
            "{args:?}: {err}"
        );
    }
    let err = refused(&["shield", "--all", "1,00000000"]);
    assert!(err.contains("= CPUs 32;"), "{err}");
}

#[test]
fn boot_params_that_isolate_every_cpu_are_refused() {
    // `--procs <last> --irqs <the others>`: on 2 CPUs the issue's `--procs 1 --irqs 0`.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online = cpushield_cpuset::CpuSet::parse_list(&online).unwrap();
    let last = online.last().unwrap();
    let mut others = online.clone();
    others.remove(last);
    assert!(
        !others.is_empty(),
        "needs two online CPUs (online: {online})"
    );
    let out = cpushield(&[
        "boot-params",
        "--procs",
        &last.to_string(),
        "--irqs",
        &others.to_list(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "nothing printed to put on a command line"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("leave at least one CPU unshielded"), "{err}");
}

#[test]
fn unwritable_output_paths_are_refused_before_any_work() {
    for (args, flag) in [
        (
            &[
                "compare",
                "--cpus",
                "1",
                "--duration",
                "1s",
                "--out",
                "/proc/nope",
            ][..],
            "--out",
        ),
        (
            &[
                "load",
                "fpu",
                "--cpus",
                "1",
                "--duration",
                "1s",
                "--json",
                "/proc/x.json",
            ][..],
            "--json",
        ),
        (
            &[
                "measure",
                "latency",
                "--cpus",
                "1",
                "--duration",
                "1s",
                "--json",
                "/proc/x.json",
            ][..],
            "--json",
        ),
        (
            &[
                "measure",
                "latency",
                "--cpus",
                "1",
                "--duration",
                "1s",
                "--histogram",
                "/proc/h",
            ][..],
            "--histogram",
        ),
        (
            &[
                "measure",
                "determinism",
                "--cpus",
                "1",
                "--json",
                "/proc/x.json",
            ][..],
            "--json",
        ),
        (
            &[
                "measure",
                "noise",
                "--cpus",
                "1",
                "--duration",
                "1s",
                "--json",
                "/proc/x.json",
            ][..],
            "--json",
        ),
    ] {
        let err = refused(args);
        assert!(
            err.contains(flag) && err.contains("pick a writable path"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn zero_histogram_bins_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.txt");
    let err = refused(&[
        "measure",
        "latency",
        "--cpus",
        "1",
        "--duration",
        "1s",
        "--histogram",
        hist.to_str().unwrap(),
        "--histogram-bins",
        "0",
    ]);
    assert!(err.contains("--histogram-bins"), "{err}");
    assert!(!hist.exists(), "no empty histogram file is left behind");
}

#[test]
fn a_bad_or_missing_config_file_is_one_line_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[shield]\nall = \"1\"\n\n[agent]\nlisten = \"nowhere\"\n",
    )
    .unwrap();
    let bad = bad.display().to_string();
    for args in [
        vec!["apply", "--config", &bad],
        vec!["apply", "--config", &bad, "--dry-run"],
        vec!["agent", "--config", &bad, "--once"],
    ] {
        let err = refused(&args);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{bad}:5: key `agent.listen`")),
            "{err}"
        );
        assert!(err.contains("127.0.0.1:9477"), "no remedy: {err}");
    }
    let missing = dir.path().join("missing.toml").display().to_string();
    for verb in ["apply", "agent"] {
        let err = refused(&[verb, "--config", &missing]);
        assert!(
            err.contains(&missing) && err.contains("--config PATH"),
            "{verb}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a file was created"
    );
}

#[test]
fn agent_intervals_are_checked_as_the_config_file_checks_them() {
    for (interval, problem) in [
        ("0", "'0' is shorter than 10ms"),
        ("1ns", "'1ns' is shorter than 10ms"),
        ("99999999y", "'99999999y' is longer than 365 days"),
        ("abc", "'abc' is not a duration"),
        ("-1s", "'-1s' is negative"),
    ] {
        let err = refused(&["agent", "--once", "--interval", interval]);
        assert!(err.contains("--interval"), "{interval}: {err}");
        assert!(
            err.contains(&format!(
                "{problem}: give an interval from 10ms to 365 days, e.g. 1s or 500ms"
            )),
            "{interval}: {err}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[agent]\ninterval = \"1ns\"\n").unwrap();
    let err = refused(&["agent", "--once", "--config", &file.display().to_string()]);
    assert!(
        err.contains("key `agent.interval`: '1ns' is shorter than 10ms; give an interval"),
        "{err}"
    );
}

#[test]
fn a_listen_port_above_65535_is_refused_naming_the_range() {
    let err = refused(&["agent", "--once", "--listen", "127.0.0.1:70000"]);
    assert!(
        err.contains("port 70000 is above 65535: write an IP address and a port from 0 to 65535"),
        "{err}"
    );
}

#[test]
fn a_config_file_that_is_a_directory_or_not_utf8_says_so_not_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, b"[shield]\nall = \"1\"\n# caf\xe9\n").unwrap();
    let binary = binary.display().to_string();
    for verb in ["apply", "agent"] {
        let err = refused(&[verb, "--config", &path]);
        assert_eq!(err.trim().lines().count(), 1, "{verb}: {err}");
        assert!(
            err.contains(&format!(
                "the config file {path} is a directory, not a file"
            )),
            "{verb}: {err}"
        );
        assert!(!err.contains("create it"), "{verb}: {err}");
        let err = refused(&[verb, "--config", &binary]);
        assert_eq!(err.trim().lines().count(), 1, "{verb}: {err}");
        assert!(
            err.contains(&format!(
                "{binary}:3: not UTF-8 text: byte 24 (0xe9) starts no UTF-8 character; save the file as UTF-8"
            )),
            "{verb}: {err}"
        );
    }
}

/// Runs `args` with at most 1 GiB of address space (a command that reads
/// without end fails on its own instead of filling the machine's memory),
/// killed after `limit`; expects what [`refused`] expects.
fn refused_within(args: &[&str], state: &std::path::Path, limit: Duration) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("CPUSHIELD_STATE_DIR", state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let gib = 1 << 30;
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, gib, gib)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd.spawn().expect("run cpushield");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    err
}

#[test]
fn a_config_that_is_a_fifo_or_a_device_is_refused_as_not_a_regular_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let fifo = fifo.display().to_string();
    for path in [fifo.as_str(), "/dev/zero"] {
        for args in [
            vec!["apply", "--dry-run", "--config", path],
            vec!["agent", "--once", "--config", path],
        ] {
            let err = refused_within(&args, dir.path(), Duration::from_secs(5));
            assert!(
                err.contains(&format!("the config file {path} is not a regular file")),
                "{args:?}: {err}"
            );
            assert!(err.contains("--config PATH"), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_config_over_one_mib_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    // Valid TOML throughout: only its size is wrong.
    std::fs::write(&big, "# a comment line\n".repeat(128 * 1024)).unwrap();
    let big = big.display().to_string();
    for args in [
        vec!["apply", "--dry-run", "--config", &big],
        vec!["agent", "--once", "--config", &big],
    ] {
        let err = refused_within(&args, dir.path(), Duration::from_secs(5));
        assert!(
            err.contains(&format!("the config file {big} holds more than 1024 KiB")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_key_a_megabyte_long_is_cut_to_a_readable_length_in_its_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.toml");
    let key = "k".repeat(1_000_000);
    std::fs::write(&file, format!("[shield]\n{key} = 1\n")).unwrap();
    let file = file.display().to_string();
    let err = refused_within(
        &["apply", "--dry-run", "--config", &file],
        dir.path(),
        Duration::from_secs(5),
    );
    assert!(err.len() < 1000, "{} bytes: {:.300}", err.len(), err);
    assert!(err.contains(&format!("{file}:2: key `")), "{err}");
    assert!(err.contains(" bytes)"), "the length not said: {err}");
}

#[test]
fn an_access_group_that_does_not_exist_is_refused_at_validation_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("access.toml");
    std::fs::write(
        &file,
        "[shield]\nall = \"1\"\n\n[[access.grant]]\ngroup = \"nosuchgroup_zz\"\ncpus = \"1\"\nmax_priority = 10\n",
    )
    .unwrap();
    let file = file.display().to_string();
    // Only --dry-run: where the group is not refused, apply would shield.
    let err = refused_within(
        &["apply", "--dry-run", "--config", &file],
        dir.path(),
        Duration::from_secs(5),
    );
    assert!(
        err.contains(&format!(
            "{file}:5: key `access.grant.group`: group \"nosuchgroup_zz\" does not exist on this machine"
        )),
        "{err}"
    );
    assert!(err.contains("groupadd nosuchgroup_zz"), "{err}");
}

#[test]
fn cpu_lists_that_name_no_cpu_say_what_was_typed_and_how_it_was_read() {
    for (typed, read) in [
        ("0x0", "read '0x0' as a hex mask with no bit set"),
        ("1:0/2", "read '1:0/2' as a CPU list, which names no CPU"),
    ] {
        let err = refused(&["shield", "--all", typed]);
        assert!(err.contains(read), "{typed}: {err}");
        assert!(err.contains("name at least one CPU"), "{typed}: {err}");
    }
}

#[test]
fn tune_with_a_load_directory_that_does_not_exist_says_so_once() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: tune checks its load directory only as root");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let err = refused_within(
        &[
            "tune",
            "--cpus",
            "1",
            "--load",
            "fs",
            "--dir",
            "/nonexistent/dir",
        ],
        state.path(),
        Duration::from_secs(10),
    );
    assert_eq!(
        err.matches("--dir /nonexistent/dir").count(),
        1,
        "not once: {err}"
    );
}

#[test]
fn mems_that_are_not_a_node_list_are_refused_naming_the_option_and_the_form() {
    for bad in ["x", "", "1-"] {
        let err = refused(&["shield", "--all", "1", "--mems", bad]);
        assert!(err.contains("--mems"), "{bad:?}: {err}");
        assert!(err.contains("a list like 1 or 0-1"), "{bad:?}: {err}");
    }
}

#[test]
fn a_host_channel_that_is_no_port_is_refused_by_compare_and_measure_latency_alike() {
    for args in [
        &["compare", "--host-channel", "/no/such/port"][..],
        &[
            "measure",
            "latency",
            "--attribute",
            "--cpus",
            "0",
            "--host-channel",
            "/no/such/port",
        ][..],
    ] {
        let err = refused(args);
        assert!(
            err.contains(
                "--host-channel /no/such/port: no such port: pass the guest's virtio-serial port"
            ),
            "{args:?}: {err}"
        );
    }
}
