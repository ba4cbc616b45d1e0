//! A veth pair between two network namespaces that `measure net --veth`
//! creates for its run and removes afterwards (also when the run fails or is
//! interrupted): the client end lives in one namespace, the server end in the
//! other, so every message crosses a real (virtual) device with its own
//! transmit and NET_RX path instead of loopback's shortcut.
//!
//! The plumbing uses iproute2 (`ip netns`, `ip link`), as an administrator
//! would; a thread joins a namespace with setns(2) on /run/netns/NAME.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;

/// Namespace names start with this, then the creating process ID.
pub const PREFIX: &str = "cpushield-net-";
/// Address of the client end (inside the client namespace only).
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
/// Address of the server end (inside the server namespace only).
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);

/// The two namespaces and the veth pair between them; dropping it removes them.
#[derive(Debug)]
pub struct VethPair {
    client_ns: String,
    server_ns: String,
}

/// The namespace names of process `pid`: (client, server).
pub fn names(pid: u32) -> (String, String) {
    (format!("{PREFIX}{pid}-c"), format!("{PREFIX}{pid}-s"))
}

/// The process ID in a namespace name made by [`names`], if it is one.
pub fn owner(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix(PREFIX)?;
    let (pid, end) = rest.split_once('-')?;
    matches!(end, "c" | "s").then_some(())?;
    pid.parse().ok()
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("running `ip {}` ({e}): install iproute2", args.join(" ")),
        )
    })?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// Removes namespaces left by an earlier run whose process is gone (a run
/// killed by a second signal cannot clean up after itself).
pub fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(pid) = owner(name) {
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None)
                .map_or_else(|e| e == nix::errno::Errno::EPERM, |()| true);
            if !alive {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
}

impl VethPair {
    /// Creates both namespaces, the veth pair, the addresses ([`CLIENT_IP`],
    /// [`SERVER_IP`], a /30) and brings every link up. On failure whatever was
    /// made is removed again.
    pub fn create() -> io::Result<Self> {
        remove_stale();
        let pid = std::process::id();
        let (client_ns, server_ns) = names(pid);
        let pair = Self {
            client_ns: client_ns.clone(),
            server_ns: server_ns.clone(),
        };
        let (cdev, sdev) = (format!("cpsn{pid}c"), format!("cpsn{pid}s"));
        let (caddr, saddr) = (format!("{CLIENT_IP}/30"), format!("{SERVER_IP}/30"));
        ip(&["netns", "add", &client_ns])?;
        ip(&["netns", "add", &server_ns])?;
        ip(&[
            "link", "add", &cdev, "netns", &client_ns, "type", "veth", "peer", "name", &sdev,
            "netns", &server_ns,
        ])?;
        for (ns, dev, addr) in [(&client_ns, &cdev, &caddr), (&server_ns, &sdev, &saddr)] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(pair)
    }

    /// The client namespace's name.
    pub fn client_ns(&self) -> &str {
        &self.client_ns
    }

    /// The server namespace's name.
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the pair, and with it the other end.
        let _ = ip(&["netns", "del", &self.client_ns]);
        let _ = ip(&["netns", "del", &self.server_ns]);
    }
}

/// Moves the calling thread into the named network namespace (sockets it
/// creates afterwards belong there).
pub fn enter(ns: &str) -> io::Result<()> {
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    // SAFETY: setns on a namespace file descriptor we own and keep open for the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns({path}): {e}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_carry_their_owner_and_only_ours_parse() {
        let (c, s) = names(4_194_304);
        assert_eq!(c, "cpushield-net-4194304-c");
        assert_eq!(owner(&c), Some(4_194_304));
        assert_eq!(owner(&s), Some(4_194_304));
        assert_eq!(owner("cpushield-net-12-x"), None);
        assert_eq!(owner("other-12-c"), None);
        assert_eq!(owner("cpushield-net-abc-c"), None);
    }

    #[test]
    fn device_names_fit_the_kernel_limit_for_any_pid() {
        // IFNAMSIZ is 16 with the NUL: 15 characters at most.
        assert!(format!("cpsn{}c", 4_194_304).len() <= 15);
    }
}
