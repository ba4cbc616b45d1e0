//! FS: unnatural acts on a set of large files. Four files of apparent size
//! S, half the size cap (after its acts a file keeps about S/8 allocated,
//! so the set stays under the cap). Per file and cycle: write it whole,
//! sequentially, and fdatasync it (a large file made, on disk); truncate it to a
//! quarter and write its last chunk (a hole in the middle); read it all
//! back; truncate to half and extend back to S (a new hole); eight 4 KiB
//! writes at random offsets; punch a hole over the first eighth. Every
//! fourth cycle each file is also fsync'd after its acts, every eighth the
//! files are removed and made again. One op = one of those acts (a
//! whole-file write or read counts once).

use super::{context, Ctx};
use rand::{Rng, SeedableRng};
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// Files in the set.
pub const FILES: usize = 4;
/// Bytes per write or read.
pub const CHUNK: usize = 64 * 1024;

/// The apparent size of each file under `size_cap`.
pub fn file_size(size_cap: u64) -> u64 {
    (size_cap / 2) & !(CHUNK as u64 - 1)
}

/// Abuses files forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let size = file_size(ctx.size_cap);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(ctx.seed);
    let data: Vec<u8> = (0..CHUNK).map(|_| rng.gen()).collect();
    let mut buf = vec![0u8; CHUNK];
    let names: Vec<_> = (0..FILES)
        .map(|i| ctx.dir.join(format!("fs-{i}")))
        .collect();
    let mut cycle = 0u64;
    ctx.ready();
    loop {
        for name in &names {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(name)
                .map_err(context(format!("opening {}", name.display())))?;
            acts(ctx, &f, size, &data, &mut buf, &mut rng)?;
            if cycle % 4 == 3 {
                f.sync_all().map_err(context("fsync"))?;
                ctx.add(1);
            }
        }
        cycle += 1;
        if cycle.is_multiple_of(8) {
            for name in &names {
                std::fs::remove_file(name)
                    .map_err(context(format!("removing {}", name.display())))?;
                ctx.add(1);
            }
        }
    }
}

/// Writes `data` repeatedly over `[from, to)`.
fn fill(f: &File, data: &[u8], from: u64, to: u64) -> io::Result<()> {
    let mut at = from;
    while at < to {
        let n = data.len().min((to - at) as usize);
        f.write_all_at(&data[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

fn acts(
    ctx: &Ctx,
    f: &File,
    size: u64,
    data: &[u8],
    buf: &mut [u8],
    rng: &mut impl Rng,
) -> io::Result<()> {
    let chunk = CHUNK as u64;
    fill(f, data, 0, size).map_err(context("writing the whole file"))?;
    ctx.add(1);
    f.sync_data().map_err(context("fdatasync"))?;
    ctx.add(1);
    f.set_len(size / 4).map_err(context("truncate"))?;
    ctx.add(1);
    f.write_all_at(data, size - chunk)
        .map_err(context("writing past a hole"))?;
    ctx.add(1);
    let mut at = 0;
    while at < size {
        at += f.read_at(buf, at).map_err(context("reading back"))?.max(1) as u64;
    }
    ctx.add(1);
    f.set_len(size / 2).map_err(context("truncate"))?;
    ctx.add(1);
    f.set_len(size).map_err(context("extend"))?;
    ctx.add(1);
    for _ in 0..8 {
        let at = rng.gen_range(0..size / chunk) * chunk;
        f.write_all_at(&data[..4096], at)
            .map_err(context("write at random"))?;
        ctx.add(1);
    }
    // Not every file system punches holes; that is not an error.
    // SAFETY: fallocate on an open descriptor inside its size.
    let rc = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            0,
            (size / 8) as libc::off_t,
        )
    };
    if rc == 0 {
        ctx.add(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes a file keeps allocated after its acts, at most: the head quarter
    /// less the punched eighth, the tail chunk and the random writes.
    fn kept_bytes(size: u64) -> u64 {
        size / 4 - size / 8 + CHUNK as u64 + 8 * 4096
    }

    #[test]
    fn the_files_fit_the_cap_and_leave_room_for_a_hole() {
        for cap in [crate::plan::MIN_SIZE_CAP, 64 << 20, 1 << 30] {
            let size = file_size(cap);
            // One file being written whole while the others keep their rest.
            assert!(
                size + (FILES as u64 - 1) * kept_bytes(size) <= cap,
                "cap {cap}"
            );
            assert!(
                size / 4 + CHUNK as u64 <= size - CHUNK as u64,
                "room for a hole"
            );
        }
    }
}
