//! The SIGINT/SIGTERM path: restore tracefs, then let the signal do what it
//! would have done.
//!
//! The handler itself only writes the signal number to a pipe (the one thing
//! a signal handler may safely do). A watcher thread reads it, runs the
//! session's cleanup (settings, instance, mount), puts the previous signal
//! action back and raises the signal again: the process then dies of it as
//! before, or the caller's own handler (e.g. `measure`'s graceful stop) runs.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a local byte.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// The installed handlers and the watcher thread.
pub struct SignalWatch {
    old: Vec<(libc::c_int, libc::sigaction)>,
    read_fd: libc::c_int,
    write_fd: libc::c_int,
    quit: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SignalWatch {
    /// Installs the handlers; `on_signal` runs on the watcher thread when a
    /// signal arrives, before the signal is re-raised.
    pub fn install(on_signal_cb: Box<dyn Fn() + Send>) -> io::Result<SignalWatch> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (read_fd, write_fd) = (fds[0], fds[1]);
        PIPE_WRITE.store(write_fd, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in SIGNALS {
            // SAFETY: zeroed sigaction is a valid starting point; fields set below.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            // SAFETY: act.sa_mask is a valid sigset_t.
            unsafe { libc::sigemptyset(&mut act.sa_mask) };
            // SAFETY: sigaction is a plain C struct; all zeroes is valid, and the kernel
            // overwrites it with the previous action below.
            let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to sigaction structs.
            if unsafe { libc::sigaction(sig, &act, &mut prev) } != 0 {
                return Err(io::Error::last_os_error());
            }
            old.push((sig, prev));
        }
        let quit = Arc::new(AtomicBool::new(false));
        let quit2 = quit.clone();
        let old_for_thread = old.clone();
        let thread = std::thread::Builder::new()
            .name("cpushield-trace-signal".into())
            .spawn(move || loop {
                let mut pfd = libc::pollfd {
                    fd: read_fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let n = unsafe { libc::poll(&mut pfd, 1, 100) };
                if quit2.load(Ordering::SeqCst) {
                    return;
                }
                if n <= 0 {
                    continue;
                }
                let mut b = 0u8;
                // SAFETY: reading one byte into a local.
                let r = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
                if r != 1 {
                    continue;
                }
                on_signal_cb();
                let sig = b as libc::c_int;
                for (s, prev) in &old_for_thread {
                    // SAFETY: restoring an action read by sigaction before.
                    unsafe { libc::sigaction(*s, prev, std::ptr::null_mut()) };
                }
                PIPE_WRITE.store(-1, Ordering::SeqCst);
                // SAFETY: raising a signal in our own process.
                unsafe { libc::raise(sig) };
                return;
            })?;
        Ok(SignalWatch {
            old,
            read_fd,
            write_fd,
            quit,
            thread: Some(thread),
        })
    }

    /// Stops watching and puts back the previous actions, unless someone else
    /// installed theirs in the meantime.
    pub fn uninstall(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.quit.store(true, Ordering::SeqCst);
        let _ = thread.join();
        for (sig, prev) in &self.old {
            // SAFETY: querying then restoring sigactions with valid pointers.
            unsafe {
                let mut cur: libc::sigaction = std::mem::zeroed();
                libc::sigaction(*sig, std::ptr::null(), &mut cur);
                if cur.sa_sigaction == on_signal as *const () as usize {
                    libc::sigaction(*sig, prev, std::ptr::null_mut());
                }
            }
        }
        PIPE_WRITE.store(-1, Ordering::SeqCst);
        // Let a signal that raced in land before closing the pipe.
        std::thread::sleep(Duration::from_millis(1));
        // SAFETY: closing our own pipe descriptors once.
        unsafe {
            libc::close(self.read_fd);
            libc::close(self.write_fd);
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.stop();
    }
}
