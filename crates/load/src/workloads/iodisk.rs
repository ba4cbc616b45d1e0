//! The Hyades paper's iodisk: read and write the disk continuously. 64 KiB blocks
//! written to, and read back from, a file of the size cap with O_DIRECT
//! (past the page cache, so each is a real disk request). Where O_DIRECT is
//! not supported (tmpfs) each write is fdatasync'd and the cache dropped
//! before each read. One op = one block written or read.

use super::{context, Ctx};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

/// Bytes per block.
pub const BLOCK: usize = 64 * 1024;

/// A block-aligned buffer, as O_DIRECT needs.
struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        AlignedBuf { ptr, layout }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: we own `layout.size()` bytes at ptr.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// The block to read back after writing block number `i` (of `blocks`):
/// one already written, away from the one just written.
pub fn read_block(i: u64, blocks: u64) -> u64 {
    let written = (i + 1).min(blocks);
    (i.wrapping_mul(7919) + blocks / 2) % written
}

/// Reads and writes forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let path = ctx.dir.join("iodisk");
    let blocks = (ctx.size_cap / BLOCK as u64).max(1);
    let open = |direct: bool| -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(&path)
    };
    let (file, direct) = match open(true) {
        Ok(f) => (f, true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            (open(false).map_err(context("creating iodisk"))?, false)
        }
        Err(e) => return Err(context("creating iodisk")(e)),
    };
    let mut buf = AlignedBuf::new(BLOCK);
    buf.as_mut()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    ctx.ready();
    let mut i = 0u64;
    loop {
        let w = i % blocks;
        file.write_all_at(buf.as_mut(), w * BLOCK as u64)
            .map_err(context("write"))?;
        if !direct {
            file.sync_data().map_err(context("fdatasync"))?;
        }
        ctx.add(1);
        let r = read_block(i, blocks);
        if !direct {
            // SAFETY: advice on our own descriptor.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        file.read_exact_at(buf.as_mut(), r * BLOCK as u64)
            .map_err(context("read"))?;
        ctx.add(1);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_touch_blocks_already_written() {
        for blocks in [1, 4, 64] {
            for i in 0..200 {
                let r = read_block(i, blocks);
                assert!(r < blocks && r <= i, "i={i} blocks={blocks} r={r}");
            }
        }
    }
}
