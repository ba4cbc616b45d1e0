//! The tracer's own doors to tracefs that the `Kernel` trait does not cover:
//! mounting, non-blocking reads of the per-CPU trace pipes, and the marker.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A per-CPU trace pipe read without blocking.
pub trait PipeReader: Send {
    /// Appends what is available now to `buf`; returns the number of bytes
    /// read (0 when nothing is waiting).
    fn read_available(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
}

/// The trace_marker file.
pub trait MarkWriter: Send + Sync {
    /// Writes one line with one write(2) call.
    fn write_line(&self, line: &[u8]) -> io::Result<()>;
}

/// Mounting tracefs and opening its streams.
pub trait TraceIo: Send + Sync {
    /// Whether tracefs is mounted at `root`.
    fn is_mounted(&self, root: &Path) -> bool;
    /// Mounts tracefs at `root`.
    fn mount(&self, root: &Path) -> io::Result<()>;
    /// Unmounts `root`.
    fn unmount(&self, root: &Path) -> io::Result<()>;
    /// Opens a trace pipe for non-blocking reads.
    fn open_pipe(&self, path: &Path) -> io::Result<Box<dyn PipeReader>>;
    /// Opens trace_marker.
    fn open_marker(&self, path: &Path) -> io::Result<Box<dyn MarkWriter>>;
}

/// The real tracefs.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealTraceIo;

/// Most bytes one `read_available` call returns, so one busy CPU cannot
/// starve the others (a trace_pipe read returns at most a page of text).
pub const READ_BUDGET: usize = 1 << 20;

struct RealPipe(File);

impl PipeReader for RealPipe {
    fn read_available(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut total = 0;
        let mut chunk = [0u8; 65536];
        while total < READ_BUDGET {
            match self.0.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }
}

struct RealMarker(File);

impl MarkWriter for RealMarker {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        (&self.0).write_all(line)
    }
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path has a NUL byte"))
}

impl TraceIo for RealTraceIo {
    fn is_mounted(&self, root: &Path) -> bool {
        let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
            return false;
        };
        mounts.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 2 && w[2] == "tracefs" && Path::new(w[1]) == root
        })
    }

    fn mount(&self, root: &Path) -> io::Result<()> {
        let target = cstr(root)?;
        // SAFETY: valid NUL-terminated strings; no data argument.
        let rc = unsafe {
            libc::mount(
                c"nodev".as_ptr(),
                target.as_ptr(),
                c"tracefs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn unmount(&self, root: &Path) -> io::Result<()> {
        let target = cstr(root)?;
        // SAFETY: valid NUL-terminated string.
        if unsafe { libc::umount(target.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn open_pipe(&self, path: &Path) -> io::Result<Box<dyn PipeReader>> {
        // O_NONBLOCK: the reader polls, so it never registers as a waiter on
        // the ring buffer, and the traced CPU never sends an irq_work wakeup
        // for it (that would itself be noise on the measured CPU).
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| cpushield_kernel::with_path(e, path))?;
        Ok(Box::new(RealPipe(f)))
    }

    fn open_marker(&self, path: &Path) -> io::Result<Box<dyn MarkWriter>> {
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| cpushield_kernel::with_path(e, path))?;
        Ok(Box::new(RealMarker(f)))
    }
}
