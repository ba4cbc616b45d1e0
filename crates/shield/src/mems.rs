//! The memory nodes of the shield's cpuset: by default the nodes of its
//! CPUs, so that a task on a shielded CPU takes its memory from the node
//! next to it; `--mems` chooses them by hand. The housekeeping side keeps
//! every node of the root: its tasks are everything else on the machine,
//! some with memory on every node already, and narrowing their nodes would
//! only squeeze the rest of the system onto fewer nodes' memory without
//! making a shielded CPU's accesses any more local. Pure: the facts come
//! from the [`Snapshot`].

use crate::snapshot::Snapshot;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::numa::nodes_of;
use serde::Serialize;

/// How the shield's nodes were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Chosen {
    /// The nodes of its CPUs.
    CpuNodes,
    /// Named with `--mems`.
    Asked,
    /// Every node of the root: one node, no NUMA information, or its CPUs'
    /// nodes have no memory.
    All,
}

/// The shield's memory nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemsChoice {
    /// The nodes; `None` where they are every node of the root (the
    /// cpuset then holds the root's nodes as before NUMA placement).
    pub nodes: Option<CpuSet>,
    /// How they were chosen.
    pub chosen: Chosen,
}

impl MemsChoice {
    /// The nodes in words for `show` and the report: `1 (the nodes of its
    /// CPUs)`; `root` is the root's node list.
    pub fn describe(&self, root: &str) -> String {
        let list = self
            .nodes
            .as_ref()
            .map_or_else(|| root.to_string(), CpuSet::to_list);
        let why = match self.chosen {
            Chosen::CpuNodes => "the nodes of its CPUs",
            Chosen::Asked => "--mems",
            Chosen::All => "every node",
        };
        format!("{list} ({why})")
    }
}

/// The root's memory nodes, parsed (empty when its text is not a list).
pub fn root_nodes(snap: &Snapshot) -> CpuSet {
    CpuSet::parse_list(&snap.root_mems).unwrap_or_default()
}

/// The nodes the shield's cpuset gets for process shield `procs`: `asked`
/// when given, else the nodes with memory that hold one of `procs`, within
/// the root's; every node of the root when that is all of them or none.
pub fn choose(snap: &Snapshot, asked: Option<&CpuSet>, procs: &CpuSet) -> MemsChoice {
    let root = root_nodes(snap);
    let (nodes, chosen) = match asked {
        Some(asked) => (asked.clone(), Chosen::Asked),
        None => (
            nodes_of(&snap.nodes, procs).intersection(&root),
            Chosen::CpuNodes,
        ),
    };
    if nodes.is_empty() || (chosen == Chosen::CpuNodes && nodes == root) {
        return MemsChoice {
            nodes: None,
            chosen: Chosen::All,
        };
    }
    MemsChoice {
        nodes: Some(nodes),
        chosen,
    }
}

/// What is wrong with `--mems LIST` on this machine, in one line with the
/// remedy; `None` when every node named exists, has memory and is the
/// root cpuset's.
pub fn refusal(snap: &Snapshot, asked: &CpuSet) -> Option<String> {
    let root = root_nodes(snap);
    let usable = if snap.nodes.is_empty() {
        root.clone()
    } else {
        CpuSet::from_cpus(snap.nodes.iter().filter(|n| n.memory).map(|n| n.id)).intersection(&root)
    };
    if asked.is_empty() {
        return Some(format!(
            "--mems names no node: name memory nodes from {}",
            usable.to_list()
        ));
    }
    let bad = asked.difference(&usable);
    if bad.is_empty() {
        return None;
    }
    let known = CpuSet::from_cpus(snap.nodes.iter().map(|n| n.id));
    let missing = bad.difference(&known);
    let what = if !snap.nodes.is_empty() && missing.is_empty() {
        "have no memory the shield's cpuset can use"
    } else {
        "do not exist"
    };
    Some(format!(
        "--mems {}: memory node(s) {} {what}; name nodes with memory from {} (ls /sys/devices/system/node)",
        asked.to_list(),
        bad.to_list(),
        usable.to_list()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_machine;

    fn two_node_snapshot() -> Snapshot {
        let k = fake_machine::v1_machine("0-3", &[]);
        fake_machine::add_nodes(&k, &["0-1", "2-3"]);
        crate::snapshot::take(&k, &crate::layout::detect(&k).unwrap()).unwrap()
    }

    fn cpus(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    #[test]
    fn the_shield_gets_the_nodes_of_its_cpus() {
        let snap = two_node_snapshot();
        let got = choose(&snap, None, &cpus("2-3"));
        assert_eq!(got.nodes, Some(cpus("1")));
        assert_eq!(got.chosen, Chosen::CpuNodes);
        assert_eq!(got.describe("0-1"), "1 (the nodes of its CPUs)");
    }

    #[test]
    fn a_shield_across_both_nodes_or_on_one_node_machine_keeps_every_node() {
        let snap = two_node_snapshot();
        assert_eq!(choose(&snap, None, &cpus("1-2")).chosen, Chosen::All);
        let one = fake_machine::v1_machine("0-3", &[]);
        let snap = crate::snapshot::take(&one, &crate::layout::detect(&one).unwrap()).unwrap();
        let got = choose(&snap, None, &cpus("3"));
        assert_eq!((got.nodes, got.chosen), (None, Chosen::All));
    }

    #[test]
    fn mems_asked_by_hand_win_over_the_cpus_nodes() {
        let snap = two_node_snapshot();
        let got = choose(&snap, Some(&cpus("0")), &cpus("3"));
        assert_eq!((got.nodes, got.chosen), (Some(cpus("0")), Chosen::Asked));
    }

    #[test]
    fn mems_naming_a_missing_or_memoryless_node_are_refused_with_the_usable_ones() {
        let snap = two_node_snapshot();
        assert_eq!(refusal(&snap, &cpus("1")), None);
        let missing = refusal(&snap, &cpus("1,4")).unwrap();
        assert!(
            missing.contains("node(s) 4 do not exist") && missing.contains("from 0-1"),
            "{missing}"
        );
        let mut memoryless = snap.clone();
        memoryless.nodes[1].memory = false;
        let text = refusal(&memoryless, &cpus("1")).unwrap();
        assert!(
            text.contains("node(s) 1 have no memory") && text.contains("from 0 "),
            "{text}"
        );
        assert!(refusal(&snap, &CpuSet::new()).is_some());
        assert!(!missing.contains('\n'));
    }
}
