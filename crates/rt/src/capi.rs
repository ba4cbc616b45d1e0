//! The C ABI (`include/cpushield.h`): Sherer's programming model for C
//! programs — place a thread, reserve its CPU, run a periodic loop with
//! advance, bind an IRQ and restore it, pass fixed-size items through the
//! wait-free queue.
//!
//! Conventions: functions returning `int` give 0 on success and a negative
//! errno on failure (`-EBUSY`: CPU reserved by another process; `-EAGAIN`:
//! queue full or empty; `-EINVAL`: bad argument); `cps_last_error()` then has
//! a one-line message with the remedy. Handles are opaque and freed by their
//! own `_free`/`_destroy`/`_restore` function.

use crate::irq::{self, IrqBinding, IrqError};
use crate::periodic::{Periodic, PeriodicStats};
use crate::reserve::{self, Reservation, ReserveError};
use crate::run::{AlonePlacer, RtRun, RunError};
use crate::sched::{self, Policy};
use crate::spsc::bytes::{self, ByteConsumer, ByteProducer};
use cpushield_cpuset::CpuSet;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io;
use std::time::Duration;

/// `policy` value of [`cps_place`]: SCHED_OTHER, `priority` is the nice value.
pub const CPS_SCHED_OTHER: c_int = 0;
/// `policy` value of [`cps_place`]: SCHED_FIFO, `priority` 1..99.
pub const CPS_SCHED_FIFO: c_int = 1;
/// `policy` value of [`cps_place`]: SCHED_RR, `priority` 1..99.
pub const CPS_SCHED_RR: c_int = 2;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(errno: c_int, message: impl Into<String>) -> c_int {
    let text = message.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(text).unwrap_or_default());
    -errno.abs()
}

fn fail_io(error: &io::Error, message: impl Into<String>) -> c_int {
    fail(error.raw_os_error().unwrap_or(libc::EIO), message)
}

fn fail_reserve(error: ReserveError) -> c_int {
    match &error {
        ReserveError::Held { .. } | ReserveError::Shielding { .. } => {
            fail(libc::EBUSY, error.to_string())
        }
        ReserveError::Io { source, .. } => fail_io(source, error.to_string()),
    }
}

fn fail_irq(error: IrqError) -> c_int {
    let errno = match &error {
        IrqError::NoSuchIrq { .. } => libc::ENOENT,
        IrqError::KernelManaged { .. } => libc::EIO,
        IrqError::NotPermitted { .. } => libc::EPERM,
        IrqError::Refused { .. } => libc::EINVAL,
        IrqError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
    };
    fail(errno, error.to_string())
}

/// Parses a C string CPU list ("1", "2-3") or mask ("0x4").
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string.
unsafe fn parse_cpus(cpus: *const c_char) -> Result<CpuSet, c_int> {
    if cpus.is_null() {
        return Err(fail(libc::EINVAL, "no CPU list given: pass e.g. \"1\""));
    }
    let text = CStr::from_ptr(cpus).to_string_lossy();
    match CpuSet::parse_user(&text) {
        Ok(set) if !set.is_empty() => Ok(set),
        Ok(_) => Err(fail(
            libc::EINVAL,
            format!("CPU list '{text}' is empty: name a CPU, e.g. \"1\""),
        )),
        Err(e) => Err(fail(
            libc::EINVAL,
            format!("CPU list '{text}': {e}; use a list like 1,3-4 or a mask like 0x8"),
        )),
    }
}

/// The message of the last failing call on this thread ("" if none).
/// Valid until the next failing call on the same thread.
#[no_mangle]
pub extern "C" fn cps_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// CLOCK_MONOTONIC now, in nanoseconds.
#[no_mangle]
pub extern "C" fn cps_now_ns() -> u64 {
    crate::clock::now_ns()
}

/// Places thread `tid` (0 = the caller) on `cpus` with a policy
/// (`CPS_SCHED_OTHER/FIFO/RR`) and priority (nice value for OTHER). Refuses
/// (-EBUSY) CPUs another process has reserved. On shielded CPUs that thread
/// alone enters the shield; its siblings stay on the housekeeping CPUs.
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cps_place(
    tid: c_int,
    cpus: *const c_char,
    policy: c_int,
    priority: c_int,
) -> c_int {
    let cpus = match parse_cpus(cpus) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    let prio_u8 = u8::try_from(priority).unwrap_or(0);
    let policy = match policy {
        CPS_SCHED_OTHER => Policy::Other { nice: priority },
        CPS_SCHED_FIFO => Policy::Fifo(prio_u8),
        CPS_SCHED_RR => Policy::RoundRobin(prio_u8),
        other => {
            return fail(
                libc::EINVAL,
                format!(
                "policy {other} is unknown: use CPS_SCHED_OTHER, CPS_SCHED_FIFO or CPS_SCHED_RR"
            ),
            )
        }
    };
    place(tid, &cpus, policy)
}

