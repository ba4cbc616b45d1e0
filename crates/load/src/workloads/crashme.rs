//! CRASHME: fill a buffer with random bytes and jump into it, in a child,
//! over and over; the children die by SIGSEGV, SIGILL, SIGBUS, SIGFPE,
//! SIGTRAP or SIGALRM and the worker keeps spawning. One op = one child
//! ended.
//!
//! Random code must not be able to harm anything, so before the jump each
//! child: arms a 20 ms SIGALRM and a 1 s (soft) / 2 s (hard) CPU limit,
//! disables core dumps (RLIMIT_CORE 0 and not dumpable), unmaps every
//! writable shared mapping it inherited (the load's counters), maps a fresh
//! private page for the code, closes every file descriptor and enters
//! seccomp strict mode, where the only system calls left are read and write
//! (on no descriptors), exit and sigreturn; any other kills it.

use super::{context, Ctx};
use crate::procs::{self, Exit};
use cpushield_kernel::{Kernel, Procfs};
use rand::{RngCore, SeedableRng};
use std::convert::Infallible;
use std::io;

/// Bytes of random code per child.
pub const CODE_BYTES: usize = 4096;

/// Spawns crashing children forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let shared = shared_writable_mappings(ctx.kernel)?;
    // A child that only enters strict mode and exits proves the sandbox works here.
    match run_child(&[], &shared, false)? {
        Exit::Code(0) => {}
        other => {
            return Err(io::Error::other(format!(
                "cannot sandbox random code: seccomp strict mode is unavailable ({other}); leave out 'crashme'"
            )))
        }
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(ctx.seed);
    let mut code = vec![0u8; CODE_BYTES];
    ctx.ready();
    loop {
        rng.fill_bytes(&mut code);
        run_child(&code, &shared, true)?;
        ctx.add(1);
    }
}

/// Forks a child that runs `code` in the sandbox (or, with `jump` false,
/// only enters the sandbox and exits 0); returns how it ended.
pub fn run_child(code: &[u8], shared: &[(usize, usize)], jump: bool) -> io::Result<Exit> {
    // SAFETY: the child runs only async-signal-safe calls and the sandboxed code.
    let pid = procs::cvt(unsafe { libc::fork() })?;
    if pid == 0 {
        // SAFETY: we are the forked child; this never returns.
        unsafe { sandboxed(code, shared, jump) }
    }
    procs::wait(pid)
}

/// Wall time a child with random code gets before SIGALRM ends it.
const CODE_ALARM_US: libc::suseconds_t = 20_000;

/// Wall time the probe child (no code) gets: on a loaded machine the fork,
/// unmapping and closing before strict mode can wait far longer than 20 ms
/// for a CPU, and an alarm there would read as "no sandbox"; it only keeps a
/// child that never got strict mode from hanging the load.
const PROBE_ALARM_S: libc::time_t = 10;

/// The child: fence itself in, then run `code`. Never returns.
unsafe fn sandboxed(code: &[u8], shared: &[(usize, usize)], jump: bool) -> ! {
    let (tv_sec, tv_usec) = if jump {
        (0, CODE_ALARM_US)
    } else {
        (PROBE_ALARM_S, 0)
    };
    let timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval { tv_sec, tv_usec },
    };
    libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut());
    let cpu = libc::rlimit {
        rlim_cur: 1,
        rlim_max: 2,
    };
    libc::setrlimit(libc::RLIMIT_CPU, &cpu);
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &no_core);
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    // Default actions for the crash signals: a handler (Rust's stack-overflow
    // one for SIGSEGV/SIGBUS) would make system calls the sandbox forbids.
    for sig in [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGTRAP,
        libc::SIGSYS,
        libc::SIGALRM,
        libc::SIGXCPU,
    ] {
        libc::signal(sig, libc::SIG_DFL);
    }
    for &(start, len) in shared {
        libc::munmap(start as *mut libc::c_void, len);
    }
    let page = libc::mmap(
        std::ptr::null_mut(),
        CODE_BYTES,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if page == libc::MAP_FAILED {
        libc::syscall(libc::SYS_exit_group, 2);
    }
    let n = code.len().min(CODE_BYTES);
    std::ptr::copy_nonoverlapping(code.as_ptr(), page.cast::<u8>(), n);
    libc::mprotect(page, CODE_BYTES, libc::PROT_READ | libc::PROT_EXEC);
    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    if libc::prctl(
        libc::PR_SET_SECCOMP,
        libc::SECCOMP_MODE_STRICT as libc::c_ulong,
        0,
        0,
        0,
    ) != 0
    {
        libc::syscall(libc::SYS_exit_group, 3);
    }
    if jump {
        let entry: extern "C" fn() = std::mem::transmute(page);
        entry();
    }
    // exit (not exit_group) is one of the four calls strict mode allows.
    libc::syscall(libc::SYS_exit, 0);
    loop {
        std::hint::spin_loop();
    }
}

