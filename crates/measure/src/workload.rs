//! The determinism workload (Brosky & Rotolo §5.1): a CPU-bound loop of double-precision
//! sine computations, and its calibration to a wanted duration on this machine.

use cpushield_rt::clock::now_ns;
use std::hint::black_box;

/// Iterations between two looks at the stop flag.
const CHUNK: u64 = 4096;

/// Runs `iterations` steps of the sine loop. Every few thousand steps it asks
/// `stop`; if that says yes the run is abandoned and None returned. The same
/// iteration count always does the same arithmetic.
#[inline(never)]
pub fn sine_loop(iterations: u64, stop: &dyn Fn() -> bool) -> Option<f64> {
    let mut acc = 0.0f64;
    let mut x = 0.0f64;
    let mut done = 0u64;
    while done < iterations {
        let n = (iterations - done).min(CHUNK);
        for _ in 0..n {
            acc += black_box(x).sin();
            x += 0.001;
            if x > std::f64::consts::TAU {
                x -= std::f64::consts::TAU;
            }
        }
        done += n;
        if stop() {
            return None;
        }
    }
    Some(black_box(acc))
}

/// Nanoseconds one run of `iterations` takes, or None if stopped.
pub fn time_loop(iterations: u64, stop: &dyn Fn() -> bool) -> Option<u64> {
    let t0 = now_ns();
    sine_loop(iterations, stop)?;
    Some(now_ns() - t0)
}

/// Shortest run of the calibration probe.
const PROBE_NS: u64 = 20_000_000;

/// Finds the iteration count whose run takes about `target_ns` on the calling
/// thread: grows a probe until it runs at least 20 ms, times it three times,
/// and scales the fastest (the least disturbed) to the target. None if stopped.
pub fn calibrate(target_ns: u64, stop: &dyn Fn() -> bool) -> Option<u64> {
    let mut n = CHUNK;
    let mut t = time_loop(n, stop)?;
    while t < PROBE_NS.min(target_ns) {
        let scale = (PROBE_NS as f64 / t.max(1) as f64).clamp(1.5, 64.0);
        n = (n as f64 * scale) as u64;
        t = time_loop(n, stop)?;
    }
    let mut best = t;
    for _ in 0..3 {
        best = best.min(time_loop(n, stop)?);
    }
    let per_iteration = best as f64 / n as f64;
    Some(((target_ns as f64 / per_iteration) as u64).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_is_deterministic_in_its_arithmetic() {
        let never = || false;
        assert_eq!(sine_loop(10_000, &never), sine_loop(10_000, &never));
        assert_ne!(sine_loop(10_000, &never), sine_loop(10_001, &never));
    }

    #[test]
    fn a_stop_request_abandons_the_run() {
        let always = || true;
        assert_eq!(sine_loop(1_000_000, &always), None);
        assert_eq!(calibrate(1_000_000_000, &always), None);
    }

    #[test]
    fn calibration_lands_near_the_target() {
        // as the probe does it: pinned to the last CPU (never CPU 0), SCHED_FIFO,
        // so other tests running in parallel do not share the CPU
        let cpu = cpushield_kernel::online_cpus(&cpushield_kernel::RealKernel)
            .unwrap()
            .last()
            .unwrap();
        let priority = (cpu != 0).then_some(50);
        std::thread::spawn(move || {
            let _ = crate::harness::enter_measuring_thread(cpu, priority, None);
            let never = || false;
            let target = 30_000_000;
            let n = calibrate(target, &never).unwrap();
            let best = (0..3).map(|_| time_loop(n, &never).unwrap()).min().unwrap();
            // a noisy shared machine: accept a wide band, the point is the scaling
            assert!(
                best > target / 3 && best < target * 3,
                "{best} ns for {n} iterations"
            );
        })
        .join()
        .unwrap();
    }
}
