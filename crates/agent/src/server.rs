//! The read-only HTTP endpoint: `GET /metrics` and `GET /status`; any other
//! path is 404, any other method 405.
//!
//! One thread serves every connection from a readiness loop (`mio`, the event
//! layer under tokio), and `httparse` (hyper's parser) reads the request
//! heads. An idle or slow client costs a socket and at most
//! [`Limits::max_head`] bytes of buffer, never a thread. The connections are
//! bounded: at [`Limits::max_connections`] a new one takes the place of the
//! one idle the longest, so a scraper still gets in while a client holds
//! hundreds open. Each connection has a deadline: [`Limits::idle_timeout`]
//! while no request is under way, [`Limits::read_timeout`] from a request's
//! first byte to the end of its head (a client that trickles a header a byte
//! at a time is cut there), [`Limits::write_timeout`] for the answer.

use crate::{lock, Shared};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bounds the server keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; at the bound a new one replaces the one
    /// idle the longest.
    pub max_connections: usize,
    /// How long a connection may stay open with no request under way (after
    /// it was accepted, or after its last answer).
    pub idle_timeout: Duration,
    /// How long a request's head may take, from its first byte.
    pub read_timeout: Duration,
    /// How long the client may take to receive an answer.
    pub write_timeout: Duration,
    /// The largest request head read (larger: 431, then closed).
    pub max_head: usize,
}

impl Default for Limits {
    /// 1,024 connections: a silent one costs this process a few hundred
    /// bytes (an entry and an empty buffer), so a thousand held open cost
    /// well under a megabyte, and a scraper is never pushed out by fewer;
    /// fewer where the descriptor limit cannot be raised that far
    /// ([`start`]). 10 s idle, which outlives no keep-alive between two
    /// scrapes at Prometheus' usual 15 s, so each scrape costs one
    /// connection; 5 s to send a request head or take an answer, far above
    /// a scrape's milliseconds on a loaded node; 4 KiB of head (a scrape's
    /// is a few hundred bytes), so 1,024 slow heads hold at most 4 MiB.
    fn default() -> Self {
        Self {
            max_connections: 1024,
            idle_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            max_head: 4 * 1024,
        }
    }
}

/// Descriptors kept for the rest of the agent (/proc and /sys reads, the
/// placement socket, the probe) besides the connections.
const RESERVED_FDS: u64 = 128;

/// The listen backlog: how many connections the kernel completes and holds
/// for the loop while it is busy (answering a scrape, or descheduled). A
/// burst beyond it loses its SYNs, which the clients resend only after a
/// second or more (the kernel logs "Possible SYN flooding"); within it,
/// every connection waits in the queue and is accepted at the loop's next
/// turn. 1,024 matches [`Limits::max_connections`]' default, so a burst of
/// as many connections as the agent keeps is taken whole. The kernel caps it
/// at `net.core.somaxconn` (4,096 by default since Linux 5.4, 128 before).
pub const LISTEN_BACKLOG: i32 = 1024;

/// Raises the soft limit of open descriptors towards the hard one, enough for
/// `wanted` connections; returns how many connections the limit allows.
fn room_for_connections(wanted: usize) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let need = wanted as u64 + RESERVED_FDS;
    let soft = if soft < need && setrlimit(Resource::RLIMIT_NOFILE, need.min(hard), hard).is_ok() {
        need.min(hard)
    } else {
        soft
    };
    (soft.saturating_sub(RESERVED_FDS) as usize).clamp(1, wanted.max(1))
}

/// A running server; [`Running::stop`] ends it.
pub struct Running {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The address it listens on (the port chosen when 0 was asked).
    pub addr: SocketAddr,
}

