//! Webber's find script: walk the root file system looking for a name
//! that is not there, again and again. Like `find / -xdev -name X`: one
//! device, symlinks not followed, every entry lstat'ed; depth is bounded.
//! One op = one directory entry visited.

use super::Ctx;
use std::convert::Infallible;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Deepest directory level walked.
pub const MAX_DEPTH: usize = 40;

/// Walks forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let root = Path::new("/");
    let dev = std::fs::symlink_metadata(root)?.dev();
    ctx.ready();
    loop {
        let mut found = 0;
        walk(root, dev, 0, ctx, &mut found);
        if found > 0 {
            return Err(io::Error::other("found the name that must not exist"));
        }
    }
}

/// Visits `dir` and below on device `dev`; counts entries into `ctx`.
fn walk(dir: &Path, dev: u64, depth: usize, ctx: &Ctx, found: &mut u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut seen = 0;
    for entry in entries.flatten() {
        seen += 1;
        if entry.file_name() == "cpushield-find-target-that-does-not-exist" {
            *found += 1;
        }
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() && meta.dev() == dev && depth < MAX_DEPTH {
            walk(&entry.path(), dev, depth + 1, ctx, found);
        }
    }
    ctx.add(seen);
}
