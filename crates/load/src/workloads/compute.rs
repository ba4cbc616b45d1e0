//! The Hyades paper's computing load: an endless loop without system calls (a
//! linear congruential generator), pinned to one CPU by the plan. One op =
//! 2^20 iterations.

use super::Ctx;
use std::convert::Infallible;
use std::io;

/// Iterations per op.
pub const ITERATIONS: u64 = 1 << 20;

/// One op's worth of work on `state`.
pub fn step(mut state: u64) -> u64 {
    for _ in 0..ITERATIONS {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    state
}

/// Loops forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let mut state = ctx.seed | 1;
    ctx.ready();
    loop {
        state = std::hint::black_box(step(state));
        ctx.add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_does_real_work() {
        assert_ne!(step(1), 1);
        assert_eq!(step(1), step(1));
    }
}