impl Running {
    /// The connections open after the loop's last turn.
    pub fn connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Stops serving, closes every connection and waits for the thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a request gets: status code, content type, body.
pub fn respond(shared: &Shared, method: &str, path: &str) -> (u16, &'static str, String) {
    let path = path.split('?').next().unwrap_or(path);
    let known = matches!(path, "/metrics" | "/status");
    if !known {
        return (
            404,
            "text/plain",
            "not found: GET /metrics or GET /status\n".into(),
        );
    }
    if method != "GET" && method != "HEAD" {
        return (
            405,
            "text/plain",
            "method not allowed: this endpoint is read-only (GET)\n".into(),
        );
    }
    match path {
        "/metrics" => (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            lock(&shared.metrics).render(),
        ),
        _ => (200, "application/json", lock(&shared.conditions).to_json()),
    }
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// Bytes of requests read and not yet answered.
    head: Vec<u8>,
    /// The answer being written, and how much of it went out.
    out: Vec<u8>,
    written: usize,
    /// Close once `out` is written.
    close_after: bool,
    /// The answer is out and the writing side shut: what the client still
    /// sends is read and dropped until it closes, so that closing with
    /// unread bytes (a refused head) does not reset the connection before
    /// the client read the answer.
    draining: bool,
    /// When it is closed unless it makes progress.
    deadline: Instant,
    /// Its last byte read or answer written (the longest idle goes first).
    last_active: Instant,
}

impl Conn {
    fn idle(&self) -> bool {
        self.head.is_empty() && self.out.is_empty()
    }
}

/// A request head, parsed.
enum Head {
    /// Not all there yet.
    Partial,
    /// Complete: its length, the answer, and whether to close after it.
    Complete {
        len: usize,
        method: String,
        path: String,
        close: bool,
    },
    /// Not HTTP.
    Bad,
}

fn parse_head(bytes: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Partial) => Head::Partial,
        Ok(httparse::Status::Complete(len)) => {
            let header = |name: &str| {
                request
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
            };
            let connection = header("connection").unwrap_or_default();
            // A body is never read: close after the answer rather than parse
            // the body as the next request.
            let body = header("transfer-encoding").is_some()
                || header("content-length").is_some_and(|l| l.trim() != "0");
            let close = body
                || connection.contains("close")
                || (request.version == Some(0) && !connection.contains("keep-alive"));
            Head::Complete {
                len,
                method: request.method.unwrap_or_default().to_string(),
                path: request.path.unwrap_or_default().to_string(),
                close,
            }
        }
        // Too many headers counts as bad too: no scraper sends 32.
        Err(_) => Head::Bad,
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    }
}

