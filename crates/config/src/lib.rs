//! The cpushield config file (`/etc/cpushield/cpushield.toml`) and the plan
//! that makes the shield match it (`cpushield apply`).
//!
//! Pure: the caller reads the file and the current shield masks; this crate
//! parses (serde + toml, unknown keys refused), validates against the online
//! CPUs, and diffs the file against the shield into a [`Plan`] of shield and
//! unshield calls that the CLI runs through the shield's own code path (so
//! the shield's journal, and `reset`, cover every change).
//!
//! Every error is one line naming the file, the line, the key, and the remedy.

use cpushield_cpuset::CpuSet;
use cpushield_shield::ShieldMasks;
use serde::Deserialize;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// Where `cpushield apply` reads its config unless `--config` names another file.
pub const DEFAULT_PATH: &str = "/etc/cpushield/cpushield.toml";

/// Where tuned's cpu-partitioning profile reads `isolated_cores`: what
/// `isolated = "tuned"` reads unless `tuned_variables` names another file
/// (the realtime profile's is `/etc/tuned/realtime-variables.conf`).
pub const TUNED_VARIABLES: &str = "/etc/tuned/cpu-partitioning-variables.conf";

/// The `isolated` value that means tuned's `isolated_cores`.
pub const ISOLATED_FROM_TUNED: &str = "tuned";

/// The agent's socket for unprivileged placement unless `[access] socket` names another.
pub const DEFAULT_SOCKET: &str = "/run/cpushield/agent.sock";

/// One `[[access.grant]]`, checked: a group, its CPUs and highest priority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRule {
    /// The Unix group name.
    pub group: String,
    /// The CPUs its members may use.
    pub cpus: CpuSet,
    /// The highest SCHED_FIFO/SCHED_RR priority they may ask for.
    pub max_priority: u32,
}

/// The agent's metrics address unless `[agent] listen` names another.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";

/// The shortest agent interval: a look reads every task and IRQ, so a
/// shorter one would keep a CPU busy looking.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The longest agent interval: a year, the longest any duration option takes.
pub const MAX_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);

/// What to write instead of a bad agent interval.
pub const INTERVAL_REMEDY: &str = "give an interval from 10ms to 365 days, e.g. 1s or 500ms";

/// What to write instead of a bad listen address.
pub const LISTEN_REMEDY: &str =
    "write an IP address and a port from 0 to 65535, e.g. 127.0.0.1:9477 (port 0: any free one)";

/// The agent's interval, from `[agent] interval` and `agent --interval`
/// alike: a duration (`1s`, `500ms`; a bare number is seconds) from
/// [`MIN_INTERVAL`] to [`MAX_INTERVAL`]. The error says what is wrong with
/// the text; [`INTERVAL_REMEDY`] says what to write.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("'{t}' is negative"));
    }
    let parsed = match t.parse::<f64>() {
        Ok(secs) if secs.is_finite() => Duration::try_from_secs_f64(secs).ok(),
        Ok(_) => return Err(format!("'{t}' is not a duration")),
        Err(_) => match humantime::parse_duration(&t.replace("µs", "us")) {
            Ok(d) => Some(d),
            Err(humantime::DurationError::NumberOverflow) => None,
            Err(_) => return Err(format!("'{t}' is not a duration")),
        },
    };
    match parsed {
        Some(d) if d < MIN_INTERVAL => Err(format!("'{t}' is shorter than 10ms")),
        Some(d) if d <= MAX_INTERVAL => Ok(d),
        _ => Err(format!("'{t}' is longer than 365 days")),
    }
}

/// The agent's listen address, from `[agent] listen` and `agent --listen`
/// alike: an IP address and a port (names are not resolved). The error says
/// what is wrong with the text; [`LISTEN_REMEDY`] says what to write.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(addr) = t.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = t.rsplit_once(':') else {
        return Err(format!("'{t}' has no port"));
    };
    if let Ok(port) = port.parse::<u64>() {
        if port > u64::from(u16::MAX) {
            return Err(format!("'{t}': port {port} is above 65535"));
        }
    } else {
        return Err(format!("'{t}': '{port}' is not a port number"));
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<std::net::IpAddr>().is_err() {
        return Err(format!(
            "'{t}': '{host}' is not an IP address (names are not resolved)"
        ));
    }
    Err(format!("'{t}' is not an address:port"))
}

/// The config file as written (every table and key optional; unknown keys refused).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[shield]`: which CPUs to shield from what.
    #[serde(default)]
    pub shield: ShieldSection,
    /// `[settings]`: the run-time settings the shield may change.
    #[serde(default)]
    pub settings: Settings,
    /// `[[irq]]`: IRQ pins.
    #[serde(default)]
    pub irq: Vec<IrqPin>,
    /// `[access]`: who may use which shielded CPUs (enforced by the agent's socket).
    #[serde(default)]
    pub access: Access,
    /// `[agent]`: the agent's settings (validated only; the agent is later work).
    #[serde(default)]
    pub agent: Agent,
    /// `[runtime]`: run-time settings beyond the shield (what `tune` found best).
    #[serde(default)]
    pub runtime: Runtime,
}

/// `[runtime]`: run-time settings beyond the shield, as `cpushield tune`
/// writes them. `apply` journals each file's value in the shield's saved
/// state before it changes it, so `reset` restores it with the shield. The
/// per-CPU keys apply to the CPUs shielded from processes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// kernel.sched_rt_runtime_us (-1: no RT throttling).
    pub sched_rt_runtime_us: Option<Spanned<i64>>,
    /// kernel.timer_migration (0 or 1).
    pub timer_migration: Option<Spanned<u8>>,
    /// vm.stat_interval, seconds.
    pub stat_interval: Option<Spanned<u32>>,
    /// The preemption model of a PREEMPT_DYNAMIC kernel (`full`, ...).
    pub preempt: Option<Spanned<String>>,
    /// The cpufreq governor of the shielded CPUs.
    pub cpufreq_governor: Option<Spanned<String>>,
    /// The energy-performance preference of the shielded CPUs.
    pub energy_performance_preference: Option<Spanned<String>>,
    /// Idle states of the shielded CPUs with a longer exit latency (us) are disabled.
    pub idle_max_latency_us: Option<Spanned<u64>>,
    /// The shielded CPUs' SMT siblings outside the shield go offline.
    pub smt_siblings_offline: Option<Spanned<bool>>,
}

