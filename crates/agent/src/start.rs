//! The agent's start-up: from what the command line chose and the config
//! file to a running loop, HTTP endpoint and placement socket, and their
//! orderly stop.

use crate::{access, probe, server, socket, OnStop, Settings, Shared};
use cpushield_config::Config;
use cpushield_kernel::Host;
use cpushield_rt::reserve::ReserveDir;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What the command line chose (`cpushield agent`'s options); `None` takes
/// the config file's value, else the default.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Choices {
    /// The config file (its [agent] table); the default path may be absent.
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub config: Option<PathBuf>,
    /// Where to serve /metrics and /status (default: the file's, else 127.0.0.1:9477).
    #[cfg_attr(feature = "clap", arg(long, value_name = "ADDR", value_parser = listen_arg))]
    pub listen: Option<SocketAddr>,
    /// How often to look, from 10ms to 365 days (default: the file's, else 1s), e.g. 500ms.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DURATION", value_parser = interval_arg))]
    pub interval: Option<Duration>,
    /// Look once, print the corrections and metrics, and exit (no server).
    #[cfg_attr(feature = "clap", arg(long))]
    pub once: bool,
    /// The socket for unprivileged placement (default: the file's [access]
    /// socket, else /run/cpushield/agent.sock); served when [access] grants exist.
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub socket: Option<PathBuf>,
    /// Run CMD (by /bin/sh -c, the reason in $CPUSHIELD_REASON) once when the
    /// probe's latency exceeds [agent] latency_limit or a finding breaks the
    /// shield; again only after that cleared. Only this flag names a command.
    #[cfg_attr(feature = "clap", arg(long, value_name = "CMD"))]
    pub on_threshold: Option<String>,
    /// Also write the metrics to PATH for node_exporter's textfile collector
    /// (a temporary file renamed over it at every look).
    #[cfg_attr(feature = "clap", arg(long, value_name = "PATH"))]
    pub textfile: Option<PathBuf>,
    /// Run check's analysis every N looks.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))
    )]
    pub check_every: u32,
    /// Benchmark hook: N looks back to back, no sleep and no server, printing
    /// the resident memory after one minute's worth and after all N.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", hide = true))]
    pub fast_forward: Option<u64>,
}

/// `--interval` on the command line: the config file's own check.
#[cfg(feature = "clap")]
fn interval_arg(text: &str) -> Result<Duration, String> {
    cpushield_config::parse_interval(text)
        .map_err(|problem| format!("{problem}: {}", cpushield_config::INTERVAL_REMEDY))
}

/// `--listen` on the command line: the config file's own check.
#[cfg(feature = "clap")]
fn listen_arg(text: &str) -> Result<SocketAddr, String> {
    cpushield_config::parse_listen(text)
        .map_err(|problem| format!("{problem}: {}", cpushield_config::LISTEN_REMEDY))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// The config file the agent reads: `--config`'s (it must be there), or the
/// default path's if there is one.
fn read_config(choices: &Choices) -> io::Result<Option<Config>> {
    let path = choices
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(cpushield_config::DEFAULT_PATH));
    match cpushield_config::read_file(&path) {
        Ok(bytes) => Config::from_bytes(&path.display().to_string(), &bytes)
            .and_then(|c| c.check_groups(&cpushield_kernel::group_exists).map(|()| c))
            .map(Some)
            .map_err(|e| invalid(e.to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound && choices.config.is_none() => Ok(None),
        Err(e) => Err(invalid(cpushield_config::unreadable(&path, &e))),
    }
}

/// The config's grants with their groups resolved, and the socket's group id.
fn access_rules(config: &Config) -> io::Result<(Vec<access::Rule>, u32)> {
    let gid = |name: &str| -> io::Result<u32> {
        match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(g.gid.as_raw()),
            _ => Err(invalid(format!(
                "{}: group {name:?} of [access] does not exist on this machine: create it (groupadd {name}) or correct the file",
                config.file
            ))),
        }
    };
    let mut rules = Vec::new();
    for g in config.grants() {
        rules.push(access::Rule {
            gid: gid(&g.group)?,
            group: g.group,
            cpus: g.cpus,
            max_priority: g.max_priority,
        });
    }
    let socket_gid = match config.socket_group() {
        Some(name) => gid(&name)?,
        None => 0,
    };
    Ok((rules, socket_gid))
}

/// The loop's settings from the command line's choices over the file's.
fn settings(choices: &Choices, config: Option<&Config>) -> io::Result<Settings> {
    let interval = choices
        .interval
        .or_else(|| config.and_then(Config::agent_interval))
        .unwrap_or(Duration::from_secs(1));
    let mut settings = Settings::new(cpushield_shield::Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores: false,
    });
    settings.interval = interval;
    settings.once = choices.once;
    settings.on_stop = match config.is_some_and(Config::agent_resets_on_stop) {
        true => OnStop::Reset,
        false => OnStop::Keep,
    };
    settings.check_every = choices.check_every.max(1);
    settings.on_threshold = choices.on_threshold.clone();
    settings.textfile = choices.textfile.clone();
    settings.fast_forward = choices.fast_forward;
    settings.probe = config
        .and_then(Config::latency_probe)
        .map(|p| probe::ProbeSettings {
            cpu: p.cpu,
            limit: p.limit,
            priority: p.priority,
            burst: 100,
            every: interval.max(Duration::from_millis(500)),
        });
    if let Some(file) = &settings.textfile {
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(invalid(format!(
                    "--textfile {}: the directory {} does not exist: create it or name a file in node_exporter's --collector.textfile.directory",
                    file.display(),
                    dir.display()
                )));
            }
        }
    }
    Ok(settings)
}

