//! The kernel as it is: std::fs for files, libc for affinity.

use crate::{
    with_path, FileLock, Kernel, KernelWriter, LockKind, SchedParams, TraceMarker, TracePipe,
    TRACE_PIPE_READ_BUDGET,
};
use cpushield_cpuset::CpuSet;
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// struct sched_attr of sched_setattr(2) (the first version, 48 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A kernel file open for writing; each write is one write(2) call.
struct OpenWriter(std::fs::File);

impl KernelWriter for OpenWriter {
    fn write(&mut self, data: &str) -> io::Result<()> {
        self.0.write_all(data.as_bytes())
    }
}

/// A trace pipe open without blocking.
struct OpenTracePipe(std::fs::File);

impl TracePipe for OpenTracePipe {
    fn read_available(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut total = 0;
        let mut chunk = [0u8; 65536];
        while total < TRACE_PIPE_READ_BUDGET {
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

/// trace_marker open for writing; `&File` writes, so every thread shares it.
struct OpenTraceMarker(std::fs::File);

impl TraceMarker for OpenTraceMarker {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        (&self.0).write_all(line)
    }
}

/// A file locked with flock(2): dropping it unlocks and closes the file.
struct HeldFlock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

impl FileLock for HeldFlock {}

/// Creates the directory of `path` when absent, with the path in the error.
fn make_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|e| with_path(e, dir))
        }
        _ => Ok(()),
    }
}

/// The running kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealKernel;

