/* dev/bench/sleepers.c: forks N sleeping processes for dev/bench/shield-vs-peers.sh.
 *
 *   sleepers N     forks N children that sleep in pause(), prints "ready N" on
 *                  stdout, then waits until its standard input closes (or it
 *                  gets SIGTERM/SIGINT/SIGHUP), kills every child and reaps them.
 *
 * Each child is a copy of this tiny process (no exec), so 50,000 of them cost
 * little memory. Children die with the parent too (PR_SET_PDEATHSIG), and the
 * bench runs it inside a private PID namespace, whose end kills what is left. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
    if (argc != 2 || atol(argv[1]) <= 0) {
        fprintf(stderr, "usage: sleepers N (N > 0 processes to fork)\n");
        return 1;
    }
    long n = atol(argv[1]);
    pid_t *kids = calloc((size_t)n, sizeof(pid_t));
    if (!kids) {
        perror("sleepers: calloc");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    pid_t parent = getpid();
    long made = 0;
    for (; made < n && !stop; made++) {
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(0);
            for (;;)
                pause();
        }
        if (pid < 0) {
            fprintf(stderr, "sleepers: fork %ld of %ld: %s (check /proc/sys/kernel/pid_max and threads-max)\n",
                    made + 1, n, strerror(errno));
            break;
        }
        kids[made] = pid;
    }
    int ok = made == n && !stop;
    if (ok) {
        printf("ready %ld\n", made);
        fflush(stdout);
        char buf[64];
        while (!stop && read(0, buf, sizeof buf) > 0) {
        }
    }
    for (long i = 0; i < made; i++)
        kill(kids[i], SIGKILL);
    while (wait(NULL) > 0 || errno == EINTR) {
    }
    return ok ? 0 : 1;
}
