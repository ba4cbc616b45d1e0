/* dev/bench/task-reads.c: what each per-task read a shield can use costs the
 * kernel, for every task of one cpuset (dev/bench/task-reads.sh).
 *
 *   task-reads TASKS_FILE PROCS_FILE
 *
 * Reads the IDs listed in TASKS_FILE (a v1 `tasks` or v2 `cgroup.threads`
 * file), then for every ID, one kind of read at a time over all of them:
 *   stat       open, read and close /proc/ID/stat (start time, flags, comm,
 *              thread count: what cpushield's first shield reads per task)
 *   comm       the same for /proc/ID/comm (the command name alone)
 *   affinity   sched_getaffinity
 *   pidfd      pidfd_open, fstat, close (on pidfs, Linux 6.9+, the inode
 *              number names the task for the whole boot; without
 *              PIDFD_THREAD a thread that is not its process's leader fails)
 * and the two lists themselves (TASKS_FILE, PROCS_FILE: one read each).
 * Prints one line per kind: "KIND total_ms per_task_us failed". Nothing is
 * written anywhere; one thread, so the figures are the kernel's work per call. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Reads a whole list file; returns the number of IDs, filling ids when set. */
static long read_list(const char *path, int *ids, long cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    long n = 0;
    int id;
    while (fscanf(f, "%d", &id) == 1) {
        if (ids && n < cap)
            ids[n] = id;
        n++;
    }
    fclose(f);
    return n;
}

static void report(const char *kind, double ms, long n, long failed) {
    printf("%s %.1f %.2f %ld\n", kind, ms, n ? ms * 1e3 / n : 0.0, failed);
}

static long read_each(const int *ids, long n, const char *file) {
    char path[64], buf[1024];
    long failed = 0;
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/proc/%d/%s", ids[i], file);
        int fd = open(path, O_RDONLY);
        if (fd < 0 || read(fd, buf, sizeof buf) <= 0)
            failed++;
        if (fd >= 0)
            close(fd);
    }
    return failed;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: task-reads TASKS_FILE PROCS_FILE\n");
        return 1;
    }
    long cap = 4 * 1024 * 1024;
    int *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        perror("malloc");
        return 1;
    }
    double t0 = now_ms();
    long n = read_list(argv[1], ids, cap);
    report("list-tasks", now_ms() - t0, n, 0);
    if (n > cap)
        n = cap;
    t0 = now_ms();
    long procs = read_list(argv[2], NULL, 0);
    report("list-procs", now_ms() - t0, procs, 0);

    t0 = now_ms();
    long failed = read_each(ids, n, "stat");
    report("stat", now_ms() - t0, n, failed);

    t0 = now_ms();
    failed = read_each(ids, n, "comm");
    report("comm", now_ms() - t0, n, failed);

    cpu_set_t set;
    failed = 0;
    t0 = now_ms();
    for (long i = 0; i < n; i++)
        if (sched_getaffinity(ids[i], sizeof set, &set) != 0)
            failed++;
    report("affinity", now_ms() - t0, n, failed);

    struct stat st;
    failed = 0;
    t0 = now_ms();
    for (long i = 0; i < n; i++) {
        int fd = syscall(SYS_pidfd_open, ids[i], 0);
        if (fd < 0 || fstat(fd, &st) != 0)
            failed++;
        if (fd >= 0)
            close(fd);
    }
    report("pidfd", now_ms() - t0, n, failed);
    return 0;
}
