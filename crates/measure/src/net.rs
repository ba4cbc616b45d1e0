//! `measure net` (the Hyades paper's messaging test): ping-pong between two
//! endpoints, UDP and TCP, for message sizes from 64 B to 64 KiB. Each round
//! trip is timed (clock read right before the send, right after the reply is
//! in) into the same exact histogram as the other probes; throughput follows
//! from the round trips per second and the size.
//!
//! The endpoints are two threads, each placed on its CPU the way the other
//! probes place theirs (a config's `placer` enters a shield's cpuset), at
//! SCHED_FIFO if asked. They talk over loopback ([`Link::Loopback`]), over a
//! veth pair between two network namespaces made for the run ([`Link::Veth`],
//! see [`veth`]), or the client talks to `cpushield measure net --listen PORT`
//! on another machine ([`Link::Peer`], served by [`serve`]).
//!
//! The echo loops are lean: blocking send and receive on buffers allocated
//! before the loop, no allocation or extra system call per message. A UDP
//! message carries a sequence number in its first 8 bytes so a late echo of a
//! lost datagram is never timed as the reply to a newer one. A TCP connection
//! starts with an 8-byte header (`CPSN`, the size as u32 big-endian) so the
//! server knows how much to echo; one connection per size.

pub mod veth;

use crate::distribution::Distribution;
use crate::error::MeasureError;
use crate::harness::{
    self, enter_measuring_thread, is_root, unix_now_ns, AppliedPolicy, ControlPlacement,
    ProcessSetup,
};
use crate::recorder::Recorder;
use crate::run_info::{kernel_release, RunInfo};
use crate::warnings::{self, Warning};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_rt::clock::now_ns;
use cpushield_rt::sched::PlaceFn;
use serde::{Deserialize, Serialize};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The default message sizes: 64 B, 256 B, 1 KiB, 4 KiB, 16 KiB, 64 KiB.
pub const DEFAULT_SIZES: [usize; 6] = [64, 256, 1024, 4096, 16384, 65536];
/// The smallest message: room for the sequence number.
pub const MIN_SIZE: usize = 8;
/// The largest message.
pub const MAX_SIZE: usize = 65536;
/// The largest UDP payload over IPv4; a larger UDP size is sent as this.
pub const UDP_MAX: usize = 65507;
/// The TCP connection header's magic.
const MAGIC: [u8; 4] = *b"CPSN";
/// How long a blocked receive waits before looking at the stop flag (and, for
/// a UDP client, counting the datagram as lost and sending the next).
const POLL: Duration = Duration::from_millis(200);
/// How long a client waits for any reply before giving up on the server.
const SILENCE: Duration = Duration::from_secs(5);
/// Stack size of an endpoint thread.
const STACK_BYTES: usize = 512 * 1024;

/// A transport protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Protocol {
    /// UDP datagrams: one message, one datagram.
    // `--protocols` lists the words alone, without these descriptions.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Udp,
    /// A TCP stream with TCP_NODELAY.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Tcp,
}

impl Protocol {
    /// Both, in the order they run.
    pub const ALL: [Protocol; 2] = [Protocol::Udp, Protocol::Tcp];

    /// "udp" or "tcp".
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Tcp => "tcp",
        }
    }

    /// The size actually sent for a requested size (UDP is capped at [`UDP_MAX`]).
    pub fn wire_size(self, requested: usize) -> usize {
        match self {
            Protocol::Udp => requested.min(UDP_MAX),
            Protocol::Tcp => requested,
        }
    }
}

/// Where the two endpoints talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "address")]
pub enum Link {
    /// Both endpoints on this machine, over 127.0.0.1.
    Loopback,
    /// Both endpoints on this machine, each in its own network namespace, over
    /// a veth pair the run creates and removes.
    Veth,
    /// Only the client here; the server is `measure net --listen` at this address.
    Peer(SocketAddr),
}

impl Link {
    /// The link `--peer` or `--veth` names; loopback when neither does.
    pub fn from_options(peer: Option<&str>, veth: bool) -> Result<Link, String> {
        Ok(match (peer, veth) {
            (Some(peer), _) => Link::Peer(resolve_peer(peer)?),
            (None, true) => Link::Veth,
            (None, false) => Link::Loopback,
        })
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Loopback => write!(f, "loopback"),
            Link::Veth => write!(f, "veth pair between two network namespaces"),
            Link::Peer(a) => write!(f, "peer {a}"),
        }
    }
}

/// Configuration of a `measure net` run.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// CPU of the client (the timing end).
    pub client_cpu: usize,
    /// CPU of the server (echo) end; unused with [`Link::Peer`].
    pub server_cpu: usize,
    /// Where the endpoints talk.
    pub link: Link,
    /// Protocols, run in this order.
    pub protocols: Vec<Protocol>,
    /// Message sizes in bytes, run in this order for each protocol.
    pub sizes: Vec<usize>,
    /// How long to measure each size and protocol (default 1 s).
    pub duration: Duration,
    /// Round trips before each measurement, not recorded (default 1000).
    pub warmup: u64,
    /// SCHED_FIFO priority of both endpoints (None: SCHED_OTHER).
    pub priority: Option<u8>,
    /// Lock all memory for the run (default true).
    pub lock_memory: bool,
    /// How the endpoint threads reach their CPUs (None: plain affinity).
    pub placer: Option<PlaceFn>,
}

