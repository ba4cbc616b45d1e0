/*
 * cpushield.h — C API of cpushield-rt: real-time threads on shielded CPUs.
 *
 * Sherer's programming model (RTLinuxPro's pthread_attr_setcpu_np,
 * pthread_attr_setreserve_np, rtl_irq_set_affinity with old-mask restore,
 * clock_nanosleep with TIMER_ADVANCE) and the Hyades paper's lock-free
 * one-reader/one-writer FIFO, on stock Linux.
 *
 * Link: pkg-config --cflags --libs cpushield   (libcpushield_rt.so / .a)
 *
 * Conventions: functions returning int give 0 on success and a negative errno
 * on failure: -EBUSY a CPU is reserved by another process, -EAGAIN queue full
 * or empty, -EINVAL bad argument, -EPERM not permitted, -ENOENT no such IRQ,
 * -EIO kernel-managed IRQ. cps_last_error() then returns a one-line message
 * naming the cause and the remedy. CPU sets are strings: a list ("1", "2-3,6")
 * or a hex mask ("0x4").
 */
#ifndef CPUSHIELD_H
#define CPUSHIELD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors and time ---------------------------------------------------- */

/* Message of the last failing call on this thread ("" if none); valid until
 * the next failing call on the same thread. */
const char *cps_last_error(void);

/* CLOCK_MONOTONIC now, in nanoseconds (the clock every deadline here uses). */
uint64_t cps_now_ns(void);

/* ---- placing a thread (pthread_attr_setcpu_np) --------------------------- */

#define CPS_SCHED_OTHER 0 /* priority = nice value -20..19 */
#define CPS_SCHED_FIFO 1  /* priority 1..99 */
#define CPS_SCHED_RR 2    /* priority 1..99 */

/* Places thread `tid` (0 = the calling thread) on `cpus` with a policy and
 * priority. -EBUSY if another process reserved one of the CPUs. When the CPUs
 * are shielded (as root), that thread alone enters the shield's cpuset; the
 * program's other threads stay on the housekeeping CPUs (Sherer's model). On
 * cgroup v2 the process must be in the root cgroup for that; otherwise start
 * it with `cpushield run --cpus N -- prog`. */
int cps_place(int tid, const char *cpus, int policy, int priority);

/* The same with SCHED_DEADLINE (runtime <= deadline <= period, ns). */
int cps_place_deadline(int tid, const char *cpus, uint64_t runtime_ns,
                       uint64_t deadline_ns, uint64_t period_ns);

/* mlockall(MCL_CURRENT | MCL_FUTURE). */
int cps_lock_memory(void);

/* Touches `bytes` of the calling thread's stack so it takes no page faults later. */
void cps_prefault_stack(size_t bytes);

/* ---- reserving a CPU (pthread_attr_setreserve_np) ------------------------ */

typedef struct CpsReservation cps_reservation;

/* Reserves `cpus` for this process: no other cpushield placement may use them
 * until cps_reservation_free() or the process ends (also by crash or SIGKILL).
 * -EBUSY if held by another process; the message names its PID and command.
 * Lock files live in /run/cpushield/reserve, or $CPUSHIELD_RESERVE_DIR. */
int cps_reserve(const char *cpus, cps_reservation **out);

/* cps_reserve() of `cpus` and their SMT sibling threads (Sherer §6: work on a
 * sibling slows the reserved CPU down). */
int cps_reserve_core(const char *cpus, cps_reservation **out);

/* 0 if this process may place work on `cpus`, -EBUSY (naming the holder) if
 * another process reserved one of them. */
int cps_reserve_check(const char *cpus);

/* Releases a reservation. NULL is ignored. */
void cps_reservation_free(cps_reservation *r);

/* ---- periodic loop with advance (clock_nanosleep TIMER_ADVANCE) ---------- */

typedef struct CpsPeriodic cps_periodic;

typedef struct cps_periodic_stats_t {
    uint64_t cycles;                 /* deadlines waited for */
    uint64_t overruns;               /* deadlines already past when waited for: skipped */
    uint64_t worst_deviation_ns;     /* largest lateness past a deadline */
    uint64_t total_deviation_ns;     /* sum, for the mean */
    uint64_t worst_sleep_latency_ns; /* largest lateness of the sleep itself: the advance to choose */
} cps_periodic_stats_t;

/* A loop with absolute deadlines every `period_ns`, the first one period from
 * now. With `advance_ns` > 0 each wait sleeps to deadline - advance and spins
 * the rest: spend that CPU time on a shielded CPU only. NULL if period is 0. */
cps_periodic *cps_periodic_init(uint64_t period_ns, uint64_t advance_ns);

/* Waits for the next deadline; returns how late the return was, in ns. */
int64_t cps_periodic_wait_next(cps_periodic *p);

/* Copies the statistics so far into `out`. */
int cps_periodic_stats(const cps_periodic *p, cps_periodic_stats_t *out);

/* Frees the loop. NULL is ignored. */
void cps_periodic_free(cps_periodic *p);

/* ---- IRQ binding with old-mask restore (rtl_irq_set_affinity) ------------ */

typedef struct CpsIrqBinding cps_irq_binding;

/* Sends IRQ `irq` to `cpus`, remembering its old mask. -EIO for a
 * kernel-managed IRQ (only a boot parameter can move it; the message says
 * which), -ENOENT for no such IRQ, -EPERM when not root. */
int cps_irq_bind(unsigned int irq, const char *cpus, cps_irq_binding **out);

/* The mask the IRQ had before, as /proc/irq/N/smp_affinity showed it. */
const char *cps_irq_old_mask(const cps_irq_binding *b);

/* Writes the old mask back and frees the binding. NULL is ignored. */
int cps_irq_restore(cps_irq_binding *b);

/* ---- single-producer/single-consumer queue (the Hyades paper) ---------- */

typedef struct CpsSpsc cps_spsc;

/* A queue of at least `capacity` items (rounded up to a power of two) of
 * `item_size` bytes each. All memory is allocated here: push and pop never
 * allocate, block or retry (wait-free). Exactly one thread may push and
 * exactly one may pop. NULL if either argument is 0. */
cps_spsc *cps_spsc_create(size_t capacity, size_t item_size);

/* Copies item_size bytes from `item` in; -EAGAIN if full. */
int cps_spsc_push(cps_spsc *q, const void *item);

/* Copies the oldest item out to `item`; -EAGAIN if empty. */
int cps_spsc_pop(cps_spsc *q, void *item);

/* The number of slots. */
size_t cps_spsc_capacity(const cps_spsc *q);

/* Frees the queue once neither side uses it. NULL is ignored. */
void cps_spsc_destroy(cps_spsc *q);

#ifdef __cplusplus
}
#endif

#endif /* CPUSHIELD_H */
