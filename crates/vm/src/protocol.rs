//! The guest↔host messages: one JSON object per line, version [`VERSION`].
//!
//! The guest asks, the host answers; the host never asks and never acts on a
//! request beyond answering it. A request is at most [`MAX_REQUEST_BYTES`]
//! bytes, names only vCPUs of the guest the channel belongs to (each QEMU has
//! its own port, so the host knows whose vCPUs they are) and a time range of
//! at most [`MAX_RANGE_NS`]. Anything else gets an error reply.
//!
//! ```text
//! guest → {"v":1,"id":1,"op":"hello"}
//! host  ← {"v":1,"id":1,"ok":true,"vcpus":2,"retention_ns":60000000000,...}
//! guest → {"v":1,"id":2,"op":"ping"}
//! host  ← {"v":1,"id":2,"ok":true,"host_ns":123456789}
//! guest → {"v":1,"id":3,"op":"gaps","vcpu":1,"from_ns":..,"to_ns":..,"offset_ns":..,"err_ns":..,"min_ns":1000000}
//! host  ← {"v":1,"id":3,"ok":true,"err_ns":..,"seen_from_ns":..,"seen_to_ns":..,"gaps":[...],"truncated":false}
//! host  ← {"v":1,"id":null,"ok":false,"error":"..."}
//! ```

use crate::timeline::{Gap, Timeline};
use serde::{Deserialize, Serialize};

/// The protocol's version: a request with another `v` gets an error reply.
pub const VERSION: u32 = 1;
/// The longest request line, bytes (newline excluded): longer is refused unread.
pub const MAX_REQUEST_BYTES: usize = 1024;
/// The longest answer line the guest reads, bytes.
pub const MAX_REPLY_BYTES: usize = 256 * 1024;
/// The longest time range one `gaps` request may cover, ns (30 s).
pub const MAX_RANGE_NS: u64 = 30_000_000_000;
/// The most gaps one answer holds: a longer list is cut (`truncated`), and
/// the guest asks again from the last gap's end.
pub const MAX_GAPS_PER_REPLY: usize = 256;
/// The name of the virtio-serial port (the guest finds it by this name in
/// /sys/class/virtio-ports/*/name; with udev it is /dev/virtio-ports/NAME).
pub const PORT_NAME: &str = "org.cpushield.vm.0";

/// What the guest asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The host side's version, the guest's vCPU count, how far back it keeps.
    Hello,
    /// The host's CLOCK_MONOTONIC now: one round of the offset estimate.
    Ping,
    /// What kept the guest's vCPU(s) from running in a time range.
    Gaps(GapsQuery),
}

/// A `gaps` request: times on the guest's CLOCK_MONOTONIC, with the guest's
/// estimate of host − guest and its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapsQuery {
    /// One vCPU (its QEMU cpu-index, the guest's CPU number), or every one.
    pub vcpu: Option<u32>,
    /// Start of the range, guest ns.
    pub from_ns: u64,
    /// End of the range, guest ns.
    pub to_ns: u64,
    /// Host clock − guest clock, ns, as the guest estimated it.
    pub offset_ns: i64,
    /// The estimate's error (half the best ping's round trip), ns.
    pub err_ns: u64,
    /// Only gaps at least this long, ns.
    pub min_ns: u64,
}

/// One request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Protocol version: [`VERSION`].
    pub v: u32,
    /// The guest's number for this request, echoed in the answer.
    pub id: u64,
    /// What is asked.
    pub op: Op,
}

/// A request as it travels: one flat object, every field known (an
/// internally tagged enum cannot refuse unknown fields reliably).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    v: u32,
    id: u64,
    op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vcpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    err_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_ns: Option<u64>,
}

impl Request {
    /// The request as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut w = Wire {
            v: self.v,
            id: self.id,
            ..Wire::default()
        };
        match &self.op {
            Op::Hello => w.op = "hello".into(),
            Op::Ping => w.op = "ping".into(),
            Op::Gaps(q) => {
                w.op = "gaps".into();
                w.vcpu = q.vcpu;
                w.from_ns = Some(q.from_ns);
                w.to_ns = Some(q.to_ns);
                w.offset_ns = Some(q.offset_ns);
                w.err_ns = Some(q.err_ns);
                w.min_ns = Some(q.min_ns);
            }
        }
        let mut s = serde_json::to_string(&w).expect("a request always serializes");
        s.push('\n');
        s
    }
}

