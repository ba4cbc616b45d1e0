/* dev/bench/trace-ab.c: what a set of trace events costs a real-time timer loop's
 * wakeup, measured A/B inside one run so that the host's slow drift cancels.
 *
 *   trace-ab SECS ON_CMD OFF_CMD
 *
 * A thread on CPU 1 at SCHED_FIFO 95 sleeps to absolute 1 ms deadlines
 * (clock_nanosleep, CLOCK_MONOTONIC) and bins each wakeup latency at 100 ns.
 * The main thread, on CPU 0, runs ON_CMD and OFF_CMD (shell commands, e.g.
 * enabling and disabling events in a tracefs instance) in turn every 200 ms;
 * samples that straddle a switch are dropped. Prints one line: the p10, p50
 * and p90 of each half and the on-minus-off differences.
 * /dev/cpu_dma_latency is held at 0 as cyclictest does. Written in C (not
 * cyclictest) because cyclictest cannot switch a setting during its run. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BINS 10000 /* 100 ns each: up to 1 ms */
static volatile int phase = -1, stop;
static long hist[2][BINS], count[2];

static void *loop(void *arg) {
    (void)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct sched_param sp = {.sched_priority = 95};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        perror("trace-ab: sched_setscheduler");
        exit(1);
    }
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!stop) {
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        int ph = phase;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ns = (now.tv_sec - next.tv_sec) * 1000000000L + now.tv_nsec - next.tv_nsec;
        if (ph >= 0 && ph == phase) {
            long bin = ns / 100;
            hist[ph][bin < BINS ? bin : BINS - 1]++;
            count[ph]++;
        }
    }
    return NULL;
}

static double pct(int ph, double q) {
    long c = 0;
    for (int i = 0; i < BINS; i++) {
        c += hist[ph][i];
        if (c >= q * count[ph])
            return i / 10.0;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 4 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: trace-ab SECS ON_CMD OFF_CMD\n");
        return 1;
    }
    int secs = atoi(argv[1]);
    mlockall(MCL_CURRENT | MCL_FUTURE);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof set, &set);
    int dma = open("/dev/cpu_dma_latency", O_WRONLY);
    int zero = 0;
    if (dma >= 0 && write(dma, &zero, sizeof zero) != sizeof zero)
        perror("trace-ab: /dev/cpu_dma_latency");
    pthread_t t;
    pthread_create(&t, NULL, loop, NULL);
    for (int i = 0; i < secs * 5; i++) {
        int on = i & 1;
        phase = -1;
        if (system(on ? argv[2] : argv[3]) != 0) {
            fprintf(stderr, "trace-ab: '%s' failed\n", on ? argv[2] : argv[3]);
            stop = 1;
            pthread_join(t, NULL);
            return 1;
        }
        phase = on;
        usleep(200000);
    }
    stop = 1;
    pthread_join(t, NULL);
    if (system(argv[3]) != 0)
        fprintf(stderr, "trace-ab: '%s' failed\n", argv[3]);
    printf("off_n %ld off_p10 %.1f off_p50 %.1f off_p90 %.1f on_n %ld on_p10 %.1f on_p50 %.1f on_p90 %.1f diff_p50 %.1f diff_p10 %.1f\n",
           count[0], pct(0, .1), pct(0, .5), pct(0, .9), count[1], pct(1, .1), pct(1, .5), pct(1, .9),
           pct(1, .5) - pct(0, .5), pct(1, .1) - pct(0, .1));
    return 0;
}
