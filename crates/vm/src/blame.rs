//! The guest's side of the channel during a measurement (`compare`'s
//! scenarios, `measure latency --attribute`): the host's view collected
//! while it runs, then put beside each sample charged to time outside the
//! guest.

use cpushield_kernel::Kernel;
use cpushield_report::{HostCause, SampleWindow};
use cpushield_trace::attribute::Attribution;
use std::path::Path;
use std::time::Duration;

/// The guest's side of the channel during a measurement: the host's view
/// collected while it runs, or why there is none.
pub enum HostSide {
    /// `--host-channel none`.
    Off,
    /// No host side answered.
    Absent(String),
    /// Collecting the host's gaps.
    Collecting(crate::guest::Collector),
}

/// Gaps shorter than this are not collected: spikes below a millisecond are
/// not what the host is asked about.
const MIN_GAP_NS: u64 = 200_000;

impl HostSide {
    /// Greets the host side on `explicit` or on the port found by name.
    pub fn start(kernel: &dyn Kernel, explicit: Option<&Path>) -> HostSide {
        let port = match explicit {
            Some(p) if p == Path::new("none") => return HostSide::Off,
            Some(p) => p.to_path_buf(),
            None => match crate::guest::find_port(kernel) {
                Some(p) => p,
                None => {
                    return HostSide::Absent(format!(
                        "no virtio-serial port named {}",
                        crate::protocol::PORT_NAME
                    ))
                }
            },
        };
        match crate::guest::Collector::start(
            &port,
            cpushield_kernel::clock::now_ns,
            MIN_GAP_NS,
            Duration::from_millis(500),
        ) {
            Ok(c) => HostSide::Collecting(c),
            Err(e) => HostSide::Absent(format!("{}: {e}", port.display())),
        }
    }

    /// Stops collecting (asking the host about each sample charged outside
    /// the guest), then [`Heard::blame`].
    pub fn blame(self, report: &mut cpushield_report::CompareReport) -> Vec<String> {
        let windows: Vec<SampleWindow> = report_targets(report)
            .iter()
            .flat_map(|(_, a)| a.outside_samples.iter().cloned())
            .collect();
        self.finish_asking(&windows).blame(report)
    }

    /// Stops collecting (asking the host about each spike that lost time
    /// outside the guest), then [`Heard::blame_spikes`].
    pub fn blame_spikes(self, attrs: &mut [Attribution]) -> Vec<String> {
        let windows: Vec<SampleWindow> = outside_spikes(attrs)
            .into_iter()
            .map(|i| spike_window(&attrs[i]))
            .collect();
        self.finish_asking(&windows).blame_spikes(attrs)
    }

    /// Stops collecting: what the host side said.
    pub fn finish(self) -> Heard {
        self.finish_asking(&[])
    }

    /// Stops collecting, asking the host about each of `windows` first
    /// ([`crate::guest::Collector::finish_asking`]): what the host side said.
    pub fn finish_asking(self, windows: &[SampleWindow]) -> Heard {
        match self {
            HostSide::Off => Heard::Off,
            HostSide::Absent(why) => Heard::Absent(why),
            HostSide::Collecting(c) => {
                let asked: Vec<(u32, u64, u64)> = windows
                    .iter()
                    .map(|w| (w.cpu as u32, w.intended_ns, w.actual_ns))
                    .collect();
                Heard::View(c.finish_asking(&asked))
            }
        }
    }
}

/// Each measurement of a compare report with samples charged outside the
/// guest (the probe's and its anchors'), named as its lines name it.
fn report_targets(
    report: &mut cpushield_report::CompareReport,
) -> Vec<(String, &mut cpushield_report::AttributionSummary)> {
    let mut targets: Vec<(String, &mut cpushield_report::AttributionSummary)> = Vec::new();
    for s in report.scenarios.iter_mut() {
        let name = s.name.clone();
        if let Some(a) = s.attribution.as_mut() {
            targets.push((name.clone(), a));
        }
        for anchor in [s.anchor.as_mut(), s.rtla.as_mut()].into_iter().flatten() {
            let who = format!("{name} ({})", anchor.tool);
            if let Some(a) = anchor.attribution.as_mut() {
                targets.push((who, a));
            }
        }
    }
    targets.retain(|(_, a)| !a.outside_samples.is_empty());
    targets
}

/// The spikes that lost time outside the guest, the most first.
fn outside_spikes(attrs: &[Attribution]) -> Vec<usize> {
    let mut outside: Vec<usize> = (0..attrs.len())
        .filter(|&i| attrs[i].outside_ns > 0)
        .collect();
    outside.sort_by_key(|&i| std::cmp::Reverse(attrs[i].outside_ns));
    outside
}

/// A spike as the window the host is asked about.
fn spike_window(a: &Attribution) -> SampleWindow {
    SampleWindow {
        cpu: a.spike.cpu,
        intended_ns: a.spike.intended_ns,
        actual_ns: a.spike.actual_ns,
        outside_ns: a.outside_ns,
    }
}

