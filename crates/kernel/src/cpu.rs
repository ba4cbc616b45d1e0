//! A CPU's power-management files: its cpufreq policy (`cpuN/cpufreq`) and
//! its cpuidle states (`cpuN/cpuidle/stateM`). `check` reports them and the
//! runtime settings write them; both read them here.

use crate::{paths, with_path, Kernel};
use std::io;
use std::path::PathBuf;

/// One cpuidle state of a CPU, as its files read; a file that cannot be
/// read (or, for `latency`, is not a number) is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleStateFiles {
    /// The state's directory name (`state2`).
    pub id: String,
    /// Its directory (`/sys/devices/system/cpu/cpu1/cpuidle/state2`).
    pub dir: PathBuf,
    /// Its `name` (`POLL`, `C1`, `C6`, ...).
    pub name: Option<String>,
    /// Its exit latency (`latency`), in µs.
    pub latency_us: Option<u64>,
    /// Its `disable` file's value (`0` or `1`).
    pub disable: Option<String>,
}

/// The cpuidle states of `cpu`, in state-number order (`state10` after
/// `state9`); none without a cpuidle driver.
pub fn idle_states(kernel: &dyn Kernel, cpu: usize) -> Vec<IdleStateFiles> {
    let idle_dir = paths::cpu_file(cpu, "cpuidle");
    let mut ids = kernel.read_dir(&idle_dir).unwrap_or_default();
    ids.retain(|n| n.starts_with("state"));
    ids.sort_by_key(|n| n[5..].parse::<u32>().unwrap_or(u32::MAX));
    ids.into_iter()
        .map(|id| {
            let dir = idle_dir.join(&id);
            let file = |leaf: &str| {
                kernel
                    .read(&dir.join(leaf))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            IdleStateFiles {
                name: file("name"),
                latency_us: file("latency").and_then(|v| v.parse().ok()),
                disable: file("disable"),
                id,
                dir,
            }
        })
        .collect()
}

/// The cpufreq file `leaf` of `cpu`, trimmed, with the path in the error
/// (a CPU without a cpufreq driver has none).
fn cpufreq(kernel: &dyn Kernel, cpu: usize, leaf: &str) -> io::Result<String> {
    let path = paths::cpu_file(cpu, &format!("cpufreq/{leaf}"));
    kernel
        .read(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| with_path(e, &path))
}

/// A cpufreq file that lists words (`performance powersave`).
fn cpufreq_words(kernel: &dyn Kernel, cpu: usize, leaf: &str) -> io::Result<Vec<String>> {
    cpufreq(kernel, cpu, leaf).map(|t| t.split_whitespace().map(str::to_string).collect())
}

/// The scaling governor of `cpu` (`scaling_governor`).
pub fn governor(kernel: &dyn Kernel, cpu: usize) -> io::Result<String> {
    cpufreq(kernel, cpu, "scaling_governor")
}

/// The scaling governors `cpu` may take (`scaling_available_governors`).
pub fn governors(kernel: &dyn Kernel, cpu: usize) -> io::Result<Vec<String>> {
    cpufreq_words(kernel, cpu, "scaling_available_governors")
}

/// The energy-performance preference of `cpu`
/// (`energy_performance_preference`), where the driver has one.
pub fn energy_performance_preference(kernel: &dyn Kernel, cpu: usize) -> io::Result<String> {
    cpufreq(kernel, cpu, "energy_performance_preference")
}

/// The energy-performance preferences `cpu` may take
/// (`energy_performance_available_preferences`).
pub fn energy_performance_preferences(kernel: &dyn Kernel, cpu: usize) -> io::Result<Vec<String>> {
    cpufreq_words(kernel, cpu, "energy_performance_available_preferences")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeKernel;

    #[test]
    fn idle_states_come_in_state_number_order_with_unreadable_files_as_none() {
        let k = FakeKernel::new();
        let dir = "/sys/devices/system/cpu/cpu1/cpuidle";
        for n in [10, 2, 9] {
            k.set_file(format!("{dir}/state{n}/name"), format!("C{n}\n"));
        }
        k.set_file(format!("{dir}/state2/latency"), "15\n");
        k.set_file(format!("{dir}/state9/latency"), "many\n");
        k.set_file(format!("{dir}/state9/disable"), "1\n");
        k.set_file(format!("{dir}/driver/name"), "intel_idle\n");
        let states = idle_states(&k, 1);
        let ids: Vec<&str> = states.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["state2", "state9", "state10"]);
        assert_eq!(states[0].name.as_deref(), Some("C2"));
        assert_eq!(states[0].latency_us, Some(15));
        assert_eq!(states[0].disable, None);
        assert_eq!(states[1].latency_us, None);
        assert_eq!(states[1].disable.as_deref(), Some("1"));
        assert_eq!(states[2].dir, PathBuf::from(format!("{dir}/state10")));
        assert!(idle_states(&k, 0).is_empty());
    }

    #[test]
    fn cpufreq_files_read_trimmed_and_split_into_words() {
        let k = FakeKernel::new();
        let dir = "/sys/devices/system/cpu/cpu0/cpufreq";
        k.set_file(format!("{dir}/scaling_governor"), "powersave\n");
        k.set_file(
            format!("{dir}/scaling_available_governors"),
            "performance powersave \n",
        );
        assert_eq!(governor(&k, 0).unwrap(), "powersave");
        assert_eq!(governors(&k, 0).unwrap(), ["performance", "powersave"]);
        let e = energy_performance_preference(&k, 0).unwrap_err();
        assert!(
            e.to_string().contains("energy_performance_preference"),
            "{e}"
        );
        assert!(governor(&k, 1).is_err());
    }
}
