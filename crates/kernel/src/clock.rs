//! CLOCK_MONOTONIC (and the thread's CPU-time clock) in nanoseconds: the clock every spike time and trace
//! timestamp (tracefs `trace_clock` = mono) is compared in.

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// The current CLOCK_MONOTONIC time in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in nanoseconds
/// (CLOCK_THREAD_CPUTIME_ID: the scheduler's run time of this thread, which
/// leaves out time a hypervisor stole where the kernel accounts steal).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Clock `id` in nanoseconds.
#[inline]
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; both
    // clocks used here exist on every Linux kernel, so it cannot fail.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * NS_PER_SEC + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_never_steps_back() {
        let a = now_ns();
        let b = now_ns();
        assert!(a > 0);
        assert!(b >= a);
    }
}