/// Places thread `tid` (0 = the caller) on `cpus` under SCHED_DEADLINE.
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cps_place_deadline(
    tid: c_int,
    cpus: *const c_char,
    runtime_ns: u64,
    deadline_ns: u64,
    period_ns: u64,
) -> c_int {
    let cpus = match parse_cpus(cpus) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    place(
        tid,
        &cpus,
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        },
    )
}

/// Places through the same orchestration as `cpushield run`, one thread
/// alone ([`AlonePlacer`]), refusing CPUs another process has reserved.
fn place(tid: c_int, cpus: &CpuSet, policy: Policy) -> c_int {
    let run = RtRun::new(
        crate::program::host().kernel(),
        &AlonePlacer,
        crate::program::reserves(),
    );
    match run.place_now(tid, cpus, policy) {
        Ok(()) => 0,
        Err(RunError::Reserve(e)) => fail_reserve(e),
        Err(RunError::Place(e)) => fail_io(&e.error, e.detail),
        Err(e) => fail(libc::EINVAL, e.to_string()),
    }
}

/// Locks all current and future memory of the process (mlockall).
#[no_mangle]
pub extern "C" fn cps_lock_memory() -> c_int {
    match sched::lock_memory() {
        Ok(()) => 0,
        Err(e) => fail_io(
            &e,
            format!("mlockall: {e}; run as root or raise RLIMIT_MEMLOCK (ulimit -l)"),
        ),
    }
}

/// Touches `bytes` of the caller's stack so later use takes no page fault.
#[no_mangle]
pub extern "C" fn cps_prefault_stack(bytes: usize) {
    sched::prefault_stack(bytes);
}

/// A held CPU reservation.
pub struct CpsReservation(#[allow(dead_code)] Reservation);

/// Reserves `cpus` for this process until [`cps_reservation_free`] or exit
/// (also on a crash or SIGKILL). -EBUSY if another process holds one; the
/// message names it.
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cps_reserve(cpus: *const c_char, out: *mut *mut CpsReservation) -> c_int {
    if out.is_null() {
        return fail(libc::EINVAL, "cps_reserve: out is NULL");
    }
    let cpus = match parse_cpus(cpus) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match reserve::reserve(&cpus) {
        Ok(r) => {
            *out = Box::into_raw(Box::new(CpsReservation(r)));
            0
        }
        Err(e) => fail_reserve(e),
    }
}

/// [`cps_reserve`] of `cpus` and their SMT sibling threads (Sherer §6).
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cps_reserve_core(
    cpus: *const c_char,
    out: *mut *mut CpsReservation,
) -> c_int {
    if out.is_null() {
        return fail(libc::EINVAL, "cps_reserve_core: out is NULL");
    }
    let cpus = match parse_cpus(cpus) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    let core = crate::thread::with_siblings(crate::program::host().kernel(), &cpus);
    match reserve::reserve(&core) {
        Ok(r) => {
            *out = Box::into_raw(Box::new(CpsReservation(r)));
            0
        }
        Err(e) => fail_reserve(e),
    }
}

/// 0 if this process may place work on `cpus`; -EBUSY (message names the
/// holder) if another process reserved one of them.
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cps_reserve_check(cpus: *const c_char) -> c_int {
    match parse_cpus(cpus) {
        Ok(cpus) => match reserve::check(&cpus) {
            Ok(()) => 0,
            Err(e) => fail_reserve(e),
        },
        Err(rc) => rc,
    }
}

/// Releases a reservation. NULL is ignored.
///
/// # Safety
/// `r` is NULL or came from [`cps_reserve`] and was not freed.
#[no_mangle]
pub unsafe extern "C" fn cps_reservation_free(r: *mut CpsReservation) {
    if !r.is_null() {
        drop(Box::from_raw(r));
    }
}

/// A periodic loop.
pub struct CpsPeriodic(Periodic);

/// A loop with period `period_ns` whose first deadline is one period from
/// now; with `advance_ns` > 0 it sleeps to deadline - advance and spins the
/// rest (use on a shielded CPU). NULL if `period_ns` is 0.
#[no_mangle]
pub extern "C" fn cps_periodic_init(period_ns: u64, advance_ns: u64) -> *mut CpsPeriodic {
    if period_ns == 0 {
        fail(libc::EINVAL, "period 0: give a period above 0 ns");
        return std::ptr::null_mut();
    }
    let lp = Periodic::new(Duration::from_nanos(period_ns))
        .with_advance(Duration::from_nanos(advance_ns));
    Box::into_raw(Box::new(CpsPeriodic(lp)))
}

/// Waits for the next deadline; returns how late the return was in ns
/// (-EINVAL if `p` is NULL).
///
/// # Safety
/// `p` is NULL or a live loop from [`cps_periodic_init`], used by one thread.
#[no_mangle]
pub unsafe extern "C" fn cps_periodic_wait_next(p: *mut CpsPeriodic) -> i64 {
    match p.as_mut() {
        Some(p) => p.0.wait_next().deviation_ns.min(i64::MAX as u64) as i64,
        None => i64::from(fail(libc::EINVAL, "cps_periodic_wait_next: NULL loop")),
    }
}

/// Copies the loop's statistics (cycles, overruns, worst and total deviation,
/// worst sleep latency) into `out`.
///
/// # Safety
/// `p` is NULL or a live loop; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cps_periodic_stats(
    p: *const CpsPeriodic,
    out: *mut PeriodicStats,
) -> c_int {
    match (p.as_ref(), out.is_null()) {
        (Some(p), false) => {
            out.write(p.0.stats());
            0
        }
        _ => fail(libc::EINVAL, "cps_periodic_stats: NULL argument"),
    }
}

