//! P3_FPU: floating-point matrix work. Multiplies two 96x96 matrices of
//! doubles, rescales the product and feeds it back, forever. One op = one
//! multiply (96^3 multiply-adds).

use super::Ctx;
use rand::{Rng, SeedableRng};
use std::convert::Infallible;
use std::io;

/// Matrix order.
pub const N: usize = 96;

/// `c = a * b` for row-major N x N matrices.
pub fn multiply(a: &[f64], b: &[f64], c: &mut [f64]) {
    c.fill(0.0);
    for i in 0..N {
        for k in 0..N {
            let aik = a[i * N + k];
            let row_b = &b[k * N..(k + 1) * N];
            let row_c = &mut c[i * N..(i + 1) * N];
            for (cj, bj) in row_c.iter_mut().zip(row_b) {
                *cj += aik * bj;
            }
        }
    }
}

/// Scales `m` so its largest magnitude is 1 (keeps values finite forever).
pub fn normalise(m: &mut [f64]) {
    let max = m.iter().fold(0.0f64, |acc, v| acc.max(v.abs()));
    if max > 0.0 && max.is_finite() {
        m.iter_mut().for_each(|v| *v /= max);
    } else {
        m.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i % 7) as f64 - 3.0);
    }
}

/// Multiplies forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(ctx.seed);
    let mut a: Vec<f64> = (0..N * N).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let b: Vec<f64> = (0..N * N).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let mut c = vec![0.0; N * N];
    ctx.ready();
    loop {
        multiply(std::hint::black_box(&a), &b, &mut c);
        normalise(&mut c);
        std::mem::swap(&mut a, &mut c);
        ctx.add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_times_a_matrix_is_that_matrix() {
        let mut id = vec![0.0; N * N];
        for i in 0..N {
            id[i * N + i] = 1.0;
        }
        let m: Vec<f64> = (0..N * N).map(|i| i as f64).collect();
        let mut c = vec![0.0; N * N];
        multiply(&id, &m, &mut c);
        assert_eq!(c, m);
    }

    #[test]
    fn normalising_bounds_values_and_repairs_non_finite_ones() {
        let mut m = vec![2.0, -8.0, 4.0];
        normalise(&mut m);
        assert_eq!(m, vec![0.25, -1.0, 0.5]);
        let mut bad = vec![f64::INFINITY, 1.0];
        normalise(&mut bad);
        assert!(bad.iter().all(|v| v.is_finite()));
    }
}