/// The `[runtime]` settings, checked: what `apply` makes true.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// kernel.sched_rt_runtime_us.
    pub sched_rt_runtime_us: Option<i64>,
    /// kernel.timer_migration.
    pub timer_migration: Option<u8>,
    /// vm.stat_interval.
    pub stat_interval: Option<u32>,
    /// The preemption model.
    pub preempt: Option<String>,
    /// The cpufreq governor of the shielded CPUs.
    pub cpufreq_governor: Option<String>,
    /// Their energy-performance preference.
    pub energy_performance_preference: Option<String>,
    /// Their idle states above this exit latency (us) disabled.
    pub idle_max_latency_us: Option<u64>,
    /// Their SMT siblings outside the shield offline.
    pub smt_siblings_offline: bool,
}

impl RuntimeSettings {
    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        *self == RuntimeSettings::default()
    }

    /// Whether a per-CPU key is set.
    pub fn per_cpu(&self) -> bool {
        self.cpufreq_governor.is_some()
            || self.energy_performance_preference.is_some()
            || self.idle_max_latency_us.is_some()
            || self.smt_siblings_offline
    }

    /// The `[runtime]` section's lines (without the header), in key order.
    pub fn toml_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut line = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                out.push(format!("{key} = {v}"));
            }
        };
        line(
            "sched_rt_runtime_us",
            self.sched_rt_runtime_us.map(|v| v.to_string()),
        );
        line(
            "timer_migration",
            self.timer_migration.map(|v| v.to_string()),
        );
        line("stat_interval", self.stat_interval.map(|v| v.to_string()));
        line("preempt", self.preempt.as_ref().map(|v| format!("{v:?}")));
        line(
            "cpufreq_governor",
            self.cpufreq_governor.as_ref().map(|v| format!("{v:?}")),
        );
        line(
            "energy_performance_preference",
            self.energy_performance_preference
                .as_ref()
                .map(|v| format!("{v:?}")),
        );
        line(
            "idle_max_latency_us",
            self.idle_max_latency_us.map(|v| v.to_string()),
        );
        line(
            "smt_siblings_offline",
            self.smt_siblings_offline.then(|| "true".to_string()),
        );
        out
    }
}

/// A word a sysfs file takes: letters, digits and `_`.
fn is_word(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `[shield]`: CPU lists (`"1"`, `"2-3,6"`); each key adds its CPUs to its masks.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShieldSection {
    /// CPUs shielded from processes, interrupts and the local timer (`shield --all`).
    pub all: Option<Spanned<String>>,
    /// CPUs shielded from processes (`shield --procs`).
    pub procs: Option<Spanned<String>>,
    /// CPUs shielded from interrupts (`shield --irqs`).
    pub irqs: Option<Spanned<String>>,
    /// CPUs shielded from the local timer (`shield --ltmr`).
    pub ltmr: Option<Spanned<String>>,
    /// Kubernetes PerformanceProfile `spec.cpu.isolated`: the CPUs for real-time
    /// work, shielded from all three (same as `all`). `"tuned"`: the CPUs of
    /// tuned's `isolated_cores` (in [`ShieldSection::tuned_variables`]).
    pub isolated: Option<Spanned<String>>,
    /// The tuned variables file `isolated = "tuned"` reads `isolated_cores`
    /// from ([`TUNED_VARIABLES`] unless given).
    pub tuned_variables: Option<Spanned<String>>,
    /// Kubernetes PerformanceProfile `spec.cpu.reserved`: the housekeeping CPUs;
    /// every other online CPU is shielded from all three.
    pub reserved: Option<Spanned<String>>,
}

/// `[settings]`: what the shield may change at run time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The local-timer shield writes `kernel.watchdog_cpumask` and
    /// `vm.stat_interval`; `false` forbids it (then `ltmr` must name no CPU).
    #[serde(default = "yes")]
    pub ltmr_sysctls: Spanned<bool>,
}

fn yes() -> Spanned<bool> {
    Spanned::new(0..0, true)
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            ltmr_sysctls: yes(),
        }
    }
}

/// `[[irq]]`: one IRQ pinned to CPUs, named by its /proc/interrupts name or number.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrqPin {
    /// The action name in /proc/interrupts (e.g. `eth0-rx-0`).
    pub name: Option<Spanned<String>>,
    /// The IRQ number.
    pub number: Option<Spanned<u32>>,
    /// The CPUs the IRQ goes to.
    pub cpus: Spanned<String>,
}

/// `[access]`: which groups may place their tasks on which shielded CPUs.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// The agent's socket (default [`DEFAULT_SOCKET`]).
    pub socket: Option<Spanned<String>>,
    /// The group that owns the socket (default: the grants' group, when they
    /// name only one).
    pub socket_group: Option<Spanned<String>>,
    /// `[[access.grant]]`: one rule per group.
    #[serde(default)]
    pub grant: Vec<Grant>,
}

/// One access rule: members of `group` may use `cpus` up to `max_priority`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// A Unix group name.
    pub group: Spanned<String>,
    /// Shielded CPUs the group may use.
    pub cpus: Spanned<String>,
    /// Highest SCHED_FIFO/SCHED_RR priority the group may ask for (1-99).
    pub max_priority: Spanned<u32>,
}

