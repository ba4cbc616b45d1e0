//! What a load will run, decided from the request and a snapshot of the
//! system, before anything starts. Pure: the snapshot ([`SystemFacts`]) is
//! gathered by [`crate::preflight`].

use crate::catalog::Workload;
use crate::error::LoadError;
use cpushield_cpuset::CpuSet;
use std::path::PathBuf;

/// Largest accepted `--scale`.
pub const MAX_SCALE: u32 = 64;
/// Smallest accepted per-workload size cap.
pub const MIN_SIZE_CAP: u64 = 4 << 20;
/// Default per-workload size cap (`--size`): 1 GiB, as stress-ng's `--hdd` writes.
pub const DEFAULT_SIZE_CAP: u64 = 1 << 30;
/// Free space kept in reserve beyond the caps.
pub const SPACE_HEADROOM: u64 = 64 << 20;

/// What to run: the request a caller (the CLI or `compare`) hands to
/// [`crate::Load::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSpec {
    /// Built-in workloads to run (see [`crate::parse_selection`]).
    pub workloads: Vec<Workload>,
    /// CPUs the load is confined to; `None` leaves it unconfined.
    pub cpus: Option<CpuSet>,
    /// Instances of each workload (per CPU for `compute`), 1..=64.
    pub scale: u32,
    /// Directory under which the per-run directory is made.
    pub dir: PathBuf,
    /// Bytes each file-writing workload instance may use under `dir`.
    pub size_cap: u64,
    /// Run stress-ng with these arguments instead of the built-in workloads.
    pub stress_ng: Option<Vec<String>>,
    /// A second machine the network workloads (netflood/ionet, ttcp) flood or
    /// are flooded by, instead of loopback; `None`: loopback.
    pub remote: Option<Remote>,
    /// CPUs the load's supervisor keeps to, while its workers keep to
    /// `cpus` (`None`, or `cpus` unset: the load's own CPUs). A tool that
    /// measures some CPUs keeps its own processes off them, the supervisor
    /// included.
    pub supervisor_cpus: Option<CpuSet>,
}

/// The other end of the network workloads when it is another machine: its
/// traffic then reaches a NIC and makes device interrupts, not only softirqs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remote {
    /// Send to this address: UDP datagrams (netflood, and ICMP echo requests
    /// when a raw socket is permitted and the address is not loopback), or TCP
    /// data sets (ttcp).
    Peer(std::net::SocketAddr),
    /// Receive on this port on every address and count what arrives: UDP
    /// datagrams (netflood) or 64 KiB TCP buffers (ttcp).
    Listen(u16),
}

impl LoadSpec {
    /// A spec for these workloads with the defaults: unconfined, scale 1,
    /// `/var/tmp`, 1 GiB per file-writing workload.
    pub fn new(workloads: Vec<Workload>) -> Self {
        LoadSpec {
            workloads,
            cpus: None,
            scale: 1,
            dir: PathBuf::from("/var/tmp"),
            supervisor_cpus: None,
            size_cap: DEFAULT_SIZE_CAP,
            stress_ng: None,
            remote: None,
        }
    }
}

/// The facts about the system a plan depends on.
#[derive(Debug, Clone, Default)]
pub struct SystemFacts {
    /// Online CPUs.
    pub online: CpuSet,
    /// Why `dir` cannot hold the load's files, if it cannot.
    pub dir_problem: Option<String>,
    /// Bytes available to us under `dir`.
    pub free_bytes: u64,
    /// Path of the C compiler, if any.
    pub cc: Option<PathBuf>,
    /// Path of `echo`, if any.
    pub echo: Option<PathBuf>,
    /// Path of stress-ng, if any.
    pub stress_ng: Option<PathBuf>,
}

/// External programs the workloads run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tools {
    /// The C compiler for `compile`.
    pub cc: Option<PathBuf>,
    /// The trivial executable for `launch`.
    pub echo: Option<PathBuf>,
}