impl NetConfig {
    /// Defaults (UDP and TCP, [`DEFAULT_SIZES`], 1 s each, loopback,
    /// SCHED_OTHER) with the client on `client_cpu`, the server on `server_cpu`.
    pub fn new(client_cpu: usize, server_cpu: usize) -> Self {
        Self {
            client_cpu,
            server_cpu,
            link: Link::Loopback,
            protocols: Protocol::ALL.to_vec(),
            sizes: DEFAULT_SIZES.to_vec(),
            duration: Duration::from_secs(1),
            warmup: 1000,
            priority: None,
            lock_memory: true,
            placer: None,
        }
    }

    /// The CPUs the endpoints run on.
    pub fn cpus(&self) -> CpuSet {
        match self.link {
            Link::Peer(_) => CpuSet::from_cpus([self.client_cpu]),
            _ => CpuSet::from_cpus([self.client_cpu, self.server_cpu]),
        }
    }

    /// Checks the configuration; the error names the input and the remedy.
    pub fn validate(&self, online: &CpuSet) -> Result<(), MeasureError> {
        warnings::validate_cpus(&self.cpus(), online).map_err(MeasureError::Config)?;
        if self.protocols.is_empty() {
            return Err(MeasureError::Config(
                "no protocol to measure: use --protocols udp,tcp".into(),
            ));
        }
        if self.sizes.is_empty() {
            return Err(MeasureError::Config(
                "no message size to measure: use e.g. --sizes 64,1K,64K".into(),
            ));
        }
        validate_sizes(&self.sizes).map_err(MeasureError::Config)?;
        if let Link::Peer(peer) = self.link {
            if peer.port() == 0 {
                return Err(MeasureError::Config(format!(
                    "--peer {peer}: port 0 reaches no server: give the port `cpushield measure net --listen PORT` listens on there, e.g. --peer {}:7000",
                    peer.ip()
                )));
            }
        }
        if self.duration.is_zero() {
            return Err(MeasureError::Config(
                "--duration must be longer than 0: use e.g. --duration 1s".into(),
            ));
        }
        harness::check_priority(self.priority)?;
        Ok(())
    }
}

/// Checks message sizes: each from [`MIN_SIZE`] to [`MAX_SIZE`].
pub fn validate_sizes(sizes: &[usize]) -> Result<(), String> {
    for &s in sizes {
        if !(MIN_SIZE..=MAX_SIZE).contains(&s) {
            return Err(format!(
                "--sizes {s}: a message is {MIN_SIZE} B to {MAX_SIZE} B (64K); use e.g. --sizes 64,1K,64K"
            ));
        }
    }
    Ok(())
}

/// Parses `--cpus A,B` (the client's and the server's CPU) or `A` (both on A).
pub fn parse_endpoint_cpus(text: &str) -> Result<(usize, usize), String> {
    let bad = || {
        format!("'{text}' is not an endpoint pair: give the client's and the server's CPU, e.g. --cpus 1,1 or --cpus 2,3")
    };
    let mut parts = text.split(',').map(|p| p.trim().parse::<usize>());
    let a = parts.next().ok_or_else(bad)?.map_err(|_| bad())?;
    let b = match parts.next() {
        Some(b) => b.map_err(|_| bad())?,
        None => a,
    };
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok((a, b))
}

/// `--peer HOST:PORT` to an address (the first the name resolves to).
pub fn resolve_peer(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let bad = || {
        format!(
            "--peer '{text}' is not HOST:PORT: give the machine running `cpushield measure net --listen PORT`, e.g. --peer 192.0.2.7:7000"
        )
    };
    let mut addrs = text.to_socket_addrs().map_err(|_| bad())?;
    addrs.next().ok_or_else(bad)
}

/// Parses a size list such as `64,256,1K,4K,16K,64K` (K = 1024 bytes).
pub fn parse_sizes(text: &str) -> Result<Vec<usize>, String> {
    let bad = |item: &str| {
        format!(
            "--sizes '{item}' is not a size: use byte counts or K (1024), e.g. --sizes 64,1K,64K"
        )
    };
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let upper = item.to_ascii_uppercase();
        let (digits, scale) = match upper.strip_suffix('K') {
            Some(d) => (d, 1024),
            None => (upper.as_str(), 1),
        };
        let n: usize = digits.parse().map_err(|_| bad(item))?;
        out.push(n.checked_mul(scale).ok_or_else(|| bad(item))?);
    }
    validate_sizes(&out)?;
    Ok(out)
}

