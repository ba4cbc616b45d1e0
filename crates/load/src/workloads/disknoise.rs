//! Brosky & Rotolo's (§5.1) disknoise script, in process:
//!
//! ```sh
//! echo boo >9
//! while true; do
//!     for f in 0 1 2 3 4 5 6 7 8 9; do cat * >$f; done
//!     cnt=$((cnt + 1)); if [ $cnt -ge 3 ]; then rm *; echo boo >9; cnt=0; fi
//! done
//! ```
//!
//! Files double each step, so the script as written writes gigabytes; here
//! the round also restarts early when the next file would pass the size cap,
//! and each file is fdatasync'd so a capped run still reaches the disk (and
//! makes the interrupts the paper was after). One op = one file written.

use super::{context, Ctx};
use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Read, Write};

/// What the script does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `cat` these files (in glob order) into `target`.
    Cat {
        /// File written.
        target: usize,
        /// Files read, in order.
        inputs: Vec<usize>,
    },
    /// `rm *; echo boo >9`.
    Reset,
}

/// The script's state: which files exist and their sizes.
#[derive(Debug, Clone)]
pub struct Script {
    sizes: [Option<u64>; 10],
    next: usize,
    rounds: u32,
    cap: u64,
}

/// What `echo boo` writes.
pub const SEED_TEXT: &[u8] = b"boo\n";

impl Script {
    /// A fresh script (after its first `echo boo >9`) under `cap` bytes.
    pub fn new(cap: u64) -> Script {
        let mut sizes = [None; 10];
        sizes[9] = Some(SEED_TEXT.len() as u64);
        Script {
            sizes,
            next: 0,
            rounds: 0,
            cap,
        }
    }

    /// Total bytes of the files.
    pub fn total(&self) -> u64 {
        self.sizes.iter().flatten().sum()
    }

    /// The next step; the caller performs it, then calls [`Script::done`].
    pub fn step(&self) -> Step {
        if self.rounds >= 3 {
            return Step::Reset;
        }
        let target = self.next;
        // The shell expands `*` before `>$f` truncates; cat skips its output file.
        let inputs: Vec<usize> = (0..10)
            .filter(|&i| i != target && self.sizes[i].is_some())
            .collect();
        let new_size: u64 = inputs.iter().map(|&i| self.sizes[i].unwrap_or(0)).sum();
        let old = self.sizes[target].unwrap_or(0);
        if self.total() - old + new_size > self.cap {
            return Step::Reset;
        }
        Step::Cat { target, inputs }
    }

    /// Records that `step` was performed.
    pub fn done(&mut self, step: &Step) {
        match step {
            Step::Reset => *self = Script::new(self.cap),
            Step::Cat { target, inputs } => {
                self.sizes[*target] =
                    Some(inputs.iter().map(|&i| self.sizes[i].unwrap_or(0)).sum());
                self.next += 1;
                if self.next == 10 {
                    self.next = 0;
                    self.rounds += 1;
                }
            }
        }
    }
}

/// Runs the script forever.
pub fn run(ctx: &Ctx) -> io::Result<Infallible> {
    let mut script = Script::new(ctx.size_cap);
    reset(ctx)?;
    let mut buf = vec![0u8; 256 * 1024];
    ctx.ready();
    loop {
        let step = script.step();
        match &step {
            Step::Reset => reset(ctx)?,
            Step::Cat { target, inputs } => {
                let path = ctx.dir.join(target.to_string());
                let mut out =
                    File::create(&path).map_err(context(format!("creating {}", path.display())))?;
                for i in inputs {
                    let mut input = File::open(ctx.dir.join(i.to_string()))?;
                    loop {
                        let n = input.read(&mut buf)?;
                        if n == 0 {
                            break;
                        }
                        out.write_all(&buf[..n])?;
                    }
                }
                out.sync_data().map_err(context("fdatasync"))?;
                ctx.add(1);
            }
        }
        script.done(&step);
    }
}

/// `rm *; echo boo >9`.
fn reset(ctx: &Ctx) -> io::Result<()> {
    for i in 0..10 {
        match std::fs::remove_file(ctx.dir.join(i.to_string())) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::write(ctx.dir.join("9"), SEED_TEXT).map_err(context("writing 9"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_round_doubles_like_the_script() {
        let mut s = Script::new(u64::MAX);
        let mut sizes = Vec::new();
        for _ in 0..10 {
            let step = s.step();
            s.done(&step);
            sizes.push(s.sizes[sizes.len()].unwrap());
        }
        // 0 = cat 9; 1 = cat 0 9; ... 9 = cat 0..8 (9 is its own output).
        assert_eq!(sizes, [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2044]);
    }

    #[test]
    fn the_ninth_file_skips_itself_as_cat_does() {
        let mut s = Script::new(u64::MAX);
        for _ in 0..9 {
            let step = s.step();
            s.done(&step);
        }
        assert_eq!(
            s.step(),
            Step::Cat {
                target: 9,
                inputs: (0..9).collect()
            }
        );
    }

    #[test]
    fn after_three_rounds_everything_is_removed() {
        let mut s = Script::new(u64::MAX);
        for _ in 0..30 {
            let step = s.step();
            assert!(matches!(step, Step::Cat { .. }));
            s.done(&step);
        }
        assert_eq!(s.step(), Step::Reset);
        s.done(&Step::Reset);
        assert_eq!(s.total(), 4);
    }

    #[test]
    fn the_files_never_pass_the_cap() {
        let cap = 1 << 20;
        let mut s = Script::new(cap);
        let mut resets = 0;
        for _ in 0..1000 {
            let step = s.step();
            if step == Step::Reset {
                resets += 1;
            }
            s.done(&step);
            assert!(s.total() <= cap);
        }
        assert!(resets > 0);
    }
}
