/*
 * periodic.c — Sherer's periodic real-time thread, with cpushield.
 *
 * A thread placed on one CPU at SCHED_FIFO wakes every period on an absolute
 * deadline (optionally with advance: sleep to deadline - advance, spin the
 * rest), sends each cycle's deviation to the main thread through the
 * wait-free queue, and prints its worst deviation. Optionally reserves the
 * CPU and binds an IRQ to it, restoring the IRQ's old mask at the end.
 *
 *   cc periodic.c $(pkg-config --cflags --libs cpushield) -lpthread -o periodic
 *   ./periodic [-c CPU] [-p PERIOD_US] [-a ADVANCE_US] [-n CYCLES] [-f PRIO] [-r] [-i IRQ]
 *
 * Not permitted SCHED_FIFO? It warns and runs at SCHED_OTHER.
 */
#include <cpushield.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct config {
    const char *cpu;
    uint64_t period_us, advance_us, cycles;
    int prio, reserve, irq;
};

struct shared {
    const struct config *cfg;
    cps_spsc *samples; /* RT thread -> main thread: one int64_t deviation per cycle */
    atomic_int done;
    uint64_t dropped;  /* samples the queue had no room for */
    cps_periodic_stats_t stats;
    int failed;
};

static void *rt_thread(void *arg)
{
    struct shared *sh = arg;
    const struct config *c = sh->cfg;

    int rc = cps_place(0, c->cpu, CPS_SCHED_FIFO, c->prio);
    if (rc == -EPERM) {
        fprintf(stderr, "warning: %s; running at SCHED_OTHER\n", cps_last_error());
        rc = cps_place(0, c->cpu, CPS_SCHED_OTHER, 0);
    }
    if (rc != 0) {
        fprintf(stderr, "periodic: %s\n", cps_last_error());
        sh->failed = 1;
        atomic_store(&sh->done, 1);
        return NULL;
    }
    cps_prefault_stack(64 * 1024);

    cps_periodic *lp = cps_periodic_init(c->period_us * 1000, c->advance_us * 1000);
    for (uint64_t i = 0; i < c->cycles; i++) {
        int64_t deviation = cps_periodic_wait_next(lp);
        if (cps_spsc_push(sh->samples, &deviation) == -EAGAIN)
            sh->dropped++;
    }
    cps_periodic_stats(lp, &sh->stats);
    cps_periodic_free(lp);
    atomic_store(&sh->done, 1);
    return NULL;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-c CPU] [-p PERIOD_US] [-a ADVANCE_US] [-n CYCLES] [-f PRIO] [-r] [-i IRQ]\n",
            prog);
    exit(1);
}

int main(int argc, char **argv)
{
    struct config cfg = {.cpu = "1", .period_us = 1000, .advance_us = 0, .cycles = 1000,
                         .prio = 80, .reserve = 0, .irq = -1};
    int opt;
    while ((opt = getopt(argc, argv, "c:p:a:n:f:ri:")) != -1) {
        switch (opt) {
        case 'c': cfg.cpu = optarg; break;
        case 'p': cfg.period_us = strtoull(optarg, NULL, 10); break;
        case 'a': cfg.advance_us = strtoull(optarg, NULL, 10); break;
        case 'n': cfg.cycles = strtoull(optarg, NULL, 10); break;
        case 'f': cfg.prio = atoi(optarg); break;
        case 'r': cfg.reserve = 1; break;
        case 'i': cfg.irq = atoi(optarg); break;
        default: usage(argv[0]);
        }
    }
    if (cfg.period_us == 0)
        usage(argv[0]);

    if (cps_lock_memory() != 0)
        fprintf(stderr, "warning: %s\n", cps_last_error());

    cps_reservation *reservation = NULL;
    if (cfg.reserve) {
        if (cps_reserve(cfg.cpu, &reservation) != 0) {
            fprintf(stderr, "periodic: %s\n", cps_last_error());
            return 1;
        }
        printf("reserved CPU %s\n", cfg.cpu);
        fflush(stdout);
    }

    cps_irq_binding *irq = NULL;
    if (cfg.irq >= 0) {
        if (cps_irq_bind((unsigned)cfg.irq, cfg.cpu, &irq) != 0) {
            fprintf(stderr, "periodic: %s\n", cps_last_error());
            cps_reservation_free(reservation);
            return 1;
        }
        printf("IRQ %d bound to CPU %s (old mask %s)\n", cfg.irq, cfg.cpu, cps_irq_old_mask(irq));
    }

    struct shared sh = {.cfg = &cfg, .samples = cps_spsc_create(1024, sizeof(int64_t))};
    /* A small stack: with memory locked, every byte of it counts against
     * RLIMIT_MEMLOCK (glibc's default 8 MiB stack would not fit for non-root). */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    int err = pthread_create(&thread, &attr, rt_thread, &sh);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        fprintf(stderr, "periodic: pthread_create: %s\n", strerror(err));
        return 1;
    }

    /* The non-real-time side: drain the queue every millisecond, never spin. */
    uint64_t received = 0;
    int64_t worst_seen = 0, sample;
    for (;;) {
        int finished = atomic_load(&sh.done);
        while (cps_spsc_pop(sh.samples, &sample) == 0) {
            received++;
            if (sample > worst_seen)
                worst_seen = sample;
        }
        if (finished)
            break;
        usleep(1000);
    }
    pthread_join(thread, NULL);
    cps_spsc_destroy(sh.samples);

    int status = sh.failed;
    if (!sh.failed) {
        const cps_periodic_stats_t *s = &sh.stats;
        printf("worst deviation: %" PRIu64 " ns (CPU %s, period %" PRIu64 " us, advance %" PRIu64
               " us, %" PRIu64 " cycles, %" PRIu64 " overruns, mean %" PRIu64
               " ns, worst sleep latency %" PRIu64 " ns)\n",
               s->worst_deviation_ns, cfg.cpu, cfg.period_us, cfg.advance_us, s->cycles,
               s->overruns, s->cycles ? s->total_deviation_ns / s->cycles : 0,
               s->worst_sleep_latency_ns);
        printf("queue: %" PRIu64 " samples received, %" PRIu64 " dropped, worst %" PRId64 " ns\n",
               received, sh.dropped, worst_seen);
    }

    if (irq && cps_irq_restore(irq) != 0) {
        fprintf(stderr, "periodic: restoring IRQ %d: %s\n", cfg.irq, cps_last_error());
        status = 1;
    }
    cps_reservation_free(reservation);
    return status;
}