/// The configuration as recorded in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetSettings {
    /// CPU of the client.
    pub client_cpu: usize,
    /// CPU of the server (None with a peer).
    pub server_cpu: Option<usize>,
    /// Where the endpoints talked.
    pub link: Link,
    /// Protocols in run order.
    pub protocols: Vec<Protocol>,
    /// Requested sizes in bytes.
    pub sizes: Vec<usize>,
    /// Measuring time per size and protocol, in nanoseconds.
    pub duration_ns: u64,
    /// Unrecorded round trips before each measurement.
    pub warmup: u64,
    /// Requested SCHED_FIFO priority (None: SCHED_OTHER).
    pub priority: Option<u8>,
}

/// One size and protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetResult {
    /// The protocol.
    pub protocol: Protocol,
    /// The size asked for, in bytes.
    pub requested_bytes: usize,
    /// The size sent each way, in bytes (UDP caps 64 KiB at 65507).
    pub size_bytes: usize,
    /// UDP datagrams sent whose echo did not come within 200 ms (not timed).
    pub lost: u64,
    /// How long the timed round trips took together, in nanoseconds.
    pub elapsed_ns: u64,
    /// Round-trip times.
    pub rtt: Distribution,
    /// Round trips per second.
    pub round_trips_per_s: f64,
    /// Payload bytes per second in each direction.
    pub bytes_per_s: f64,
}

/// The result of a `measure net` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetReport {
    /// What was asked for.
    pub settings: NetSettings,
    /// When, how long, interrupted or not, warnings.
    pub run: RunInfo,
    /// The scheduling the client had.
    pub client: AppliedPolicy,
    /// The scheduling the server had (None with a peer).
    pub server: Option<AppliedPolicy>,
    /// One entry per protocol and size, in run order.
    pub results: Vec<NetResult>,
}

/// Where the client finds the servers.
#[derive(Debug, Clone, Copy)]
struct Targets {
    udp: SocketAddr,
    tcp: SocketAddr,
}

fn system(what: impl Into<String>) -> impl FnOnce(io::Error) -> MeasureError {
    let what = what.into();
    move |error| MeasureError::System { what, error }
}