impl Kernel for RealKernel {
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        // Read until end of file without asking the size first: /proc and
        // /sys files report size 0 or 4096 whatever they hold, so the stat
        // std::fs::read makes would be one wasted syscall per file.
        let mut file = std::fs::File::open(path)?;
        let mut out = Vec::new();
        // A /proc/PID/stat line is a few hundred bytes.
        let mut chunk = [0u8; 1024];
        loop {
            match file.read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn write(&self, path: &Path, data: &str) -> io::Result<()> {
        // One write(2) call: kernel files act on each write, and a cgroup
        // tasks file takes one PID per write.
        let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
        file.write_all(data.as_bytes())
    }

    fn open_for_writes<'a>(&'a self, path: &Path) -> io::Result<Box<dyn KernelWriter + 'a>> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(Box::new(OpenWriter(file)))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path).map_err(|e| with_path(e, path))
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn remove_tree(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn get_affinity(&self, tid: i32) -> io::Result<CpuSet> {
        // Large enough for 8192 CPUs.
        let mut words = [0u64; 128];
        // SAFETY: the buffer is valid for writes of its full size, which is passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                tid,
                std::mem::size_of_val(&words),
                words.as_mut_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel returns the bytes it filled (its cpumask size).
        let filled = (rc as usize).div_ceil(8).min(words.len());
        Ok(CpuSet::from_words(&words[..filled]))
    }

    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        let mut words = [0u64; 128];
        if cpus.iter().any(|cpu| cpu >= 64 * words.len()) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        for cpu in cpus.iter() {
            words[cpu / 64] |= 1u64 << (cpu % 64);
        }
        // SAFETY: the buffer is valid for reads of its full size, which is passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_setaffinity,
                tid,
                std::mem::size_of_val(&words),
                words.as_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
        let cpath = c_string(path.as_os_str().as_bytes())?;
        let cname = c_string(name.as_bytes())?;
        // SAFETY: both strings are NUL-terminated and live across the call; the
        // value pointer is valid for reads of its length.
        let rc = unsafe {
            libc::setxattr(
                cpath.as_ptr(),
                cname.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn get_xattr(&self, path: &Path, name: &str) -> io::Result<Vec<u8>> {
        let cpath = c_string(path.as_os_str().as_bytes())?;
        let cname = c_string(name.as_bytes())?;
        let mut buf = vec![0u8; 256];
        // SAFETY: both strings are NUL-terminated and live across the call; the
        // buffer is valid for writes of its length, which is passed.
        let rc = unsafe {
            libc::getxattr(
                cpath.as_ptr(),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(rc as usize);
        Ok(buf)
    }

    fn get_sched(&self, tid: i32) -> io::Result<SchedParams> {
        let mut attr = SchedAttr::default();
        let size = std::mem::size_of::<SchedAttr>() as u32;
        // SAFETY: attr is a valid, writable sched_attr of the size passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                tid,
                &mut attr as *mut SchedAttr,
                size,
                0,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SchedParams {
            policy: attr.sched_policy,
            flags: attr.sched_flags,
            nice: attr.sched_nice,
            priority: attr.sched_priority,
            runtime: attr.sched_runtime,
            deadline: attr.sched_deadline,
            period: attr.sched_period,
        })
    }

    fn set_sched(&self, tid: i32, p: &SchedParams) -> io::Result<()> {
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: p.policy,
            sched_flags: p.flags,
            sched_nice: p.nice,
            sched_priority: p.priority,
            sched_runtime: p.runtime,
            sched_deadline: p.deadline,
            sched_period: p.period,
        };
        // SAFETY: attr is a valid sched_attr whose size field is set; the kernel only reads it.
        let rc =
            unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        nix::mount::mount(
            Some(fstype),
            target,
            Some(fstype),
            nix::mount::MsFlags::MS_NOSUID
                | nix::mount::MsFlags::MS_NODEV
                | nix::mount::MsFlags::MS_NOEXEC,
            None::<&str>,
        )
        .map_err(io::Error::from)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        nix::mount::umount(target).map_err(io::Error::from)
    }

    fn lock_file(&self, path: &Path, kind: LockKind) -> io::Result<Box<dyn FileLock>> {
        use nix::fcntl::{Flock, FlockArg};
        make_parent(path)?;
        let opened = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path);
        // flock works on a file opened for reading too: one that exists in
        // a directory this process cannot write is still locked.
        let file = match opened {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EROFS)) => {
                std::fs::File::open(path).map_err(|_| with_path(e, path))?
            }
            other => other.map_err(|e| with_path(e, path))?,
        };
        let arg = match kind {
            LockKind::Shared => FlockArg::LockShared,
            LockKind::Exclusive => FlockArg::LockExclusive,
            LockKind::TryExclusive => FlockArg::LockExclusiveNonblock,
        };
        let mut file = file;
        loop {
            match Flock::lock(file, arg) {
                Ok(held) => return Ok(Box::new(HeldFlock(held))),
                // A signal handled while waiting: wait again.
                Err((again, nix::errno::Errno::EINTR)) => file = again,
                Err((_, errno)) => return Err(with_path(errno.into(), path)),
            }
        }
    }

    fn put_file(&self, path: &Path, text: &str) -> io::Result<()> {
        make_parent(path)?;
        std::fs::write(path, text).map_err(|e| with_path(e, path))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path).map_err(|e| with_path(e, path))
    }

    fn open_trace_pipe(&self, path: &Path) -> io::Result<Box<dyn TracePipe>> {
        // O_NONBLOCK: the reader polls, so it never registers as a waiter on
        // the ring buffer, and the traced CPU never sends an irq_work wakeup
        // for it (that would itself be noise on the measured CPU).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| with_path(e, path))?;
        Ok(Box::new(OpenTracePipe(file)))
    }

    fn open_trace_marker(&self, path: &Path) -> io::Result<Box<dyn TraceMarker>> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| with_path(e, path))?;
        Ok(Box::new(OpenTraceMarker(file)))
    }

    fn kernel_log(&self) -> io::Result<String> {
        // SYSLOG_ACTION_SIZE_BUFFER: no buffer is passed.
        // SAFETY: a null pointer with length 0 is what this action takes.
        let size = unsafe { libc::klogctl(10, std::ptr::null_mut(), 0) };
        if size < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; size as usize];
        // SYSLOG_ACTION_READ_ALL: reads without consuming, as dmesg does.
        // SAFETY: the buffer is valid for writes of the length passed.
        let n = unsafe { libc::klogctl(3, buf.as_mut_ptr().cast(), size) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}
