//! The report writers against a fixed input: table golden file, JSON schema
//! round trip, plots that are not blank, and report.html rendered by headless
//! Chromium into a screenshot that is not blank.

mod support;

use cpushield_report::*;
use std::path::Path;
use std::process::Command;
use support::without_tags;

fn latency(max_ns: u64, spread: u64) -> LatencySummary {
    let mut histogram = Vec::new();
    let mut count = 100_000u64;
    let mut ns = 2_000u64;
    while ns <= max_ns && count > 0 {
        histogram.push((ns, count));
        ns = ns * spread / 2 + 1_000;
        count /= 4;
    }
    if histogram.last().map(|h| h.0) != Some(max_ns) {
        histogram.push((max_ns, 1));
    }
    LatencySummary {
        samples: histogram.iter().map(|h| h.1).sum(),
        missed: 0,
        min_ns: 1_500,
        mean_ns: 4_200.0,
        p50_ns: 3_000,
        p99_ns: 20_000,
        p99999_ns: max_ns / 2,
        max_ns,
        histogram,
    }
}

fn determinism(jitter_pct: f64) -> DeterminismSummary {
    let ideal = 0.5;
    let runs: Vec<f64> = (0..10)
        .map(|i| ideal * (1.0 + jitter_pct / 100.0 * (i % 4) as f64 / 3.0))
        .collect();
    DeterminismSummary {
        runs: 10,
        ideal_s: ideal,
        fastest_s: ideal,
        max_s: ideal * (1.0 + jitter_pct / 100.0),
        jitter_s: ideal * jitter_pct / 100.0,
        jitter_pct,
        run_times_s: runs,
        ..Default::default()
    }
}

fn fixture() -> CompareReport {
    let scenario = |name: &str, max_ns, spread, jitter, shielded| ScenarioResult {
        name: name.into(),
        description: format!("{name} scenario"),
        measured_cpus: "1".into(),
        shielded,
        advance_ns: None,
        latency: latency(max_ns, spread),
        determinism: Some(determinism(jitter)),
        load: if name == "idle" {
            vec![]
        } else {
            vec![LoadOps {
                workload: "fpu".into(),
                ops: 1000,
                ops_per_s: 100.0,
            }]
        },
        irqs_per_s: 250.0,
        warnings: vec![],
        ..Default::default()
    };
    let mut report = CompareReport {
        schema: SCHEMA.into(),
        created: "2026-11-22T00:00:00Z".into(),
        host: "Linux 6.18 (2 CPUs)".into(),
        scope: "namespace".into(),
        load_profile: "stress-kernel".into(),
        duration_s: 60.0,
        idle_poll: false,
        interval_ns: 488_281,
        scenarios: vec![
            scenario("idle", 441_000, 5, 0.5, false),
            scenario("loaded", 34_732_000, 9, 12.0, false),
            scenario("shielded", 412_000, 5, 0.8, true),
        ],
        verdict: Verdict::default(),
        ..Default::default()
    };
    report.judge();
    report
}

/// The fixture with every latency sample above 100 us explained: each
/// scenario's worst case caused inside the guest and its worst time outside.
fn traced(
    loaded_guest_ns: u64,
    shielded_guest_ns: u64,
    outside_ns: u64,
    steal_ns: u64,
) -> CompareReport {
    let mut r = fixture();
    for s in r.scenarios.iter_mut() {
        let guest = match s.name.as_str() {
            "loaded" => loaded_guest_ns,
            "shielded" => shielded_guest_ns,
            _ => 30_000,
        };
        let outside = if s.name == "idle" { 0 } else { outside_ns };
        s.latency.max_ns = guest + outside;
        s.attribution = Some(AttributionSummary {
            threshold_ns: 100_000,
            samples_above: 10,
            explained: 10,
            latency_ns: 10 * (guest + outside),
            named_ns: 10 * (guest + outside),
            guest_ns: 10 * guest,
            outside_ns: 10 * outside,
            guest_worst_ns: guest,
            outside_worst_ns: outside,
            steal_ns,
            causes: vec![if s.name == "shielded" {
                // What a shield leaves on this project's VM: the disk's
                // completions, raised by its kernel-managed IRQ.
                CauseRow {
                    kind: "softirq".into(),
                    name: "softirq BLOCK".into(),
                    guest: true,
                    count: 10,
                    total_ns: 10 * guest,
                    worst_ns: guest,
                    fix: Some("isolcpus=managed_irq,1".into()),
                }
            } else {
                CauseRow {
                    kind: "irq".into(),
                    name: "irq 38 virtio2-input.0".into(),
                    guest: true,
                    count: 10,
                    total_ns: 10 * guest,
                    worst_ns: guest,
                    fix: Some("cpushield shield --irqs 1".into()),
                }
            }],
            ..Default::default()
        });
    }
    r.judge();
    r
}