/// One process the supervisor starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The workload, or `None` for the stress-ng process.
    pub workload: Option<Workload>,
    /// The instance number within its workload.
    pub index: u32,
    /// CPUs it may run on; `None` = unconfined.
    pub cpus: Option<CpuSet>,
}

impl Instance {
    /// Name used in reports: the workload's name, or `stress-ng`.
    pub fn name(&self) -> &'static str {
        self.workload.map_or("stress-ng", Workload::name)
    }

    /// Name of its private directory under the run directory.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.name(), self.index)
    }
}

/// stress-ng and the arguments it runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressNgRun {
    /// The stress-ng executable.
    pub path: PathBuf,
    /// The user's arguments.
    pub args: Vec<String>,
}

/// Everything the supervisor needs to run the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The processes to start, in order.
    pub instances: Vec<Instance>,
    /// Bytes the instances may occupy in total.
    pub disk_bytes: u64,
    /// External programs.
    pub tools: Tools,
    /// Set when stress-ng runs instead of built-in workloads.
    pub stress_ng: Option<StressNgRun>,
    /// CPUs the whole load is confined to.
    pub cpus: Option<CpuSet>,
}

/// Checks the request against the system and lists the processes to start.
/// Refuses, naming the input and the remedy, anything that cannot run.
pub fn plan(spec: &LoadSpec, facts: &SystemFacts) -> Result<Plan, LoadError> {
    check_request(spec, facts)?;
    if let Some(args) = &spec.stress_ng {
        let path = facts.stress_ng.clone().ok_or(LoadError::StressNgMissing)?;
        return Ok(Plan {
            instances: vec![Instance {
                workload: None,
                index: 0,
                cpus: spec.cpus.clone(),
            }],
            disk_bytes: 0,
            tools: Tools::default(),
            stress_ng: Some(StressNgRun {
                path,
                args: args.clone(),
            }),
            cpus: spec.cpus.clone(),
        });
    }
    let tools = tools_for(&spec.workloads, facts)?;
    let instances = instances(spec, &facts.online);
    let disk_bytes: u64 = instances
        .iter()
        .filter_map(|i| i.workload)
        .map(|w| w.disk_bytes(spec.size_cap))
        .sum();
    let need = disk_bytes.saturating_add(SPACE_HEADROOM);
    if need > facts.free_bytes {
        return Err(LoadError::NoSpace {
            dir: spec.dir.clone(),
            need_mib: need.div_ceil(1 << 20),
            free_mib: facts.free_bytes >> 20,
        });
    }
    Ok(Plan {
        instances,
        disk_bytes,
        tools,
        stress_ng: None,
        cpus: spec.cpus.clone(),
    })
}

/// Refuses a request that asks for nothing, a scale or size cap out of
/// range, CPUs that are not online, or a directory that cannot be used.
fn check_request(spec: &LoadSpec, facts: &SystemFacts) -> Result<(), LoadError> {
    if spec.stress_ng.is_none() && spec.workloads.is_empty() {
        return Err(LoadError::Empty);
    }
    if !(1..=MAX_SCALE).contains(&spec.scale) {
        return Err(LoadError::BadScale {
            scale: spec.scale,
            max: MAX_SCALE,
        });
    }
    if spec.size_cap < MIN_SIZE_CAP {
        return Err(LoadError::BadSizeCap {
            size: spec.size_cap,
            min: MIN_SIZE_CAP,
        });
    }
    if let Some(cpus) = &spec.cpus {
        if cpus.is_empty() {
            return Err(LoadError::CpusEmpty);
        }
        let missing = cpus.difference(&facts.online);
        if !missing.is_empty() {
            return Err(LoadError::CpusOffline {
                asked: cpus.to_list(),
                missing: missing.to_list(),
                online: facts.online.to_list(),
            });
        }
    }
    if let Some(reason) = &facts.dir_problem {
        return Err(LoadError::BadDir {
            dir: spec.dir.clone(),
            reason: reason.clone(),
        });
    }
    Ok(())
}

