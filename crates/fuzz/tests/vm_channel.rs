//! Property/fuzz tests of the host side of the VM blame channel: the
//! guest's request parser and the timeline the host builds from its trace.
//! A guest is not trusted: whatever it sends, the host answers with one
//! bounded line and does nothing else.

use cpushield_fuzz::{config, input, mutated_line};
use cpushield_trace::event::parse_line;
use cpushield_vm::protocol::{
    answer, parse_request, GapsQuery, HostFacts, Op, Reply, Request, MAX_GAPS_PER_REPLY,
    MAX_RANGE_NS, MAX_REQUEST_BYTES, VERSION,
};
use cpushield_vm::timeline::{Limits, Timeline, MAX_OCCUPANTS};
use proptest::prelude::*;
use std::collections::BTreeMap;

const FACTS: HostFacts = HostFacts {
    vcpus: 2,
    retention_ns: 60_000_000_000,
    now_ns: 1_000_000_000_000,
};

/// A timeline with gaps of both vCPUs, from the vm_trace corpus.
fn busy_timeline() -> Timeline {
    let mut t = Timeline::new(BTreeMap::from([(100, 0), (101, 1)]));
    for seed in cpushield_fuzz::seeds("vm_trace") {
        for line in String::from_utf8_lossy(&seed).lines() {
            if let Some(e) = parse_line(line) {
                t.feed(&e);
            }
        }
    }
    t.read_up_to(1_001_000_000_000);
    t
}

fn gaps_query() -> impl Strategy<Value = GapsQuery> {
    (
        proptest::option::of(0u32..4),
        any::<u64>(),
        0u64..=2 * MAX_RANGE_NS,
        any::<i64>(),
        0u64..=2 * MAX_RANGE_NS,
        any::<u64>(),
    )
        .prop_map(
            |(vcpu, from_ns, len, offset_ns, err_ns, min_ns)| GapsQuery {
                vcpu,
                from_ns,
                to_ns: from_ns.saturating_add(len),
                offset_ns,
                err_ns,
                min_ns,
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_from_the_guest_get_one_bounded_reply_line(line in input("vm_request")) {
        let t = busy_timeline();
        let reply = answer(&line, &t, FACTS);
        let text = reply.to_line();
        prop_assert_eq!(text.matches('\n').count(), 1);
        let back: Reply = serde_json::from_str(text.trim_end()).unwrap();
        prop_assert_eq!(back.v, VERSION);
        if !reply.ok {
            // An error reply is short: a hostile request cannot make the host write much.
            prop_assert!(text.len() < 2048, "{} bytes", text.len());
            prop_assert!(reply.error.is_some());
        }
        if let Ok(req) = parse_request(&line) {
            prop_assert!(line.len() <= MAX_REQUEST_BYTES);
            prop_assert_eq!(req.v, VERSION);
            if let Op::Gaps(q) = &req.op {
                prop_assert!(q.to_ns >= q.from_ns && q.to_ns - q.from_ns <= MAX_RANGE_NS);
            }
        }
    }

    #[test]
    fn an_answered_gaps_request_names_only_the_guests_own_vcpus(q in gaps_query(), id in any::<u64>()) {
        let t = busy_timeline();
        let line = Request { v: VERSION, id, op: Op::Gaps(q.clone()) }.to_line();
        let line = line.trim_end().as_bytes();
        let reply = answer(line, &t, FACTS);
        let fits = q.to_ns - q.from_ns <= MAX_RANGE_NS && q.err_ns <= MAX_RANGE_NS;
        let own = q.vcpu.is_none_or(|k| k < FACTS.vcpus);
        prop_assert_eq!(reply.ok, fits && own, "{:?}", reply.error);
        prop_assert_eq!(reply.id, Some(id));
        if reply.ok {
            prop_assert_eq!(reply.err_ns, Some(q.err_ns));
            let gaps = reply.gaps.unwrap();
            prop_assert!(gaps.len() <= MAX_GAPS_PER_REPLY);
            for g in gaps {
                prop_assert!(g.vcpu < FACTS.vcpus);
                if let Some(k) = q.vcpu { prop_assert_eq!(g.vcpu, k); }
            }
        }
    }

    #[test]
    fn a_request_the_guest_writes_is_read_back_the_same(q in gaps_query(), id in any::<u64>(), which in 0u8..3) {
        let op = match which { 0 => Op::Hello, 1 => Op::Ping, _ => Op::Gaps(q) };
        let req = Request { v: VERSION, id, op };
        let line = req.to_line();
        let line = line.trim_end().as_bytes();
        prop_assert!(line.len() <= MAX_REQUEST_BYTES);
        match parse_request(line) {
            Ok(back) => prop_assert_eq!(back, req),
            // Refused only for a range or error the host does not take.
            Err(r) => prop_assert!(r.error.unwrap().contains("ns"), "{line:?}"),
        }
    }

    #[test]
    fn the_timeline_stays_bounded_on_any_host_trace(lines in prop::collection::vec(mutated_line("vm_trace"), 1..200)) {
        let limits = Limits { max_gaps: 16, retention_ns: 1_000_000_000, min_gap_ns: 0 };
        let mut t = Timeline::with_limits(BTreeMap::from([(100, 0), (101, 1), (4711, 2)]), limits);
        for l in &lines {
            if let Some(e) = parse_line(l) {
                t.feed(&e);
            }
        }
        prop_assert!(t.len() <= 16);
        let (gaps, _) = t.gaps(None, 0, u64::MAX, 0, usize::MAX);
        // Kept gaps plus at most one open gap per vCPU thread.
        prop_assert!(gaps.len() <= 16 + 3);
        for g in gaps {
            prop_assert!(g.by.len() <= MAX_OCCUPANTS);
            prop_assert!(g.from_ns <= g.to_ns || g.open);
        }
    }
}