#[test]
fn the_verdict_applies_the_acceptance_ratios() {
    let r = fixture();
    let v = &r.verdict;
    assert!((v.loaded_over_shielded.unwrap() - 34_732.0 / 412.0).abs() < 1e-6);
    assert!(v.shielded_over_idle.unwrap() < 1.0);
    assert!(v.pass, "{}", v.line);
    let mut bad = fixture();
    bad.scenarios[2].latency.max_ns = 5_000_000;
    bad.judge();
    assert!(!bad.verdict.pass);
}

#[test]
fn determinism_jitter_is_measured_from_the_experiments_fastest_run() {
    let mut r = fixture();
    // The loaded scenario's runs are all slower than the idle ideal.
    let loaded = r.scenarios[1].determinism.as_mut().unwrap();
    loaded.run_times_s = vec![0.6, 0.62, 0.65];
    loaded.ideal_s = 0.6;
    loaded.max_s = 0.65;
    r.judge();
    let d = r.scenarios[1].determinism.as_ref().unwrap();
    assert!(
        (d.ideal_s - 0.5).abs() < 1e-12,
        "one ideal for all: {}",
        d.ideal_s
    );
    assert!((d.fastest_s - 0.6).abs() < 1e-12);
    assert!((d.jitter_pct - 30.0).abs() < 1e-9, "{}", d.jitter_pct);
}

#[test]
fn the_verdict_names_the_idle_floor_when_it_caps_the_ratio() {
    let mut r = fixture();
    r.scenarios[0].latency.max_ns = 3_400_000;
    r.scenarios[2].latency.max_ns = 4_500_000;
    r.judge();
    assert!(!r.verdict.pass);
    assert_eq!(r.verdict.notes.len(), 1, "{:?}", r.verdict.notes);
    assert!(r.verdict.notes[0].contains("cannot exceed about 10.2"));
    assert!(fixture().verdict.notes.is_empty());
}

#[test]
fn the_verdict_notes_jitter_that_exists_without_load() {
    let mut r = fixture();
    let idle = r.scenarios[0].determinism.as_mut().unwrap();
    idle.run_times_s.push(0.75);
    idle.max_s = 0.75;
    r.judge();
    assert!(
        r.verdict
            .notes
            .iter()
            .any(|n| n.contains("with no load and no shield the jitter is already 50.0%")),
        "{:?}",
        r.verdict.notes
    );
}

#[test]
fn the_table_matches_its_golden_file() {
    let text = table::render(&fixture(), None);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/table.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 to create)");
    assert_eq!(text, want);
}

#[test]
fn report_json_round_trips_with_its_schema() {
    let r = fixture();
    let text = serde_json::to_string(&r).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["schema"], "cpushield.compare/5");
    for field in [
        "created",
        "host",
        "scope",
        "load_profile",
        "duration_s",
        "scenarios",
        "verdict",
    ] {
        assert!(value.get(field).is_some(), "missing {field}");
    }
    let back: CompareReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
}

fn distinct_colours(png_bytes: &[u8]) -> usize {
    let decoder = png::Decoder::new(png_bytes);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bpp = info.line_size / info.width as usize;
    let mut colours = std::collections::HashSet::new();
    for px in buf[..info.buffer_size()].chunks(bpp) {
        colours.insert(px.to_vec());
    }
    colours.len()
}