/// Runs every protocol and size, or until `stop` is set (what was measured so
/// far is reported).
pub fn run(host: &Host, config: &NetConfig, stop: &AtomicBool) -> Result<NetReport, MeasureError> {
    let kernel = host.kernel();
    let cpus = config.cpus();
    let view = warnings::read_view(kernel, &cpus)?;
    config.validate(&view.online)?;
    let mut warns = warnings::before_run(&view, &cpus, is_root(), None);
    let setup = ProcessSetup::enter(config.lock_memory, true);
    warns.extend(setup.warnings.iter().cloned());
    let _placement =
        ControlPlacement::enter(host, warnings::control_cpus(&cpus, &view.online).as_ref());
    let veth = match config.link {
        Link::Veth => Some(veth::VethPair::create().map_err(system(
            "creating the network namespaces and veth pair (--veth needs root and iproute2)",
        ))?),
        _ => None,
    };
    let (client_ns, server_ns) = veth
        .as_ref()
        .map(|v| (v.client_ns(), v.server_ns()))
        .unzip();
    let server_stop = AtomicBool::new(false);
    let stopped = || stop.load(Ordering::Relaxed) || server_stop.load(Ordering::Relaxed);
    let started_unix_ns = unix_now_ns();
    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let mut servers = Vec::new();
        let targets = match config.link {
            Link::Peer(addr) => Targets {
                udp: addr,
                tcp: addr,
            },
            Link::Loopback | Link::Veth => {
                let ip = match config.link {
                    Link::Veth => veth::SERVER_IP,
                    _ => Ipv4Addr::LOCALHOST,
                };
                let (tx, rx) = mpsc::channel();
                for protocol in Protocol::ALL {
                    let tx = tx.clone();
                    let stopped = &stopped;
                    let spawned = std::thread::Builder::new()
                        .name(format!("cpushield-net-{}", protocol.name()))
                        .stack_size(STACK_BYTES)
                        .spawn_scoped(scope, move || {
                            server(protocol, config, server_ns, ip, stopped, &tx)
                        })
                        .map_err(MeasureError::Spawn);
                    match spawned {
                        Ok(h) => servers.push(h),
                        Err(e) => {
                            server_stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                }
                drop(tx);
                match servers_ready(&rx, SERVERS_START_WITHIN) {
                    Ok(targets) => targets,
                    Err(e) => {
                        server_stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
        };
        let client = std::thread::Builder::new()
            .name("cpushield-net-client".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, move || client(config, client_ns, targets, stop))
            .map_err(MeasureError::Spawn);
        let client = client.and_then(|h| {
            h.join()
                .map_err(|_| MeasureError::Thread("the net client panicked".into()))?
        });
        server_stop.store(true, Ordering::Relaxed);
        let (server_applied, mut server_warnings) = join_servers(servers)?;
        let (client_applied, client_warning, results) = client?;
        server_warnings.extend(client_warning);
        Ok((client_applied, server_applied, server_warnings, results))
    });
    drop(veth);
    let (client, server, thread_warnings, results) = outcome?;
    warns.extend(thread_warnings);
    Ok(NetReport {
        settings: settings(config),
        run: RunInfo {
            started_unix_ns,
            elapsed_ns: started.elapsed().as_nanos() as u64,
            interrupted: stop.load(Ordering::Relaxed),
            kernel_release: kernel_release(kernel),
            warnings: warns,
        },
        client,
        server,
        results,
    })
}

/// How long the echo servers have to bind their ports.
const SERVERS_START_WITHIN: Duration = Duration::from_secs(10);

/// What the report says the run was asked for (no server CPU when the
/// server is a peer's).
fn settings(config: &NetConfig) -> NetSettings {
    NetSettings {
        client_cpu: config.client_cpu,
        server_cpu: (!matches!(config.link, Link::Peer(_))).then_some(config.server_cpu),
        link: config.link,
        protocols: config.protocols.clone(),
        sizes: config.sizes.clone(),
        duration_ns: config.duration.as_nanos().min(u64::MAX as u128) as u64,
        warmup: config.warmup,
        priority: config.priority,
    }
}

/// What a server thread tells the run: the address its protocol listens
/// on, or why it could not start.
type ServerReady = Result<(Protocol, SocketAddr), MeasureError>;

/// One echo server thread: placed and in its namespace, it serves
/// `protocol` on `ip` until `stopped`, having sent its address on `ready`
/// (or why it could not start, and then it returns nothing applied).
fn server(
    protocol: Protocol,
    config: &NetConfig,
    ns: Option<&str>,
    ip: Ipv4Addr,
    stopped: &dyn Fn() -> bool,
    ready: &mpsc::Sender<ServerReady>,
) -> ServerEnd {
    let (applied, warning) = match enter_endpoint(config.server_cpu, config, ns, "server") {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok((None, None));
        }
    };
    serve_one(protocol, SocketAddr::from((ip, 0)), stopped, |addr| {
        let _ = ready.send(Ok((protocol, addr)));
    })
    .map_err(system(format!("the {} echo server", protocol.name())))?;
    Ok((Some(applied), warning))
}

/// The addresses of the UDP and TCP servers once both have sent theirs; the
/// first server's error, or a timeout when they are not both there `within`.
fn servers_ready(
    rx: &mpsc::Receiver<ServerReady>,
    within: Duration,
) -> Result<Targets, MeasureError> {
    let mut udp = None;
    let mut tcp = None;
    while udp.is_none() || tcp.is_none() {
        match rx.recv_timeout(within) {
            Ok(Ok((Protocol::Udp, a))) => udp = Some(a),
            Ok(Ok((Protocol::Tcp, a))) => tcp = Some(a),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(MeasureError::Thread(format!(
                    "the echo servers did not start within {} s",
                    within.as_secs()
                )))
            }
        }
    }
    Ok(Targets {
        udp: udp.expect("set above"),
        tcp: tcp.expect("set above"),
    })
}

/// The client thread: placed and in its namespace, it runs every protocol
/// and size against `targets`.
fn client(
    config: &NetConfig,
    ns: Option<&str>,
    targets: Targets,
    stop: &AtomicBool,
) -> Result<(AppliedPolicy, Option<Warning>, Vec<NetResult>), MeasureError> {
    let (applied, warning) = enter_endpoint(config.client_cpu, config, ns, "client")?;
    Ok((applied, warning, client_runs(config, targets, stop)?))
}

/// What one server thread ends with: how it was placed (None when it could
/// not start), and its warning.
type ServerEnd = Result<(Option<AppliedPolicy>, Option<Warning>), MeasureError>;

/// Waits for the stopped server threads: the first placement any reports,
/// and every warning.
fn join_servers(
    servers: Vec<std::thread::ScopedJoinHandle<'_, ServerEnd>>,
) -> Result<(Option<AppliedPolicy>, Vec<Warning>), MeasureError> {
    let mut applied = None;
    let mut warnings = Vec::new();
    for h in servers {
        let (a, warning) = h
            .join()
            .map_err(|_| MeasureError::Thread("a net server panicked".into()))??;
        applied = applied.or(a);
        warnings.extend(warning);
    }
    Ok((applied, warnings))
}

/// Places the calling endpoint thread (CPU, policy, stop signals blocked) and
/// moves it into its network namespace, if any.
fn enter_endpoint(
    cpu: usize,
    config: &NetConfig,
    ns: Option<&str>,
    role: &str,
) -> Result<(AppliedPolicy, Option<Warning>), MeasureError> {
    let entered = enter_measuring_thread(cpu, config.priority, config.placer.clone())?;
    if let Some(ns) = ns {
        veth::enter(ns).map_err(system(format!(
            "moving the {role} into its network namespace"
        )))?;
    }
    Ok(entered)
}

/// The client's runs: every protocol, every size.
fn client_runs(
    config: &NetConfig,
    targets: Targets,
    stop: &AtomicBool,
) -> Result<Vec<NetResult>, MeasureError> {
    let mut buf = vec![0u8; MAX_SIZE];
    let mut results = Vec::new();
    let duration_ns = config.duration.as_nanos().min(u64::MAX as u128) as u64;
    for &protocol in &config.protocols {
        for &requested in &config.sizes {
            if stop.load(Ordering::Relaxed) {
                return Ok(results);
            }
            let size = protocol.wire_size(requested);
            let msg = &mut buf[..size];
            let mut rec = Recorder::new();
            let what = || format!("{} ping-pong of {size} B", protocol.name());
            let (elapsed, lost) = match protocol {
                Protocol::Udp => {
                    udp_ping_pong(targets.udp, msg, config.warmup, duration_ns, stop, &mut rec)
                }
                Protocol::Tcp => {
                    tcp_ping_pong(targets.tcp, msg, config.warmup, duration_ns, stop, &mut rec)
                }
            }
            .map_err(|error| match config.link {
                Link::Peer(peer)
                    if matches!(
                        error.kind(),
                        ErrorKind::ConnectionRefused | ErrorKind::TimedOut
                    ) =>
                {
                    MeasureError::Peer {
                        what: what(),
                        peer,
                        error,
                    }
                }
                _ => system(what())(error),
            })?;
            results.push(result(protocol, requested, size, lost, elapsed, &rec));
        }
    }
    Ok(results)
}

fn result(
    protocol: Protocol,
    requested: usize,
    size: usize,
    lost: u64,
    elapsed_ns: u64,
    rec: &Recorder,
) -> NetResult {
    let secs = elapsed_ns as f64 / 1e9;
    let rate = if secs > 0.0 {
        rec.count() as f64 / secs
    } else {
        0.0
    };
    NetResult {
        protocol,
        requested_bytes: requested,
        size_bytes: size,
        lost,
        elapsed_ns,
        rtt: rec.finish(),
        round_trips_per_s: rate,
        bytes_per_s: rate * size as f64,
    }
}

fn set_recv_timeout(socket: &impl std::os::fd::AsFd, timeout: Duration) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimeout};
    use nix::sys::time::{TimeVal, TimeValLike};
    let tv = TimeVal::microseconds(timeout.as_micros() as i64);
    setsockopt(socket, ReceiveTimeout, &tv).map_err(io::Error::from)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Fills `buf` from `stream`, looking at `stopped` whenever a receive times
