//! `measure net` as text: a header naming the endpoints and link, then one
//! line per protocol and size with the round-trip percentiles, the round trips
//! per second and the payload throughput (each way), as the Hyades paper plots
//! messaging latency and bandwidth against message size.

use crate::net::{Link, NetReport, NetResult};
use cpushield_cpuset::fmt_ns;

/// A byte count as the size list spells it: `64`, `1K`, `64K`, `65507`.
pub fn fmt_size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}K", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// The column headings of [`line`].
pub fn heading() -> String {
    format!(
        "{:<5} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}\n",
        "proto", "size", "trips", "min", "p50", "p99", "p99.9", "p99.999", "max", "trips/s", "MB/s"
    )
}

/// One protocol and size on one line (times are round trips).
pub fn line(r: &NetResult) -> String {
    let s = &r.rtt.summary;
    let p = &s.percentiles;
    let lost = if r.lost > 0 {
        format!("  ({} lost)", r.lost)
    } else {
        String::new()
    };
    format!(
        "{:<5} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10.0} {:>9.1}{lost}\n",
        r.protocol.name(),
        fmt_size(r.size_bytes),
        s.count,
        fmt_ns(s.min_ns),
        fmt_ns(p.p50_ns),
        fmt_ns(p.p99_ns),
        fmt_ns(p.p99_9_ns),
        fmt_ns(p.p99_999_ns),
        fmt_ns(s.max_ns),
        r.round_trips_per_s,
        r.bytes_per_s / 1e6,
    )
}

/// The whole report as text.
pub fn report(report: &NetReport) -> String {
    let st = &report.settings;
    let ends = match (st.link, st.server_cpu, report.server) {
        (Link::Peer(a), _, _) => format!(
            "client on CPU {} ({}), server {a}",
            st.client_cpu, report.client
        ),
        (_, Some(cpu), Some(server)) => format!(
            "client on CPU {} ({}), server on CPU {cpu} ({server})",
            st.client_cpu, report.client
        ),
        (_, cpu, _) => format!(
            "client on CPU {} ({}), server on CPU {}",
            st.client_cpu,
            report.client,
            cpu.map_or("?".into(), |c| c.to_string())
        ),
    };
    let mut out = format!(
        "net: ping-pong over {}; {ends}; {} per size after {} warm-up round trips; ran {:.3} s on kernel {}{}\n",
        st.link,
        fmt_ns(st.duration_ns),
        st.warmup,
        report.run.elapsed_ns as f64 / 1e9,
        report.run.kernel_release,
        if report.run.interrupted {
            " (interrupted: what was measured so far)"
        } else {
            ""
        }
    );
    out.push_str("round-trip times; MB/s is payload each way (10^6 bytes)\n");
    out.push_str(&heading());
    for r in &report.results {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::Protocol;
    use crate::recorder::Recorder;

    #[test]
    fn sizes_print_as_typed() {
        assert_eq!(fmt_size(64), "64");
        assert_eq!(fmt_size(1024), "1K");
        assert_eq!(fmt_size(65536), "64K");
        assert_eq!(fmt_size(65507), "65507");
    }

    #[test]
    fn a_line_has_the_protocol_size_percentiles_and_throughput() {
        let mut rec = Recorder::new();
        for v in [10_000u64, 12_000, 30_000] {
            rec.record(v, 0, 0);
        }
        let r = NetResult {
            protocol: Protocol::Udp,
            requested_bytes: 65536,
            size_bytes: 65507,
            lost: 2,
            elapsed_ns: 1_000_000_000,
            rtt: rec.finish(),
            round_trips_per_s: 3.0,
            bytes_per_s: 3.0 * 65507.0,
        };
        let text = line(&r);
        assert!(text.starts_with("udp    65507          3"), "{text}");
        assert!(
            text.contains("10.0 us") && text.contains("30.0 us"),
            "{text}"
        );
        assert!(text.contains("0.2  (2 lost)"), "{text}");
    }
}