impl Wire {
    fn into_request(self) -> Result<Request, String> {
        let extra = self.vcpu.is_some()
            || self.from_ns.is_some()
            || self.to_ns.is_some()
            || self.offset_ns.is_some()
            || self.err_ns.is_some()
            || self.min_ns.is_some();
        let op = match self.op.as_str() {
            "hello" | "ping" if extra => {
                return Err(format!(
                    "request not understood: {} takes no other field",
                    self.op
                ))
            }
            "hello" => Op::Hello,
            "ping" => Op::Ping,
            "gaps" => {
                let need = |v: Option<u64>, name: &str| {
                    v.ok_or_else(|| format!("request not understood: gaps needs {name}"))
                };
                Op::Gaps(GapsQuery {
                    vcpu: self.vcpu,
                    from_ns: need(self.from_ns, "from_ns")?,
                    to_ns: need(self.to_ns, "to_ns")?,
                    offset_ns: self
                        .offset_ns
                        .ok_or("request not understood: gaps needs offset_ns")?,
                    err_ns: need(self.err_ns, "err_ns")?,
                    min_ns: self.min_ns.unwrap_or(0),
                })
            }
            other => {
                return Err(format!(
                    "request not understood: unknown op '{}': hello, ping or gaps",
                    other.chars().take(32).collect::<String>()
                ))
            }
        };
        Ok(Request {
            v: self.v,
            id: self.id,
            op,
        })
    }
}

/// One answer line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Protocol version: [`VERSION`].
    pub v: u32,
    /// The request's id (None when the request could not be read).
    pub id: Option<u64>,
    /// Whether the request was answered.
    pub ok: bool,
    /// Why not (one line), when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `hello`: the guest's vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    /// `hello`: how long the host keeps gaps, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ns: Option<u64>,
    /// `hello`: the host side's program and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `ping`: the host's CLOCK_MONOTONIC when it answered, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_ns: Option<u64>,
    /// `gaps`: the clock error the answer's times carry, ns (the guest's
    /// `err_ns`, echoed: every time below is that uncertain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err_ns: Option<u64>,
    /// `gaps`: the host traced from this time (guest ns): before it, it saw nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_from_ns: Option<u64>,
    /// `gaps`: the host had read its trace up to this time (guest ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_to_ns: Option<u64>,
    /// `gaps`: the gaps overlapping the range, in guest time, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<Vec<Gap>>,
    /// `gaps`: more gaps than [`MAX_GAPS_PER_REPLY`] matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

impl Reply {
    pub(crate) fn ok(id: u64) -> Reply {
        Reply {
            v: VERSION,
            id: Some(id),
            ok: true,
            error: None,
            vcpus: None,
            retention_ns: None,
            host: None,
            host_ns: None,
            err_ns: None,
            seen_from_ns: None,
            seen_to_ns: None,
            gaps: None,
            truncated: None,
        }
    }

    /// An error reply.
    pub fn error(id: Option<u64>, why: impl Into<String>) -> Reply {
        Reply {
            id,
            ok: false,
            error: Some(why.into()),
            ..Reply::ok(0)
        }
    }

    /// The reply as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"v":1,"id":null,"ok":false,"error":"reply could not be written"}"#.to_string()
        });
        s.push('\n');
        s
    }
}

/// Reads a request line (newline excluded). Every refusal is a reply to send.
// The refusal is the reply itself, sent once per bad line: boxing it buys nothing.
#[allow(clippy::result_large_err)]
pub fn parse_request(line: &[u8]) -> Result<Request, Reply> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err(Reply::error(
            None,
            format!(
                "request of {} bytes refused: at most {MAX_REQUEST_BYTES}",
                line.len()
            ),
        ));
    }
    let text = std::str::from_utf8(line)
        .map_err(|_| Reply::error(None, "request is not UTF-8: send one JSON object per line"))?;
    // The id, when one can be read, so that even a refusal says which request.
    let id = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("id").and_then(|i| i.as_u64()));
    let wire: Wire = serde_json::from_str(text).map_err(|e| {
        Reply::error(
            id,
            format!("request not understood: {e}; see docs/ARCHITECTURE.md, VM blame channel"),
        )
    })?;
    let req = wire.into_request().map_err(|e| Reply::error(id, e))?;
    if req.v != VERSION {
        return Err(Reply::error(
            Some(req.id),
            format!(
                "protocol version {} not spoken: this host speaks {VERSION}",
                req.v
            ),
        ));
    }
    if let Op::Gaps(q) = &req.op {
        if q.to_ns < q.from_ns {
            return Err(Reply::error(Some(req.id), "to_ns before from_ns"));
        }
        if q.to_ns - q.from_ns > MAX_RANGE_NS {
            return Err(Reply::error(
                Some(req.id),
                format!(
                    "range of {} ns refused: at most {MAX_RANGE_NS} ns per request",
                    q.to_ns - q.from_ns
                ),
            ));
        }
        if q.err_ns > MAX_RANGE_NS {
            return Err(Reply::error(
                Some(req.id),
                "err_ns above the longest range: estimate the offset again",
            ));
        }
    }
    Ok(req)
}

/// What the host knows besides the timeline, to answer with.
#[derive(Debug, Clone, Copy)]
pub struct HostFacts {
    /// The guest's vCPU count.
    pub vcpus: u32,
    /// How long gaps are kept, ns.
    pub retention_ns: u64,
    /// The host's CLOCK_MONOTONIC now, ns.
    pub now_ns: u64,
}

