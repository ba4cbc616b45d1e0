//! CLOCK_MONOTONIC in nanoseconds: read it, sleep to an absolute time, spin to one.

pub use cpushield_kernel::clock::{now_ns, thread_cpu_ns, NS_PER_SEC};

/// Converts nanoseconds to a timespec.
#[inline]
pub fn to_timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / NS_PER_SEC) as libc::time_t,
        tv_nsec: (ns % NS_PER_SEC) as libc::c_long,
    }
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `deadline_ns`
/// (clock_nanosleep with TIMER_ABSTIME). Returns early only if a signal
/// interrupted the sleep and `resume_on_signal` is false; returns whether the
/// full sleep completed.
#[inline]
pub fn sleep_until_ns(deadline_ns: u64, resume_on_signal: bool) -> bool {
    let ts = to_timespec(deadline_ns);
    loop {
        // SAFETY: `ts` is a valid timespec that outlives the call; the remainder
        // pointer may be NULL with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        match rc {
            0 => return true,
            libc::EINTR if resume_on_signal => continue,
            _ => return false,
        }
    }
}

/// Busy-waits until `deadline_ns`; returns the time of the first clock read at or
/// after the deadline.
#[inline]
pub fn spin_until_ns(deadline_ns: u64) -> u64 {
    loop {
        let now = now_ns();
        if now >= deadline_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_never_goes_back() {
        let mut last = now_ns();
        for _ in 0..10_000 {
            let t = now_ns();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn absolute_sleep_does_not_return_before_the_deadline() {
        let target = now_ns() + 2_000_000;
        assert!(sleep_until_ns(target, true));
        assert!(now_ns() >= target);
    }

    #[test]
    fn spin_returns_at_or_after_the_deadline() {
        let target = now_ns() + 100_000;
        assert!(spin_until_ns(target) >= target);
    }
}
