//! The Hyades paper's ioctl load (an ioctl under the big kernel lock, then): a
//! tight loop of system calls that take kernel locks. Per loop, nine calls:
//! FIONREAD on a pipe (pipe mutex), TIOCGWINSZ and TCSETS on a pty master
//! (tty and termios locks), a POSIX record lock and unlock and a flock and
//! unlock on a file (file lock context), and mmap + munmap of a page
//! (mmap lock, for writing). One op = one loop.

use super::{context, Ctx};
use crate::procs::cvt;
use std::convert::Infallible;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Locks forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a two-element array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).map_err(context("pipe"))?;
    // SAFETY: opening a pty master we own.
    let pty = cvt(unsafe {
        libc::open(
            c"/dev/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })
    .map_err(context("opening /dev/ptmx"))?;
    let lock = File::create(ctx.dir.join("lock")).map_err(context("creating the lock file"))?;
    let lock_fd = lock.as_raw_fd();
    // SAFETY: plain ioctl/fcntl/flock/mmap calls on descriptors and memory we own.
    unsafe {
        let mut termios: libc::termios = std::mem::zeroed();
        cvt(libc::tcgetattr(pty, &mut termios)).map_err(context("tcgetattr on the pty"))?;
        let mut record: libc::flock = std::mem::zeroed();
        record.l_whence = libc::SEEK_SET as libc::c_short;
        record.l_len = 1;
        ctx.ready();
        loop {
            let mut pending: libc::c_int = 0;
            cvt(libc::ioctl(fds[0], libc::FIONREAD, &mut pending)).map_err(context("FIONREAD"))?;
            let mut size: libc::winsize = std::mem::zeroed();
            cvt(libc::ioctl(pty, libc::TIOCGWINSZ, &mut size)).map_err(context("TIOCGWINSZ"))?;
            cvt(libc::tcsetattr(pty, libc::TCSANOW, &termios)).map_err(context("TCSETS"))?;
            record.l_type = libc::F_WRLCK as libc::c_short;
            cvt(libc::fcntl(lock_fd, libc::F_SETLK, &record)).map_err(context("F_SETLK"))?;
            record.l_type = libc::F_UNLCK as libc::c_short;
            cvt(libc::fcntl(lock_fd, libc::F_SETLK, &record)).map_err(context("F_SETLK unlock"))?;
            cvt(libc::flock(lock_fd, libc::LOCK_EX)).map_err(context("flock"))?;
            cvt(libc::flock(lock_fd, libc::LOCK_UN)).map_err(context("flock unlock"))?;
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                return Err(context("mmap")(io::Error::last_os_error()));
            }
            libc::munmap(page, 4096);
            ctx.add(1);
        }
    }
}