#[test]
fn plots_are_written_as_svg_and_non_blank_png() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_all(&fixture(), dir.path()).unwrap();
    assert_eq!(files.len(), 6);
    let svg = std::fs::read_to_string(dir.path().join("latency.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("loaded"));
    for name in ["latency.png", "determinism.png"] {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert!(distinct_colours(&bytes) > 8, "{name} looks blank");
    }
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("<svg")
            && !html.contains("<script")
            && !html.contains("http://www.w3.org/2000/svg\" href")
    );
}

#[test]
fn report_html_renders_in_headless_chromium() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(chromium) = chromium else {
        skipped("chromium is not installed (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_all(&fixture(), dir.path()).unwrap();
    let shot = dir.path().join("shot.png");
    let profile = dir.path().join("profile");
    let status = headless_chromium(chromium, &profile)
        .args(["--hide-scrollbars", "--window-size=1200,1600"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!(
            "file://{}",
            dir.path().join("report.html").display()
        ))
        .output()
        .expect("run chromium");
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let bytes = std::fs::read(&shot).unwrap();
    assert!(distinct_colours(&bytes) > 16, "report.html rendered blank");
}

#[test]
fn a_shield_with_nothing_left_on_a_quiet_host_is_called_working() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    let shielded = shielded_of(&mut r).attribution.as_mut().unwrap();
    shielded.causes[0].kind = "self".into();
    shielded.causes[0].name = "the probe itself, on its way to user space".into();
    r.judge();
    let v = &r.verdict;
    assert!(v.pass, "{}", v.line);
    assert_eq!(v.category, "works");
    assert!(!v.host_noisy);
    assert!(
        v.line
            .starts_with("SHIELD WORKS on CPU 1: nothing the shield controls reached it"),
        "{}",
        v.line
    );
    assert!(
        v.line
            .contains("nothing that mattered came from outside the guest"),
        "{}",
        v.line
    );
    assert!((v.guest_loaded_over_shielded.unwrap() - 500.0).abs() < 1e-9);
    assert!(v.remains.is_empty(), "{:?}", v.remains);
}

#[test]
fn a_working_shield_names_what_remains_with_what_removes_it() {
    let r = traced(30_000_000, 60_000, 0, 0);
    let v = &r.verdict;
    assert!(v.pass, "{}", v.line);
    assert_eq!(v.category, "works-with-remaining");
    assert!(
        v.line.starts_with(
            "SHIELD WORKS on CPU 1: nothing the shield controls reached it; what remains needs a boot parameter;"
        ),
        "{}",
        v.line
    );
    assert_eq!(
        v.remains,
        [Remains {
            needs: "a boot parameter".into(),
            fix: "isolcpus=managed_irq,1".into(),
            what: vec!["softirq BLOCK (worst 60.0 us)".into()],
            worst_ns: 60_000,
        }]
    );
    assert_eq!(
        v.remaining,
        ["softirq BLOCK (worst 60.0 us): needs a boot parameter (fix: isolcpus=managed_irq,1)"]
    );
}

#[test]
fn a_working_shield_on_a_noisy_host_is_not_blamed_for_the_host() {
    // Raw figures alone: 46 ms vs 16 ms, 2.9x. Inside the guest: 500x.
    let r = traced(30_000_000, 60_000, 16_000_000, 720_000_000);
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert_eq!(r.verdict.category, "works-with-remaining");
    assert!(r.verdict.host_noisy);
    assert!(r.verdict.loaded_over_shielded.unwrap() < 3.0);
    let line = &r.verdict.line;
    assert!(
        line.contains("what remains needs a boot parameter and a quieter host;"),
        "{line}"
    );
    let host = r.verdict.remains.last().unwrap();
    assert_eq!(host.needs, "a quieter host");
    assert!(
        host.what[0].contains("16.0 ms of the shielded worst case (steal 720 ms)"),
        "{host:?}"
    );
    assert!(
        r.verdict
            .notes
            .iter()
            .any(|n| n.contains("time outside the guest, not because of the shield")),
        "{:?}",
        r.verdict.notes
    );
}

#[test]
fn an_irq_the_shield_should_have_moved_is_a_leak_named_with_its_fix() {
    let mut r = traced(30_000_000, 5_000_000, 0, 0);
    let cause = &mut shielded_of(&mut r).attribution.as_mut().unwrap().causes[0];
    (cause.kind, cause.name) = ("irq".into(), "irq 38 virtio2-input.0".into());
    cause.fix = Some("cpushield shield --irqs 1".into());
    r.judge();
    assert!(!r.verdict.pass);
    assert_eq!(r.verdict.category, "leaks");
    let line = &r.verdict.line;
    assert!(line.starts_with("SHIELD LEAKS"), "{line}");
    assert!(
        line.contains("irq 38 virtio2-input.0 reached the shielded CPU in 10 samples (worst 5.00 ms; fix: cpushield shield --irqs 1)"),
        "{line}"
    );
    assert!(!line.contains("outside the guest (the vCPU"), "{line}");
}

#[test]
fn a_leaking_shield_on_a_noisy_host_keeps_the_host_apart() {
    let mut r = traced(30_000_000, 5_000_000, 16_000_000, 720_000_000);
    add_shielded_cause(&mut r, "task", "hog (812)", None);
    r.judge();
    assert!(!r.verdict.pass);
    let line = &r.verdict.line;
    assert!(line.starts_with("SHIELD LEAKS"), "{line}");
    assert!(line.contains("not counted against it"), "{line}");
}

#[test]
fn a_verdict_does_not_flip_with_the_hosts_noise_around_the_old_ratio() {
    // README's quiet hour and a noisy one on the same machine: the loaded
    // guest-caused worst case 3.1 ms or 27 ms, the shielded one 0.29-0.62 ms
    // from the disk's softirq. One ratio against 10x called these "falls
    // short" and "works"; judged on what reached the CPU they are one answer.
    for (loaded, shielded) in [
        (3_100_000, 620_000),
        (4_900_000, 290_000),
        (27_000_000, 520_000),
    ] {
        let r = traced(loaded, shielded, 0, 0);
        assert_eq!(
            r.verdict.category, "works-with-remaining",
            "{}",
            r.verdict.line
        );
        assert_eq!(r.verdict.remains[0].fix, "isolcpus=managed_irq,1");
    }
}

#[test]
fn host_stalls_that_may_hold_the_loaded_figure_leave_the_verdict_undecided_with_what_to_do() {
    let mut r = traced(3_000_000, 620_000, 0, 0);
    let loaded = r.scenarios[1].attribution.as_mut().unwrap();
    // Every loaded sample above the threshold also lost time outside the
    // guest: up to one tick (4 ms) of each may be the host's too.
    loaded.guest_worst_low_ns = Some(0);
    loaded.samples_with_outside = 10;
    r.judge();
    let v = &r.verdict;
    assert!(!v.pass);
    assert_eq!(v.category, "cannot-judge");
    assert!(
        v.line.starts_with(
            "CANNOT JUDGE THE SHIELD on CPU 1: the host's stalls blur the loaded figure: run again with --duration 120s"
        ),
        "{}",
        v.line
    );
    assert!(
        v.line
            .contains("(10 of its 10 samples above 100 us also lost time outside the guest)"),
        "{}",
        v.line
    );
}

#[test]
fn a_load_that_barely_reached_the_cpu_shows_nothing_to_judge_and_says_how_to_run() {
    let r = traced(700_000, 620_000, 0, 0);
    let v = &r.verdict;
    assert_eq!(v.category, "cannot-judge", "{}", v.line);
    assert!(
        v.line
            .starts_with("CANNOT JUDGE THE SHIELD on CPU 1: the load did not disturb it"),
        "{}",
        v.line
    );
    assert!(
        v.line.contains("run longer (--duration 120s)"),
        "{}",
        v.line
    );
    assert!(v.line.contains("softirq BLOCK"), "{}", v.line);
}

#[test]
fn the_effect_is_given_with_its_spread_over_slices_of_the_loaded_probe() {
    let mut r = traced(30_000_000, 600_000, 0, 0);
    r.scenarios[1]
        .attribution
        .as_mut()
        .unwrap()
        .guest_worst_by_slice_ns = vec![3_000_000, 30_000_000, 6_000_000, 12_000_000];
    r.judge();
    let e = r.verdict.effect_slices.unwrap();
    assert_eq!((e.min, e.max, e.count), (5.0, 50.0, 4));
    assert!((e.median - 15.0).abs() < 1e-9, "{e:?}");
    assert!(
        r.verdict
            .line
            .contains("(50.0x; 5.0-50x over 4 slices of the loaded probe)"),
        "{}",
        r.verdict.line
    );
}

/// Adds to the shielded scenario's traced causes one of `kind` named `name`
/// (one sample, 50 us) with `fix`.
fn add_shielded_cause(r: &mut CompareReport, kind: &str, name: &str, fix: Option<&str>) {
    let shielded = r
        .scenarios
        .iter_mut()
        .find(|s| s.name == "shielded")
        .unwrap();
    shielded
        .attribution
        .as_mut()
        .unwrap()
        .causes
        .push(CauseRow {
            kind: kind.into(),
            name: name.into(),
            guest: true,
            count: 1,
            total_ns: 50_000,
            worst_ns: 50_000,
            fix: fix.map(Into::into),
        });
}

#[test]
fn a_task_left_on_the_shielded_cpu_is_never_called_working() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    add_shielded_cause(&mut r, "task", "hog (812)", None);
    r.judge();
    assert!(!r.verdict.pass);
    assert!(
        r.verdict.line.starts_with("SHIELD LEAKS"),
        "{}",
        r.verdict.line
    );
    assert!(r.verdict.remaining.iter().any(|x| x.contains("hog (812)")));
}

