//! FIFOS_MMAP: a partner process echoes 512-byte messages sent through one
//! FIFO back through another; every 500 round trips the worker makes a pass
//! over a 4 MiB MAP_SHARED file mapping (touch every page, msync; every
//! eighth pass synchronously), then unmaps it. One op = one round trip or
//! one mmap pass.

use super::{context, Ctx, Partner};
use std::convert::Infallible;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Bytes per message.
pub const MESSAGE: usize = 512;
/// Round trips between mmap passes.
pub const ROUNDS: u32 = 500;
/// Bytes of the mapped file.
pub const MAP_BYTES: usize = 4 << 20;

/// Ping-pongs and maps forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let ping = ctx.dir.join("ping");
    let pong = ctx.dir.join("pong");
    mkfifo(&ping)?;
    mkfifo(&pong)?;
    let map_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(ctx.dir.join("map"))
        .map_err(context("creating the mapped file"))?;
    map_file.set_len(MAP_BYTES as u64)?;

    let (ping_r, pong_w) = (ping.clone(), pong.clone());
    let partner = Partner::fork("fifo partner", move || echo_forever(&ping_r, &pong_w))?;
    // Opens in the partner's order (ping, then pong): no deadlock.
    let mut to = OpenOptions::new()
        .write(true)
        .open(&ping)
        .map_err(context("opening the ping fifo"))?;
    let mut from = File::open(&pong).map_err(context("opening the pong fifo"))?;
    ctx.ready();

    let msg = [0xa5u8; MESSAGE];
    let mut back = [0u8; MESSAGE];
    let mut pass = 0u64;
    loop {
        for _ in 0..ROUNDS {
            to.write_all(&msg).map_err(|e| partner.explain(e))?;
            from.read_exact(&mut back).map_err(|e| partner.explain(e))?;
            ctx.add(1);
        }
        mmap_pass(&map_file, pass)?;
        pass += 1;
        ctx.add(1);
    }
}

/// The partner: read a message from `ping`, write it to `pong`, forever.
fn echo_forever(ping: &Path, pong: &Path) -> io::Result<Infallible> {
    let mut from = File::open(ping)?;
    let mut to = OpenOptions::new().write(true).open(pong)?;
    let mut buf = [0u8; MESSAGE];
    loop {
        from.read_exact(&mut buf)?;
        to.write_all(&buf)?;
    }
}

fn mkfifo(path: &Path) -> io::Result<()> {
    let c = CString::new(path.to_string_lossy().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(context(format!("mkfifo {}", path.display()))(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Maps the file, writes one byte in every page, msyncs, unmaps.
fn mmap_pass(file: &File, pass: u64) -> io::Result<()> {
    // SAFETY: mapping a file we hold open, of the length we set, then
    // touching only bytes inside the mapping before unmapping it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            MAP_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(context("mmap of the mapped file")(
                io::Error::last_os_error(),
            ));
        }
        let base = p.cast::<u8>();
        let offset = (pass % 4096) as usize;
        for page in (0..MAP_BYTES).step_by(4096) {
            let b = base.add(page + offset);
            b.write_volatile(b.read_volatile().wrapping_add(1));
        }
        let flags = if pass % 8 == 7 {
            libc::MS_SYNC
        } else {
            libc::MS_ASYNC
        };
        let rc = libc::msync(p, MAP_BYTES, flags);
        let err = io::Error::last_os_error();
        libc::munmap(p, MAP_BYTES);
        if rc != 0 {
            return Err(context("msync")(err));
        }
    }
    Ok(())
}
