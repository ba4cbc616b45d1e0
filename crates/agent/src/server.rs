//! The read-only HTTP endpoint: `GET /metrics` and `GET /status`; any other
//! path is 404, any other method 405.

use crate::{lock, Shared};
use std::net::SocketAddr;
use std::sync::Arc;
use tiny_http::{Header, Method, Response, Server};

/// A running server; [`Running::stop`] ends it.
pub struct Running {
    server: Arc<Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The address it listens on (the port chosen when 0 was asked).
    pub addr: SocketAddr,
}

impl Running {
    /// Stops serving and waits for the thread.
    pub fn stop(mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a request gets: status code, content type, body.
pub fn respond(shared: &Shared, method: &Method, path: &str) -> (u16, &'static str, String) {
    let path = path.split('?').next().unwrap_or(path);
    let known = matches!(path, "/metrics" | "/status");
    if !known {
        return (
            404,
            "text/plain",
            "not found: GET /metrics or GET /status\n".into(),
        );
    }
    if *method != Method::Get && *method != Method::Head {
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

/// Serves `shared` on `addr` in a thread.
pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> std::io::Result<Running> {
    let server = Arc::new(Server::http(addr).map_err(|e| {
        std::io::Error::other(format!(
            "cannot listen on {addr} ({e}): free the port or set [agent] listen / --listen"
        ))
    })?);
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| std::io::Error::other("the server has no IP address"))?;
    let s = Arc::clone(&server);
    let thread = std::thread::spawn(move || {
        for request in s.incoming_requests() {
            let (code, kind, body) = respond(&shared, request.method(), request.url());
            let header = Header::from_bytes("Content-Type", kind).expect("valid header");
            let _ = request.respond(
                Response::from_string(body)
                    .with_status_code(code)
                    .with_header(header),
            );
        }
    });
    Ok(Running {
        server,
        thread: Some(thread),
        addr,
    })
}