#[test]
fn cpushield_own_threads_on_the_shielded_cpu_are_its_own_bug_never_a_shield_leak() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    add_shielded_cause(&mut r, "task", "cpushield (218)", None);
    add_shielded_cause(
        &mut r,
        "task",
        "cpushield-trace (256)",
        Some("taskset -a -pc 0-2 256"),
    );
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert!(!r.verdict.line.contains("LEAKS"), "{}", r.verdict.line);
    assert!(
        !r.verdict.line.contains("cpushield (218)"),
        "{}",
        r.verdict.line
    );
    assert!(
        r.verdict.remaining.iter().all(|x| !x.contains("cpushield")),
        "{:?}",
        r.verdict.remaining
    );
    for name in ["cpushield (218)", "cpushield-trace (256)"] {
        assert!(
            r.verdict
                .notes
                .iter()
                .any(|n| n.contains(name)
                    && n.contains("a bug in cpushield, not a leak of the shield")),
            "{name}: {:?}",
            r.verdict.notes
        );
    }
}

#[test]
fn a_pod_task_on_the_shielded_cpu_is_named_with_the_kubelet_fix_and_not_counted_as_a_leak() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    add_shielded_cause(
        &mut r,
        "pod",
        "tokio-rt-worker (4411)",
        Some("kubelet: static CPU manager"),
    );
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert!(!r.verdict.line.starts_with("SHIELD LEAKS"));
    assert!(
        r.verdict.notes.iter().any(|n| n.contains("Kubernetes pods")
            && n.contains("tokio-rt-worker (4411)")
            && n.contains("fix: kubelet: static CPU manager")),
        "{:?}",
        r.verdict.notes
    );
}