/// What the host side said by the end of a run.
pub enum Heard {
    /// Not asked (`--host-channel none`).
    Off,
    /// No host side answered, and why.
    Absent(String),
    /// The host's view, collected while the run went.
    View(crate::guest::HostView),
}

impl Heard {
    /// Puts the host's cause beside each worst sample charged outside the
    /// guest (probe and anchors); returns the lines to print.
    pub fn blame(&self, report: &mut cpushield_report::CompareReport) -> Vec<String> {
        let targets = report_targets(report);
        let asked: Vec<(String, Vec<SampleWindow>)> = targets
            .iter()
            .map(|(who, a)| (who.clone(), a.outside_samples.clone()))
            .collect();
        let answer = self.explain(&asked);
        for ((_, a), causes) in targets.into_iter().zip(answer.causes) {
            a.host_causes.extend(causes);
        }
        answer.lines
    }

    /// Puts the host's cause beside each of `measure latency`'s spikes that
    /// lost time outside the guest, as a note of its attribution ("outside
    /// the guest T: cause"); returns the lines to print: the [`PRINTED`]
    /// spikes with the most time outside the guest and how many more there
    /// are, or the line on how to get a host side.
    pub fn blame_spikes(&self, attrs: &mut [Attribution]) -> Vec<String> {
        let outside = outside_spikes(attrs);
        let asked: Vec<(String, Vec<SampleWindow>)> = outside
            .iter()
            .map(|&i| {
                let a = &attrs[i];
                (
                    format!("spike {} on CPU {}", a.spike.seq, a.spike.cpu),
                    vec![spike_window(a)],
                )
            })
            .collect();
        let answer = self.explain(&asked);
        for (&i, causes) in outside.iter().zip(&answer.causes) {
            for c in causes {
                let a = &mut attrs[i];
                a.notes.push(format!(
                    "outside the guest {}: {}",
                    cpushield_cpuset::fmt_ns(a.outside_ns),
                    c.line
                ));
            }
        }
        let mut lines = answer.lines;
        if lines.len() > PRINTED {
            let more = lines.len() - PRINTED;
            lines.truncate(PRINTED);
            lines.push(format!(
                "... the host's cause of {more} more spike{} in trace-summary.json (notes)",
                if more == 1 { "" } else { "s" }
            ));
        }
        lines
    }

    /// The host's cause of each sample of each measurement (`who` names it in
    /// the lines), in the same order, and the lines to print: each
    /// measurement's first [`PRINTED`] samples, or, where no host side
    /// answered and some sample lost time outside the guest, one line on how
    /// to get one.
    pub fn explain(&self, targets: &[(String, Vec<SampleWindow>)]) -> HostAnswer {
        let mut answer = HostAnswer {
            causes: vec![Vec::new(); targets.len()],
            lines: Vec::new(),
        };
        match self {
            Heard::Off => {}
            Heard::Absent(why) => {
                if targets.iter().any(|(_, w)| !w.is_empty()) {
                    answer.lines.push(no_host_line(why));
                }
            }
            Heard::View(view) => {
                for ((who, windows), causes) in targets.iter().zip(answer.causes.iter_mut()) {
                    for (i, w) in windows.iter().enumerate() {
                        let c = view.explain(w.cpu as u32, w.intended_ns, w.actual_ns);
                        if i < PRINTED {
                            answer.lines.push(format!(
                                "{who}: outside the guest {}: {}",
                                cpushield_cpuset::fmt_ns(w.outside_ns),
                                c.line
                            ));
                        }
                        causes.push(c);
                    }
                }
            }
        }
        answer
    }
}

/// Samples of one measurement whose host cause is printed (the rest are in
/// the report).
pub const PRINTED: usize = 3;

/// The host's answer about a run's samples: see [`HostSide::explain`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostAnswer {
    /// Per measurement asked about, the host's cause of each sample, in order
    /// (empty where no host side answered).
    pub causes: Vec<Vec<HostCause>>,
    /// The lines to print.
    pub lines: Vec<String>,
}

/// `--host-channel PATH`'s check: an existing port, or `none`; else the one
/// line that says what to pass.
pub fn check_channel_arg(p: &Path) -> Result<(), String> {
    if p.as_os_str() == "none" || p.exists() {
        Ok(())
    } else {
        Err(format!(
            "--host-channel {}: no such port: pass the guest's virtio-serial port (/dev/virtio-ports/{} or its /dev/vportNpM), or none",
            p.display(),
            crate::protocol::PORT_NAME
        ))
    }
}