/// Runs `cpushield agent` until SIGTERM or SIGINT (or one look with
/// `--once`, or the looks of `--fast-forward`). Returns the metrics to print
/// after a `--once` look. Every error is one line naming the input and the
/// remedy, with nothing started.
pub fn run(
    host: &Host,
    reserves: ReserveDir,
    choices: &Choices,
    version: &str,
) -> io::Result<Option<String>> {
    let config = read_config(choices)?;
    let settings = settings(choices, config.as_ref())?;
    let shared = Shared::new(version);
    if settings.once || settings.fast_forward.is_some() {
        let stop = AtomicBool::new(false);
        crate::run(host, shared.clone(), &settings, &stop)?;
        return Ok(settings.once.then(|| crate::lock(&shared.metrics).render()));
    }
    let listen = choices.listen.unwrap_or_else(|| match &config {
        Some(c) => c.agent_listen(),
        None => cpushield_config::DEFAULT_LISTEN
            .parse()
            .expect("the default address parses"),
    });
    let access = match &config {
        Some(c) if !c.grants().is_empty() => Some((
            access_rules(c)?,
            choices.socket.clone().unwrap_or_else(|| c.socket_path()),
        )),
        _ => None,
    };
    let stop = crate::stop_on_signals()?;
    let server = server::start(listen, shared.clone(), server::Limits::default())?;
    let socket = match access {
        Some(((rules, gid), path)) => match socket::start(host, reserves, &path, gid, rules) {
            Ok(running) => {
                println!(
                    "cpushield agent: placing callers' own processes as [access] grants, on {}",
                    path.display()
                );
                Some(running)
            }
            Err(e) => {
                server.stop();
                return Err(e);
            }
        },
        None => None,
    };
    println!(
        "cpushield agent: serving http://{}/metrics and /status, looking every {}",
        server.addr,
        humantime::format_duration(settings.interval)
    );
    let result = crate::run(host, shared, &settings, stop);
    server.stop();
    if let Some(s) = socket {
        s.stop();
    }
    result.map(|()| None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Config {
        Config::parse("/etc/cpushield/cpushield.toml", text).unwrap()
    }

    #[test]
    fn the_command_lines_interval_wins_over_the_files_and_the_default_is_one_second() {
        let config = parsed("[agent]\ninterval = \"250ms\"\non_stop = \"reset\"\n");
        let mut choices = Choices::default();
        let s = settings(&choices, Some(&config)).unwrap();
        assert_eq!(s.interval, Duration::from_millis(250));
        assert_eq!(s.on_stop, OnStop::Reset);
        choices.interval = Some(Duration::from_secs(3));
        assert_eq!(
            settings(&choices, Some(&config)).unwrap().interval,
            Duration::from_secs(3)
        );
        let s = settings(&Choices::default(), None).unwrap();
        assert_eq!(
            (s.interval, s.on_stop),
            (Duration::from_secs(1), OnStop::Keep)
        );
    }

    #[test]
    fn a_named_config_file_must_be_there_and_be_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut choices = Choices {
            config: Some(dir.path().to_path_buf()),
            ..Choices::default()
        };
        let err = read_config(&choices).unwrap_err().to_string();
        assert!(err.contains("is a directory, not a file"), "{err}");
        choices.config = Some(dir.path().join("absent.toml"));
        let err = read_config(&choices).unwrap_err().to_string();
        assert!(err.contains("does not exist: create it"), "{err}");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, b"[agent]\n\xfe = 1\n").unwrap();
        choices.config = Some(bad);
        let err = read_config(&choices).unwrap_err().to_string();
        assert!(err.contains(":2: not UTF-8 text: byte 8 (0xfe)"), "{err}");
    }

    #[test]
    fn a_textfile_in_a_missing_directory_is_refused_before_anything_starts() {
        let choices = Choices {
            textfile: Some(PathBuf::from("/nonexistent-dir/cpushield.prom")),
            ..Choices::default()
        };
        let err = settings(&choices, None).unwrap_err().to_string();
        assert!(
            err.contains("the directory /nonexistent-dir does not exist"),
            "{err}"
        );
    }
}