/// Address ranges of the writable shared mappings of this process.
fn shared_writable_mappings(kernel: &dyn Kernel) -> io::Result<Vec<(usize, usize)>> {
    let maps = Procfs::new(kernel)
        .own_file("maps")
        .map_err(context("reading /proc/self/maps"))?;
    Ok(parse_shared_writable(&maps))
}

/// The `rw-s` / `-w-s` ranges of a /proc/PID/maps text, as (start, length).
pub fn parse_shared_writable(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let range = parts.next()?;
            let perms = parts.next()?.as_bytes();
            if perms.len() < 4 || perms[1] != b'w' || perms[3] != b's' {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let start = usize::from_str_radix(a, 16).ok()?;
            let end = usize::from_str_radix(b, 16).ok()?;
            Some((start, end.checked_sub(start)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_writable_shared_mappings_are_unmapped() {
        let maps = "7f00-7f10 rw-s 00000000 00:01 42 /dev/zero (deleted)\n\
                    7f10-7f20 rw-p 00000000 00:00 0\n\
                    7f20-7f30 r--s 00000000 00:01 43 /x\n";
        assert_eq!(parse_shared_writable(maps), vec![(0x7f00, 0x10)]);
    }

    #[test]
    fn the_sandbox_can_be_entered_here() {
        assert_eq!(run_child(&[], &[], false).unwrap(), Exit::Code(0));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn illegal_instructions_die_by_sigill() {
        assert_eq!(
            run_child(&[0x0f, 0x0b], &[], true).unwrap(),
            Exit::Signal(libc::SIGILL)
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_wild_write_dies_by_sigsegv_not_by_a_handler() {
        // xor rax, rax; mov qword [rax], 1
        let code = [0x48, 0x31, 0xc0, 0x48, 0xc7, 0x00, 0x01, 0x00, 0x00, 0x00];
        assert_eq!(
            run_child(&code, &[], true).unwrap(),
            Exit::Signal(libc::SIGSEGV)
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_endless_loop_is_cut_off_by_the_alarm() {
        // jmp $
        assert_eq!(
            run_child(&[0xeb, 0xfe], &[], true).unwrap(),
            Exit::Signal(libc::SIGALRM)
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn any_system_call_beyond_read_write_exit_kills_only_the_child() {
        // mov eax, 39 (getpid); syscall; ud2
        let code = [0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0x0f, 0x0b];
        assert_eq!(
            run_child(&code, &[], true).unwrap(),
            Exit::Signal(libc::SIGKILL)
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn writes_reach_no_file_because_every_descriptor_is_closed() {
        // mov eax, 1 (write); mov edi, 2; xor esi, esi; xor edx, edx; syscall;
        // cmp eax, -9 (EBADF); jne +2; ud2 (SIGILL when EBADF as expected); hlt (SIGSEGV otherwise)
        let code = [
            0xb8, 1, 0, 0, 0, 0xbf, 2, 0, 0, 0, 0x31, 0xf6, 0x31, 0xd2, 0x0f, 0x05, 0x83, 0xf8,
            0xf7, 0x75, 0x02, 0x0f, 0x0b, 0xf4,
        ];
        assert_eq!(
            run_child(&code, &[], true).unwrap(),
            Exit::Signal(libc::SIGILL)
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn random_code_cannot_write_the_load_counters() {
        let shared = crate::shm::Shared::new(1).unwrap();
        let addr = &shared.slot(0).ops as *const _ as u64;
        // mov rax, addr; mov qword [rax], 1; ud2
        let mut code = vec![0x48, 0xb8];
        code.extend_from_slice(&addr.to_le_bytes());
        code.extend_from_slice(&[0x48, 0xc7, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0f, 0x0b]);
        let maps = shared_writable_mappings(&cpushield_kernel::RealKernel).unwrap();
        assert!(maps
            .iter()
            .any(|&(s, l)| (s..s + l).contains(&(addr as usize))));
        assert_eq!(
            run_child(&code, &maps, true).unwrap(),
            Exit::Signal(libc::SIGSEGV)
        );
        assert_eq!(shared.slot(0).ops(), 0);
        // Without the unmapping the same code would have written it.
        assert_eq!(
            run_child(&code, &[], true).unwrap(),
            Exit::Signal(libc::SIGILL)
        );
        assert_eq!(shared.slot(0).ops(), 1);
    }
}