/// out. Returns false on a clean end of stream before the first byte (or when
/// stopped), and an error after [`SILENCE`] without data if `give_up`.
fn read_full(
    stream: &mut TcpStream,
    buf: &mut [u8],
    stopped: &dyn Fn() -> bool,
    give_up: bool,
) -> io::Result<bool> {
    let mut got = 0;
    let mut quiet = Duration::ZERO;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                got += n;
                quiet = Duration::ZERO;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if stopped() {
                    return Ok(false);
                }
                quiet += POLL;
                if give_up && quiet >= SILENCE {
                    return Err(io::Error::new(
                        ErrorKind::TimedOut,
                        "no reply from the server for 5 s",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// TCP ping-pong: header, warm-up, then timed round trips until `duration_ns`
/// has passed or `stop` is set. Returns (timed elapsed ns, 0).
fn tcp_ping_pong(
    addr: SocketAddr,
    msg: &mut [u8],
    warmup: u64,
    duration_ns: u64,
    stop: &AtomicBool,
    rec: &mut Recorder,
) -> io::Result<(u64, u64)> {
    let mut stream = TcpStream::connect_timeout(&addr, SILENCE)?;
    stream.set_nodelay(true)?;
    set_recv_timeout(&stream, POLL)?;
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&MAGIC);
    header[4..].copy_from_slice(&(msg.len() as u32).to_be_bytes());
    stream.write_all(&header)?;
    msg.fill(0x5a);
    let stopped = || stop.load(Ordering::Relaxed);
    for _ in 0..warmup {
        stream.write_all(msg)?;
        if !read_full(&mut stream, msg, &stopped, true)? {
            return Ok((0, 0));
        }
    }
    let start = now_ns();
    let end = start.saturating_add(duration_ns);
    let mut index = 0u64;
    let mut t1 = start;
    loop {
        let t0 = now_ns();
        stream.write_all(msg)?;
        if !read_full(&mut stream, msg, &stopped, true)? {
            break;
        }
        t1 = now_ns();
        rec.record(t1 - t0, t1 - start, index);
        index += 1;
        if t1 >= end || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok((t1 - start, 0))
}

/// UDP ping-pong: warm-up, then timed round trips. A datagram whose echo does
/// not come within [`POLL`] is counted lost and the next one is sent; late
/// echoes (an older sequence number) are dropped. Returns (timed elapsed ns,
/// lost).
fn udp_ping_pong(
    addr: SocketAddr,
    msg: &mut [u8],
    warmup: u64,
    duration_ns: u64,
    stop: &AtomicBool,
    rec: &mut Recorder,
) -> io::Result<(u64, u64)> {
    let local: SocketAddr = match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local)?;
    sock.connect(addr)?;
    set_recv_timeout(&sock, POLL)?;
    msg.fill(0x5a);
    let mut seq = 0u64;
    let mut lost = 0u64;
    let mut quiet = Duration::ZERO;
    // One round trip: Some(true) answered, Some(false) lost, None stopped.
    let mut round_trip = |msg: &mut [u8], seq: u64| -> io::Result<Option<bool>> {
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        sock.send(msg)?;
        loop {
            match sock.recv(msg) {
                Ok(n) if n >= 8 && msg[..8] == seq.to_le_bytes() => {
                    quiet = Duration::ZERO;
                    return Ok(Some(true));
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(None);
                    }
                    quiet += POLL;
                    if quiet >= SILENCE {
                        return Err(io::Error::new(
                            ErrorKind::TimedOut,
                            "no reply from the server for 5 s",
                        ));
                    }
                    return Ok(Some(false));
                }
                // An ICMP port unreachable from an earlier datagram.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    quiet += POLL;
                    if quiet >= SILENCE {
                        return Err(e);
                    }
                    std::thread::sleep(POLL);
                    return Ok(Some(false));
                }
                Err(e) => return Err(e),
            }
        }
    };
    for _ in 0..warmup {
        seq += 1;
        if round_trip(msg, seq)?.is_none() {
            return Ok((0, 0));
        }
    }
    let start = now_ns();
    let end = start.saturating_add(duration_ns);
    let mut index = 0u64;
    let mut t1 = start;
    loop {
        seq += 1;
        let t0 = now_ns();
        match round_trip(msg, seq)? {
            Some(true) => {
                t1 = now_ns();
                rec.record(t1 - t0, t1 - start, index);
                index += 1;
            }
            Some(false) => {
                lost += 1;
                t1 = now_ns();
            }
            None => break,
        }
        if t1 >= end || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok((t1 - start, lost))
}

/// Serves one protocol on `bind` until `stopped()`: echoes every UDP datagram
/// to its sender, or every TCP connection's messages back on it (connections
/// one after the other). `ready` gets the bound address.
fn serve_one(
    protocol: Protocol,
    bind: SocketAddr,
    stopped: &dyn Fn() -> bool,
    ready: impl FnOnce(SocketAddr),
) -> io::Result<u64> {
    let mut buf = vec![0u8; MAX_SIZE];
    match protocol {
        Protocol::Udp => {
            let sock = UdpSocket::bind(bind)?;
            set_recv_timeout(&sock, POLL)?;
            ready(sock.local_addr()?);
            let mut echoed = 0u64;
            loop {
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        // A full send queue or a vanished client costs one echo, not the server.
                        if sock.send_to(&buf[..n], from).is_ok() {
                            echoed += 1;
                        }
                    }
                    Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {
                        if stopped() {
                            return Ok(echoed);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Protocol::Tcp => {
            let listener = TcpListener::bind(bind)?;
            set_recv_timeout(&listener, POLL)?;
            ready(listener.local_addr()?);
            let mut echoed = 0u64;
            loop {
                let mut stream = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {
                        if stopped() {
                            return Ok(echoed);
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                // A bad or broken connection ends that connection only.
                if let Ok(n) = echo_connection(&mut stream, &mut buf, stopped) {
                    echoed += n;
                }
                if stopped() {
                    return Ok(echoed);
                }
            }
        }
    }
}

/// Echoes one TCP connection's messages until it closes; returns how many.
fn echo_connection(
    stream: &mut TcpStream,
    buf: &mut [u8],
    stopped: &dyn Fn() -> bool,
) -> io::Result<u64> {
    stream.set_nodelay(true)?;
    set_recv_timeout(&stream, POLL)?;
    let mut header = [0u8; 8];
    if !read_full(stream, &mut header, stopped, false)? {
        return Ok(0);
    }
    let size = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
    if header[..4] != MAGIC || !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            "not a cpushield measure net client",
        ));
    }
    let msg = &mut buf[..size];
    let mut echoed = 0u64;
    while read_full(stream, msg, stopped, false)? {
        stream.write_all(msg)?;
        echoed += 1;
    }
    Ok(echoed)
}

/// Configuration of `measure net --listen`: the server end for a client on
/// another machine.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// CPU of the server threads.
    pub cpu: usize,
    /// Address to listen on, UDP and TCP (e.g. 0.0.0.0:PORT).
    pub bind: SocketAddr,
    /// SCHED_FIFO priority (None: SCHED_OTHER).
    pub priority: Option<u8>,
    /// Lock all memory while serving (default true).
    pub lock_memory: bool,
    /// How the server threads reach their CPU (None: plain affinity).
    pub placer: Option<PlaceFn>,
}

/// What `measure net --listen` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeSummary {
    /// UDP datagrams echoed.
    pub udp_echoed: u64,
    /// TCP messages echoed.
    pub tcp_echoed: u64,
}

impl ServeConfig {
    /// The server end on `cpu`, listening on `port` of every address, at
    /// SCHED_OTHER, its memory locked, placed by plain affinity.
    pub fn on_port(cpu: usize, port: u16) -> Self {
        ServeConfig {
            cpu,
            bind: SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
            priority: None,
            lock_memory: true,
            placer: None,
        }
    }
}

impl std::fmt::Display for ServeSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "served {} UDP datagrams and {} TCP messages",
            self.udp_echoed, self.tcp_echoed
        )
    }
}