/// Frees a loop. NULL is ignored.
///
/// # Safety
/// `p` is NULL or came from [`cps_periodic_init`] and was not freed.
#[no_mangle]
pub unsafe extern "C" fn cps_periodic_free(p: *mut CpsPeriodic) {
    if !p.is_null() {
        drop(Box::from_raw(p));
    }
}

/// An IRQ bound to CPUs, with its old mask.
pub struct CpsIrqBinding {
    binding: IrqBinding<'static>,
    old_mask: CString,
}

/// Sends IRQ `irq` to `cpus`, keeping the old mask for [`cps_irq_restore`].
/// A kernel-managed IRQ gives -EIO and a message naming the boot-time remedy.
///
/// # Safety
/// `cpus` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cps_irq_bind(
    irq: c_uint,
    cpus: *const c_char,
    out: *mut *mut CpsIrqBinding,
) -> c_int {
    if out.is_null() {
        return fail(libc::EINVAL, "cps_irq_bind: out is NULL");
    }
    let cpus = match parse_cpus(cpus) {
        Ok(c) => c,
        Err(rc) => return rc,
    };
    match irq::bind_irq(irq, &cpus) {
        Ok(binding) => {
            let old_mask = CString::new(binding.old_mask()).unwrap_or_default();
            *out = Box::into_raw(Box::new(CpsIrqBinding { binding, old_mask }));
            0
        }
        Err(e) => fail_irq(e),
    }
}

/// The IRQ's mask before the binding, as /proc/irq/N/smp_affinity showed it.
///
/// # Safety
/// `b` is NULL or a live binding.
#[no_mangle]
pub unsafe extern "C" fn cps_irq_old_mask(b: *const CpsIrqBinding) -> *const c_char {
    match b.as_ref() {
        Some(b) => b.old_mask.as_ptr(),
        None => std::ptr::null(),
    }
}

/// Writes the old mask back and frees the binding. NULL is ignored.
///
/// # Safety
/// `b` is NULL or came from [`cps_irq_bind`] and was not restored.
#[no_mangle]
pub unsafe extern "C" fn cps_irq_restore(b: *mut CpsIrqBinding) -> c_int {
    if b.is_null() {
        return 0;
    }
    let b = Box::from_raw(b);
    match b.binding.restore() {
        Ok(()) => 0,
        Err(e) => fail_irq(e),
    }
}

/// A single-producer, single-consumer queue of fixed-size items: exactly one
/// thread pushes and exactly one pops.
pub struct CpsSpsc {
    producer: ByteProducer,
    consumer: ByteConsumer,
}

/// A queue of at least `capacity` items (rounded up to a power of two) of
/// `item_size` bytes. All memory is allocated here; push and pop never
/// allocate and are wait-free. NULL if either is 0.
#[no_mangle]
pub extern "C" fn cps_spsc_create(capacity: usize, item_size: usize) -> *mut CpsSpsc {
    match bytes::channel(capacity, item_size) {
        Some((producer, consumer)) => Box::into_raw(Box::new(CpsSpsc { producer, consumer })),
        None => {
            fail(
                libc::EINVAL,
                format!("queue of {capacity} items of {item_size} bytes: both must be above 0 and fit in memory"),
            );
            std::ptr::null_mut()
        }
    }
}

/// Copies `item_size` bytes from `item` into the queue; -EAGAIN if full.
/// Call from the one producing thread only.
///
/// # Safety
/// `q` is a live queue; `item` points to `item_size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn cps_spsc_push(q: *mut CpsSpsc, item: *const c_void) -> c_int {
    if q.is_null() || item.is_null() {
        return -libc::EINVAL;
    }
    // Only the producer field is borrowed: the consumer thread may be using
    // the other field at the same time.
    let producer = &mut *std::ptr::addr_of_mut!((*q).producer);
    let item = std::slice::from_raw_parts(item.cast::<u8>(), producer.item_size());
    if producer.push(item) {
        0
    } else {
        -libc::EAGAIN
    }
}