/// The line printed where no host side answered, and why.
pub fn no_host_line(why: &str) -> String {
    format!(
        "host side: none answered ({why}); {}",
        crate::guest::NO_HOST_HINT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_turns_the_host_side_off_and_no_port_leaves_it_absent_with_why() {
        let k = cpushield_kernel::FakeKernel::new();
        assert!(matches!(
            HostSide::start(&k, Some(Path::new("none"))),
            HostSide::Off
        ));
        match HostSide::start(&k, None) {
            HostSide::Absent(why) => assert!(
                why.starts_with("no virtio-serial port named org.cpushield.vm.0"),
                "{why}"
            ),
            _ => panic!("a fake machine has no port"),
        }
    }

    fn attribution(seq: u64, intended_ns: u64, actual_ns: u64, outside_ns: u64) -> Attribution {
        Attribution {
            spike: cpushield_trace::Spike {
                seq,
                cpu: 1,
                tid: 500,
                intended_ns,
                actual_ns,
            },
            latency_ns: actual_ns - intended_ns,
            causes: Vec::new(),
            outside_ns,
            steal: None,
            irq_entry_after_ns: None,
            wakeup_after_ns: None,
            switch_in_after_ns: None,
            events: 0,
            notes: Vec::new(),
            trace_file: None,
        }
    }

    fn hog_view() -> crate::guest::HostView {
        use crate::timeline::{Gap, GapState, Occupant, OccupantKind};
        crate::guest::HostView {
            host: "cpushield".into(),
            gaps: vec![Gap {
                vcpu: 1,
                from_ns: 10_000_000,
                to_ns: 58_000_000,
                state: GapState::Halted,
                host_cpu: 1,
                woken_ns: Some(11_000_000),
                by: vec![Occupant {
                    kind: OccupantKind::Task,
                    name: "sh".into(),
                    pid: Some(9691),
                    vcpu: None,
                    host_cpu: 1,
                    ns: 46_800_000,
                }],
                open: false,
            }],
            seen_from_ns: Some(0),
            seen_to_ns: Some(100_000_000),
            lost: false,
            err_ns: 50_000,
        }
    }

    #[test]
    fn measure_latencys_spikes_outside_the_guest_get_the_hosts_cause_worst_first() {
        let mut attrs = vec![
            attribution(1, 1_000_000, 1_200_000, 0),
            attribution(2, 9_000_000, 58_100_000, 47_000_000),
            attribution(3, 70_000_000, 72_000_000, 1_500_000),
        ];
        let lines = Heard::View(hog_view()).blame_spikes(&mut attrs);
        assert!(
            attrs[0].notes.is_empty(),
            "no time outside the guest, nothing asked"
        );
        assert_eq!(
            attrs[1].notes,
            ["outside the guest 47.0 ms: vCPU 1 halted (guest idle) for 1.00 ms, then woken and kept waiting 47.0 ms on host CPU 1 by sh (pid 9691) for 46.8 ms of it: a wakeup path (clock offset error ± 50.0 us)"]
        );
        assert!(
            attrs[2].notes[0].contains("the host saw vCPU 1 run throughout"),
            "{:?}",
            attrs[2].notes
        );
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("spike 2 on CPU 1: outside the guest 47.0 ms: vCPU 1 halted"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("spike 3 on CPU 1: outside the guest 1.50 ms:"));
    }

    #[test]
    fn measure_latency_prints_the_worst_spikes_causes_and_counts_the_rest() {
        let mut attrs: Vec<Attribution> = (0..5)
            .map(|i| attribution(i, 20_000_000, 30_000_000 + i, 1_000_000 + i))
            .collect();
        let lines = Heard::View(hog_view()).blame_spikes(&mut attrs);
        assert_eq!(lines.len(), PRINTED + 1);
        assert!(lines[0].starts_with("spike 4 on CPU 1:"), "{}", lines[0]);
        assert_eq!(
            lines[PRINTED],
            "... the host's cause of 2 more spikes in trace-summary.json (notes)"
        );
        assert!(attrs.iter().all(|a| a.notes.len() == 1));
    }

    #[test]
    fn measure_latency_without_a_host_side_says_in_one_line_how_to_get_one() {
        let mut attrs = vec![attribution(2, 9_000_000, 58_100_000, 47_000_000)];
        let lines = Heard::Absent("no virtio-serial port named org.cpushield.vm.0".into())
            .blame_spikes(&mut attrs);
        assert_eq!(
            lines,
            [format!(
                "host side: none answered (no virtio-serial port named org.cpushield.vm.0); {}",
                crate::guest::NO_HOST_HINT
            )]
        );
        assert!(attrs[0].notes.is_empty());
        let mut inside = vec![attribution(2, 9_000_000, 9_100_000, 0)];
        assert!(Heard::Absent("none".into())
            .blame_spikes(&mut inside)
            .is_empty());
        assert!(Heard::Off.blame_spikes(&mut attrs).is_empty());
    }

    #[test]
    fn measure_latency_says_from_when_the_hosts_view_is_missing() {
        let mut view = hog_view();
        view.lost = true;
        let mut attrs = vec![attribution(2, 200_000_000, 230_000_000, 29_000_000)];
        let lines = Heard::View(view).blame_spikes(&mut attrs);
        assert!(
            lines[0].contains("the host's view is missing from 0.100 s"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn a_host_channel_is_an_existing_port_or_none() {
        assert!(check_channel_arg(Path::new("none")).is_ok());
        assert!(check_channel_arg(Path::new("/")).is_ok());
        let e = check_channel_arg(Path::new("/no/such/port")).unwrap_err();
        assert!(
            e.starts_with("--host-channel /no/such/port: no such port"),
            "{e}"
        );
    }
}
