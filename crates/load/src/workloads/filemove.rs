//! Webber's file-move script: copy two large files over each other, A to
//! B and B to A, forever. Each file is half the size cap. One op = one copy.

use super::{context, Ctx};
use rand::{RngCore, SeedableRng};
use std::convert::Infallible;
use std::io::{self, Write};

/// Copies forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let a = ctx.dir.join("a");
    let b = ctx.dir.join("b");
    let size = ctx.size_cap / 2;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(ctx.seed);
    let mut chunk = vec![0u8; 1 << 20];
    let mut file = std::fs::File::create(&a).map_err(context("creating a"))?;
    let mut written = 0;
    while written < size {
        rng.fill_bytes(&mut chunk);
        let n = chunk.len().min((size - written) as usize);
        file.write_all(&chunk[..n]).map_err(context("writing a"))?;
        written += n as u64;
    }
    drop(file);
    ctx.ready();
    loop {
        std::fs::copy(&a, &b).map_err(context("copying a to b"))?;
        ctx.add(1);
        std::fs::copy(&b, &a).map_err(context("copying b to a"))?;
        ctx.add(1);
    }
}