/// Copies the oldest item into `item` (`item_size` bytes); -EAGAIN if empty.
/// Call from the one consuming thread only.
///
/// # Safety
/// `q` is a live queue; `item` points to `item_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn cps_spsc_pop(q: *mut CpsSpsc, item: *mut c_void) -> c_int {
    if q.is_null() || item.is_null() {
        return -libc::EINVAL;
    }
    let consumer = &mut *std::ptr::addr_of_mut!((*q).consumer);
    let out = std::slice::from_raw_parts_mut(item.cast::<u8>(), consumer.item_size());
    if consumer.pop(out) {
        0
    } else {
        -libc::EAGAIN
    }
}

/// The number of slots (0 for NULL).
///
/// # Safety
/// `q` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn cps_spsc_capacity(q: *const CpsSpsc) -> usize {
    q.as_ref().map_or(0, |q| q.producer.capacity())
}

/// Frees the queue and any items left in it. NULL is ignored.
///
/// # Safety
/// `q` is NULL or came from [`cps_spsc_create`], and neither side uses it any more.
#[no_mangle]
pub unsafe extern "C" fn cps_spsc_destroy(q: *mut CpsSpsc) {
    if !q.is_null() {
        drop(Box::from_raw(q));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_cpu_lists_fail_with_einval_and_a_message() {
        // SAFETY: the CPU list is a NUL-terminated literal that outlives the call.
        let rc = unsafe { cps_place(0, c"nonsense".as_ptr(), CPS_SCHED_OTHER, 0) };
        assert_eq!(rc, -libc::EINVAL);
        // SAFETY: cps_last_error returns a NUL-terminated thread-local string that
        // stays valid until the next cps_* call on this thread; we copy it at once.
        let msg = unsafe { CStr::from_ptr(cps_last_error()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("CPU list 'nonsense'"), "{msg}");
    }

    #[test]
    fn reserving_a_core_refuses_a_null_out_and_a_bad_list_before_any_lock() {
        let mut r = std::ptr::null_mut();
        // SAFETY: the CPU lists are NUL-terminated literals; `r` is writable.
        unsafe {
            assert_eq!(
                cps_reserve_core(c"1".as_ptr(), std::ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(cps_reserve_core(c"x".as_ptr(), &mut r), -libc::EINVAL);
        }
        assert!(r.is_null());
    }

    #[test]
    fn an_unknown_policy_is_refused() {
        // SAFETY: the CPU list is a NUL-terminated literal that outlives the call.
        let rc = unsafe { cps_place(0, c"1".as_ptr(), 9, 0) };
        assert_eq!(rc, -libc::EINVAL);
    }

    #[test]
    fn the_c_queue_passes_items_and_reports_full_and_empty() {
        let q = cps_spsc_create(2, 8);
        assert!(!q.is_null());
        // SAFETY: `q` is a live queue from cps_spsc_create (checked non-NULL) with
        // 8-byte items; every item pointer is a u64 on the stack, and `q` is freed once.
        unsafe {
            assert_eq!(cps_spsc_capacity(q), 2);
            for v in [1u64, 2] {
                assert_eq!(cps_spsc_push(q, (&v as *const u64).cast()), 0);
            }
            assert_eq!(
                cps_spsc_push(q, (&3u64 as *const u64).cast()),
                -libc::EAGAIN
            );
            let mut out = 0u64;
            assert_eq!(cps_spsc_pop(q, (&mut out as *mut u64).cast()), 0);
            assert_eq!(out, 1);
            cps_spsc_destroy(q);
        }
        assert!(cps_spsc_create(0, 8).is_null());
    }

    #[test]
    fn a_periodic_loop_reports_its_stats() {
        let p = cps_periodic_init(200_000, 0);
        // SAFETY: `p` is a live loop from cps_periodic_init, `st` is a writable
        // PeriodicStats, and `p` is freed once at the end.
        unsafe {
            assert!(cps_periodic_wait_next(p) >= 0);
            let mut st = PeriodicStats::default();
            assert_eq!(cps_periodic_stats(p, &mut st), 0);
            assert_eq!(st.cycles, 1);
            cps_periodic_free(p);
        }
        assert!(cps_periodic_init(0, 0).is_null());
    }

    #[test]
    fn binding_a_missing_irq_is_enoent() {
        let mut b = std::ptr::null_mut();
        // SAFETY: the CPU list is a NUL-terminated literal and `b` a writable pointer.
        let rc = unsafe { cps_irq_bind(4_000_000, c"1".as_ptr(), &mut b) };
        assert_eq!(rc, -libc::ENOENT);
        assert!(b.is_null());
    }
}