/// The host's answer to one request line: never anything but a reply.
pub fn answer(line: &[u8], timeline: &Timeline, facts: HostFacts) -> Reply {
    let req = match parse_request(line) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    match req.op {
        Op::Hello => Reply {
            vcpus: Some(facts.vcpus),
            retention_ns: Some(facts.retention_ns),
            host: Some(format!("cpushield {}", env!("CARGO_PKG_VERSION"))),
            ..Reply::ok(req.id)
        },
        Op::Ping => Reply {
            host_ns: Some(facts.now_ns),
            ..Reply::ok(req.id)
        },
        Op::Gaps(q) => {
            if let Some(k) = q.vcpu {
                if k >= facts.vcpus {
                    return Reply::error(
                        Some(req.id),
                        format!(
                            "no vCPU {k}: this guest has vCPUs 0-{}",
                            facts.vcpus.saturating_sub(1)
                        ),
                    );
                }
            }
            let to_host = |t: u64| shift(t, q.offset_ns);
            let to_guest = |t: u64| shift(t, q.offset_ns.saturating_neg());
            // The range widened by the clock error: a gap the error could
            // place inside it is in.
            let from = to_host(q.from_ns).saturating_sub(q.err_ns);
            let to = to_host(q.to_ns).saturating_add(q.err_ns);
            let (found, truncated) = timeline.gaps(q.vcpu, from, to, q.min_ns, MAX_GAPS_PER_REPLY);
            let gaps = found
                .into_iter()
                .map(|mut g| {
                    g.from_ns = to_guest(g.from_ns);
                    g.to_ns = to_guest(g.to_ns);
                    g.woken_ns = g.woken_ns.map(to_guest);
                    g
                })
                .collect();
            let (seen_from, seen_to) = timeline.seen();
            Reply {
                err_ns: Some(q.err_ns),
                seen_from_ns: seen_from.map(to_guest),
                seen_to_ns: seen_to.map(to_guest),
                gaps: Some(gaps),
                truncated: Some(truncated),
                ..Reply::ok(req.id)
            }
        }
    }
}

/// `t + by`, kept within u64.
fn shift(t: u64, by: i64) -> u64 {
    if by >= 0 {
        t.saturating_add(by as u64)
    } else {
        t.saturating_sub(by.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts {
            vcpus: 2,
            retention_ns: 60_000_000_000,
            now_ns: 5_000,
        }
    }

    fn reply(line: &str) -> Reply {
        answer(line.as_bytes(), &Timeline::new([]), facts())
    }

    #[test]
    fn hello_and_ping_are_answered_with_the_vcpu_count_and_the_host_clock() {
        let r = reply(r#"{"v":1,"id":7,"op":"hello"}"#);
        assert!(r.ok);
        assert_eq!((r.id, r.vcpus), (Some(7), Some(2)));
        let r = reply(r#"{"v":1,"id":8,"op":"ping"}"#);
        assert_eq!(r.host_ns, Some(5_000));
    }

    #[test]
    fn another_guests_vcpu_a_long_range_a_new_version_and_unknown_fields_are_refused() {
        for (line, why) in [
            (
                r#"{"v":1,"id":1,"op":"gaps","vcpu":2,"from_ns":0,"to_ns":1,"offset_ns":0,"err_ns":0}"#,
                "no vCPU 2",
            ),
            (
                r#"{"v":1,"id":1,"op":"gaps","from_ns":0,"to_ns":40000000000,"offset_ns":0,"err_ns":0}"#,
                "range",
            ),
            (
                r#"{"v":1,"id":1,"op":"gaps","from_ns":9,"to_ns":1,"offset_ns":0,"err_ns":0}"#,
                "before",
            ),
            (r#"{"v":2,"id":1,"op":"ping"}"#, "version"),
            (
                r#"{"v":1,"id":1,"op":"ping","cmd":"reboot"}"#,
                "not understood",
            ),
            (r#"{"v":1,"id":1,"op":"shield"}"#, "not understood"),
            ("\u{0}\u{1}", "not understood"),
        ] {
            let r = reply(line);
            assert!(!r.ok, "{line}");
            assert!(
                r.error.as_deref().unwrap().contains(why),
                "{line}: {:?}",
                r.error
            );
        }
    }

    #[test]
    fn an_oversized_request_is_refused_without_being_read() {
        let long = format!(
            r#"{{"v":1,"id":1,"op":"ping","pad":"{}"}}"#,
            "x".repeat(2000)
        );
        let r = reply(&long);
        assert!(!r.ok);
        assert!(r.error.unwrap().contains("at most 1024"));
        assert_eq!(r.id, None);
    }

    #[test]
    fn every_reply_is_one_line() {
        let r = reply(r#"{"v":1,"id":1,"op":"hello"}"#).to_line();
        assert_eq!(r.matches('\n').count(), 1);
        assert!(r.ends_with('\n'));
    }
}
