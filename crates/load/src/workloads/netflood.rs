//! The Hyades paper's ionet (`ping -f`): flood 127.0.0.1 with 64-byte UDP
//! datagrams (a ping's size) from the worker to a receiver process. Loopback
//! delivery runs in the NET_RX softirq, so the flood makes softirq work and
//! wakeups. One op = one datagram received.
//!
//! With another machine ([`Remote`]) the traffic crosses a NIC and makes
//! device interrupts: `Peer` floods it with the same datagrams and, when a raw
//! socket is permitted (CAP_NET_RAW) and the peer is not loopback, with ICMP
//! echo requests as `ping -f` does (one op per datagram or request sent);
//! `Listen` receives a flood on a port and counts the datagrams.

use super::{context, is_timeout, set_recv_timeout, Ctx, Partner};
use crate::plan::Remote;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Bytes per datagram.
pub const DATAGRAM: usize = 64;

/// Floods forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    match ctx.remote {
        None => flood_loopback(ctx),
        Some(Remote::Peer(addr)) => flood_peer(ctx, addr),
        Some(Remote::Listen(port)) => {
            let rx = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))
                .map_err(context(format!("binding UDP port {port}")))?;
            ctx.ready();
            receive_forever(&rx, ctx)
        }
    }
}

/// Sends datagrams to `addr` forever (and ICMP echo requests from a partner
/// process, where permitted).
fn flood_peer(ctx: &Ctx, addr: SocketAddr) -> io::Result<Infallible> {
    let local: SocketAddr = match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let tx = UdpSocket::bind(local).map_err(context("binding a UDP socket"))?;
    tx.connect(addr)
        .map_err(context(format!("connecting to {addr}")))?;
    let pinger = match (addr.ip(), icmp_socket()) {
        (IpAddr::V4(ip), Some(sock)) if !ip.is_loopback() => {
            Some(Partner::fork("ICMP echo flood", move || {
                ping_forever(&sock, ip, ctx)
            })?)
        }
        _ => None,
    };
    let packet = [0x42u8; DATAGRAM];
    ctx.ready();
    let mut sent = 0u64;
    loop {
        match tx.send(&packet) {
            Ok(_) => ctx.add(1),
            // The peer's port unreachable, or our queue full: keep flooding.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED) | Some(libc::EAGAIN)
                ) => {}
            Err(e) => return Err(e),
        }
        sent += 1;
        if sent.is_multiple_of(4096) {
            if let Some(p) = &pinger {
                p.check()?;
            }
        }
    }
}

/// A raw ICMP socket, if this process may open one.
fn icmp_socket() -> Option<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP) };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An ICMP echo request (type 8) with identifier `id`, sequence `seq` and 56
/// bytes of payload (ping's default), checksum filled in.
pub(crate) fn echo_request(id: u16, seq: u16) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[0] = 8;
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in p[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let sum = checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// The Internet checksum (RFC 1071).
pub(crate) fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in data.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += word as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends echo requests to `ip` forever.
fn ping_forever(sock: &OwnedFd, ip: Ipv4Addr, ctx: &Ctx) -> io::Result<Infallible> {
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let id = std::process::id() as u16;
    let mut seq = 0u16;
    loop {
        seq = seq.wrapping_add(1);
        let packet = echo_request(id, seq);
        // SAFETY: sendto with a valid buffer and address that outlive the call.
        let rc = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                packet.as_ptr() as *const libc::c_void,
                packet.len(),
                0,
                &to as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc >= 0 {
            ctx.add(1);
        } else {
            let e = io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) {
                return Err(e);
            }
        }
    }
}

/// The loopback flood: the worker sends, a partner process receives and counts.
fn flood_loopback(ctx: &Ctx) -> io::Result<Infallible> {
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
    set_recv_timeout(&rx, 1000);
    let mut buf = [0u8; 2048];
    loop {
        match rx.recv(&mut buf) {
            Ok(_) => ctx.add(1),
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_request_checksums_to_zero_as_a_receiver_verifies_it() {
        let p = echo_request(0x1234, 7);
        assert_eq!(p[0], 8, "type: echo request");
        assert_eq!(&p[4..8], &[0x12, 0x34, 0, 7]);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to 0");
    }

    #[test]
    fn the_checksum_matches_rfc_1071s_example() {
        // RFC 1071 section 3: 0001 f203 f4f5 f6f7 sums to ddf2, checksum 220d.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }
}
