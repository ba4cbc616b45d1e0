//! Webber's launch script: run a trivial executable (`echo`) over and
//! over; it prints a line, which the worker reads from a pipe (standing in
//! for Webber's screen). One op = one launch.

use super::{context, Ctx};
use crate::procs::{cvt, Redirect, Spawn};
use std::convert::Infallible;
use std::io;

/// Launches forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let echo = ctx
        .tools
        .echo
        .as_deref()
        .ok_or_else(|| io::Error::other("no echo executable was found"))?;
    let mut fds = [0; 2];
    // SAFETY: pipe2 into a two-element array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).map_err(context("pipe"))?;
    let [read_end, write_end] = fds;
    let spawn = Spawn::new(echo, &["cpushield", "load", "launch"])?.stdout(Redirect::Fd(write_end));
    let mut buf = [0u8; 4096];
    let mut first = true;
    loop {
        let exit = spawn.run()?;
        if !exit.success() {
            return Err(io::Error::other(format!(
                "{} failed ({exit})",
                echo.display()
            )));
        }
        // SAFETY: reading into our buffer from our pipe; the line fits the
        // pipe buffer, so it is all there once echo has exited.
        let n = unsafe { libc::read(read_end, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return Err(io::Error::other("echo printed nothing"));
        }
        ctx.add(1);
        if first {
            ctx.ready();
            first = false;
        }
    }
}
