//! Real-kernel tests: each test boots a Debian kernel under QEMU (4 CPUs, software
//! emulation) with a static `cpushield` and one scenario of `dev/guest/scenarios` as
//! `/init`, and passes when the guest reports no failed check (see docs/TESTING.md).
//! A scenario is one module with a test per kernel it runs on (`on_6_1`, `on_6_12_rt`:
//! the kernels of dev/guest/kernels.sh), e.g.
//! `guest_cgroup_v2_shield_follows_rule_enforces_and_resets_exactly::on_6_12_rt`.
//!
//! Without `qemu-system-x86_64` or when the kernel package cannot be downloaded the tests
//! print `skipped: ...` and pass, unless `CPUSHIELD_GUEST=1` (set by CI) makes that a
//! failure. `CPUSHIELD_GUEST=0` skips them outright. The guests run one at a time: each
//! one keeps the host's CPUs busy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The repository root (two levels above this crate).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

/// What the preparation step found: ready to boot, or why the tests must be skipped.
enum Setup {
    Ready,
    Unavailable(String),
}

/// One guest at a time, across the tests of this binary.
fn guest_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn guest_required() -> bool {
    std::env::var("CPUSHIELD_GUEST").is_ok_and(|v| v == "1")
}

fn guest_disabled() -> bool {
    std::env::var("CPUSHIELD_GUEST").is_ok_and(|v| v == "0")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Fetches the kernel and builds the static binary and initramfs, once per test binary.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        if !on_path("qemu-system-x86_64") {
            return Setup::Unavailable(
                "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)".into(),
            );
        }
        let root = repo_root();
        let kernel = Command::new(root.join("dev/guest/fetch-kernel.sh"))
            .arg("--all")
            .output()
            .expect("run dev/guest/fetch-kernel.sh");
        if !kernel.status.success() {
            return Setup::Unavailable(format!(
                "the guest kernel could not be fetched: {}",
                String::from_utf8_lossy(&kernel.stderr).trim()
            ));
        }
        // A failing static build is a real failure, not a reason to skip.
        let initramfs = Command::new(root.join("dev/guest/build-initramfs.sh"))
            .output()
            .expect("run dev/guest/build-initramfs.sh");
        assert!(
            initramfs.status.success(),
            "dev/guest/build-initramfs.sh failed (static build of cpushield or cpio):\n{}",
            String::from_utf8_lossy(&initramfs.stderr)
        );
        Setup::Ready
    })
}

/// Boots `script` (relative to the repository root) with `args` on the guest kernel
/// `kernel` (a name of dev/guest/kernels.sh) and asserts success, or prints why the guest
/// tests are skipped.
fn run_guest(kernel: &str, name: &str, script: &str, args: &[&str]) {
    if guest_disabled() {
        eprintln!("skipped: guest test {name}: CPUSHIELD_GUEST=0");
        return;
    }
    let _one_at_a_time = guest_lock();
    match setup() {
        Setup::Unavailable(why) if guest_required() => {
            panic!("guest test {name} cannot run and CPUSHIELD_GUEST=1: {why}")
        }
        Setup::Unavailable(why) => {
            eprintln!("skipped: guest test {name} on {kernel}: {why}");
            return;
        }
        Setup::Ready => {}
    }
    let root = repo_root();
    let output = Command::new(root.join(script))
        .args(args)
        .env("GUEST_KERNEL", kernel)
        .env("GUEST_NO_BUILD", "1")
        .env("GUEST_QUIET", "1")
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by the test harness only when the test fails (or with --nocapture).
    println!("{stdout}");
    eprintln!("{stderr}");
    let failures: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|line| line.contains("GUEST-FAIL") || line.starts_with("run.sh:"))
        .collect();
    assert!(
        output.status.success(),
        "guest scenario {name} on {kernel} failed:\n{}",
        failures.join("\n")
    );
}

/// The name dev/guest/kernels.sh gives the kernel a test module's function is named after.
macro_rules! kernel_name {
    (on_6_1) => {
        "6.1"
    };
    (on_6_12_rt) => {
        "6.12-rt"
    };
}