#[test]
fn a_kernel_managed_irq_is_named_with_its_boot_fix_without_failing_the_shield() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    let shielded = shielded_of(&mut r);
    shielded.findings.push(CheckFinding {
        severity: "breaks-shield".into(),
        title: "IRQ 36 (virtio1-req.0) is kernel-managed and arrives on CPU 1".into(),
        remedies: vec!["isolcpus=managed_irq,1".into()],
        runtime_fix: false,
        topic: "irq".into(),
    });
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    // The IRQ and the softirq it raises go with one boot parameter: one line.
    assert_eq!(
        r.verdict.remaining,
        vec!["IRQ 36 (virtio1-req.0) is kernel-managed and arrives on CPU 1, softirq BLOCK (worst 60.0 us): needs a boot parameter (fix: isolcpus=managed_irq,1)".to_string()]
    );
}

/// The shielded scenario of a report.
fn shielded_of(r: &mut CompareReport) -> &mut ScenarioResult {
    r.scenarios
        .iter_mut()
        .find(|s| s.name == "shielded")
        .unwrap()
}

/// check's finding for the interrupt that completed a pending move off CPU 1.
fn pending_move_finding() -> CheckFinding {
    CheckFinding {
        severity: "warn".into(),
        title: "IRQ 42 (virtio3-tx) arrived once on CPU 1 and so completed its pending move off it: the kernel moves such an IRQ at its next interrupt, which still arrives on the old CPU; none will follow".into(),
        remedies: vec!["irqaffinity=0 (IRQs start on the housekeeping CPUs, so no move is left pending when the shield goes up)".into()],
        runtime_fix: false,
        topic: "irq-pending".into(),
    }
}

