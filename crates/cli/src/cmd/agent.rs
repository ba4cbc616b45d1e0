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
    let settings = Settings {
        interval,
        once: args.once,
        on_stop,
        options: cpushield_shield::Options {
            is_root: nix::unistd::geteuid().is_root(),
            whole_cores: false,
        },
    };
    let shared = Shared::new(env!("CARGO_PKG_VERSION"));
    let store = FileStore::from_env();
    let kernel = RealKernel;
    if settings.once {
        let stop = std::sync::atomic::AtomicBool::new(false);
        cpushield_agent::run(&kernel, &store, shared.clone(), &settings, &stop)?;
        print!("{}", shared.metrics.lock().expect("metrics").render());
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