/// The external programs the workloads need, each found on the system.
fn tools_for(workloads: &[Workload], facts: &SystemFacts) -> Result<Tools, LoadError> {
    let mut tools = Tools::default();
    for &w in workloads {
        if w.needs_cc() {
            tools.cc = Some(facts.cc.clone().ok_or(LoadError::ToolMissing {
                workload: w.name(),
                tool: "a C compiler (cc, gcc or clang)",
                remedy: "install one (apt-get install gcc) or leave out 'compile'",
            })?);
        }
        if w.needs_echo() {
            tools.echo = Some(facts.echo.clone().ok_or(LoadError::ToolMissing {
                workload: w.name(),
                tool: "echo",
                remedy: "install coreutils or leave out 'launch'",
            })?);
        }
    }
    Ok(tools)
}

/// The processes to start: `scale` of each workload, per CPU of the load's
/// CPUs (all online ones when none are named) for a per-CPU workload.
fn instances(spec: &LoadSpec, online: &CpuSet) -> Vec<Instance> {
    let mut instances = Vec::new();
    for &w in &spec.workloads {
        if w.per_cpu() {
            let cpus = spec.cpus.as_ref().unwrap_or(online);
            let mut index = 0;
            for cpu in cpus.iter() {
                for _ in 0..spec.scale {
                    instances.push(Instance {
                        workload: Some(w),
                        index,
                        cpus: Some(CpuSet::from_cpus([cpu])),
                    });
                    index += 1;
                }
            }
        } else {
            for index in 0..spec.scale {
                instances.push(Instance {
                    workload: Some(w),
                    index,
                    cpus: spec.cpus.clone(),
                });
            }
        }
    }
    instances
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> SystemFacts {
        SystemFacts {
            online: CpuSet::first_n(4),
            dir_problem: None,
            free_bytes: 10 << 30,
            cc: Some("/usr/bin/cc".into()),
            echo: Some("/usr/bin/echo".into()),
            stress_ng: Some("/usr/bin/stress-ng".into()),
        }
    }

    #[test]
    fn a_request_for_nothing_or_offline_cpus_is_refused_before_any_plan() {
        let empty = LoadSpec::new(Vec::new());
        assert!(matches!(
            check_request(&empty, &facts()),
            Err(LoadError::Empty)
        ));
        let mut offline = LoadSpec::new(vec![Workload::Fpu]);
        offline.cpus = Some(CpuSet::from_cpus([7]));
        assert!(matches!(
            check_request(&offline, &facts()),
            Err(LoadError::CpusOffline { .. })
        ));
        offline.cpus = Some(CpuSet::from_cpus([3]));
        assert!(check_request(&offline, &facts()).is_ok());
    }

    #[test]
    fn only_the_tools_the_workloads_need_are_looked_for() {
        let tools = tools_for(&[Workload::Fpu], &facts()).unwrap();
        assert_eq!((tools.cc, tools.echo), (None, None));
        let tools = tools_for(&[Workload::Compile, Workload::Launch], &facts()).unwrap();
        assert!(tools.cc.is_some() && tools.echo.is_some());
        let no_cc = SystemFacts {
            cc: None,
            ..facts()
        };
        assert!(matches!(
            tools_for(&[Workload::Compile], &no_cc),
            Err(LoadError::ToolMissing { .. })
        ));
    }

    #[test]
    fn instances_are_numbered_per_workload_across_its_cpus() {
        let mut spec = LoadSpec::new(vec![Workload::Compute]);
        spec.scale = 2;
        let got: Vec<(u32, String)> = instances(&spec, &CpuSet::from_cpus([0, 2]))
            .into_iter()
            .map(|i| (i.index, i.cpus.unwrap().to_list()))
            .collect();
        assert_eq!(
            got,
            [
                (0, "0".to_string()),
                (1, "0".to_string()),
                (2, "2".to_string()),
                (3, "2".to_string())
            ]
        );
    }

    #[test]
    fn scale_multiplies_instances_and_compute_runs_per_cpu() {
        let mut spec = LoadSpec::new(vec![Workload::Fpu, Workload::Compute]);
        spec.scale = 2;
        spec.cpus = Some(CpuSet::from_cpus([1, 3]));
        let plan = plan(&spec, &facts()).unwrap();
        let fpu: Vec<_> = plan
            .instances
            .iter()
            .filter(|i| i.workload == Some(Workload::Fpu))
            .collect();
        assert_eq!(fpu.len(), 2);
        assert!(fpu.iter().all(|i| i.cpus == spec.cpus));
        let pins: Vec<_> = plan
            .instances
            .iter()
            .filter(|i| i.workload == Some(Workload::Compute))
            .map(|i| i.cpus.clone().unwrap().to_list())
            .collect();
        assert_eq!(pins, ["1", "1", "3", "3"]);
    }

    #[test]
    fn unconfined_compute_covers_every_online_cpu() {
        let spec = LoadSpec::new(vec![Workload::Compute]);
        let plan = plan(&spec, &facts()).unwrap();
        assert_eq!(plan.instances.len(), 4);
    }

    #[test]
    fn zero_scale_is_refused() {
        let mut spec = LoadSpec::new(vec![Workload::Fpu]);
        spec.scale = 0;
        assert!(matches!(
            plan(&spec, &facts()),
            Err(LoadError::BadScale { scale: 0, .. })
        ));
    }

    #[test]
    fn offline_cpus_are_refused_by_number() {
        let mut spec = LoadSpec::new(vec![Workload::Fpu]);
        spec.cpus = Some(CpuSet::from_cpus([2, 9]));
        let msg = plan(&spec, &facts()).unwrap_err().to_string();
        assert!(msg.contains("CPUs 9 are not online"), "{msg}");
    }

    #[test]
    fn caps_beyond_free_space_are_refused_before_anything_starts() {
        let mut spec = LoadSpec::new(vec![Workload::Fs, Workload::Filemove]);
        spec.size_cap = 8 << 30;
        let msg = plan(&spec, &facts()).unwrap_err().to_string();
        assert!(msg.contains("needs 16448 MiB"), "{msg}");
        assert!(msg.contains("lower --size"), "{msg}");
    }

    #[test]
    fn missing_compiler_is_named_with_the_remedy() {
        let mut f = facts();
        f.cc = None;
        let msg = plan(&LoadSpec::new(vec![Workload::Compile]), &f)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("'compile'") && msg.contains("apt-get install gcc"),
            "{msg}"
        );
        assert!(plan(&LoadSpec::new(vec![Workload::Fpu]), &f).is_ok());
    }

    #[test]
    fn unusable_dir_is_refused_with_its_reason() {
        let mut f = facts();
        f.dir_problem = Some("read-only file system".into());
        let msg = plan(&LoadSpec::new(vec![Workload::Fpu]), &f)
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("--dir /var/tmp: read-only"), "{msg}");
    }

    #[test]
    fn stress_ng_mode_runs_one_process_and_needs_stress_ng() {
        let mut spec = LoadSpec::new(vec![]);
        spec.stress_ng = Some(vec!["--cpu".into(), "1".into()]);
        let p = plan(&spec, &facts()).unwrap();
        assert_eq!(p.instances.len(), 1);
        assert_eq!(p.instances[0].name(), "stress-ng");
        let mut f = facts();
        f.stress_ng = None;
        assert!(matches!(plan(&spec, &f), Err(LoadError::StressNgMissing)));
    }

    #[test]
    fn nothing_to_run_is_refused() {
        assert!(matches!(
            plan(&LoadSpec::new(vec![]), &facts()),
            Err(LoadError::Empty)
        ));
    }
}