/// Serves UDP and TCP echo on `config.bind` until `stop` is set; `ready` is
/// called once both sockets are bound (with the UDP and TCP addresses).
pub fn serve(
    host: &Host,
    config: &ServeConfig,
    stop: &AtomicBool,
    ready: impl FnOnce(SocketAddr, SocketAddr),
) -> Result<ServeSummary, MeasureError> {
    let cpus = CpuSet::from_cpus([config.cpu]);
    let view = warnings::read_view(host.kernel(), &cpus)?;
    warnings::validate_cpus(&cpus, &view.online).map_err(MeasureError::Config)?;
    let _setup = ProcessSetup::enter(config.lock_memory, true);
    let stopped = || stop.load(Ordering::Relaxed);
    let halt = AtomicBool::new(false);
    let stopped_or_halt = || stopped() || halt.load(Ordering::Relaxed);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        let mut handles = Vec::new();
        for protocol in Protocol::ALL {
            let tx = tx.clone();
            let stopped = &stopped_or_halt;
            let h = std::thread::Builder::new()
                .name(format!("cpushield-net-{}", protocol.name()))
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, move || {
                    if let Err(e) =
                        enter_measuring_thread(config.cpu, config.priority, config.placer.clone())
                    {
                        let _ = tx.send(Err(e));
                        return Ok(0);
                    }
                    let served = serve_one(protocol, config.bind, stopped, |a| {
                        let _ = tx.send(Ok((protocol, a)));
                    });
                    served.map_err(system(format!(
                        "serving {} on {}",
                        protocol.name(),
                        config.bind
                    )))
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The thread already started must not wait for a signal.
                    halt.store(true, Ordering::Relaxed);
                    return Err(MeasureError::Spawn(e));
                }
            }
        }
        drop(tx);
        let mut addrs = (None, None);
        let mut first_error = None;
        for msg in rx.iter() {
            match msg {
                Ok((Protocol::Udp, a)) => addrs.0 = Some(a),
                Ok((Protocol::Tcp, a)) => addrs.1 = Some(a),
                Err(e) => {
                    halt.store(true, Ordering::Relaxed);
                    first_error.get_or_insert(e);
                    break;
                }
            }
            if let (Some(u), Some(t)) = addrs {
                ready(u, t);
                break;
            }
        }
        let mut counts = [0u64; 2];
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(Ok(n)) => counts[i] = n,
                Ok(Err(e)) => {
                    halt.store(true, Ordering::Relaxed);
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    halt.store(true, Ordering::Relaxed);
                    first_error.get_or_insert(MeasureError::Thread("a net server panicked".into()));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(ServeSummary {
                udp_echoed: counts[0],
                tcp_echoed: counts[1],
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_run_reports_no_server_cpu() {
        let mut config = NetConfig::new(1, 2);
        assert_eq!(settings(&config).server_cpu, Some(2));
        config.link = Link::Peer("192.0.2.7:7000".parse().unwrap());
        let s = settings(&config);
        assert_eq!((s.client_cpu, s.server_cpu), (1, None));
    }

    #[test]
    fn the_run_waits_for_both_servers_and_stops_at_the_first_error() {
        let (tx, rx) = mpsc::channel();
        let (udp, tcp): (SocketAddr, SocketAddr) = (
            "127.0.0.1:7001".parse().unwrap(),
            "127.0.0.1:7002".parse().unwrap(),
        );
        tx.send(Ok((Protocol::Tcp, tcp))).unwrap();
        tx.send(Ok((Protocol::Udp, udp))).unwrap();
        let t = servers_ready(&rx, Duration::from_secs(1)).unwrap();
        assert_eq!((t.udp, t.tcp), (udp, tcp));
        tx.send(Ok((Protocol::Udp, udp))).unwrap();
        tx.send(Err(MeasureError::Thread("no socket".into())))
            .unwrap();
        assert!(matches!(
            servers_ready(&rx, Duration::from_secs(1)),
            Err(MeasureError::Thread(m)) if m == "no socket"
        ));
        tx.send(Ok((Protocol::Udp, udp))).unwrap();
        let late = servers_ready(&rx, Duration::from_millis(10)).err().unwrap();
        assert!(late.to_string().contains("did not start within"), "{late}");
    }

    #[test]
    fn endpoint_cpus_take_one_or_two_cpus() {
        assert_eq!(parse_endpoint_cpus("1"), Ok((1, 1)));
        assert_eq!(parse_endpoint_cpus("2,3"), Ok((2, 3)));
        assert!(parse_endpoint_cpus("1,2,3")
            .unwrap_err()
            .contains("e.g. --cpus 1,1"));
        assert!(parse_endpoint_cpus("x").is_err());
        assert!(parse_endpoint_cpus("-1").is_err());
    }

    #[test]
    fn a_peer_without_a_port_is_refused_with_the_form() {
        let err = resolve_peer("192.0.2.7").unwrap_err();
        assert!(err.contains("HOST:PORT"), "{err}");
        assert_eq!(
            resolve_peer("192.0.2.7:7000").unwrap(),
            "192.0.2.7:7000".parse().unwrap()
        );
    }

    #[test]
    fn sizes_parse_with_k_and_refuse_what_a_message_cannot_be() {
        assert_eq!(parse_sizes("64,1K,64k").unwrap(), vec![64, 1024, 65536]);
        assert!(parse_sizes("4").unwrap_err().contains("8 B to 65536 B"));
        assert!(parse_sizes("128K").unwrap_err().contains("--sizes 131072"));
        assert!(parse_sizes("lots").unwrap_err().contains("'lots'"));
        assert!(parse_sizes("64,,1K").is_err());
    }

    #[test]
    fn udp_caps_64k_at_the_largest_datagram_and_tcp_does_not() {
        assert_eq!(Protocol::Udp.wire_size(65536), UDP_MAX);
        assert_eq!(Protocol::Udp.wire_size(64), 64);
        assert_eq!(Protocol::Tcp.wire_size(65536), 65536);
    }

    #[test]
    fn a_peer_at_port_0_is_refused_naming_the_listen_side() {
        let mut c = NetConfig::new(1, 0);
        c.link = Link::Peer("127.0.0.1:0".parse().unwrap());
        let err = c.validate(&CpuSet::first_n(2)).unwrap_err().to_string();
        assert!(
            err.starts_with("--peer 127.0.0.1:0: port 0 reaches no server: give the port `cpushield measure net --listen PORT`"),
            "{err}"
        );
    }

    #[test]
    fn a_peer_that_does_not_answer_is_one_message_naming_the_fix_with_no_repeated_cause() {
        let err = MeasureError::Peer {
            what: "udp ping-pong of 64 B".into(),
            peer: "192.0.2.1:7000".parse().unwrap(),
            error: io::Error::from(ErrorKind::ConnectionRefused),
        };
        assert!(std::error::Error::source(&err).is_none());
        assert_eq!(
            err.to_string(),
            "udp ping-pong of 64 B with peer 192.0.2.1:7000: connection refused: start `cpushield measure net --listen 7000` on that machine, and let UDP and TCP port 7000 through its firewall"
        );
        let err = system("reading x")(io::Error::from(ErrorKind::NotFound));
        assert!(std::error::Error::source(&err).is_none(), "{err}");
    }

    #[test]
    fn a_peer_run_measures_only_the_client_cpu() {
        let mut c = NetConfig::new(1, 0);
        assert_eq!(c.cpus().to_list(), "0-1");
        c.link = Link::Peer("192.0.2.1:7000".parse().unwrap());
        assert_eq!(c.cpus().to_list(), "1");
    }

    #[test]
    fn bad_settings_name_the_option_and_the_remedy() {
        let online = CpuSet::first_n(2);
        let mut c = NetConfig::new(1, 1);
        assert!(c.validate(&online).is_ok());
        c.duration = Duration::ZERO;
        assert!(c
            .validate(&online)
            .unwrap_err()
            .to_string()
            .contains("--duration"));
        let mut c = NetConfig::new(1, 5);
        assert!(c
            .validate(&online)
            .unwrap_err()
            .to_string()
            .contains("not online"));
        c = NetConfig::new(1, 1);
        c.priority = Some(100);
        assert!(c
            .validate(&online)
            .unwrap_err()
            .to_string()
            .contains("1..99"));
        c = NetConfig::new(1, 1);
        c.protocols.clear();
        assert!(c
            .validate(&online)
            .unwrap_err()
            .to_string()
            .contains("--protocols"));
    }

    /// The echo loops against each other on loopback, unpinned: every round
    /// trip comes back with the size sent.
    #[test]
    fn loopback_echo_times_every_round_trip_for_both_protocols() {
        let stop = AtomicBool::new(false);
        let halt = AtomicBool::new(false);
        let stopped = || halt.load(Ordering::Relaxed);
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel();
            for p in Protocol::ALL {
                let tx = tx.clone();
                let stopped = &stopped;
                s.spawn(move || {
                    serve_one(p, (Ipv4Addr::LOCALHOST, 0).into(), stopped, |a| {
                        tx.send((p, a)).unwrap()
                    })
                    .unwrap()
                });
            }
            let mut addrs = std::collections::HashMap::new();
            for _ in 0..2 {
                let (p, a) = rx.recv().unwrap();
                addrs.insert(p, a);
            }
            let mut buf = vec![0u8; MAX_SIZE];
            for size in [64, UDP_MAX] {
                let mut rec = Recorder::new();
                let (elapsed, lost) = udp_ping_pong(
                    addrs[&Protocol::Udp],
                    &mut buf[..size],
                    10,
                    20_000_000,
                    &stop,
                    &mut rec,
                )
                .unwrap();
                assert!(rec.count() > 0 && elapsed > 0, "udp {size}");
                assert_eq!(lost, 0);
            }
            for size in [64, MAX_SIZE] {
                let mut rec = Recorder::new();
                let (elapsed, _) = tcp_ping_pong(
                    addrs[&Protocol::Tcp],
                    &mut buf[..size],
                    10,
                    20_000_000,
                    &stop,
                    &mut rec,
                )
                .unwrap();
                assert!(rec.count() > 0 && elapsed > 0, "tcp {size}");
            }
            halt.store(true, Ordering::Relaxed);
        });
    }
}
