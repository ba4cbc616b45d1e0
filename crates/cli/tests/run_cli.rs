//! `cpushield run` on this host, on CPU 1, without a shield (`--allow-unshielded`;
//! the shielded case runs in the guest). Every task placed here is one this
//! test started. Each test has its own empty shield state and reservation
//! directory.

use cpushield_rt::reserve::{Holder, ReserveDir};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn reserve_dir(&self) -> ReserveDir {
        ReserveDir::new(self.dir.path().join("reserve"))
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cpushield"));
        c.arg("run")
            .args(args)
            .env("CPUSHIELD_STATE_DIR", self.dir.path().join("state"))
            .env("CPUSHIELD_RESERVE_DIR", self.dir.path().join("reserve"));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits until CPU `cpu` is reserved by someone other than `not`.
    fn wait_for_holder(&self, cpu: usize, not: i32) -> Holder {
        let t0 = Instant::now();
        loop {
            if let Some(h) = self.reserve_dir().holder(cpu).unwrap() {
                if h.pid != not && h.pid != 0 {
                    return h;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "CPU {cpu} never reserved"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill takes integers only and touches no memory.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid}");
}

fn status_field(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn the_exit_status_is_the_tasks_own() {
    let env = Env::new();
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(out.status.code(), Some(128 + 9), "killed by SIGKILL");
}

#[test]
fn the_command_starts_on_the_cpu_with_the_policy_already_set() {
    let env = Env::new();
    let out = env.run(&[
        "--cpus",
        "1",
        "--fifo",
        "10",
        "--allow-unshielded",
        "--",
        "sh",
        "-c",
        "grep Cpus_allowed_list /proc/$$/status; chrt -p $$",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("Cpus_allowed_list:\t1\n"), "{stdout}");
    assert!(stdout.contains("policy: SCHED_FIFO"), "{stdout}");
    assert!(stdout.contains("priority: 10"), "{stdout}");
}

#[test]
fn idle_poll_keeps_a_sched_idle_spinner_on_the_cpu_while_the_task_runs() {
    let env = Env::new();
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--idle-poll",
        "--",
        "sh",
        "-c",
        "for t in /proc/$PPID/task/*; do if [ \"$(cat $t/comm)\" = cpushield-poll1 ]; then chrt -p ${t##*/}; grep Cpus_allowed_list $t/status; fi; done",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("policy: SCHED_IDLE"), "{stdout}");
    assert!(stdout.contains("Cpus_allowed_list:\t1\n"), "{stdout}");
}

#[test]
fn unshielded_cpus_are_refused_and_nothing_runs() {
    let env = Env::new();
    let marker = env.dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let out = env.run(&["--cpus", "1", "--", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("CPU(s) 1 not shielded") && stderr.contains("cpushield shield --all 1"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

/// Runs `run` with `args` and expects a refusal: exit 1, exactly one line on
/// stderr containing `expect`, and nothing run.
fn assert_refused_one_line(env: &Env, args: &[&str], expect: &str) {
    let marker = env.dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let mut argv = args.to_vec();
    argv.extend(["--", "sh", "-c", &script]);
    let out = env.run(&argv);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{argv:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{argv:?}: not one line: {err}");
    assert!(err.contains(expect), "{argv:?}: {err}");
    assert!(!marker.exists(), "{argv:?} ran the command");
}

#[test]
fn bad_input_is_refused_with_one_line_and_nothing_runs() {
    let env = Env::new();
    for (args, expect) in [
        (&["--irq", "4000000"][..], "IRQ 4000000 does not exist"),
        (&["--fifo", "100"][..], "priority 100 is out of range"),
        (
            &["--deadline", "2ms/1ms/1ms"][..],
            "runtime <= deadline <= period",
        ),
    ] {
        let mut argv = vec!["--cpus", "1", "--allow-unshielded"];
        argv.extend(args);
        assert_refused_one_line(&env, &argv, expect);
    }
    assert_refused_one_line(
        &env,
        &["--cpus", "4000", "--allow-unshielded"],
        "CPU(s) 4000 not online",
    );
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--",
        "cpushield-no-such-cmd",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("'cpushield-no-such-cmd' not found"), "{err}");
    let out = env.run(&["--cpus", "1", "--allow-unshielded", "--pid", "999999999"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no task with PID 999999999"), "{err}");
}

#[test]
fn share_with_a_policy_a_lock_a_reservation_or_idle_poll_is_refused_and_nothing_runs() {
    let env = Env::new();
    for (extra, flag) in [
        (&["--fifo", "10"][..], "--fifo"),
        (&["--rr", "10"][..], "--rr"),
        (&["--deadline", "1ms/2ms/3ms"][..], "--deadline"),
        (&["--nice", "5"][..], "--nice"),
        (&["--mlock"][..], "--mlock"),
        (&["--reserve"][..], "--reserve"),
        (&["--idle-poll"][..], "--idle-poll"),
    ] {
        let mut argv = vec!["--cpus", "1", "--allow-unshielded", "--share"];
        argv.extend(extra);
        assert_refused_one_line(
            &env,
            &argv,
            &format!("--share with {flag}: shared work runs at SCHED_IDLE"),
        );
        assert!(
            env.reserve_dir().holder(1).unwrap().is_none(),
            "{argv:?} left a reservation"
        );
    }
}

#[test]
fn mlock_lets_the_command_lock_all_its_memory_and_says_it_must() {
    let env = Env::new();
    // MCL_CURRENT | MCL_FUTURE = 3; prints mlockall's return value.
    let script = "import ctypes; print(ctypes.CDLL(None, use_errno=True).mlockall(3))";
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--mlock",
        "--",
        "python3",
        "-c",
        script,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        "0",
        "mlockall succeeded in the task"
    );
    assert!(text(&out.stderr).contains("must call mlockall itself"));
}

#[test]
fn sigterm_to_run_reaches_the_task_and_run_exits_with_its_status() {
    let env = Env::new();
    let mut run = env.spawn(&["--cpus", "1", "--allow-unshielded", "--", "sleep", "30"]);
    std::thread::sleep(Duration::from_millis(300));
    kill(run.id() as i32, libc::SIGTERM);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
}

#[test]
fn a_reservation_refuses_a_second_run_naming_the_holder_and_ends_with_a_sigkilled_task() {
    let env = Env::new();
    let mut holder_run = env.spawn(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--reserve",
        "--",
        "sleep",
        "30",
    ]);
    let holder = env.wait_for_holder(1, holder_run.id() as i32);
    assert!(holder.command.contains("sleep 30"), "{holder:?}");

    let out = env.run(&["--cpus", "1", "--allow-unshielded", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "CPU 1 is reserved by PID {} (sleep 30)",
            holder.pid
        )),
        "{stderr}"
    );

    kill(holder.pid, libc::SIGKILL);
    assert_eq!(holder_run.wait().unwrap().code(), Some(128 + 9));
    assert_eq!(env.reserve_dir().holder(1).unwrap(), None);
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--reserve",
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn the_reservation_outlives_a_sigkilled_run_as_long_as_its_task() {
    let env = Env::new();
    let mut holder_run = env.spawn(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--reserve",
        "--",
        "sleep",
        "30",
    ]);
    let holder = env.wait_for_holder(1, holder_run.id() as i32);
    kill(holder_run.id() as i32, libc::SIGKILL);
    holder_run.wait().unwrap();
    // The task inherited the lock: still held.
    let still = env
        .reserve_dir()
        .holder(1)
        .unwrap()
        .expect("still held by the task");
    assert_eq!(still.pid, holder.pid);
    // Held in deed, not only on file: another placement there is refused.
    assert_refused_one_line(
        &env,
        &["--cpus", "1", "--allow-unshielded"],
        &format!("CPU 1 is reserved by PID {} (sleep 30)", holder.pid),
    );
    kill(holder.pid, libc::SIGKILL);
    // The task was run's child; now an orphan, reaped by init or a subreaper.
    let t0 = Instant::now();
    while env.reserve_dir().holder(1).unwrap().is_some() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "reservation not released"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = env.run(&["--cpus", "1", "--allow-unshielded", "--", "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn an_existing_task_is_moved_with_its_policy() {
    let env = Env::new();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id() as i32;
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--rr",
        "5",
        "--pid",
        &pid.to_string(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "moved PID {pid} (1 thread) to CPU(s) 1 at SCHED_RR priority 5"
        )),
        "{stdout}"
    );
    assert_eq!(status_field(pid, "Cpus_allowed_list"), "1");
    // SAFETY: sched_getscheduler takes a PID and touches no memory.
    assert_eq!(unsafe { libc::sched_getscheduler(pid) }, libc::SCHED_RR);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn threads_moves_every_thread_of_an_existing_process() {
    let env = Env::new();
    let script = "import threading, time\n\
                  ts = [threading.Thread(target=time.sleep, args=(30,)) for _ in range(3)]\n\
                  [t.start() for t in ts]\n\
                  print('ready', flush=True)\n\
                  time.sleep(30)\n";
    let mut py = Command::new("python3")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is installed");
    let pid = py.id() as i32;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(py.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let out = env.run(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--pid",
        &pid.to_string(),
        "--threads",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("moved PID {pid} (4 threads)")),
        "{}",
        text(&out.stdout)
    );
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for t in tasks {
        let tid = t.unwrap().file_name();
        let status = std::fs::read_to_string(
            Path::new("/proc")
                .join(pid.to_string())
                .join("task")
                .join(&tid)
                .join("status"),
        )
        .unwrap();
        assert!(
            status.contains("Cpus_allowed_list:\t1\n"),
            "thread {tid:?} not moved"
        );
    }
    py.kill().unwrap();
    py.wait().unwrap();
}

#[test]
fn a_moved_task_keeps_its_reservation_until_it_exits() {
    let env = Env::new();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id() as i32;
    let mut run = env.spawn(&[
        "--cpus",
        "1",
        "--allow-unshielded",
        "--reserve",
        "--pid",
        &pid.to_string(),
    ]);
    let holder = env.wait_for_holder(1, run.id() as i32);
    assert_eq!(holder.pid, pid, "the reservation names the task, not run");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let status = run.wait().unwrap();
    assert!(status.success());
    assert_eq!(env.reserve_dir().holder(1).unwrap(), None);
}
