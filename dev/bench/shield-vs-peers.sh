#!/usr/bin/env bash
# Shield and undo N sleeping tasks with cpushield, cset and tuna, side by side:
# for each N, ROUNDS rounds; each round runs in a fresh private PID namespace
# (`unshare --pid --fork --mount-proc`) holding N sleeping processes
# (dev/bench/sleepers.c: forked copies of one tiny process, no exec), and there
#   cpushield shield --all 1   then  cpushield reset
#   cset shield --cpu 1        then  cset shield --reset
#   tuna --cpus 1 --isolate    (no undo: `tuna --cpus 1 --include` of Debian's
#                               tuna 0.15 fails with a TypeError; the bench
#                               puts the IRQs back itself)
#   floor: dev/bench/cgroup-move-floor.c moves every task of the root cpuset into a
#          child cpuset and back, one write per ID: the kernel's own cost,
#          under every tool that shields by cgroup
#   reads: dev/bench/task-reads.c reads, for every task of the root cpuset, its
#          /proc stat, its comm, its affinity and a pidfd (one kind of read at
#          a time, one thread) and the root's two lists: what each per-task
#          read a shield could use costs the kernel, beside cset's time
# are each timed on the same N tasks (cpushield and cset alternate who goes
# first; tuna goes last, as nothing undoes it). Prints every run, then per N
# the median of each and the ratios to cset, then the median CPU time of each
# run split into user (the tool's own code) and system (the kernel's work),
# then the median cost of each per-task read and its share of cset's shield.
#
# Usage: dev/bench/shield-vs-peers.sh [ROUNDS=3] [TASKS...]   (default TASKS: 1000 10000 50000)
#   e.g. dev/bench/shield-vs-peers.sh 1 1000   (one quick round)
# Needs: root, cgroup v1 or v2 cpuset, CPU 1 online, cc, cset (apt-get install
# cpuset), tuna; scripts/dev-setup.sh installs them. Changes the cpuset hierarchy,
# IRQ affinities and the local-timer sysctls while it runs, and puts them back
# (also on failure); raises kernel.pid_max and kernel.threads-max when N needs
# it and restores them. Other tools that shield must not run meanwhile (in this
# project: under `flock /tmp/cpushield-hosttest.lock`). Nothing spins.
source "$(dirname "$0")/lib.sh"
bench_args "ROUNDS=3 TASKS..." "$@"
[ ${#TASKS[@]} -gt 0 ] || TASKS=(1000 10000 50000)
[ "$ROUNDS" -ge 1 ] || bench_die "ROUNDS must be at least 1"
for n in "${TASKS[@]}"; do
    [ "$n" -ge 1 ] || bench_die "each TASKS count must be at least 1"
done
bench_root
bench_need cc cset tuna unshare
bench_bin
[ -d /sys/devices/system/cpu/cpu1 ] && [ "$(cat /sys/devices/system/cpu/cpu1/online 2>/dev/null || echo 1)" = 1 ] ||
    bench_die "needs CPU 1 online (online: $(cat /sys/devices/system/cpu/online))"

WORK=$(mktemp -d /tmp/shield-vs-peers.XXXXXX)
SLEEPERS=$WORK/sleepers
cc -O2 -Wall -o "$SLEEPERS" dev/bench/sleepers.c || bench_die "cannot build dev/bench/sleepers.c"
FLOOR=$WORK/cgroup-move-floor
cc -O2 -Wall -o "$FLOOR" dev/bench/cgroup-move-floor.c || bench_die "cannot build dev/bench/cgroup-move-floor.c"
READS=$WORK/task-reads
cc -O2 -Wall -o "$READS" dev/bench/task-reads.c || bench_die "cannot build dev/bench/task-reads.c"
STATE=$WORK/state
CG=$(awk '$9 == "cgroup2" { v2 = $5 } $9 == "cgroup" && $NF ~ /(^|,)cpuset(,|$)/ { v1 = $5 }
          END { print (v1 != "" ? v1 : v2) }' /proc/self/mountinfo)
[ -n "$CG" ] || bench_die "no cpuset hierarchy mounted"
for d in cpushield-shield cpushield-system user system cpushield-bench-floor; do
    [ ! -e "$CG/$d" ] || bench_die "$CG/$d exists already (a shield in place?): reset it first"
done
# The floor's child cpuset: CPU 0 and the root's memory nodes (v1 needs both).
FLOOR_CG=$CG/cpushield-bench-floor
TASKS_FILE=tasks
[ -e "$CG/tasks" ] || TASKS_FILE=cgroup.procs

# What the tools change and the bench puts back.
PID_MAX=$(cat /proc/sys/kernel/pid_max)
THREADS_MAX=$(cat /proc/sys/kernel/threads-max)
IRQS=$WORK/irqs
for f in /proc/irq/*/smp_affinity /proc/irq/default_smp_affinity; do
    echo "$f $(cat "$f")"
done >"$IRQS"
restore_irqs() {
    local f v
    while read -r f v; do
        [ "$(cat "$f" 2>/dev/null)" = "$v" ] || echo "$v" >"$f" 2>/dev/null || true
    done <"$IRQS"
}
cleanup() {
    # The namespace (and every sleeper) is gone once unshare returns.
    if [ -e "$CG/cpushield-shield" ] || [ -e "$CG/cpushield-system" ]; then
        CPUSHIELD_STATE_DIR=$STATE "$BIN" reset --namespace-gone >/dev/null 2>&1 ||
            echo "$BENCH_NAME: cpushield's cgroups are left in $CG: CPUSHIELD_STATE_DIR=$STATE cpushield reset --namespace-gone" >&2
    fi
    if [ -e "$CG/user" ] || [ -e "$CG/system" ]; then
        cset shield --reset >/dev/null 2>&1 || echo "$BENCH_NAME: cset's cpusets are left in $CG: cset shield --reset" >&2
    fi
    if [ -d "$FLOOR_CG" ]; then
        "$FLOOR" "$FLOOR_CG/$TASKS_FILE" "$CG/$TASKS_FILE" >/dev/null 2>&1
        rmdir "$FLOOR_CG" 2>/dev/null || echo "$BENCH_NAME: $FLOOR_CG is left" >&2
    fi
    restore_irqs
    [ "$(cat /proc/sys/kernel/pid_max)" = "$PID_MAX" ] || echo "$PID_MAX" >/proc/sys/kernel/pid_max
    [ "$(cat /proc/sys/kernel/threads-max)" = "$THREADS_MAX" ] || echo "$THREADS_MAX" >/proc/sys/kernel/threads-max
    # A state left behind is kept for `reset --namespace-gone`.
    [ -e "$STATE/state.json" ] && return
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

MAX_N=$(printf '%s\n' "${TASKS[@]}" | sort -n | tail -1)
# Every sleeper takes a PID here and in the namespace; leave room for the rest.
NEED=$((MAX_N * 2 + 32768))
[ "$PID_MAX" -ge "$NEED" ] || echo $((NEED > 4194304 ? 4194304 : NEED)) >/proc/sys/kernel/pid_max
[ "$THREADS_MAX" -ge $((MAX_N + 32768)) ] || echo $((MAX_N + 32768)) >/proc/sys/kernel/threads-max

# One round in a private PID namespace: this function runs as its PID 1.
# Appends "tool-step rc wall_us user_ms sys_ms" lines to $OUT.
round() {
    set -u
    local n=$1 first=$2
    coproc SL { "$SLEEPERS" "$n"; }
    local ready
    read -r ready <&"${SL[0]}" || { echo "sleepers failed to start $n tasks" >&2; return 1; }
    sleep 1
    timed() {
        local name=$1 t0 t1 rc cpu
        shift
        # Wall time from bash's clock (no process forked inside the interval);
        # CPU time from bash's `times` in this shell (a subshell counts from 0):
        # its second line is the CPU time of the waited-for children so far,
        # so the difference is the tool's (and its own children's).
        times >"$WORK/times.0"
        t0=${EPOCHREALTIME/./}
        "$@" >"$WORK/$name.log" 2>&1
        rc=$?
        t1=${EPOCHREALTIME/./}
        times >"$WORK/times.1"
        cpu=$(awk 'FNR == 2 { for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t[FILENAME, i] = (p[1] * 60 + p[2]) * 1000 } }
                   END { printf "%d %d", t[ARGV[2], 1] - t[ARGV[1], 1], t[ARGV[2], 2] - t[ARGV[1], 2] }' \
            "$WORK/times.0" "$WORK/times.1")
        echo "$name $rc $((t1 - t0)) $cpu" >>"$OUT"
        [ "$rc" = 0 ] || { echo "$name failed (exit $rc):" >&2; tail -n 5 "$WORK/$name.log" >&2; }
    }
    ours() {
        CPUSHIELD_STATE_DIR=$STATE timed cpushield-shield "$BIN" shield --all 1
        CPUSHIELD_STATE_DIR=$STATE timed cpushield-undo "$BIN" reset
    }
    peer() {
        timed cset-shield cset shield --cpu 1
        timed cset-undo cset shield --reset
    }
    floor() {
        [ "$TASKS_FILE" = tasks ] || return 0 # v1 only: a v2 child needs its controllers enabled
        mkdir "$FLOOR_CG" &&
            echo 0 >"$FLOOR_CG/cpuset.cpus" &&
            cat "$CG/cpuset.mems" >"$FLOOR_CG/cpuset.mems" || return 1
        timed floor-shield "$FLOOR" "$CG/$TASKS_FILE" "$FLOOR_CG/$TASKS_FILE"
        timed floor-undo "$FLOOR" "$FLOOR_CG/$TASKS_FILE" "$CG/$TASKS_FILE"
        rmdir "$FLOOR_CG"
    }
    reads() {
        local threads=tasks
        [ "$TASKS_FILE" = tasks ] || threads=cgroup.threads
        if "$READS" "$CG/$threads" "$CG/cgroup.procs" >"$WORK/reads.out"; then
            sed 's/^/reads /' "$WORK/reads.out" >>"$OUT"
        else
            echo "dev/bench/task-reads.c failed (this run reports no per-task reads)" >&2
        fi
    }
    if [ "$first" = ours ]; then ours; peer; else peer; ours; fi
    floor
    reads
    timed tuna-shield tuna --cpus 1 --isolate
    restore_irqs
    exec {SL[1]}>&-
    wait
}
export -f round restore_irqs
export SLEEPERS BIN STATE WORK IRQS FLOOR READS FLOOR_CG CG TASKS_FILE

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) CPUs, cpuset in $CG, shielding CPU 1, $ROUNDS round(s)"
printf '%-8s %-6s %-10s %12s %12s\n' tasks round tool shield_ms undo_ms
SUMMARY=$WORK/summary
CPU_SUMMARY=$WORK/cpu-summary
for n in "${TASKS[@]}"; do
    for r in $(seq 1 "$ROUNDS"); do
        OUT=$WORK/times.$n.$r
        export OUT
        : >"$OUT"
        first=ours
        [ $((r % 2)) = 1 ] || first=peer
        unshare --pid --fork --mount-proc bash -c "round $n $first" ||
            bench_die "round $r with $n tasks failed (logs in $WORK)"
        if awk '$1 != "reads" && $2 != 0 { bad = 1 } END { exit !bad }' "$OUT"; then
            bench_die "a tool failed in round $r with $n tasks (logs in $WORK)"
        fi
        for d in cpushield-shield cpushield-system user system cpushield-bench-floor; do
            [ ! -e "$CG/$d" ] || bench_die "$CG/$d is left after round $r: the undo did not finish"
        done
        awk -v n="$n" '$1 == "reads" { print n, $2, $3, $4, $5 }' "$OUT" >>"$WORK/reads-summary"
        for tool in cpushield cset floor tuna; do
            s=$(awk -v k="$tool-shield" '$1 == k { print $3 }' "$OUT")
            u=$(awk -v k="$tool-undo" '$1 == k { print $3 }' "$OUT")
            printf '%-8s %-6s %-10s %12.1f %12s\n' "$n" "$r" "$tool" "$(echo "$s / 1000" | bc -l)" \
                "$([ -n "$u" ] && printf '%.1f' "$(echo "$u / 1000" | bc -l)" || echo -)"
            echo "$n $tool $s ${u:--}" >>"$SUMMARY"
            for step in shield undo; do
                awk -v n="$n" -v k="$tool-$step" -v t="$tool" -v st="$step" \
                    '$1 == k { print n, t, st, $4, $5 }' "$OUT" >>"$CPU_SUMMARY"
            done
        done
    done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "# medians of $ROUNDS round(s); ratio = cpushield / cset (target: at most 0.5 at 10,000 and 50,000); floor/cset = the kernel's own share of cset's time"
printf '%-8s %-10s %12s %12s %14s %14s\n' tasks tool shield_ms undo_ms shield_us/task undo_us/task
for n in "${TASKS[@]}"; do
    for tool in cpushield cset floor tuna; do
        s=$(awk -v n="$n" -v t="$tool" '$1 == n && $2 == t { print $3 }' "$SUMMARY" | median)
        u=$(awk -v n="$n" -v t="$tool" '$1 == n && $2 == t && $4 != "-" { print $4 }' "$SUMMARY" | median)
        eval "S_$tool=$s U_$tool=$u"
        [ "$s" != - ] || continue
        if [ "$u" = - ]; then
            printf '%-8s %-10s %12.1f %12s %14.1f %14s\n' "$n" "$tool" "$(echo "$s / 1000" | bc -l)" - \
                "$(echo "$s / $n" | bc -l)" -
        else
            printf '%-8s %-10s %12.1f %12.1f %14.1f %14.1f\n' "$n" "$tool" "$(echo "$s / 1000" | bc -l)" \
                "$(echo "$u / 1000" | bc -l)" "$(echo "$s / $n" | bc -l)" "$(echo "$u / $n" | bc -l)"
        fi
    done
    printf '%-8s %-10s %12.2f %12.2f\n' "$n" "ratio" "$(echo "$S_cpushield / $S_cset" | bc -l)" \
        "$(echo "$U_cpushield / $U_cset" | bc -l)"
    [ "$S_floor" = - ] || printf '%-8s %-10s %12.2f %12.2f\n' "$n" "floor/cset" "$(echo "$S_floor / $S_cset" | bc -l)" \
        "$(echo "$U_floor / $U_cset" | bc -l)"
done
echo
echo "# CPU time of each run, medians of $ROUNDS round(s): user (the tool's own code) and system (the kernel's work for it), ms (bash's \`times\`, whose resolution is the kernel's accounting)"
printf '%-8s %-10s %-7s %10s %10s\n' tasks tool step user_ms sys_ms
for n in "${TASKS[@]}"; do
    for tool in cpushield cset floor tuna; do
        for step in shield undo; do
            cu=$(awk -v n="$n" -v t="$tool" -v st="$step" '$1 == n && $2 == t && $3 == st { print $4 }' "$CPU_SUMMARY" | median)
            cs=$(awk -v n="$n" -v t="$tool" -v st="$step" '$1 == n && $2 == t && $3 == st { print $5 }' "$CPU_SUMMARY" | median)
            [ "$cu" != - ] || continue
            printf '%-8s %-10s %-7s %10s %10s\n' "$n" "$tool" "$step" "$cu" "$cs"
        done
    done
done
echo
echo "# per-task reads (dev/bench/task-reads.c, one thread, every task of the root cpuset), medians of $ROUNDS round(s); share = total / cset's shield time"
printf '%-8s %-12s %10s %10s %8s %8s\n' tasks read total_ms us/task share failed
for n in "${TASKS[@]}"; do
    S_cset=$(awk -v n="$n" '$1 == n && $2 == "cset" { print $3 }' "$SUMMARY" | median)
    for kind in list-tasks list-procs stat comm affinity pidfd; do
        t=$(awk -v n="$n" -v k="$kind" '$1 == n && $2 == k { print $3 }' "$WORK/reads-summary" | median)
        [ "$t" != - ] || continue
        per=$(awk -v n="$n" -v k="$kind" '$1 == n && $2 == k { print $4 }' "$WORK/reads-summary" | median)
        # Calls the kernel refused (pidfd_open before Linux 5.3, a task gone meanwhile).
        failed=$(awk -v n="$n" -v k="$kind" '$1 == n && $2 == k { print $5 }' "$WORK/reads-summary" | median)
        printf '%-8s %-12s %10.1f %10.2f %8.2f %8s\n' "$n" "$kind" "$t" "$per" "$(echo "$t * 1000 / $S_cset" | bc -l)" "$failed"
    done
done
