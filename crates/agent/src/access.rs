//! Unprivileged placement, the decision: the one request the agent's socket
//! accepts, and whether the `[access]` grants allow it. Pure: the caller
//! supplies who asked (SO_PEERCRED and the caller's groups) and who owns the
//! process to place.

use cpushield_cpuset::CpuSet;
use serde::{Deserialize, Serialize};

/// One `[[access.grant]]` with its group resolved to a gid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The group's name.
    pub group: String,
    /// The group's id on this machine.
    pub gid: u32,
    /// The CPUs its members may use.
    pub cpus: CpuSet,
    /// The highest real-time priority they may ask for.
    pub max_priority: u32,
}

impl Rule {
    /// The rule as written in the config file, for refusals.
    pub fn describe(&self) -> String {
        format!(
            "[[access.grant]] group = \"{}\", cpus = \"{}\", max_priority = {}",
            self.group,
            self.cpus.to_list(),
            self.max_priority
        )
    }
}

/// The caller, as the kernel reported it (SO_PEERCRED) and its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The caller's process id.
    pub pid: i32,
    /// Its user id.
    pub uid: u32,
    /// Its primary group and supplementary groups.
    pub groups: Vec<u32>,
}

/// The scheduling policy a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
    /// SCHED_OTHER (priority must be 0): placement only.
    Other,
}

/// The one request: place process `pid` on `cpus` with `policy` at `priority`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Place {
    /// The process to place (every thread of it); 0 is the caller itself.
    pub pid: i32,
    /// The CPUs, as a list (`"1"`, `"2-3"`).
    pub cpus: String,
    /// The policy.
    pub policy: Policy,
    /// Its priority (1-99 for fifo and rr, 0 for other).
    pub priority: u32,
}

/// What the socket accepts: exactly one kind of request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    /// Place a process.
    Place(Place),
}

/// The longest request line the agent reads.
pub const MAX_REQUEST: usize = 4096;

/// Parses one request line; anything but a well-formed `place` is refused
/// with one line.
pub fn parse_request(line: &str) -> Result<(Place, CpuSet), String> {
    let Request::Place(place) = serde_json::from_str::<Request>(line.trim()).map_err(|_| {
        "refused: the socket accepts only {\"place\":{\"pid\":N,\"cpus\":\"LIST\",\"policy\":\"fifo|rr|other\",\"priority\":N}} (what `cpushield run` sends)".to_string()
    })?;
    let cpus = CpuSet::parse_list(&place.cpus)
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            format!(
                "refused: cpus {:?} is not a non-empty CPU list; name CPUs such as \"1\"",
                place.cpus
            )
        })?;
    match place.policy {
        Policy::Fifo | Policy::Rr if !(1..=99).contains(&place.priority) => Err(format!(
            "refused: priority {} is outside 1-99 for {:?}",
            place.priority, place.policy
        )),
        Policy::Other if place.priority != 0 => {
            Err("refused: policy other takes priority 0".to_string())
        }
        _ if place.pid < 0 => Err(format!("refused: pid {} is not a process", place.pid)),
        _ => Ok((place, cpus)),
    }
}

/// Whether `peer` may place a process of user `owner` on `cpus` at
/// `priority`: the process must be the caller's own, and one grant of a
/// group the caller is in must cover the CPUs and the priority. Err: the
/// one-line refusal naming the rule.
pub fn decide<'r>(
    rules: &'r [Rule],
    peer: &Peer,
    owner: u32,
    pid: i32,
    cpus: &CpuSet,
    priority: u32,
) -> Result<&'r Rule, String> {
    if owner != peer.uid {
        return Err(format!(
            "refused: process {pid} belongs to uid {owner}, not to you (uid {}): the agent places only the caller's own processes",
            peer.uid
        ));
    }
    let mine: Vec<&Rule> = rules
        .iter()
        .filter(|r| peer.groups.contains(&r.gid))
        .collect();
    if mine.is_empty() {
        let groups: Vec<&str> = rules.iter().map(|r| r.group.as_str()).collect();
        return Err(format!(
            "refused: uid {} is in none of the groups of the [[access.grant]] rules ({}); ask an administrator to add you to one",
            peer.uid,
            if groups.is_empty() { "there are none".to_string() } else { groups.join(", ") }
        ));
    }
    if let Some(rule) = mine
        .iter()
        .find(|r| cpus.is_subset(&r.cpus) && priority <= r.max_priority)
    {
        return Ok(rule);
    }
    let rule = mine
        .iter()
        .find(|r| cpus.is_subset(&r.cpus))
        .unwrap_or(&mine[0]);
    if !cpus.is_subset(&rule.cpus) {
        return Err(format!(
            "refused: CPU {} is not granted to you by {}",
            cpus.difference(&rule.cpus).to_list(),
            rule.describe()
        ));
    }
    Err(format!(
        "refused: priority {priority} is above max_priority {} of {}",
        rule.max_priority,
        rule.describe()
    ))
}