#[test]
fn an_irq_that_completed_its_pending_move_is_no_leak_and_the_verdict_says_what_it_was() {
    let mut r = traced(30_000_000, 60_000, 0, 0);
    let shielded = shielded_of(&mut r);
    shielded.findings.push(pending_move_finding());
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert!(!r.verdict.line.contains("LEAKS"), "{}", r.verdict.line);
    assert!(
        !r.verdict.remaining.iter().any(|x| x.contains("IRQ 42")),
        "{:?}",
        r.verdict.remaining
    );
    assert!(
        r.verdict.notes.iter().any(|n| n.starts_with(
            "not counted against the shield, a move the kernel completes at the IRQ's next interrupt: IRQ 42 (virtio3-tx)"
        ) && n.contains("(avoided at boot: irqaffinity=0")),
        "{:?}",
        r.verdict.notes
    );
}

#[test]
fn a_pending_move_that_was_the_worst_shielded_cause_is_named_as_such() {
    let mut r = traced(30_000_000, 20_000_000, 0, 0);
    let shielded = shielded_of(&mut r);
    shielded.findings.push(pending_move_finding());
    let cause = &mut shielded.attribution.as_mut().unwrap().causes[0];
    cause.name = "irq 42 virtio3-tx".into();
    cause.fix = Some("irqaffinity=0".into());
    r.judge();
    assert!(!r.verdict.pass);
    assert!(
        r.verdict.line.contains(
            "irq 42 virtio3-tx (the interrupt that completed its pending move off the shielded CPU; worst 20.0 ms; fix: irqaffinity=0)"
        ),
        "{}",
        r.verdict.line
    );
}

/// Gives the loaded and shielded scenarios a cyclictest anchor with these
/// maxima, as cyclictest reports them (not traced).
fn with_anchor(r: &mut CompareReport, loaded_ns: u64, shielded_ns: u64) {
    for s in r.scenarios.iter_mut() {
        let max_ns = match s.name.as_str() {
            "loaded" => loaded_ns,
            "shielded" => shielded_ns,
            _ => continue,
        };
        s.anchor = Some(Anchor {
            tool: "cyclictest".into(),
            max_ns,
            ..Default::default()
        });
    }
}

