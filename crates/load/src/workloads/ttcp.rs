//! TTCP: a sender process pushes 64 MiB data sets through a TCP connection
//! over 127.0.0.1 to the receiver (the worker), connection after connection.
//! The receiver resets each finished connection (SO_LINGER 0) so no
//! TIME_WAIT sockets pile up. One op = one 64 KiB buffer received.
//!
//! With another machine ([`Remote`]): `Peer` sends the data sets to a ttcp
//! receiver there (one op per buffer sent), `Listen` is that receiver for a
//! sender there (any address, the given port), as ttcp over a real link.

use super::{context, is_timeout, set_recv_timeout, Ctx, Partner};
use crate::plan::Remote;
use std::convert::Infallible;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// Bytes per buffer (one op).
pub const BUFFER: usize = 64 * 1024;
/// Bytes per connection.
pub const DATASET: u64 = 64 << 20;

/// Receives forever; returns only on an error.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    match ctx.remote {
        None => {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(context("binding 127.0.0.1"))?;
            let addr = listener.local_addr()?;
            let sender = Partner::fork("ttcp sender", || send_forever(addr, None))?;
            receive(ctx, listener, Some(sender))
        }
        Some(Remote::Listen(port)) => {
            let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
                .map_err(context(format!("binding TCP port {port}")))?;
            receive(ctx, listener, None)
        }
        Some(Remote::Peer(addr)) => {
            ctx.ready();
            send_forever(addr, Some(ctx)).map_err(context(format!("sending to {addr}")))
        }
    }
}

/// Accepts connections and receives their data sets forever, counting
/// buffers; `sender` is the local partner, if any.
fn receive(ctx: &Ctx, listener: TcpListener, sender: Option<Partner>) -> io::Result<Infallible> {
    let check = |sender: &Option<Partner>| sender.as_ref().map_or(Ok(()), Partner::check);
    let explain = |sender: &Option<Partner>, e| match sender {
        Some(s) => s.explain(e),
        None => e,
    };
    set_recv_timeout(&listener, 1000);
    ctx.ready();
    let mut buf = vec![0u8; BUFFER];
    let mut pending = 0u64;
    loop {
        let mut stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if is_timeout(&e) => {
                check(&sender)?;
                continue;
            }
            Err(e) => return Err(e),
        };
        set_recv_timeout(&stream, 1000);
        let mut got = 0u64;
        while got < DATASET {
            let n = match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n as u64,
                Err(e) if is_timeout(&e) => {
                    check(&sender)?;
                    continue;
                }
                // A remote sender that goes away ends its connection only.
                Err(_) if sender.is_none() => break,
                Err(e) => return Err(explain(&sender, e)),
            };
            got += n;
            pending += n;
            if pending >= BUFFER as u64 {
                ctx.add(pending / BUFFER as u64);
                pending %= BUFFER as u64;
            }
        }
        reset_on_close(&stream);
    }
}

/// Connects and sends data sets forever, counting buffers into `ctx` if given.
fn send_forever(addr: SocketAddr, ctx: Option<&Ctx>) -> io::Result<Infallible> {
    let buf = vec![0x5au8; BUFFER];
    loop {
        let mut stream = TcpStream::connect(addr)?;
        let mut sent = 0u64;
        while sent < DATASET {
            stream.write_all(&buf)?;
            sent += BUFFER as u64;
            if let Some(ctx) = ctx {
                ctx.add(1);
            }
        }
        // Wait for the receiver's reset (or EOF) before the next data set.
        let _ = stream.read(&mut [0u8; 1]);
    }
}

/// Makes close() send a reset instead of entering TIME_WAIT.
fn reset_on_close(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a valid linger struct.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const _ as *const libc::c_void,
            std::mem::size_of_val(&linger) as libc::socklen_t,
        );
    }
}
