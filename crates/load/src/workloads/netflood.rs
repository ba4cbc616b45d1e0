//! The Hyades paper's ionet (`ping -f`): flood 127.0.0.1 with 64-byte UDP
//! datagrams (a ping's size) from the worker to a receiver process. Loopback
//! delivery runs in the NET_RX softirq, so the flood makes softirq work and
//! wakeups. One op = one datagram received.

use super::{context, is_timeout, set_recv_timeout, Ctx, Partner};
use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;

/// Bytes per datagram.
pub const DATAGRAM: usize = 64;

/// Floods forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(context("binding 127.0.0.1"))?;
    let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(context("binding 127.0.0.1"))?;
    tx.connect(rx.local_addr()?)?;
    // The receiver counts (the slot is shared with it).
    let receiver = {
        let rx = rx.try_clone()?;
        Partner::fork("netflood receiver", move || receive_forever(&rx, ctx))?
    };
    drop(rx);
    let packet = [0x42u8; DATAGRAM];
    ctx.ready();
    let mut sent = 0u64;
    loop {
        match tx.send(&packet) {
            Ok(_) => {}
            // Receive queue full or refused while the receiver catches up.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED)
                ) =>
            {
                receiver.check()?;
            }
            Err(e) => return Err(receiver.explain(e)),
        }
        sent += 1;
        if sent.is_multiple_of(4096) {
            receiver.check()?;
        }
    }
}

fn receive_forever(rx: &UdpSocket, ctx: &Ctx) -> io::Result<Infallible> {
    set_recv_timeout(rx.as_raw_fd(), 1000);
    let mut buf = [0u8; 2048];
    loop {
        match rx.recv(&mut buf) {
            Ok(_) => ctx.add(1),
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
}
