//! `cpushield agent`: keeps the shield true and serves Prometheus metrics
//! (the loop is `cpushield_agent`; here only arguments and the config file).

use crate::args::EXIT_OK;
use clap::Args;
use cpushield_agent::{OnStop, Settings, Shared};
use cpushield_config::Config;
use cpushield_kernel::RealKernel;
use cpushield_shield::state::FileStore;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `cpushield agent`.
#[derive(Args)]
pub struct AgentArgs {
    /// The config file (its [agent] table); the default path may be absent.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Where to serve /metrics and /status (default: the file's, else 127.0.0.1:9477).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// How often to look (default: the file's, else 1s), e.g. 500ms.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    interval: Option<Duration>,
    /// Look once, print the corrections and metrics, and exit (no server).
    #[arg(long)]
    once: bool,
    /// The socket for unprivileged placement (default: the file's [access]
    /// socket, else /run/cpushield/agent.sock); served when [access] grants exist.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Run CMD (by /bin/sh -c, the reason in $CPUSHIELD_REASON) once when the
    /// probe's latency exceeds [agent] latency_limit or a finding breaks the
    /// shield; again only after that cleared. Only this flag names a command.
    #[arg(long, value_name = "CMD")]
    on_threshold: Option<String>,
    /// Also write the metrics to PATH for node_exporter's textfile collector
    /// (a temporary file renamed over it at every look).
    #[arg(long, value_name = "PATH")]
    textfile: Option<PathBuf>,
    /// Run check's analysis every N looks.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    check_every: u32,
    /// Benchmark hook: N looks back to back, no sleep and no server, printing
    /// the resident memory after one minute's worth and after all N.
    #[arg(long, value_name = "N", hide = true)]
    fast_forward: Option<u64>,
}

/// The config's grants with their groups resolved, and the socket's group id.
fn access_rules(config: &Config) -> anyhow::Result<(Vec<cpushield_agent::access::Rule>, u32)> {
    let gid = |name: &str| -> anyhow::Result<u32> {
        match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(g.gid.as_raw()),
            _ => anyhow::bail!(
                "{}: group {name:?} of [access] does not exist on this machine: create it (groupadd {name}) or correct the file",
                config.file
            ),
        }
    };
    let mut rules = Vec::new();
    for g in config.grants() {
        rules.push(cpushield_agent::access::Rule {
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

/// Runs `cpushield agent`.
pub fn agent(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(cpushield_config::DEFAULT_PATH));
    let config = match std::fs::read_to_string(&path) {
        Ok(text) => Some(Config::parse(&path.display().to_string(), &text)?),
        Err(_) if args.config.is_none() => None,
        Err(e) => anyhow::bail!(
            "cannot read the config file {} ({e}): create it (every key is described in \
             dist/cpushield.toml) or name another with --config PATH",
            path.display()
        ),
    };
    let agent_table = config.as_ref().map(|c| &c.content.agent);
    let listen = args.listen.unwrap_or_else(|| {
        config
            .as_ref()
            .map(|c| c.agent_listen())
            .unwrap_or_else(|| cpushield_config::DEFAULT_LISTEN.parse().expect("default"))
    });
    let interval = args
        .interval
        .or_else(|| {
            agent_table
                .and_then(|a| a.interval.as_ref())
                .and_then(|i| humantime::parse_duration(i.get_ref()).ok())
        })
        .unwrap_or(Duration::from_secs(1));
    if interval.is_zero() {
        anyhow::bail!("--interval 0 would look without pause: give a positive duration, e.g. 1s");
    }
    let on_stop = match agent_table.and_then(|a| a.on_stop.as_ref()) {
        Some(s) if s.get_ref() == "reset" => OnStop::Reset,
        _ => OnStop::Keep,
    };
    let mut settings = Settings::new(cpushield_shield::Options {
        is_root: nix::unistd::geteuid().is_root(),
        whole_cores: false,
    });
    settings.interval = interval;
    settings.once = args.once;
    settings.on_stop = on_stop;
    settings.check_every = args.check_every;
    settings.on_threshold = args.on_threshold.clone();
    settings.textfile = args.textfile.clone();
    settings.fast_forward = args.fast_forward;
    settings.probe = config.as_ref().and_then(|c| c.latency_probe()).map(|p| {
        cpushield_agent::probe::ProbeSettings {
            cpu: p.cpu,
            limit: p.limit,
            priority: p.priority,
            burst: 100,
            every: interval.max(Duration::from_millis(500)),
        }
    });
    if let Some(dir) = settings.textfile.as_ref().and_then(|p| p.parent()) {
        if !dir.as_os_str().is_empty() && !dir.is_dir() {
            anyhow::bail!(
                "--textfile {}: the directory {} does not exist: create it or name a file in node_exporter's --collector.textfile.directory",
                settings.textfile.as_ref().expect("set").display(),
                dir.display()
            );
        }
    }
    let shared = Shared::new(env!("CARGO_PKG_VERSION"));
    let store = FileStore::from_env();
    let kernel = RealKernel;
    if settings.once || settings.fast_forward.is_some() {
        let stop = std::sync::atomic::AtomicBool::new(false);
        cpushield_agent::run(&kernel, &store, shared.clone(), &settings, &stop)?;
        if settings.once {
            print!("{}", shared.metrics.lock().expect("metrics").render());
        }
        return Ok(ExitCode::from(EXIT_OK));
    }
    let access = match &config {
        Some(c) if !c.grants().is_empty() => Some((
            access_rules(c)?,
            args.socket.clone().unwrap_or_else(|| c.socket_path()),
        )),
        _ => None,
    };
    let stop = cpushield_agent::stop_on_signals()?;
    let server = cpushield_agent::server::start(listen, shared.clone())?;
    let socket = match access {
        Some(((rules, gid), path)) => {
            let running = cpushield_agent::socket::start(&RealKernel, &path, gid, rules);
            match running {
                Ok(r) => {
                    println!(
                        "cpushield agent: placing callers' own processes as [access] grants, on {}",
                        path.display()
                    );
                    Some(r)
                }
                Err(e) => {
                    server.stop();
                    return Err(e.into());
                }
            }
        }
        None => None,
    };
    println!(
        "cpushield agent: serving http://{}/metrics and /status, looking every {}",
        server.addr,
        humantime::format_duration(interval)
    );
    let result = cpushield_agent::run(&kernel, &store, shared, &settings, stop);
    server.stop();
    if let Some(s) = socket {
        s.stop();
    }
    result?;
    Ok(ExitCode::from(EXIT_OK))
}
