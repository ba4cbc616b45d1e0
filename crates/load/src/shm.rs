//! The page(s) of shared memory through which the load's processes report to
//! the process that started it: an ops counter, a state and a message per
//! worker, and the supervisor's own state. An anonymous `MAP_SHARED` mapping
//! made before the first fork, so every child writes into the same memory
//! the parent reads, live, without system calls.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Bytes of a slot's name.
pub const NAME_LEN: usize = 32;
/// Bytes of a slot's or the header's message.
pub const MSG_LEN: usize = 200;

/// Slot state: the worker is setting up (0 = slot not used yet).
pub const SLOT_STARTING: u32 = 1;
/// Slot state: the worker is doing (and counting) its work.
pub const SLOT_RUNNING: u32 = 2;
/// Slot state: the worker failed; the message says why.
pub const SLOT_FAILED: u32 = 3;
/// Slot state: the worker finished on its own (stress-ng with its own timeout).
pub const SLOT_EXITED: u32 = 4;

/// Supervisor state: all workers started (0 = still starting them).
pub const SUP_RUNNING: u32 = 1;
/// Supervisor state: it could not start the load; the message says why.
pub const SUP_FAILED: u32 = 2;
/// Supervisor state: every child is gone and every file removed.
pub const SUP_DONE: u32 = 3;

/// One worker's report.
#[repr(C)]
pub struct Slot {
    /// Work done so far, in the workload's unit.
    pub ops: AtomicU64,
    state: AtomicU32,
    pid: AtomicI32,
    name: [AtomicU8; NAME_LEN],
    msg: [AtomicU8; MSG_LEN],
}

impl Slot {
    /// Adds `n` ops.
    pub fn add(&self, n: u64) {
        self.ops.fetch_add(n, Ordering::Relaxed);
    }
    /// Ops so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }
    /// The state (`SLOT_*`).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }
    /// Sets the state.
    pub fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::Release);
    }
    /// Marks the slot failed with `message`, unless it already failed (the
    /// first failure is the cause).
    pub fn fail(&self, message: &str) {
        if self.state() != SLOT_FAILED {
            write_text(&self.msg, message);
            self.set_state(SLOT_FAILED);
        }
    }
    /// The failure message.
    pub fn message(&self) -> String {
        read_text(&self.msg)
    }
    /// Sets the name shown in reports.
    pub fn set_name(&self, name: &str) {
        write_text(&self.name, name);
    }
    /// The name shown in reports.
    pub fn name(&self) -> String {
        read_text(&self.name)
    }
    /// Records the worker's process id.
    pub fn set_pid(&self, pid: i32) {
        self.pid.store(pid, Ordering::Release);
    }
    /// The worker's process id (0 before it started).
    pub fn pid(&self) -> i32 {
        self.pid.load(Ordering::Acquire)
    }
}

/// The supervisor's report.
#[repr(C)]
pub struct Header {
    state: AtomicU32,
    msg: [AtomicU8; MSG_LEN],
}

impl Header {
    /// The state (`SUP_*`).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }
    /// Sets the state.
    pub fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::Release);
    }
    /// Marks the supervisor failed with `message`.
    pub fn fail(&self, message: &str) {
        write_text(&self.msg, message);
        self.set_state(SUP_FAILED);
    }
    /// The failure message.
    pub fn message(&self) -> String {
        read_text(&self.msg)
    }
}

/// An anonymous shared mapping holding a [`Header`] and `n` [`Slot`]s.
pub struct Shared {
    base: *mut u8,
    bytes: usize,
    slots: usize,
}

// SAFETY: the mapping holds only atomics (Header and Slot fields), which may be
// shared and sent between threads; `base` is never reassigned and the mapping
// lives until Drop, so moving or sharing the handle is sound.
unsafe impl Send for Shared {}
// SAFETY: as for Send: every access through `&Shared` is an atomic operation.
unsafe impl Sync for Shared {}

impl Shared {
    /// Maps zeroed shared memory for `slots` slots.
    pub fn new(slots: usize) -> io::Result<Shared> {
        let len = Self::slot_offset(slots);
        let page = 4096;
        let len = len.div_ceil(page) * page;
        // SAFETY: a fresh anonymous mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Shared {
            base: base.cast(),
            bytes: len,
            slots,
        })
    }

    fn slot_offset(index: usize) -> usize {
        let header = std::mem::size_of::<Header>().div_ceil(64) * 64;
        header + index * std::mem::size_of::<Slot>()
    }

    /// The supervisor's header.
    pub fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a zeroed Header (all-zero atomics are valid).
        unsafe { &*(self.base as *const Header) }
    }

    /// Slot `index`.
    pub fn slot(&self, index: usize) -> &Slot {
        assert!(index < self.slots, "slot {index} out of {}", self.slots);
        // SAFETY: in bounds, aligned (offsets are multiples of 8), zero-initialised.
        unsafe { &*(self.base.add(Self::slot_offset(index)) as *const Slot) }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base.cast(), self.bytes) };
    }
}

fn write_text(dst: &[AtomicU8], text: &str) {
    let mut end = text.len().min(dst.len() - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    for (cell, &b) in dst.iter().zip(&text.as_bytes()[..end]) {
        cell.store(b, Ordering::Relaxed);
    }
    dst[end].store(0, Ordering::Relaxed);
}

fn read_text(src: &[AtomicU8]) -> String {
    let bytes: Vec<u8> = src
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_written_by_a_child_are_seen_by_the_parent() {
        let shared = Shared::new(3).unwrap();
        // SAFETY: a test process; the child only does atomic stores to the shared
        // mapping and then _exit, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            shared.slot(2).add(41);
            shared.slot(2).add(1);
            shared.slot(1).fail("boom");
            // SAFETY: _exit ends the child at once without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: `status` is a writable int and `pid` our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(shared.slot(2).ops(), 42);
        assert_eq!(shared.slot(1).state(), SLOT_FAILED);
        assert_eq!(shared.slot(1).message(), "boom");
        assert_eq!(shared.slot(0).state(), 0, "untouched slots stay zeroed");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let shared = Shared::new(1).unwrap();
        let long = "é".repeat(MSG_LEN);
        shared.slot(0).fail(&long);
        let got = shared.slot(0).message();
        assert!(got.len() < MSG_LEN && got.chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_first_failure_is_kept() {
        let shared = Shared::new(1).unwrap();
        shared.slot(0).fail("first");
        shared.slot(0).fail("second");
        assert_eq!(shared.slot(0).message(), "first");
    }
}