/// `guest_test!(module: "name", "script", [args], on [kernels])`: a module named after
/// the behaviour, with one test per kernel, each booting `script` with `args`.
macro_rules! guest_test {
    ($(#[$doc:meta])* $module:ident: $name:literal, $script:literal, $args:tt, on [$($kernel:ident),+]) => {
        $(#[$doc])*
        mod $module {
            $(
                #[test]
                fn $kernel() {
                    super::run_guest(kernel_name!($kernel), $name, $script, &$args);
                }
            )+
        }
    };
}

// CI time: every scenario on both kernels would take the guest tests from about 15 to
// about 30 minutes under TCG and the whole CI past 32. So each runs on 6.12-rt (PREEMPT_RT,
// the papers' kind of kernel), the cgroup-v1 ones on 6.1 alone (6.12-rt has no v1 cpuset),
// and on both only those whose behaviour differs by kernel: kernel-partition (6.1
// overwrites a task's mask, 6.2+ intersects it), pid-reuse, boot-params (the closed loop
// asserted on each), irq-threads (threadirqs vs PREEMPT_RT), timerlat (refused without the
// tracer on 6.1), trace-fresh (tracers present differ) and tune-sigkill (the preemption
// model is switchable only on 6.1's PREEMPT_DYNAMIC).
guest_test!(
    guest_kernel_isolated_partition_behaves_as_cpushield_assumes:
    "kernel-partition", "dev/guest/run.sh", ["kernel-partition"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_cgroup_v2_shield_follows_rule_enforces_and_resets_exactly:
    "shield-v2", "dev/guest/run.sh", ["shield-v2"], on [on_6_12_rt]
);

guest_test!(
    guest_cgroup_v1_shield_follows_rule_enforces_and_resets_exactly:
    "shield-v1", "dev/guest/run.sh", ["shield-v1"], on [on_6_1]
);

guest_test!(
    guest_reset_after_sigkill_mid_shield_restores_everything:
    "shield-sigkill", "dev/guest/run.sh", ["shield-sigkill"], on [on_6_12_rt]
);

guest_test!(
    guest_reset_restores_a_new_task_with_a_saved_tasks_id_as_new_and_a_saved_one_as_saved:
    "pid-reuse", "dev/guest/run.sh", ["pid-reuse"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_reset_is_idempotent_and_serialised:
    "reset-idempotent", "dev/guest/run.sh", ["reset-idempotent"], on [on_6_12_rt]
);

guest_test!(
    guest_a_shield_whose_state_is_gone_is_said_refused_and_undone_without_it:
    "state-lost", "dev/guest/run.sh", ["state-lost"], on [on_6_12_rt]
);

guest_test!(
    guest_state_faults_are_recovered_or_refused_and_reset_is_exact:
    "state-faults", "dev/guest/run.sh", ["state-faults"], on [on_6_12_rt]
);

guest_test!(
    guest_boot_params_fragment_takes_effect_on_reboot:
    "boot-params", "dev/guest/run-boot-params.sh", [], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_run_places_a_task_on_the_v2_shield_binds_irqs_and_reserves:
    "run", "dev/guest/run.sh", ["run"], on [on_6_12_rt]
);

guest_test!(
    guest_run_places_a_task_on_the_v1_shield_binds_irqs_and_reserves:
    "run-v1", "dev/guest/run.sh", ["run-v1"], on [on_6_1]
);

guest_test!(
    guest_check_names_an_irq_bound_to_a_shielded_cpu_with_its_remedy:
    "check-irq", "dev/guest/run.sh", ["check-irq"], on [on_6_12_rt]
);

guest_test!(
    guest_irq_handler_threads_follow_their_irq_off_the_shield_and_one_pinned_by_hand_is_named:
    "irq-threads", "dev/guest/run.sh", ["irq-threads"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_check_names_a_task_pinned_to_a_shielded_cpu:
    "check-task", "dev/guest/run.sh", ["check-task"], on [on_6_12_rt]
);

guest_test!(
    guest_check_finds_a_real_shield_clean:
    "check-shielded", "dev/guest/run.sh", ["check-shielded"], on [on_6_12_rt]
);

guest_test!(
    guest_trace_on_a_fresh_kernel_restores_what_tracefs_meant:
    "trace-fresh", "dev/guest/run.sh", ["trace-fresh"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_shared_job_is_sched_idle_in_the_shield_and_compare_reports_table_2:
    "compare-shared", "dev/guest/run.sh", ["compare-shared"], on [on_6_12_rt]
);

guest_test!(
    guest_measure_latency_source_timerlat_reports_irq_and_thread_latency_or_names_the_missing_tracer:
    "timerlat", "dev/guest/run.sh", ["timerlat"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_measure_latency_source_rtc_reads_realfeel_at_the_rate_and_restores_the_rtc_irq:
    "measure-rtc", "dev/guest/run.sh", ["measure-rtc"], on [on_6_12_rt]
);

guest_test!(
    guest_v1_an_affinity_set_while_shielded_is_followed_by_later_shields_and_reset:
    "follow-requests-v1", "dev/guest/run.sh", ["follow-requests-v1"], on [on_6_1]
);

guest_test!(
    guest_v2_an_affinity_set_while_shielded_is_followed_by_later_shields_and_reset:
    "follow-requests-v2", "dev/guest/run.sh", ["follow-requests-v2"], on [on_6_12_rt]
);

guest_test!(
    guest_v1_tasks_of_kubernetes_pods_are_neither_moved_nor_narrowed_by_shield_or_reset:
    "kubepods-v1", "dev/guest/run.sh", ["kubepods-v1"], on [on_6_1]
);

guest_test!(
    guest_v2_tasks_of_kubernetes_pods_are_not_moved_and_the_partition_is_warned_about:
    "kubepods-v2", "dev/guest/run.sh", ["kubepods-v2"], on [on_6_12_rt]
);

guest_test!(
    /// Two boots of a Debian bookworm disk (debootstrap, cached) running systemd, with the
    /// .deb installed by dpkg and cpushield.service enabled (dev/guest/run-systemd.sh).
    guest_systemd_unit_shields_at_boot_stop_undoes_exactly_reboot_restores:
    "systemd", "dev/guest/run-systemd.sh", [], on [on_6_12_rt]
);

guest_test!(
    guest_v1_cps_place_and_rt_thread_put_one_thread_alone_in_the_shield:
    "thread-v1", "dev/guest/run.sh", ["thread-v1"], on [on_6_1]
);

guest_test!(
    guest_v2_cps_place_and_rt_thread_put_one_thread_alone_in_the_threaded_shield:
    "thread-v2", "dev/guest/run.sh", ["thread-v2"], on [on_6_12_rt]
);

guest_test!(
    guest_compare_smt_measures_the_sibling_busy_idle_and_offline_and_brings_it_back:
    "compare-smt", "dev/guest/run.sh", ["compare-smt"], on [on_6_12_rt]
);

guest_test!(
    guest_tune_killed_half_way_is_restored_byte_for_byte_by_reset:
    "tune-sigkill", "dev/guest/run.sh", ["tune-sigkill"], on [on_6_1, on_6_12_rt]
);

guest_test!(
    guest_nic_irqs_from_a_host_flood_reach_cpu3_until_shielded_and_reset_restores_them:
    "nic-irq", "dev/guest/run.sh", ["nic-irq"], on [on_6_12_rt]
);

guest_test!(
    guest_whole_cores_shields_every_smt_sibling_and_reset_restores:
    "whole-cores", "dev/guest/run.sh", ["whole-cores"], on [on_6_12_rt]
);

guest_test!(
    guest_irq_moves_pending_off_the_shielded_cpu_are_named_until_their_one_interrupt_completes_them:
    "irq-pending", "dev/guest/run.sh", ["irq-pending"], on [on_6_12_rt]
);

guest_test!(
    /// This machine as the guest's host stalls the vCPU (a SCHED_FIFO hog on its host
    /// CPU) in the middle of compare's loaded scenario: the stall shows in the raw worst
    /// case and is charged outside the guest, for the probe and for the traced cyclictest
    /// anchor; the report sets each anchor beside the verdict in the guest's terms.
    guest_a_host_stall_in_the_loaded_scenario_is_charged_outside_the_guest_for_probe_and_anchor:
    "compare-stall", "dev/guest/run.sh", ["compare-stall"], on [on_6_12_rt]
);