/// Gives the loaded and shielded scenarios a cyclictest anchor whose wakeups
/// were traced: its guest-caused worst case loaded and shielded, and the
/// causes of its shielded wakeups.
fn with_traced_anchor(
    r: &mut CompareReport,
    loaded_guest_ns: u64,
    shielded_guest_ns: u64,
    shielded_causes: Vec<CauseRow>,
) {
    for s in r.scenarios.iter_mut() {
        let (guest, causes) = match s.name.as_str() {
            "loaded" => (loaded_guest_ns, Vec::new()),
            "shielded" => (shielded_guest_ns, shielded_causes.clone()),
            _ => continue,
        };
        s.anchor = Some(Anchor {
            tool: "cyclictest".into(),
            max_ns: guest + 5_000_000,
            traced_wakeups: Some(5_000),
            attribution: Some(AttributionSummary {
                threshold_ns: 100_000,
                samples_above: 3,
                explained: 3,
                guest_worst_ns: guest,
                guest_worst_low_ns: Some(guest),
                causes,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
}

#[test]
fn a_traced_anchor_that_sees_the_shield_working_in_the_guest_agrees() {
    let mut r = traced(30_000_000, 600_000, 0, 0);
    with_traced_anchor(&mut r, 4_200_000, 200_000, Vec::new());
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert_eq!(r.verdict.anchor_agrees, Some(true));
    let a = &r.verdict.anchors[0];
    assert_eq!(
        (a.terms.as_str(), a.line.as_str()),
        ("in the guest", "in the guest 21.0x: agrees")
    );
    let answer = cpushield_report::table::answer(&r, None, None);
    assert!(
        answer
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains("cyclictest 4.2 ms 200 us 21.0x in the guest 21.0x: agrees"),
        "{answer}"
    );
}

#[test]
fn a_traced_anchor_refutes_works_when_it_sees_no_effect_in_the_guest() {
    // The probe saw 50x; cyclictest, traced the same way, 1.2x: one of the
    // two is wrong, and the report says so.
    let mut r = traced(30_000_000, 600_000, 0, 0);
    with_traced_anchor(&mut r, 3_600_000, 3_000_000, Vec::new());
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert_eq!(r.verdict.anchor_agrees, Some(false));
    assert_eq!(
        r.verdict.anchors[0].line,
        "in the guest 1.2x: DISAGREES (the verdict says the shield works; it needs 2x)"
    );
    assert!(
        r.verdict.notes.iter().any(|n| n.starts_with(
            "the verdict disagrees with its cyclictest anchor (in the guest 1.2x: DISAGREES"
        ) && n.contains("a bug in cpushield")),
        "{:?}",
        r.verdict.notes
    );
    let answer = cpushield_report::table::answer(&r, None, None);
    assert!(answer.contains("DISAGREES"), "{answer}");
}

#[test]
fn a_traced_anchor_refutes_works_when_a_task_reached_the_shielded_cpu_while_it_ran() {
    let mut r = traced(30_000_000, 600_000, 0, 0);
    let hog = CauseRow {
        kind: "task".into(),
        name: "hog (812)".into(),
        guest: true,
        count: 2,
        total_ns: 400_000,
        worst_ns: 300_000,
        fix: None,
    };
    // cyclictest's own main thread is its business, not a leak.
    let own = CauseRow {
        name: "cyclictest (811)".into(),
        ..hog.clone()
    };
    with_traced_anchor(&mut r, 4_200_000, 200_000, vec![own.clone()]);
    r.judge();
    assert_eq!(
        r.verdict.anchor_agrees,
        Some(true),
        "{:?}",
        r.verdict.anchors
    );
    with_traced_anchor(&mut r, 4_200_000, 200_000, vec![own, hog]);
    r.judge();
    assert_eq!(r.verdict.anchor_agrees, Some(false));
    assert!(
        r.verdict.anchors[0]
            .line
            .contains("but hog (812) reached CPU 1 while it ran: DISAGREES"),
        "{}",
        r.verdict.anchors[0].line
    );
}

#[test]
fn the_cpushield_run_that_starts_cyclictest_seen_on_the_shielded_cpu_is_named_a_bug_in_cpushield() {
    // `cpushield run` waits on the housekeeping CPUs: its main thread on the
    // measured CPU while cyclictest ran is neither the anchor's own time nor
    // a leak of the shield.
    let mut r = traced(30_000_000, 600_000, 0, 0);
    let runner = CauseRow {
        kind: "task".into(),
        name: "cpushield (377)".into(),
        guest: true,
        count: 2,
        total_ns: 40_000,
        worst_ns: 30_000,
        fix: None,
    };
    with_traced_anchor(&mut r, 4_200_000, 200_000, vec![runner]);
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert_eq!(r.verdict.anchor_agrees, Some(true));
    assert!(
        r.verdict.notes.iter().any(|n| n.contains("cpushield (377)")
            && n.contains("cyclictest anchor")
            && n.contains("a bug in cpushield, not a leak of the shield")),
        "{:?}",
        r.verdict.notes
    );
}

#[test]
fn an_untraced_anchor_says_it_counts_the_hosts_stalls_and_is_not_set_against_a_traced_verdict() {
    let mut r = traced(5_600_000, 400_000, 0, 0);
    with_anchor(&mut r, 29_600_000, 18_500_000);
    r.judge();
    assert!(r.verdict.pass, "{}", r.verdict.line);
    assert_eq!(r.verdict.anchor_agrees, None);
    assert_eq!(
        r.verdict.anchors[0].line,
        "raw 1.6x: counts the host's stalls; not compared"
    );
    let answer = cpushield_report::table::answer(&r, None, None);
    assert!(!answer.contains("DISAGREES"), "{answer}");
    assert!(!answer.contains("agrees with the verdict"), "{answer}");
}

#[test]
fn raw_verdicts_and_raw_anchors_are_compared_on_the_same_bar() {
    let mut r = fixture();
    with_anchor(&mut r, 35_000_000, 400_000);
    r.judge();
    assert!(r.verdict.pass);
    assert_eq!(r.verdict.anchor_agrees, Some(true));
    with_anchor(&mut r, 35_000_000, 20_000_000);
    r.judge();
    assert_eq!(r.verdict.anchor_agrees, Some(false));
    assert!(r.verdict.anchors[0].line.contains("DISAGREES"));
}

#[test]
fn report_html_shows_every_section_of_the_terminal_report_in_chromium() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium is installed by scripts/dev-setup.sh");
    let mut r = traced(30_000_000, 60_000, 16_000_000, 720_000_000);
    for s in r.scenarios.iter_mut() {
        s.idle = Some(IdleChoice {
            policy: "halt".into(),
            how: "calibrated".into(),
            halt_max_ns: Some(296_000),
            poll_max_ns: Some(24_300_000),
            reason: "halting 296 us vs polling 24.3 ms".into(),
            ..Default::default()
        });
        s.warnings.push(format!("steal on {}", s.name));
        s.notes.push(format!("note on {}", s.name));
    }
    r.judge();
    let dir = tempfile::tempdir().unwrap();
    write_all(&r, dir.path()).unwrap();
    let profile = dir.path().join("profile");
    let out = headless_chromium(chromium, &profile)
        .arg("--dump-dom")
        .arg(format!(
            "file://{}",
            dir.path().join("report.html").display()
        ))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    for id in [
        "verdict",
        "latency-plot",
        "determinism-plot",
        "notes",
        "warnings",
        "scenarios",
        "thresholds",
        "idle-policy",
        "guest-host",
        "causes",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "section {id} missing from the rendered page"
        );
    }
    assert!(dom.contains("SHIELD WORKS"), "verdict text");
    let text = without_tags(&dom);
    assert!(text.contains("irq 38 virtio2-input.0"), "cause table");
    assert!(text.contains("softirq BLOCK"), "what remains");
    assert!(
        dom.contains("halting 296 us vs polling 24.3 ms"),
        "idle policy reason"
    );
    assert!(dom.contains("steal on shielded") && dom.contains("note on loaded"));
    assert!(
        dom.contains("<td>-</td><td>250</td></tr>"),
        "idle load shows '-'"
    );
    assert!(!dom.contains(">-0<"));
}

/// A test that cannot run here is skipped with a message, except in CI
/// (`CI=true`), whose machine is set up for every test: there it fails.
fn skipped(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "cannot run in CI: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Headless Chromium with a fresh profile and no network of its own (this
/// machine's network is closed).
fn headless_chromium(chromium: &str, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn the_hosts_view_of_each_sample_outside_the_guest_is_in_the_text_and_the_html() {
    let mut r = traced(30_000_000, 60_000, 41_200_000, 0);
    let a = shielded_of(&mut r).attribution.as_mut().unwrap();
    a.outside_samples = vec![SampleWindow {
        cpu: 1,
        intended_ns: 10,
        actual_ns: 41_200_010,
        outside_ns: 41_200_000,
    }];
    a.host_causes = vec![HostCause {
        line: "on the host, sh (pid 4711) ran on host CPU 1 for 40.3 ms while vCPU 1 was runnable"
            .into(),
        kind: "preempted".into(),
        vcpu: 1,
        overlap_ns: 41_000_000,
        err_ns: 400_000,
        culprit: Some("sh".into()),
        culprit_pid: Some(4711),
        host_cpu: Some(1),
        culprit_ns: Some(40_300_000),
        missing_from_ns: None,
    }];
    let text = cpushield_report::table::details(&r, None);
    let at = text
        .find("what the host saw, shielded:")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(text[at..].contains("sh (pid 4711)"), "{text}");
    let html = cpushield_report::html::render(&r, "", "");
    assert!(
        html.contains("<h3>shielded: what the host saw</h3>"),
        "{html}"
    );
    assert!(html.contains("sh (pid 4711)"), "{html}");
    assert!(html.contains("while vCPU 1 was runnable"), "{html}");
}