/// The real, effective, saved and filesystem uids of /proc/PID/status.
pub fn parse_uids(status: &str) -> Option<[u32; 4]> {
    let line = cpushield_parse::pid_status::field(status, "Uid")?;
    let v: Vec<u32> = line
        .split_whitespace()
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

/// The supplementary groups of /proc/PID/status (`Groups:`).
pub fn parse_groups(status: &str) -> Vec<u32> {
    cpushield_parse::pid_status::field(status, "Groups")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// The owner of a process for placement: its uid when the real, effective,
/// saved and filesystem uids agree; `u32::MAX` (nobody's) when they differ
/// (a set-uid program is not its caller's to place).
pub fn owner_of(status: &str) -> Option<u32> {
    let [r, e, s, f] = parse_uids(status)?;
    Some(if r == e && e == s && s == f {
        r
    } else {
        u32::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        vec![Rule {
            group: "rt".into(),
            gid: 900,
            cpus: CpuSet::parse_list("1").unwrap(),
            max_priority: 50,
        }]
    }

    fn peer(groups: &[u32]) -> Peer {
        Peer {
            pid: 10,
            uid: 1000,
            groups: groups.to_vec(),
        }
    }

    fn one(c: &str) -> CpuSet {
        CpuSet::parse_list(c).unwrap()
    }

    #[test]
    fn a_member_placing_its_own_process_within_the_grant_is_allowed() {
        let r = rules();
        assert_eq!(
            decide(&r, &peer(&[100, 900]), 1000, 10, &one("1"), 50)
                .unwrap()
                .group,
            "rt"
        );
    }

    #[test]
    fn another_cpu_is_refused_naming_the_grant() {
        let e = decide(&rules(), &peer(&[900]), 1000, 10, &one("0-1"), 5).unwrap_err();
        assert!(e.starts_with("refused: CPU 0 is not granted"), "{e}");
        assert!(e.contains("group = \"rt\", cpus = \"1\""), "{e}");
    }

    #[test]
    fn a_priority_above_the_grant_is_refused_naming_max_priority() {
        let e = decide(&rules(), &peer(&[900]), 1000, 10, &one("1"), 51).unwrap_err();
        assert!(e.contains("priority 51 is above max_priority 50"), "{e}");
    }

    #[test]
    fn another_users_process_is_refused_even_for_a_member() {
        let e = decide(&rules(), &peer(&[900]), 0, 1, &one("1"), 5).unwrap_err();
        assert!(e.contains("process 1 belongs to uid 0"), "{e}");
    }

    #[test]
    fn a_caller_outside_every_granted_group_is_refused_naming_the_groups() {
        let e = decide(&rules(), &peer(&[100]), 1000, 10, &one("1"), 5).unwrap_err();
        assert!(
            e.contains("none of the groups") && e.contains("(rt)"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn only_the_place_request_is_accepted() {
        let (p, cpus) =
            parse_request(r#"{"place":{"pid":5,"cpus":"1","policy":"fifo","priority":10}}"#)
                .unwrap();
        assert_eq!((p.pid, p.policy, p.priority), (5, Policy::Fifo, 10));
        assert_eq!(cpus, one("1"));
        for bad in [
            r#"{"reset":{}}"#,
            r#"{"place":{"pid":5,"cpus":"1","policy":"fifo","priority":10,"cmd":"sh"}}"#,
            r#"{"place":{"pid":5,"cpus":"1","policy":"deadline","priority":10}}"#,
            "shield --all 1",
        ] {
            let e = parse_request(bad).unwrap_err();
            assert!(
                e.starts_with("refused: the socket accepts only"),
                "{bad}: {e}"
            );
        }
        for bad in [
            r#"{"place":{"pid":5,"cpus":"","policy":"fifo","priority":10}}"#,
            r#"{"place":{"pid":5,"cpus":"1","policy":"fifo","priority":0}}"#,
            r#"{"place":{"pid":-1,"cpus":"1","policy":"rr","priority":3}}"#,
            r#"{"place":{"pid":5,"cpus":"1","policy":"other","priority":3}}"#,
        ] {
            assert!(
                parse_request(bad).unwrap_err().starts_with("refused: "),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        /// Whatever a caller writes, the parser answers without panicking,
        /// and what it accepts is a well-formed placement.
        #[test]
        fn any_request_line_is_answered_and_only_well_formed_places_pass(
            line in "\\PC{0,200}",
            pid in -5i32..100_000,
            cpus in "[0-9,\\-]{0,8}",
            policy in "(fifo|rr|other|deadline|FIFO)",
            priority in 0u32..200,
        ) {
            let _ = parse_request(&line);
            let json = format!(r#"{{"place":{{"pid":{pid},"cpus":"{cpus}","policy":"{policy}","priority":{priority}}}}}"#);
            match parse_request(&json) {
                Ok((p, set)) => {
                    proptest::prop_assert!(p.pid >= 0 && !set.is_empty());
                    match p.policy {
                        Policy::Other => proptest::prop_assert_eq!(p.priority, 0),
                        _ => proptest::prop_assert!((1..=99).contains(&p.priority)),
                    }
                }
                Err(e) => {
                    proptest::prop_assert!(e.starts_with("refused: ") && !e.contains('\n'));
                }
            }
        }
    }

    #[test]
    fn a_set_uid_process_belongs_to_nobody() {
        let plain = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGroups:\t27 900 \n";
        assert_eq!(owner_of(plain), Some(1000));
        assert_eq!(parse_groups(plain), vec![27, 900]);
        let setuid = "Uid:\t1000\t0\t0\t0\n";
        assert_eq!(owner_of(setuid), Some(u32::MAX));
    }
}