/// `[agent]`: the long-running agent's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// Address of the metrics endpoint (default 127.0.0.1:9477).
    pub listen: Option<Spanned<String>>,
    /// How often the agent checks the shield (e.g. `"1s"`, `"500ms"`).
    pub interval: Option<Spanned<String>>,
    /// On SIGTERM: `"keep"` the shield up or `"reset"` it.
    pub on_stop: Option<Spanned<String>>,
    /// The CPU of the low-duty latency probe (none: no probe).
    pub latency_cpu: Option<Spanned<u32>>,
    /// The latency above which `--on-threshold` runs (default `"100us"`).
    pub latency_limit: Option<Spanned<String>>,
    /// The probe's SCHED_FIFO priority (default 50).
    pub latency_priority: Option<Spanned<u32>>,
}

/// The agent's latency probe as the file asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyProbe {
    /// The CPU.
    pub cpu: usize,
    /// The limit.
    pub limit: Duration,
    /// The SCHED_FIFO priority.
    pub priority: u8,
}

/// What the file asks for, checked against this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// The shield masks the file declares.
    pub masks: ShieldMasks,
    /// IRQ pins, in file order.
    pub irq_pins: Vec<(IrqRef, CpuSet)>,
    /// Line of the first `[[irq]]` table, if any.
    pub first_irq_line: Option<usize>,
}

/// How a pin names its IRQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IrqRef {
    /// By action name.
    Name(String),
    /// By number.
    Number(u32),
}

/// A config file that cannot be used: where, which key, why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// 1-based line (0 when the whole file is meant).
    pub line: usize,
    /// The key (dotted, e.g. `shield.procs`).
    pub key: String,
    /// What is wrong.
    pub problem: String,
    /// What to do.
    pub remedy: String,
}

/// The longest word of a file's text an error repeats: a key a megabyte
/// long is named by its start and its size, so the message stays one line
/// a person can read.
const LONGEST_QUOTED: usize = 64;

/// `word` cut to [`LONGEST_QUOTED`] characters, with its length in bytes.
fn cut(word: &str) -> std::borrow::Cow<'_, str> {
    match word.char_indices().nth(LONGEST_QUOTED) {
        Some((at, _)) => format!("{}… ({} bytes)", &word[..at], word.len()).into(),
        None => word.into(),
    }
}

/// `text` with each of its words cut as [`cut`] cuts one.
fn cut_words(text: &str) -> String {
    text.split(' ').map(cut).collect::<Vec<_>>().join(" ")
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problem = cut_words(&self.problem);
        if self.key.is_empty() {
            return write!(
                f,
                "{}:{}: {}; {}",
                self.file, self.line, problem, self.remedy
            );
        }
        write!(
            f,
            "{}:{}: key `{}`: {}; {}",
            self.file,
            self.line,
            cut(&self.key),
            problem,
            self.remedy
        )
    }
}

impl std::error::Error for ConfigError {}

/// A parsed file with its name and text (for line numbers).
#[derive(Debug)]
pub struct Config {
    /// The file name, as given.
    pub file: String,
    text: String,
    /// The parsed content.
    pub content: ConfigFile,
    /// tuned's `isolated_cores`, once read ([`Config::read_tuned_variables`]).
    tuned_isolated: Option<CpuSet>,
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// The key on the line of `span` (`a = 1` gives `a`; `[t]` gives `t`), prefixed
/// with the table the line is in.
fn key_at(text: &str, span: &Range<usize>) -> String {
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[line_start..line_end].trim();
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    if line.starts_with('[') {
        return line
            .trim_matches(|c| c == '[' || c == ']')
            .trim()
            .to_string();
    }
    let key = match line.split_once('=') {
        Some((k, _)) => k.trim().trim_matches('"').to_string(),
        None => text[start..span.end.min(text.len()).max(start)]
            .trim()
            .to_string(),
    };
    match table {
        Some(t) if !key.is_empty() => format!("{t}.{key}"),
        Some(t) => t,
        None => key,
    }
}

/// One line for a config file at `path` that cannot be read (`error` from
/// reading it): what is wrong and what to do.
pub fn unreadable(path: &Path, error: &io::Error) -> String {
    let file = path.display();
    if let Some(not) = error.get_ref().and_then(|e| e.downcast_ref::<NotAConfig>()) {
        return match not {
            NotAConfig::NotRegular => format!(
                "the config file {file} is not a regular file (a FIFO, a device or a socket \
                 would block or never end): name the config file itself with --config PATH"
            ),
            NotAConfig::TooLarge => format!(
                "the config file {file} holds more than {} KiB, far more than any config: \
                 name the config file itself with --config PATH",
                MAX_CONFIG_BYTES / 1024
            ),
        };
    }
    match error.kind() {
        io::ErrorKind::NotFound => format!(
            "the config file {file} does not exist: create it (every key is described in \
             dist/cpushield.toml) or name another with --config PATH"
        ),
        io::ErrorKind::IsADirectory => format!(
            "the config file {file} is a directory, not a file: name the file in it, \
             e.g. --config {}",
            path.join("cpushield.toml").display()
        ),
        io::ErrorKind::PermissionDenied => format!(
            "cannot read the config file {file} (permission denied): run as root, or make it \
             readable"
        ),
        _ => format!(
            "cannot read the config file {file} ({error}): fix it, or name another with \
             --config PATH"
        ),
    }
}

/// The most a config file may hold: a config is a page of settings, and a
/// file without end (`/dev/zero`) must not be read until memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why a path cannot be a config file, though it can be opened.
#[derive(Debug)]
enum NotAConfig {
    /// A FIFO, a device or a socket: its read may block or never end.
    NotRegular,
    /// Over [`MAX_CONFIG_BYTES`].
    TooLarge,
}

impl fmt::Display for NotAConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAConfig::NotRegular => write!(f, "not a regular file"),
            NotAConfig::TooLarge => write!(f, "larger than {MAX_CONFIG_BYTES} bytes"),
        }
    }
}

impl std::error::Error for NotAConfig {}