fn answer(code: u16, kind: &str, body: &str, with_body: bool, close: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        reason(code),
        body.len(),
        if close { "close" } else { "keep-alive" }
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The answer to the request at the start of a connection's unread bytes.
struct Reply {
    /// How many of the bytes the request took.
    used: usize,
    /// The answer to write.
    bytes: Vec<u8>,
    /// Whether to close the connection once it is written.
    close: bool,
}

/// The answer to the request head at the start of `head`: None while the
/// head is still coming (and shorter than `max_head`); a bad or overlong
/// head is answered and closes the connection.
fn reply_to(head: &[u8], shared: &Shared, max_head: usize) -> Option<Reply> {
    if head.is_empty() {
        return None;
    }
    let (code, kind, body, with_body, close, used) = match parse_head(head) {
        Head::Complete {
            len,
            method,
            path,
            close,
        } => {
            let (code, kind, body) = respond(shared, &method, &path);
            (code, kind, body, method != "HEAD", close, len)
        }
        Head::Bad => (
            400,
            "text/plain",
            "bad request: GET /metrics or GET /status\n".to_string(),
            true,
            true,
            head.len(),
        ),
        Head::Partial if head.len() >= max_head => (
            431,
            "text/plain",
            format!("request head larger than {max_head} bytes\n"),
            true,
            true,
            head.len(),
        ),
        Head::Partial => return None,
    };
    Some(Reply {
        used,
        bytes: answer(code, kind, &body, with_body, close),
        close,
    })
}

/// Moves one connection as far as it can go without blocking: writes what
/// is pending, answers every complete request, reads what is there.
/// Returns whether to keep it.
fn drive(conn: &mut Conn, shared: &Shared, limits: &Limits) -> bool {
    loop {
        let now = Instant::now();
        if conn.draining {
            let mut sink = [0u8; 2048];
            match conn.stream.read(&mut sink) {
                Ok(0) => return false,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        if !conn.out.is_empty() {
            match conn.stream.write(&conn.out[conn.written..]) {
                Ok(0) => return false,
                Ok(n) => {
                    conn.written += n;
                    if conn.written == conn.out.len() {
                        if conn.close_after {
                            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
                            conn.draining = true;
                            conn.out.clear();
                            conn.head.clear();
                            conn.deadline = now + limits.write_timeout;
                            continue;
                        }
                        conn.out.clear();
                        conn.written = 0;
                        conn.last_active = now;
                        conn.deadline = now
                            + if conn.head.is_empty() {
                                limits.idle_timeout
                            } else {
                                limits.read_timeout
                            };
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
            continue;
        }
        if let Some(reply) = reply_to(&conn.head, shared, limits.max_head) {
            conn.head.drain(..reply.used);
            conn.out = reply.bytes;
            conn.close_after = reply.close;
            conn.deadline = now + limits.write_timeout;
            continue;
        }
        // Never more than one byte past the limit: enough to tell a head
        // that is too long.
        let mut chunk = [0u8; 2048];
        let room = (limits.max_head + 1)
            .saturating_sub(conn.head.len())
            .clamp(1, chunk.len());
        match conn.stream.read(&mut chunk[..room]) {
            Ok(0) => return false,
            Ok(n) => {
                if conn.head.is_empty() {
                    conn.deadline = now + limits.read_timeout;
                }
                conn.head.extend_from_slice(&chunk[..n]);
                conn.last_active = now;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The loop: accepts, drives the connections that are ready, closes the
/// ones past their deadline, until `stop`.
struct Loop {
    poll: Poll,
    listener: TcpListener,
    conns: HashMap<Token, Conn>,
    next: usize,
    limits: Limits,
    shared: Arc<Shared>,
}

impl Loop {
    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }

    /// At the bound: the connection with no request under way idle the
    /// longest, else the one idle the longest.
    fn evict(&mut self) {
        let oldest = self
            .conns
            .iter()
            .min_by_key(|(_, c)| (!c.idle(), c.last_active))
            .map(|(t, _)| *t);
        if let Some(token) = oldest {
            self.close(token);
        }
    }

    /// Accepts what is pending, at most half the bound in one turn, so that
    /// a flood of connections cannot push out one accepted in the turn
    /// before its request was read. Returns whether more may be
    /// pending.
    fn accept(&mut self) -> bool {
        for _ in 0..(self.limits.max_connections / 2).max(1) {
            let mut stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors or the like: the pending client waits
                // for the next turn, when connections may have closed.
                Err(_) => return false,
            };
            while !self.conns.is_empty() && self.conns.len() >= self.limits.max_connections {
                self.evict();
            }
            // Tokens 0 and 1 are the listener and the waker.
            self.next = self.next.wrapping_add(1).max(2);
            let token = Token(self.next);
            let registered = self.poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            );
            if registered.is_err() {
                continue;
            }
            let now = Instant::now();
            let mut conn = Conn {
                stream,
                head: Vec::new(),
                out: Vec::new(),
                written: 0,
                close_after: false,
                draining: false,
                deadline: now + self.limits.idle_timeout,
                last_active: now,
            };
            // A scraper sends its request with the connection: answer it
            // now, before later connections can take its place.
            if drive(&mut conn, &self.shared, &self.limits) {
                self.conns.insert(token, conn);
            } else {
                let _ = self.poll.registry().deregister(&mut conn.stream);
            }
        }
        true
    }

    fn run(mut self, stop: &AtomicBool, open: &AtomicUsize) {
        let mut events = Events::with_capacity(256);
        let mut pending = false;
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            let timeout = if pending {
                Some(Duration::ZERO)
            } else {
                self.conns
                    .values()
                    .map(|c| c.deadline.saturating_duration_since(now))
                    .min()
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                eprintln!("cpushield agent: the HTTP endpoint stopped: {e}");
                return;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => pending = true,
                    WAKER => {}
                    token => {
                        let keep = match self.conns.get_mut(&token) {
                            Some(conn) => drive(conn, &self.shared, &self.limits),
                            None => continue,
                        };
                        if !keep {
                            self.close(token);
                        }
                    }
                }
            }
            // After the ready connections were served: a new batch never
            // evicts one whose request is already waiting to be read.
            if pending {
                pending = self.accept();
            }
            let now = Instant::now();
            let late: Vec<Token> = self
                .conns
                .iter()
                .filter(|(_, c)| c.deadline <= now)
                .map(|(t, _)| *t)
                .collect();
            for token in late {
                self.close(token);
            }
            open.store(self.conns.len(), Ordering::SeqCst);
        }
    }
}

/// Serves `shared` on `addr` in a thread, within `limits` (the connections
/// also within what the descriptor limit allows, raised if need be).
pub fn start(addr: SocketAddr, shared: Arc<Shared>, mut limits: Limits) -> io::Result<Running> {
    limits.max_connections = room_for_connections(limits.max_connections);
    let std_listener = std::net::TcpListener::bind(addr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot listen on {addr} ({e}): free the port or set [agent] listen / --listen"
            ),
        )
    })?;
    // std listens with a backlog of 128; listen again on the same socket
    // sets the one chosen.
    nix::sys::socket::listen(
        &std_listener,
        nix::sys::socket::Backlog::new(LISTEN_BACKLOG).map_err(io::Error::from)?,
    )
    .map_err(io::Error::from)?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let mut listener = TcpListener::from_std(std_listener);
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let event_loop = Loop {
        poll,
        listener,
        conns: HashMap::new(),
        next: 1,
        limits,
        shared,
    };
    let (loop_stop, loop_open) = (Arc::clone(&stop), Arc::clone(&open));
    let thread = std::thread::Builder::new()
        .name("agent-http".into())
        .spawn(move || event_loop.run(&loop_stop, &loop_open))?;
    Ok(Running {
        waker,
        stop,
        open,
        thread: Some(thread),
        addr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream as Client;

    fn serve(limits: Limits) -> Running {
        start("127.0.0.1:0".parse().unwrap(), Shared::new("7.7.7"), limits).unwrap()
    }

    fn client(server: &Running) -> Client {
        let c = Client::connect(server.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c
    }

    /// Reads one answer (head and the body its Content-Length names).
    fn read_answer(c: &mut Client) -> String {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = c.read(&mut chunk).expect("an answer before the timeout");
            assert!(
                n > 0,
                "closed without an answer: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .and_then(|l| l.trim().parse().ok())
                    .unwrap_or(0);
                if got.len() >= end + 4 + len {
                    return text;
                }
            }
        }
    }

    /// Waits until the server closes `c` (a read of 0 bytes), within 5 s.
    fn closed_by_server(c: &mut Client) -> bool {
        let mut byte = [0u8; 1];
        loop {
            match c.read(&mut byte) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    #[test]
    fn a_head_is_answered_once_complete_and_refused_when_bad_or_too_long() {
        let shared = Shared::new("7.7.7");
        assert!(reply_to(b"", &shared, 64).is_none(), "nothing read yet");
        assert!(
            reply_to(b"GET /metrics HTTP/1.1\r\n", &shared, 64).is_none(),
            "a head still coming waits"
        );
        let get = b"GET /nothing HTTP/1.1\r\n\r\nGET";
        let r = reply_to(get, &shared, 64).expect("a complete head is answered");
        assert_eq!(r.used, get.len() - 3, "the next request's bytes are kept");
        assert!(String::from_utf8_lossy(&r.bytes).starts_with("HTTP/1.1 404"));
        assert!(!r.close);
        let long = format!("GET /{}", "a".repeat(59));
        let r = reply_to(long.as_bytes(), &shared, 64).expect("an overlong head is refused");
        assert!(String::from_utf8_lossy(&r.bytes).starts_with("HTTP/1.1 431"));
        assert!(r.close);
        assert_eq!(r.used, 64);
    }

    #[test]
    fn a_scrape_is_answered_while_more_idle_connections_than_the_bound_are_held() {
        let server = serve(Limits {
            max_connections: 8,
            ..Limits::default()
        });
        let idle: Vec<Client> = (0..40).map(|_| client(&server)).collect();
        let mut scrape = client(&server);
        scrape
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let text = read_answer(&mut scrape);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.contains("cpushield_build_info{version=\"7.7.7\"} 1"),
            "{text}"
        );
        assert!(server.connections() <= 8, "{} open", server.connections());
        drop(idle);
        server.stop();
    }

    #[test]
    fn a_burst_of_a_thousand_connects_while_the_loop_is_busy_is_accepted_whole_by_the_server() {
        const BURST: usize = 1000;
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            somaxconn > BURST,
            "net.core.somaxconn {somaxconn} caps the backlog below the burst"
        );
        let shared = Shared::new("7.7.7");
        let server = start(
            "127.0.0.1:0".parse().unwrap(),
            Arc::clone(&shared),
            Limits {
                max_connections: BURST + 10,
                ..Limits::default()
            },
        )
        .unwrap();
        // The loop answers this scrape and waits for the metrics meanwhile:
        // it accepts nothing until they are let go.
        let held = shared.metrics.lock().unwrap();
        let mut busy = client(&server);
        busy.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.connections() < 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        // Each connect completes in the kernel's queue or loses its SYN; a
        // lost SYN is resent only after a second, so 200 ms tells them apart.
        let mut burst = Vec::new();
        for n in 0..BURST {
            match Client::connect_timeout(&server.addr, Duration::from_millis(200)) {
                Ok(c) => burst.push(c),
                Err(e) => panic!("connection {n} of the burst was not queued: {e}"),
            }
        }
        drop(held);
        read_answer(&mut busy);
        // Counted on the server's side: every connection of the burst accepted.
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.connections() < BURST + 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(server.connections(), BURST + 1);
        drop(burst);
        server.stop();
    }

    #[test]
    fn a_connection_that_sends_nothing_is_closed_at_the_idle_timeout() {
        let server = serve(Limits {
            idle_timeout: Duration::from_millis(200),
            ..Limits::default()
        });
        let mut c = client(&server);
        assert!(closed_by_server(&mut c));
        server.stop();
    }

    #[test]
    fn a_request_head_left_unfinished_is_cut_at_the_read_timeout() {
        // The idle timeout is far away: only the read timeout can close it.
        let server = serve(Limits {
            idle_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_millis(300),
            ..Limits::default()
        });
        let mut c = client(&server);
        c.write_all(b"GET /metr").unwrap();
        assert!(closed_by_server(&mut c));
        server.stop();
    }

    #[test]
    fn one_connection_serves_requests_one_after_another_and_head_gets_no_body() {
        let server = serve(Limits::default());
        let mut c = client(&server);
        c.write_all(b"GET /status HTTP/1.1\r\n\r\n").unwrap();
        let first = read_answer(&mut c);
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains("Connection: keep-alive"), "{first}");
        assert!(first.contains("\"conditions\""), "{first}");
        c.write_all(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap();
        let second = read_answer(&mut c);
        assert!(second.starts_with("HTTP/1.1 405 "), "{second}");
        c.write_all(b"HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{rest}");
        assert!(
            rest.ends_with("\r\n\r\n"),
            "HEAD answered with a body: {rest}"
        );
        server.stop();
    }

    #[test]
    fn a_head_over_the_limit_gets_431_and_the_connection_is_closed() {
        let server = serve(Limits {
            max_head: 512,
            ..Limits::default()
        });
        let mut c = client(&server);
        let long = format!("GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n", "a".repeat(600));
        c.write_all(long.as_bytes()).unwrap();
        let mut rest = String::new();
        c.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("HTTP/1.1 431 "), "{rest}");
        let mut bad = client(&server);
        bad.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
        let mut rest = String::new();
        bad.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("HTTP/1.1 400 "), "{rest}");
        server.stop();
    }
}
