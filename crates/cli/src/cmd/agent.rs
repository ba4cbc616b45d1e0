//! `cpushield agent`: keeps the shield true and serves Prometheus metrics
//! (the start-up and the loop are `cpushield_agent`; here only the arguments
//! and what `--once` prints).

use crate::args::EXIT_OK;
use clap::Args;
use cpushield_agent::start::Choices;
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
    #[arg(long, value_name = "ADDR", value_parser = listen)]
    listen: Option<SocketAddr>,
    /// How often to look, from 10ms to 365 days (default: the file's, else 1s), e.g. 500ms.
    #[arg(long, value_name = "DURATION", value_parser = interval)]
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

/// clap value parser of `--interval`: the config file's own check.
fn interval(text: &str) -> Result<Duration, String> {
    cpushield_config::parse_interval(text)
        .map_err(|problem| format!("{problem}: {}", cpushield_config::INTERVAL_REMEDY))
}

/// clap value parser of `--listen`: the config file's own check.
fn listen(text: &str) -> Result<SocketAddr, String> {
    cpushield_config::parse_listen(text)
        .map_err(|problem| format!("{problem}: {}", cpushield_config::LISTEN_REMEDY))
}

/// Runs `cpushield agent`.
pub fn agent(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let choices = Choices {
        config: args.config,
        listen: args.listen,
        interval: args.interval,
        once: args.once,
        socket: args.socket,
        on_threshold: args.on_threshold,
        textfile: args.textfile,
        check_every: args.check_every,
        fast_forward: args.fast_forward,
    };
    if let Some(metrics) = cpushield_agent::start::run(
        &crate::host::real(),
        crate::host::reserves(),
        &choices,
        env!("CARGO_PKG_VERSION"),
    )? {
        print!("{metrics}");
    }
    Ok(ExitCode::from(EXIT_OK))
}