/// Reads a config file: a regular file (a directory is
/// `ErrorKind::IsADirectory`; a FIFO, device or socket is refused before it
/// is opened, since opening a FIFO blocks) of at most [`MAX_CONFIG_BYTES`].
/// [`unreadable`] words each error.
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    }
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotAConfig::NotRegular,
        ));
    }
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut io::Read::take(std::fs::File::open(path)?, MAX_CONFIG_BYTES + 1),
        &mut bytes,
    )?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            NotAConfig::TooLarge,
        ));
    }
    Ok(bytes)
}

impl Config {
    /// Parses the bytes of `file`: UTF-8 text (a byte that is not is named
    /// with its offset and line), then as [`Config::parse`].
    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Self, ConfigError> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let at = e.valid_up_to();
            let valid = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
            ConfigError {
                file: file.to_string(),
                line: line_of(valid, at),
                key: String::new(),
                problem: format!(
                    "not UTF-8 text: byte {at} (0x{:02x}) starts no UTF-8 character",
                    bytes[at]
                ),
                remedy: "save the file as UTF-8 (TOML is UTF-8 only)".into(),
            }
        })?;
        Self::parse(file, text)
    }

    /// Parses `text`, read from `file`. Unknown keys and wrong types are errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let content: ConfigFile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().trim().replace('\n', " ");
            let remedy = if message.contains("unknown field") {
                "remove or correct the key (every key is described in dist/cpushield.toml)"
            } else {
                "correct the value (every key is described in dist/cpushield.toml)"
            };
            ConfigError {
                file: file.to_string(),
                line: line_of(text, span.start),
                key: key_at(text, &span),
                problem: message,
                remedy: remedy.to_string(),
            }
        })?;
        let config = Self {
            file: file.to_string(),
            text: text.to_string(),
            content,
            tuned_isolated: None,
        };
        config.check_access_and_agent()?;
        config.check_tuned_keys()?;
        Ok(config)
    }

    /// Whether `isolated = "tuned"`.
    fn isolated_from_tuned(&self) -> bool {
        self.content
            .shield
            .isolated
            .as_ref()
            .is_some_and(|v| v.get_ref() == ISOLATED_FROM_TUNED)
    }

    fn check_tuned_keys(&self) -> Result<(), ConfigError> {
        let Some(path) = &self.content.shield.tuned_variables else {
            return Ok(());
        };
        if !self.isolated_from_tuned() {
            return Err(self.error(
                &path.span(),
                "shield.tuned_variables",
                "is read only with isolated = \"tuned\"".into(),
                "set isolated = \"tuned\", or remove tuned_variables",
            ));
        }
        if !path.get_ref().starts_with('/') {
            return Err(self.error(
                &path.span(),
                "shield.tuned_variables",
                format!("{:?} is not an absolute path", path.get_ref()),
                "write e.g. \"/etc/tuned/realtime-variables.conf\"",
            ));
        }
        Ok(())
    }

    /// The tuned variables file to read before [`Config::resolve`], when the
    /// file says `isolated = "tuned"`: the command reads it and hands the
    /// text to [`Config::read_tuned_variables`].
    pub fn tuned_variables_path(&self) -> Option<std::path::PathBuf> {
        self.isolated_from_tuned().then(|| {
            self.content
                .shield
                .tuned_variables
                .as_ref()
                .map_or(TUNED_VARIABLES.into(), |p| p.get_ref().into())
        })
    }

    /// The error for a tuned variables file at `path` that could not be read,
    /// at the line of `isolated = "tuned"`.
    pub fn tuned_variables_unreadable(&self, path: &Path, error: &io::Error) -> ConfigError {
        let span = self
            .content
            .shield
            .isolated
            .as_ref()
            .map_or(0..0, |v| v.span());
        let why = match error.kind() {
            io::ErrorKind::NotFound => "does not exist".to_string(),
            _ => format!("cannot be read ({error})"),
        };
        self.error(
            &span,
            "shield.isolated",
            format!(
                "\"tuned\" reads isolated_cores from {}, which {why}",
                path.display()
            ),
            "write isolated_cores=CPUS there (tuned's cpu-partitioning profile reads the same \
             file), name another with tuned_variables, or give the CPUs here",
        )
    }

    /// Reads tuned's `isolated_cores` from the variables file `file` with
    /// text `text`: the CPUs `isolated = "tuned"` stands for. A file tuned
    /// could not read, a missing key, or a value tuned computes or that is
    /// no CPU list is an error naming that file, its line and the key.
    pub fn read_tuned_variables(&mut self, file: &str, text: &str) -> Result<(), ConfigError> {
        use cpushield_parse::tuned;
        let fail = |line: usize, problem: String, remedy: &str| ConfigError {
            file: file.to_string(),
            line,
            key: "isolated_cores".into(),
            problem,
            remedy: remedy.to_string(),
        };
        let vars = tuned::parse_variables(text).map_err(|e| ConfigError {
            file: file.to_string(),
            line: e.line,
            key: String::new(),
            problem: e.problem,
            remedy: "correct the line (tuned reads `key=value` lines and # comments)".into(),
        })?;
        let Some(entry) = vars.get("", "isolated_cores") else {
            return Err(fail(
                0,
                "is not set (cpushield.toml says isolated = \"tuned\")".into(),
                "add a line isolated_cores=CPUS, e.g. isolated_cores=2-3",
            ));
        };
        let cpus = tuned::isolated_cores(&entry.value).map_err(|p| {
            fail(
                entry.line,
                p.to_string(),
                "write the CPUs as a list, e.g. isolated_cores=2-3 (cpushield reads a literal \
                 list, not a tuned function)",
            )
        })?;
        self.tuned_isolated = Some(cpus);
        Ok(())
    }

    fn error(&self, span: &Range<usize>, key: &str, problem: String, remedy: &str) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: if span.is_empty() && span.start == 0 {
                0
            } else {
                line_of(&self.text, span.start)
            },
            key: key.to_string(),
            problem,
            remedy: remedy.to_string(),
        }
    }

    fn cpus(&self, value: &Spanned<String>, key: &str) -> Result<CpuSet, ConfigError> {
        CpuSet::parse_list(value.get_ref()).map_err(|e| {
            self.error(
                &value.span(),
                key,
                format!("{:?} is not a CPU list ({e})", value.get_ref()),
                "write a CPU list such as \"1\" or \"2-3,6\"",
            )
        })
    }

    /// Refuses a group of `[access]` (a grant's, or `socket_group`) that
    /// `exists` does not know, naming file, line and key. Parsing checks a
    /// group's spelling; whether it exists is this machine's to say, so
    /// every command that uses the file (`apply`, its `--dry-run`, the
    /// agent) asks here, before any change.
    pub fn check_groups(&self, exists: &dyn Fn(&str) -> bool) -> Result<(), ConfigError> {
        let access = &self.content.access;
        let named = access
            .grant
            .iter()
            .map(|g| (&g.group, "access.grant.group"))
            .chain(
                access
                    .socket_group
                    .iter()
                    .map(|g| (g, "access.socket_group")),
            );
        for (group, key) in named {
            let name = group.get_ref();
            if !exists(name) {
                return Err(self.error(
                    &group.span(),
                    key,
                    format!("group {name:?} does not exist on this machine"),
                    &format!("create it (groupadd {name}) or name a group that exists"),
                ));
            }
        }
        Ok(())
    }

    fn check_access_and_agent(&self) -> Result<(), ConfigError> {
        self.check_grants()?;
        self.check_socket()?;
        self.check_runtime()?;
        self.check_agent()
    }

    /// Each `[[access.grant]]`: a Unix group name, some CPUs, a real-time
    /// priority.
    fn check_grants(&self) -> Result<(), ConfigError> {
        for grant in &self.content.access.grant {
            let group = grant.group.get_ref();
            let valid_group = !group.is_empty()
                && group
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !valid_group {
                return Err(self.error(
                    &grant.group.span(),
                    "access.grant.group",
                    format!("{group:?} is not a group name"),
                    "name a Unix group (letters, digits, _ - .)",
                ));
            }
            let cpus = self.cpus(&grant.cpus, "access.grant.cpus")?;
            if cpus.is_empty() {
                return Err(self.error(
                    &grant.cpus.span(),
                    "access.grant.cpus",
                    "names no CPU".into(),
                    "name the shielded CPUs the group may use, e.g. \"1\"",
                ));
            }
            let prio = *grant.max_priority.get_ref();
            if !(1..=99).contains(&prio) {
                return Err(self.error(
                    &grant.max_priority.span(),
                    "access.grant.max_priority",
                    format!("{prio} is outside 1-99"),
                    "give a real-time priority from 1 to 99",
                ));
            }
        }
        Ok(())
    }

    /// The agent's socket: owned by one of the granted groups (named when
    /// the grants name several), at an absolute path.
    fn check_socket(&self) -> Result<(), ConfigError> {
        let access = &self.content.access;
        let mut groups: Vec<&str> = access
            .grant
            .iter()
            .map(|g| g.group.get_ref().as_str())
            .collect();
        groups.sort_unstable();
        groups.dedup();
        if let Some(sg) = &access.socket_group {
            if !groups.contains(&sg.get_ref().as_str()) {
                return Err(self.error(
                    &sg.span(),
                    "access.socket_group",
                    format!("{:?} is the group of no [[access.grant]]", sg.get_ref()),
                    "name one of the granted groups",
                ));
            }
        } else if groups.len() > 1 {
            return Err(self.error(
                &access.grant[0].group.span(),
                "access.socket_group",
                format!(
                    "the grants name several groups ({}) but one group owns the socket",
                    groups.join(", ")
                ),
                "set socket_group = \"GROUP\" in [access] (a group all users of the agent are in)",
            ));
        }
        if let Some(socket) = &access.socket {
            if !socket.get_ref().starts_with('/') {
                return Err(self.error(
                    &socket.span(),
                    "access.socket",
                    format!("{:?} is not an absolute path", socket.get_ref()),
                    "write e.g. \"/run/cpushield/agent.sock\"",
                ));
            }
        }
        Ok(())
    }

    /// `[agent]`: its listen address, interval, latency limit and priority,
    /// and what it does on stop.
    fn check_agent(&self) -> Result<(), ConfigError> {
        let agent = &self.content.agent;
        if let Some(listen) = &agent.listen {
            if let Err(problem) = parse_listen(listen.get_ref()) {
                return Err(self.error(&listen.span(), "agent.listen", problem, LISTEN_REMEDY));
            }
        }
        if let Some(interval) = &agent.interval {
            if let Err(problem) = parse_interval(interval.get_ref()) {
                return Err(self.error(
                    &interval.span(),
                    "agent.interval",
                    problem,
                    INTERVAL_REMEDY,
                ));
            }
        }
        if let Some(limit) = &agent.latency_limit {
            if !matches!(humantime::parse_duration(limit.get_ref()), Ok(d) if !d.is_zero()) {
                return Err(self.error(
                    &limit.span(),
                    "agent.latency_limit",
                    format!("{:?} is not a positive duration", limit.get_ref()),
                    "write e.g. \"100us\"",
                ));
            }
        }
        if let Some(prio) = &agent.latency_priority {
            if !(1..=99).contains(prio.get_ref()) {
                return Err(self.error(
                    &prio.span(),
                    "agent.latency_priority",
                    format!("{} is outside 1-99", prio.get_ref()),
                    "give a SCHED_FIFO priority from 1 to 99",
                ));
            }
        }
        if let Some(on_stop) = &agent.on_stop {
            if !matches!(on_stop.get_ref().as_str(), "keep" | "reset") {
                return Err(self.error(
                    &on_stop.span(),
                    "agent.on_stop",
                    format!("{:?} is neither \"keep\" nor \"reset\"", on_stop.get_ref()),
                    "write \"keep\" (leave the shield up) or \"reset\"",
                ));
            }
        }
        Ok(())
    }

    fn check_runtime(&self) -> Result<(), ConfigError> {
        let r = &self.content.runtime;
        if let Some(v) = &r.sched_rt_runtime_us {
            if !(-1..=1_000_000).contains(v.get_ref()) {
                return Err(self.error(
                    &v.span(),
                    "runtime.sched_rt_runtime_us",
                    format!("{} is outside -1 to 1000000", v.get_ref()),
                    "write -1 (no RT throttling) or the microseconds per second RT tasks may run",
                ));
            }
        }
        if let Some(v) = &r.timer_migration {
            if *v.get_ref() > 1 {
                return Err(self.error(
                    &v.span(),
                    "runtime.timer_migration",
                    format!("{} is neither 0 nor 1", v.get_ref()),
                    "write 0 or 1",
                ));
            }
        }
        if let Some(v) = &r.stat_interval {
            if !(1..=3600).contains(v.get_ref()) {
                return Err(self.error(
                    &v.span(),
                    "runtime.stat_interval",
                    format!("{} is outside 1 to 3600 seconds", v.get_ref()),
                    "write the seconds between vmstat updates, e.g. 120",
                ));
            }
        }
        if let Some(v) = &r.preempt {
            if !matches!(v.get_ref().as_str(), "none" | "voluntary" | "full" | "lazy") {
                return Err(self.error(
                    &v.span(),
                    "runtime.preempt",
                    format!("{:?} is not a preemption model", v.get_ref()),
                    "write \"none\", \"voluntary\", \"full\" or \"lazy\"",
                ));
            }
        }
        for (key, value) in [
            ("runtime.cpufreq_governor", &r.cpufreq_governor),
            (
                "runtime.energy_performance_preference",
                &r.energy_performance_preference,
            ),
        ] {
            if let Some(v) = value {
                if !is_word(v.get_ref()) {
                    return Err(self.error(
                        &v.span(),
                        key,
                        format!("{:?} is not a word a sysfs file takes", v.get_ref()),
                        "write one word of letters, digits and _, e.g. \"performance\"",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The line of the `[runtime]` key `key` (`runtime.preempt`), or of the
    /// table, for errors found against the machine.
    pub fn runtime_line(&self, key: &str) -> usize {
        let r = &self.content.runtime;
        let span = match key.trim_start_matches("runtime.") {
            "sched_rt_runtime_us" => r.sched_rt_runtime_us.as_ref().map(|v| v.span()),
            "timer_migration" => r.timer_migration.as_ref().map(|v| v.span()),
            "stat_interval" => r.stat_interval.as_ref().map(|v| v.span()),
            "preempt" => r.preempt.as_ref().map(|v| v.span()),
            "cpufreq_governor" => r.cpufreq_governor.as_ref().map(|v| v.span()),
            "energy_performance_preference" => {
                r.energy_performance_preference.as_ref().map(|v| v.span())
            }
            "idle_max_latency_us" => r.idle_max_latency_us.as_ref().map(|v| v.span()),
            "smt_siblings_offline" => r.smt_siblings_offline.as_ref().map(|v| v.span()),
            _ => None,
        };
        match span {
            Some(span) => line_of(&self.text, span.start),
            None => self
                .text
                .lines()
                .position(|l| l.trim() == "[runtime]")
                .map_or(0, |i| i + 1),
        }
    }

    /// The `[runtime]` settings (the file was validated by [`Config::parse`]).
    pub fn runtime(&self) -> RuntimeSettings {
        let r = &self.content.runtime;
        RuntimeSettings {
            sched_rt_runtime_us: r.sched_rt_runtime_us.as_ref().map(|v| *v.get_ref()),
            timer_migration: r.timer_migration.as_ref().map(|v| *v.get_ref()),
            stat_interval: r.stat_interval.as_ref().map(|v| *v.get_ref()),
            preempt: r.preempt.as_ref().map(|v| v.get_ref().clone()),
            cpufreq_governor: r.cpufreq_governor.as_ref().map(|v| v.get_ref().clone()),
            energy_performance_preference: r
                .energy_performance_preference
                .as_ref()
                .map(|v| v.get_ref().clone()),
            idle_max_latency_us: r.idle_max_latency_us.as_ref().map(|v| *v.get_ref()),
            smt_siblings_offline: r
                .smt_siblings_offline
                .as_ref()
                .is_some_and(|v| *v.get_ref()),
        }
    }

    /// The `[[access.grant]]` rules, checked (the file was validated by [`Config::parse`]).
    pub fn grants(&self) -> Vec<GrantRule> {
        self.content
            .access
            .grant
            .iter()
            .filter_map(|g| {
                Some(GrantRule {
                    group: g.group.get_ref().clone(),
                    cpus: CpuSet::parse_list(g.cpus.get_ref()).ok()?,
                    max_priority: *g.max_priority.get_ref(),
                })
            })
            .collect()
    }

    /// The group that owns the agent's socket: `[access] socket_group`, else
    /// the grants' one group; `None` without grants.
    pub fn socket_group(&self) -> Option<String> {
        let access = &self.content.access;
        access
            .socket_group
            .as_ref()
            .map(|g| g.get_ref().clone())
            .or_else(|| access.grant.first().map(|g| g.group.get_ref().clone()))
    }

    /// The agent's socket path (the default when the file names none).
    pub fn socket_path(&self) -> std::path::PathBuf {
        self.content
            .access
            .socket
            .as_ref()
            .map(|s| s.get_ref().into())
            .unwrap_or_else(|| DEFAULT_SOCKET.into())
    }

    /// The latency probe, when `[agent] latency_cpu` names a CPU.
    pub fn latency_probe(&self) -> Option<LatencyProbe> {
        let a = &self.content.agent;
        Some(LatencyProbe {
            cpu: *a.latency_cpu.as_ref()?.get_ref() as usize,
            limit: a
                .latency_limit
                .as_ref()
                .and_then(|l| humantime::parse_duration(l.get_ref()).ok())
                .unwrap_or(Duration::from_micros(100)),
            priority: a
                .latency_priority
                .as_ref()
                .map_or(50, |p| *p.get_ref() as u8),
        })
    }

    /// The agent's listen address (the default when the file names none).
    pub fn agent_listen(&self) -> SocketAddr {
        self.content
            .agent
            .listen
            .as_ref()
            .and_then(|l| parse_listen(l.get_ref()).ok())
            .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("default address"))
    }

    /// The agent's interval, when the file names one.
    pub fn agent_interval(&self) -> Option<Duration> {
        let interval = self.content.agent.interval.as_ref()?;
        parse_interval(interval.get_ref()).ok()
    }

    /// Whether the agent resets the shield when it stops (`on_stop = "reset"`;
    /// the default, `"keep"`, leaves it up).
    pub fn agent_resets_on_stop(&self) -> bool {
        self.content
            .agent
            .on_stop
            .as_ref()
            .is_some_and(|s| s.get_ref() == "reset")
    }

    /// What the file asks of a machine whose online CPUs are `online`.
    pub fn resolve(&self, online: &CpuSet) -> Result<Desired, ConfigError> {
        let spans = self.shield_keys()?;
        let masks = self.masks(&spans, online)?;
        self.check_some_cpu_left(&masks, &spans, online)?;
        self.check_uses_of_the_shield(&masks)?;
        let irq_pins = self.irq_pins(online)?;
        let first_irq_line = self
            .content
            .irq
            .first()
            .map(|p| line_of(&self.text, p.cpus.span().start));
        Ok(Desired {
            masks,
            irq_pins,
            first_irq_line,
        })
    }

    /// The CPUs of each `[shield]` key given, with its key and span, in the
    /// order of [`Config::resolve`]'s keys (`isolated = "tuned"` read as
    /// tuned's isolated cores).
    fn shield_keys(&self) -> Result<Vec<KeyCpus>, ConfigError> {
        let s = &self.content.shield;
        let mut spans: Vec<KeyCpus> = Vec::new();
        for (key, value) in [
            ("shield.all", &s.all),
            ("shield.isolated", &s.isolated),
            ("shield.procs", &s.procs),
            ("shield.irqs", &s.irqs),
            ("shield.ltmr", &s.ltmr),
            ("shield.reserved", &s.reserved),
        ] {
            if let Some(v) = value {
                let cpus = if key == "shield.isolated" && self.isolated_from_tuned() {
                    self.tuned_isolated.clone().ok_or_else(|| {
                        self.error(
                            &v.span(),
                            key,
                            "\"tuned\" stands for tuned's isolated_cores, which was not read"
                                .into(),
                            "run apply, which reads the tuned variables file, or give the CPUs",
                        )
                    })?
                } else {
                    self.cpus(v, key)?
                };
                spans.push((key, v.span(), cpus));
            }
        }
        Ok(spans)
    }

    /// The masks the keys add up to, each key's CPUs online; `reserved`
    /// shields every other online CPU, and none of it may be isolated.
    fn masks(&self, spans: &[KeyCpus], online: &CpuSet) -> Result<ShieldMasks, ConfigError> {
        let mut masks = ShieldMasks::default();
        for (key, span, cpus) in spans {
            let offline = cpus.difference(online);
            if !offline.is_empty() {
                return Err(self.error(
                    span,
                    key,
                    format!("CPU(s) {offline} not online (online CPUs: {online})"),
                    "name CPUs from the online list",
                ));
            }
            match *key {
                "shield.procs" => masks.procs = masks.procs.union(cpus),
                "shield.irqs" => masks.irqs = masks.irqs.union(cpus),
                "shield.ltmr" => masks.ltmr = masks.ltmr.union(cpus),
                "shield.reserved" => {
                    if let Some((_, _, iso)) = spans.iter().find(|(k, ..)| *k == "shield.isolated")
                    {
                        let both = iso.intersection(cpus);
                        if !both.is_empty() {
                            return Err(self.error(
                                span,
                                key,
                                format!("CPU(s) {both} are both isolated and reserved"),
                                "a CPU is either isolated (shielded) or reserved (housekeeping)",
                            ));
                        }
                    }
                    if cpus.is_empty() {
                        return Err(self.error(
                            span,
                            key,
                            "names no CPU".into(),
                            "reserve at least one housekeeping CPU, e.g. \"0\"",
                        ));
                    }
                    masks = masks.union(&ShieldMasks::all(&online.difference(cpus)));
                }
                _ => masks = masks.union(&ShieldMasks::all(cpus)),
            }
        }
        Ok(masks)
    }

    /// Refuses masks that shield a kind of work on every online CPU, at the
    /// last key that adds to it, and local-timer CPUs with the sysctls off.
    fn check_some_cpu_left(
        &self,
        masks: &ShieldMasks,
        spans: &[KeyCpus],
        online: &CpuSet,
    ) -> Result<(), ConfigError> {
        for (kind, own_key, mask) in [
            ("processes", "shield.procs", &masks.procs),
            ("interrupts", "shield.irqs", &masks.irqs),
            ("the local timer", "shield.ltmr", &masks.ltmr),
        ] {
            if !online.is_empty() && online.is_subset(mask) {
                // The last key that adds CPUs to this mask.
                let (key, span, _) = spans
                    .iter()
                    .rev()
                    .find(|(k, ..)| {
                        *k == own_key
                            || matches!(*k, "shield.all" | "shield.isolated" | "shield.reserved")
                    })
                    .expect("a non-empty mask has a key");
                return Err(self.error(
                    span,
                    key,
                    format!("shields {kind} on every online CPU ({online})"),
                    "leave at least one CPU unshielded for the rest of the system",
                ));
            }
        }
        let sysctls = &self.content.settings.ltmr_sysctls;
        if !*sysctls.get_ref() && !masks.ltmr.is_empty() {
            return Err(self.error(
                &sysctls.span(),
                "settings.ltmr_sysctls",
                format!(
                    "is false but the shield names local-timer CPUs ({})",
                    masks.ltmr
                ),
                "set ltmr_sysctls = true, or shield only procs and irqs",
            ));
        }
        Ok(())
    }

    /// What needs the shield: the grants' CPUs and the agent's latency CPU
    /// shielded from processes, `[runtime]` beside a shield (its per-CPU
    /// settings beside a process shield).
    fn check_uses_of_the_shield(&self, masks: &ShieldMasks) -> Result<(), ConfigError> {
        for grant in &self.content.access.grant {
            let cpus = self.cpus(&grant.cpus, "access.grant.cpus")?;
            let outside = cpus.difference(&masks.procs);
            if !outside.is_empty() {
                return Err(self.error(
                    &grant.cpus.span(),
                    "access.grant.cpus",
                    format!(
                        "CPU(s) {outside} are not shielded from processes (shield.procs: {})",
                        masks.procs
                    ),
                    "grant only shielded CPUs, or add them to the shield",
                ));
            }
        }
        if let Some(cpu) = &self.content.agent.latency_cpu {
            if !masks.procs.contains(*cpu.get_ref() as usize) {
                return Err(self.error(
                    &cpu.span(),
                    "agent.latency_cpu",
                    format!(
                        "CPU {} is not shielded from processes (shield.procs: {})",
                        cpu.get_ref(),
                        masks.procs
                    ),
                    "name a shielded CPU for the probe, or add it to the shield",
                ));
            }
        }
        let runtime = self.runtime();
        if !runtime.is_empty() && masks.is_empty() {
            return Err(ConfigError {
                file: self.file.clone(),
                line: self.runtime_line(""),
                key: "runtime".into(),
                problem: "a [runtime] section without a shield".into(),
                remedy:
                    "add a [shield] (reset restores the run-time settings together with the shield)"
                        .into(),
            });
        }
        if runtime.per_cpu() && masks.procs.is_empty() {
            return Err(ConfigError {
                file: self.file.clone(),
                line: self.runtime_line(""),
                key: "runtime".into(),
                problem: "per-CPU settings but no CPU is shielded from processes".into(),
                remedy: "shield the CPUs they are for (shield.all or shield.procs)".into(),
            });
        }
        Ok(())
    }

    /// Each `[[irq]]` pin: the IRQ by name or number, to online CPUs.
    fn irq_pins(&self, online: &CpuSet) -> Result<Vec<(IrqRef, CpuSet)>, ConfigError> {
        let mut irq_pins = Vec::new();
        for pin in &self.content.irq {
            let cpus = self.cpus(&pin.cpus, "irq.cpus")?;
            let offline = cpus.difference(online);
            if cpus.is_empty() || !offline.is_empty() {
                return Err(self.error(
                    &pin.cpus.span(),
                    "irq.cpus",
                    format!("{cpus} is empty or names offline CPUs (online: {online})"),
                    "name online CPUs for the IRQ",
                ));
            }
            let which = match (&pin.name, &pin.number) {
                (Some(n), None) => IrqRef::Name(n.get_ref().clone()),
                (None, Some(n)) => IrqRef::Number(*n.get_ref()),
                _ => {
                    return Err(self.error(
                        &pin.cpus.span(),
                        "irq",
                        "an [[irq]] needs exactly one of name and number".into(),
                        "write name = \"eth0-rx-0\" or number = 24",
                    ))
                }
            };
            irq_pins.push((which, cpus));
        }
        Ok(irq_pins)
    }
}

/// A `[shield]` key, where its value is in the file, and its CPUs.
type KeyCpus = (&'static str, Range<usize>, CpuSet);

/// One change `apply` makes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `cpushield shield` with these masks (added to the shield).
    Shield(ShieldMasks),
    /// `cpushield unshield` with these masks (removed from the shield).
    Unshield(ShieldMasks),
    /// `cpushield reset`: the file shields nothing, the shield goes.
    Reset,
}

/// The changes that make the shield match the file; empty when it already does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The changes, in order.
    pub changes: Vec<Change>,
}

impl Plan {
    /// Whether there is nothing to change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// One line per change and kind of shield, for `apply --dry-run`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for change in &self.changes {
            let (verb, masks) = match change {
                Change::Shield(m) => ("shield", m),
                Change::Unshield(m) => ("unshield", m),
                Change::Reset => {
                    out.push(
                        "reset: remove the shield and restore the state from before it".into(),
                    );
                    continue;
                }
            };
            for (what, mask) in [
                ("processes", &masks.procs),
                ("interrupts", &masks.irqs),
                ("the local timer", &masks.ltmr),
            ] {
                if !mask.is_empty() {
                    out.push(format!("{verb} CPU {mask} from {what}"));
                }
            }
        }
        out
    }
}

/// The changes that take the shield from `current` to `desired` on a machine
/// whose online CPUs are `online`. CPUs kept in both stay shielded throughout
/// when that is allowed (the shield grows first, then shrinks).
pub fn plan(current: &ShieldMasks, desired: &ShieldMasks, online: &CpuSet) -> Plan {
    if current == desired {
        return Plan::default();
    }
    if desired.is_empty() {
        return Plan {
            changes: vec![Change::Reset],
        };
    }
    let add = desired.difference(current);
    let remove = current.difference(desired);
    let grow = (!add.is_empty()).then_some(Change::Shield(add));
    let shrink = (!remove.is_empty()).then_some(Change::Unshield(remove));
    let union = current.union(desired);
    let grow_first = cpushield_shield::validate(&union, online).is_ok();
    let changes = if grow_first {
        [grow, shrink]
    } else {
        [shrink, grow]
    };
    Plan {
        changes: changes.into_iter().flatten().collect(),
    }
}

#[cfg(test)]
mod tests;
