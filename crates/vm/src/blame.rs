//! The guest's side of the channel during a compare run: the host's view
//! collected while the scenarios run, then put beside each worst sample the
//! report charges to time outside the guest.

use cpushield_kernel::Kernel;
use std::path::Path;
use std::time::Duration;

/// The guest's side of the channel during a compare run: the host's view
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

    /// Puts the host's cause beside each worst sample charged outside the
    /// guest (probe and anchors); returns the lines to print.
    pub fn blame(self, report: &mut cpushield_report::CompareReport) -> Vec<String> {
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
        match self {
            HostSide::Off => Vec::new(),
            HostSide::Absent(why) if !targets.is_empty() => vec![format!(
                "host side: none answered ({why}); {}",
                crate::guest::NO_HOST_HINT
            )],
            HostSide::Absent(_) => Vec::new(),
            HostSide::Collecting(c) => {
                let view = c.finish();
                let mut lines = Vec::new();
                for (who, a) in targets {
                    for (i, w) in a.outside_samples.clone().into_iter().enumerate() {
                        let c = view.explain(w.cpu as u32, w.intended_ns, w.actual_ns);
                        // The worst three printed; every one in the report.
                        if i < 3 {
                            lines.push(format!(
                                "{who}: outside the guest {}: {}",
                                cpushield_cpuset::fmt_ns(w.outside_ns),
                                c.line
                            ));
                        }
                        a.host_causes.push(c);
                    }
                }
                lines
            }
        }
    }
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
}
