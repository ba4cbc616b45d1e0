/* dev/bench/cgroup-move-floor.c: the kernel's own cost of moving tasks between
 * cpusets, the floor under any tool that shields by cgroup (dev/bench/shield-vs-peers.sh).
 *
 *   cgroup-move-floor FROM_TASKS TO_TASKS
 *
 * Writes every ID listed in FROM_TASKS (a v1 `tasks` or v2 `cgroup.threads`
 * file) into TO_TASKS, one write(2) per ID through one open file, and prints
 * "moved N failed M". The IDs the kernel refuses (per-CPU kernel threads)
 * count as failed. No /proc read, no affinity call, no journal: what is left
 * is the kernel's attach work per task. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: cgroup-move-floor FROM_TASKS TO_TASKS\n");
        return 1;
    }
    FILE *from = fopen(argv[1], "r");
    if (!from) {
        perror(argv[1]);
        return 1;
    }
    int to = open(argv[2], O_WRONLY);
    if (to < 0) {
        perror(argv[2]);
        return 1;
    }
    char line[32];
    long moved = 0, failed = 0;
    while (fgets(line, sizeof line, from)) {
        if (write(to, line, strlen(line)) < 0)
            failed++;
        else
            moved++;
    }
    printf("moved %ld failed %ld\n", moved, failed);
    return 0;
}
