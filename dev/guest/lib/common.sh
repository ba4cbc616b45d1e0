# Helpers shared by the guest scenarios (busybox ash). Sourced by /init with every
# other file of dev/guest/lib.
#
# Output protocol, one line each, parsed by dev/guest/run.sh:
#   GUEST-PASS <name>
#   GUEST-FAIL <name>: <reason>
#   GUEST-INFO <text>
#   GUEST-DONE failures=<n>
#
# Snapshots are directories of plain text files (see snapshot); every comparison is made
# on those files so a failure can print exactly what differed.

GUEST_FAILURES=0
CGROOT=/sys/fs/cgroup
CS=/bin/cpushield
# PF_NO_SETAFFINITY (include/linux/sched.h): per-CPU kernel threads whose affinity nobody can change.
PF_NO_SETAFFINITY=67108864
PF_KTHREAD=2097152

info() { echo "GUEST-INFO $*"; }
pass() { echo "GUEST-PASS $1"; }
fail() {
    GUEST_FAILURES=$((GUEST_FAILURES + 1))
    echo "GUEST-FAIL $1: $2"
}

# reserve_holder CPU RUNNER: the PID that holds CPU's reservation, once the task that
# `run --reserve` starts (not RUNNER, the backgrounded run itself) holds it; waits up to
# 5 s, prints nothing if it never does.
reserve_holder() {
    _i=0
    while [ "$_i" -lt 100 ]; do
        _h=$(cut -d' ' -f1 "/run/cpushield/reserve/cpu$1" 2>/dev/null)
        if [ -n "$_h" ] && [ "$_h" != 0 ] && [ "$_h" != "$2" ]; then
            echo "$_h"
            return
        fi
        usleep 50000
        _i=$((_i + 1))
    done
}

# check_eq NAME EXPECTED ACTUAL [what]
check_eq() {
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "${4:-value} expected '$2', got '$3'"; fi
}

# Seconds since boot with centisecond resolution, for timings and delays.
uptime_cs() { read -r up _ </proc/uptime; echo "${up%.*}${up#*.}"; }

# --- cgroup hierarchies ---------------------------------------------------------------

# mount_cgroups v2|v1|none
#   v2: cgroup2 at /sys/fs/cgroup with the cpuset controller enabled for children, like
#       systemd leaves it.
#   v1: the hybrid layout of Debian/Ubuntu hosts (and of our CI host): tmpfs at
#       /sys/fs/cgroup, v1 cpuset, cpu and memory hierarchies, cgroup2 (no controllers) at
#       /sys/fs/cgroup/unified.
mount_cgroups() {
    case "$1" in
        v2)
            mount -t cgroup2 cgroup2 "$CGROOT" || return 1
            echo +cpuset >"$CGROOT/cgroup.subtree_control" || return 1
            ;;
        v1)
            mount -t tmpfs -o mode=755 cgroup "$CGROOT" || return 1
            for c in cpuset cpu memory; do
                mkdir -p "$CGROOT/$c"
                mount -t cgroup -o "$c" cgroup "$CGROOT/$c" || return 1
            done
            mkdir -p "$CGROOT/unified"
            mount -t cgroup2 cgroup2 "$CGROOT/unified" || return 1
            ;;
        none) ;;
        *) return 1 ;;
    esac
}

# v1_cpuset_available: whether this kernel mounts a cgroup v1 cpuset hierarchy
# (CONFIG_CPUSETS_V1; Debian's 6.12 has none). Tries it on a scratch directory, before
# the scenario's hierarchy is mounted.
v1_cpuset_available() {
    mkdir -p /tmp/v1-probe
    mount -t cgroup -o cpuset cgroup /tmp/v1-probe 2>/dev/null || { rmdir /tmp/v1-probe; return 1; }
    umount /tmp/v1-probe
    rmdir /tmp/v1-probe
}

# in_root_cpuset PID: whether the task is in the root of the cpuset hierarchy mounted
# (v1 cpuset or v2).
in_root_cpuset() {
    case "$GUEST_CGROUP" in
        v1) grep -q ':cpuset:/$' "/proc/$1/cgroup" ;;
        *) grep -q '^0::/$' "/proc/$1/cgroup" ;;
    esac
}

# --- processes ------------------------------------------------------------------------

# spawn NAME CPUS [CGROUP_DIR]: start `sleep 1000` with affinity CPUS ("all" = inherited),
# optionally inside cgroup directory CGROUP_DIR (moved before the affinity is set, because
# attaching to a cpuset resets the affinity). Appends "pid cpus name" to /tmp/spawned,
# where cpus is the affinity the task must have ("all": every CPU its cpuset allows).
spawn() {
    _cg=${3:-}
    if [ "$2" = all ]; then _ts=""; else _ts="taskset -c $2"; fi
    if [ -n "$_cg" ]; then
        sh -c "echo \$\$ >$_cg/cgroup.procs && exec $_ts sleep 1000" &
    else
        $_ts sleep 1000 &
    fi
    _want=$2
    if [ "$_want" = all ]; then
        _want=$(cat "${_cg:-$CGROOT}/cpuset.cpus.effective" "${_cg:-$CGROOT}/cpuset.effective_cpus" \
            2>/dev/null | head -n 1)
        [ -n "$_want" ] || _want=$(cat /sys/devices/system/cpu/online)
    fi
    echo "$! $_want $1" >>/tmp/spawned
}

# spawn_many COUNT CPUS: COUNT plain sleepers with affinity CPUS, no per-task bookkeeping.
spawn_many() {
    _i=0
    if [ "$2" = all ]; then
        while [ $_i -lt "$1" ]; do sleep 1000 & _i=$((_i + 1)); done
    else
        while [ $_i -lt "$1" ]; do taskset -c "$2" sleep 1000 & _i=$((_i + 1)); done
    fi
}

# cpus_of PID: the Cpus_allowed_list of PID, empty if it is gone.
cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
# cgroups_of PID: /proc/PID/cgroup on one line.
cgroups_of() { tr '\n' ';' <"/proc/$1/cgroup" 2>/dev/null; }

# --- CPU list arithmetic (awk) ----------------------------------------------------------

# Functions prepended to awk programs: parse a kernel CPU list / hex mask into a set,
# print a set as a CPU list, and Brosky's rule.
AWK_CPUS='
function cpus_parse(list, set,    n, parts, i, r, a, b, c) {
    split("", set)
    n = split(list, parts, ",")
    for (i = 1; i <= n; i++) {
        if (parts[i] == "") continue
        if (split(parts[i], r, "-") == 2) { a = r[1] + 0; b = r[2] + 0 } else { a = parts[i] + 0; b = a }
        for (c = a; c <= b; c++) set[c] = 1
    }
}
function cpus_list(set,    c, out, start, max) {
    max = -1
    for (c in set) if (c + 0 > max) max = c + 0
    out = ""; start = -1
    for (c = 0; c <= max + 1; c++) {
        if ((c in set) && start < 0) start = c
        if (!(c in set) && start >= 0) {
            out = out (out == "" ? "" : ",") (start == c - 1 ? start : start "-" (c - 1))
            start = -1
        }
    }
    return out
}
function cpus_mask_to_list(mask,    hex, i, d, v, bit, set, pos) {
    hex = mask; gsub(/,/, "", hex); hex = tolower(hex)
    split("", set); pos = 0
    for (i = length(hex); i >= 1; i--) {
        d = substr(hex, i, 1); v = index("0123456789abcdef", d) - 1
        for (bit = 0; bit < 4; bit++) { if (v % 2 == 1) set[pos + bit] = 1; v = int(v / 2) }
        pos += 4
    }
    return cpus_list(set)
}
# Brosky rule (the shielded-processor paper): effective = requested & ~shielded if non-empty, else requested.
function cpus_rule(requested, shielded,    r, s, e, c, any) {
    cpus_parse(requested, r); cpus_parse(shielded, s)
    split("", e); any = 0
    for (c in r) if (!(c in s)) { e[c] = 1; any = 1 }
    return any ? cpus_list(e) : cpus_list(r)
}
'

# mask_to_list HEXMASK
mask_to_list() { awk -v m="$1" "$AWK_CPUS"' BEGIN { print cpus_mask_to_list(m) }'; }
# cpus_rule REQUESTED SHIELDED
cpus_rule() { awk -v r="$1" -v s="$2" "$AWK_CPUS"' BEGIN { print cpus_rule(r, s) }'; }
# cpus_has LIST CPU: true if CPU is in LIST.
cpus_has() { awk -v l="$1" -v c="$2" "$AWK_CPUS"' BEGIN { cpus_parse(l, s); exit !((c + 0) in s) }'; }

# --- snapshots ----------------------------------------------------------------------------

SYSCTL_EXCLUDE='random/|ns_last_pid|pty/nr|/tainted|hung_task_detect_count|/sched_domain/|perf_event_max|nr_|/osrelease|/version|dentry-state|inode-|file-nr|core_pattern_|vm/stat_refresh'

# snapshot DIR: the state reset must restore, as text files in DIR:
#   procs      pid comm cpus_allowed_list          (every task in /proc)
#   flags      pid flags                           (from /proc/PID/stat)
#   cgroups    pid /proc/PID/cgroup joined by ';'
#   irqs       irq smp_affinity_list              (every /proc/irq/N)
#   irqmasks   every smp_affinity and default_smp_affinity as its exact text
#   irqdefault default_smp_affinity as a CPU list
#   wq         workqueue cpumasks (global and per workqueue)
#   sysctl     /proc/sys/kernel, /proc/sys/vm (minus counters), cpu online/isolation files
#   cgtree     every cgroup directory with its cpuset/partition/controller files
snapshot() {
    _d=$1
    rm -rf "$_d"; mkdir -p "$_d"
    # One pass over stat for names and flags (kworkers append their current workqueue to the
    # name: keep the stable part), one over status for the affinity, one over cgroup.
    cat /proc/[0-9]*/stat 2>/dev/null | awk '{
            pid = $1; name = $0; sub(/^[^(]*\(/, "", name); sub(/\) [^)]*$/, "", name)
            if (name ~ /^kworker\//) sub(/-.*/, "", name)
            gsub(/[ \t]/, "_", name)
            rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
            print pid, name, f[7]
        }' | sort -n >"$_d/stat"
    grep -H '^Cpus_allowed_list' /proc/[0-9]*/status 2>/dev/null \
        | sed 's#^/proc/\([0-9]*\)/status:Cpus_allowed_list:[[:space:]]*#\1 #' >"$_d/cpus"
    awk 'FILENAME == ARGV[1] { c[$1] = $2; next } ($1 in c) { print $1, $2, c[$1] }' \
        "$_d/cpus" "$_d/stat" >"$_d/procs"
    awk '{ print $1, $3 }' "$_d/stat" >"$_d/flags"
    rm -f "$_d/cpus" "$_d/stat"
    grep -H '' /proc/[0-9]*/cgroup 2>/dev/null | awk '
        { split($0, p, "/"); pid = p[3]; sub(/^[^:]*:/, ""); c[pid] = c[pid] $0 ";" }
        END { for (pid in c) print pid, c[pid] }' | sort -n >"$_d/cgroups"
    for _irq in /proc/irq/[0-9]*; do
        read -r _v <"$_irq/smp_affinity_list"
        echo "${_irq#/proc/irq/} $_v"
    done | sort -n >"$_d/irqs"
    # What reset writes back, as the kernel shows it: the mask text, byte for byte.
    grep -H '' /proc/irq/[0-9]*/smp_affinity /proc/irq/default_smp_affinity | sort >"$_d/irqmasks"
    read -r _v </proc/irq/default_smp_affinity
    mask_to_list "$_v" >"$_d/irqdefault"
    for _f in /sys/devices/virtual/workqueue/cpumask /sys/devices/virtual/workqueue/*/cpumask; do
        [ -f "$_f" ] && read -r _v <"$_f" && echo "$_f $_v"
    done >"$_d/wq"
    { grep -r '' /proc/sys/kernel /proc/sys/vm 2>/dev/null | grep -v -E "$SYSCTL_EXCLUDE"
      for _f in /sys/devices/system/cpu/online /sys/devices/system/cpu/isolated \
                /sys/devices/system/cpu/nohz_full /sys/devices/system/cpu/cpu*/online; do
          [ -f "$_f" ] && { _v=; read -r _v <"$_f"; echo "$_f:$_v"; }
      done; } >"$_d/sysctl"
    find "$CGROOT" -mindepth 0 -type d 2>/dev/null | sort | while read -r _cg; do
        echo "$_cg/"
        for _f in cgroup.subtree_control cgroup.type cpuset.cpus cpuset.mems \
                  cpuset.cpus.partition cpuset.cpus.effective cpuset.effective_cpus \
                  cpuset.cpu_exclusive cpuset.mem_exclusive cpuset.sched_load_balance; do
            [ -f "$_cg/$_f" ] && { _v=; read -r _v <"$_cg/$_f"; echo "$_cg/$_f: $_v"; }
        done
    done >"$_d/cgtree"
}

# diff_pids A B: lines "pid ..." of A and B that differ, for pids (with the same comm,
# second field) present in both. Tasks that exit or start in between are not compared.
diff_pids() {
    awk 'NR == FNR { a[$1] = $0; n[$1] = $2; next }
         ($1 in a) && (n[$1] == $2 || n[$1] == "") && a[$1] != $0 { print "was [" a[$1] "] now [" $0 "]" }' "$1" "$2"
}
# diff_movable BEFORE AFTER: diff_pids of the procs files for tasks anyone can set the
# affinity of. Tasks flagged PF_NO_SETAFFINITY cannot be given an affinity by anyone, and
# the kernel itself rewrites some of them (6.1 sets unbound kworkers to the root cpuset's
# CPUs when a partition comes or goes): their differences go to /tmp/diff.unmovable, to
# be reported, not failed.
# A threaded IRQ handler (`irq/N-name`) is not compared: the kernel gives it its IRQ's
# effective affinity whenever the IRQ's mask is written or a CPU comes and goes (after a
# CPU hotplug on 6.12-rt, IO-APIC handler threads pinned to one CPU came back with 0-3,
# their IRQs' masks restored exactly). Such a line goes to /tmp/diff.irqthread when the
# thread lies within IRQ N's mask in B, and stays a difference when it does not.
diff_movable() {
    rm -f /tmp/diff.unmovable /tmp/diff.irqthread
    diff_pids "$1/procs" "$2/procs" | awk -v PF="$PF_NO_SETAFFINITY" "$AWK_CPUS"'
        function within(inner, outer,    i, o, c) {
            cpus_parse(inner, i); cpus_parse(outer, o)
            for (c in i) if (!(c in o)) return 0
            return 1
        }
        FILENAME == ARGV[1] { if (int($2 / PF) % 2 == 1) u[$1] = 1; next }
        FILENAME == ARGV[2] { irq[$1] = $2; next }
        {
            split($0, w, /[][ ]/)
            if (w[3] in u) { print > "/tmp/diff.unmovable"; next }
            if (match(w[4], /^irq\/[0-9]+-/)) {
                n = substr(w[4], 5, RLENGTH - 5)
                split($0, now, /now \[/); split(now[2], v, /[] ]/)
                if ((n in irq) && within(v[3], irq[n])) { print > "/tmp/diff.irqthread"; next }
            }
            print
        }' "$1/flags" "$2/irqs" -
}

# diff_cgroups_pids A B PROCS_A PROCS_B: like diff_pids for the cgroups file, matching comm
# from the procs files so a reused pid is not mistaken for the old task.
diff_cgroups_pids() {
    awk 'FILENAME == ARGV[1] { ca[$1] = $2; next }
         FILENAME == ARGV[2] { cb[$1] = $2; next }
         FILENAME == ARGV[3] { a[$1] = $0; next }
         ($1 in a) && ca[$1] == cb[$1] && a[$1] != $0 { print "was [" ca[$1] " " a[$1] "] now [" $0 "]" }' \
        "$3" "$4" "$1" "$2"
}

# report_diff NAME WHAT DIFF_FILE: pass if empty, else fail with the first lines, and up
# to 30 lines of detail as GUEST-INFO.
report_diff() {
    if [ ! -s "$3" ]; then
        pass "$1"
    else
        fail "$1" "$2 differ in $(wc -l <"$3") lines: $(head -n 5 "$3" | tr '\n' ' ')"
        head -n 30 "$3" | sed "s#^#GUEST-INFO   $1: #"
    fi
}

# compare_snapshots NAME BEFORE AFTER: every part of AFTER identical to BEFORE (tasks
# compared when present in both). One PASS/FAIL line per part: NAME/procs, NAME/irqs ...
compare_snapshots() {
    _n=$1; _a=$2; _b=$3
    diff_movable "$_a" "$_b" >/tmp/diff.out
    report_diff "$_n/affinities" "task affinities" /tmp/diff.out
    if [ -s /tmp/diff.irqthread ]; then
        info "$_n: IRQ handler threads the kernel moved with their IRQ (within its restored mask): $(tr '\n' ' ' </tmp/diff.irqthread)"
    fi
    if [ -s /tmp/diff.unmovable ]; then
        info "$_n: kernel-owned tasks (PF_NO_SETAFFINITY) whose affinity the kernel changed, not restorable by anyone: $(tr '\n' ' ' </tmp/diff.unmovable)"
    fi
    diff_cgroups_pids "$_a/cgroups" "$_b/cgroups" "$_a/procs" "$_b/procs" >/tmp/diff.out
    report_diff "$_n/cgroup-membership" "task cgroups" /tmp/diff.out
    diff "$_a/irqs" "$_b/irqs" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/irqs" "IRQ affinities" /tmp/diff.out
    diff "$_a/irqdefault" "$_b/irqdefault" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/irq-default" "default_smp_affinity" /tmp/diff.out
    diff "$_a/irqmasks" "$_b/irqmasks" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/irq-mask-text" "IRQ mask files (exact text)" /tmp/diff.out
    diff "$_a/wq" "$_b/wq" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/workqueue" "workqueue cpumasks" /tmp/diff.out
    diff "$_a/sysctl" "$_b/sysctl" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/sysctl" "sysctl/sysfs values" /tmp/diff.out
    diff "$_a/cgtree" "$_b/cgtree" | grep '^[-+][^-+]' >/tmp/diff.out
    report_diff "$_n/cgroup-tree" "cgroup directories/files" /tmp/diff.out
}

# same_snapshot BEFORE AFTER: true (silently) if compare_snapshots would pass everything.
same_snapshot() {
    [ -z "$(diff_movable "$1" "$2")" ] || return 1
    [ -z "$(diff_cgroups_pids "$1/cgroups" "$2/cgroups" "$1/procs" "$2/procs")" ] || return 1
    for _p in irqs irqmasks irqdefault wq sysctl cgtree; do
        cmp -s "$1/$_p" "$2/$_p" || return 1
    done
}

# expect_rule NAME BEFORE AFTER PROCS_SHIELDED IRQS_SHIELDED [EXCLUDED_PIDS_FILE]: every
# task in AFTER obeys Brosky's rule against its affinity in BEFORE and the process shield,
# every IRQ (and default_smp_affinity) against the IRQ shield. Not checked: tasks flagged
# PF_NO_SETAFFINITY (per-CPU kernel threads, listed as unmovable), tasks not in both,
# pids in EXCLUDED_PIDS_FILE. IRQs whose affinity cannot be written (see probe_irqs) must
# be unchanged instead. A threaded IRQ handler (`irq/N-name`, every device IRQ on
# PREEMPT_RT) follows its IRQ, not the rule: the kernel sets its affinity to the IRQ's
# effective one when the IRQ's mask is written, so it must lie within IRQ N's mask in AFTER.
# An IRQ left on shielded CPUs only (it asked for nothing else) keeps its thread in the
# root cpuset, which a v2 partition clamps to the other CPUs: outside the shield is right too.
expect_rule() {
    _n=$1; _a=$2; _b=$3; _s=$4; _si=$5; _x=${6:-/dev/null}
    awk -v S="$_s" -v PF="$PF_NO_SETAFFINITY" "$AWK_CPUS"'
        function within(inner, outer,    i, o, c) {
            cpus_parse(inner, i); cpus_parse(outer, o)
            for (c in i) if (!(c in o)) return 0
            return 1
        }
        function disjoint(a, b,    p, q, c) {
            cpus_parse(a, p); cpus_parse(b, q)
            for (c in p) if (c in q) return 0
            return 1
        }
        FILENAME == ARGV[1] { x[$1] = 1; next }
        FILENAME == ARGV[2] { f[$1] = $2; next }
        FILENAME == ARGV[3] { irq[$1] = $2; next }
        FILENAME == ARGV[4] { n[$1] = $2; r[$1] = $3; next }
        ($1 in r) && n[$1] == $2 && !($1 in x) && int(f[$1] / PF) % 2 == 0 {
            if (match($2, /^irq\/[0-9]+-/)) {
                i = substr($2, 5, RLENGTH - 5)
                if ((i in irq) && !within($3, irq[i]) && !(within(irq[i], S) && disjoint($3, S)))
                    print "pid " $1 " (" $2 ") expected within IRQ " i "\047s " irq[i] " got " $3
                next
            }
            want = cpus_rule(r[$1], S)
            if ($3 != want) print "pid " $1 " (" $2 ") requested " r[$1] " expected " want " got " $3
        }' "$_x" "$_a/flags" "$_b/irqs" "$_a/procs" "$_b/procs" >/tmp/rule.out
    report_diff "$_n/task-affinities" "rule violations" /tmp/rule.out
    awk -v S="$_si" "$AWK_CPUS"'
        FILENAME == ARGV[1] { fixed[$1] = 1; next }
        FILENAME == ARGV[2] { r[$1] = $2; next }
        ($1 in r) {
            want = ($1 in fixed) ? r[$1] : cpus_rule(r[$1], S)
            if ($2 != want) print "irq " $1 " was " r[$1] " expected " want ($1 in fixed ? " (unwritable)" : "") " got " $2
        }' /tmp/irq-unwritable "$_a/irqs" "$_b/irqs" >/tmp/rule.out
    report_diff "$_n/irq-affinities" "rule violations" /tmp/rule.out
    check_eq "$_n/irq-default" "$(cpus_rule "$(cat "$_a/irqdefault")" "$_si")" "$(cat "$_b/irqdefault")" \
        "default_smp_affinity"
}

# unmovable_tasks SNAPSHOT: pid comm cpus of tasks flagged PF_NO_SETAFFINITY.
unmovable_tasks() {
    awk -v PF="$PF_NO_SETAFFINITY" 'FILENAME == ARGV[1] { f[$1] = $2; next }
        int(f[$1] / PF) % 2 == 1' "$1/flags" "$1/procs"
}

# probe_irqs: which IRQs refuse an affinity write (kernel-managed, the timer...). Writes
# each IRQ's own mask back to it, which changes nothing, and lists refusals in
# /tmp/irq-unwritable.
probe_irqs() {
    : >/tmp/irq-unwritable
    for _irq in /proc/irq/[0-9]*; do
        read -r _m <"$_irq/smp_affinity"
        if ! echo "$_m" >"$_irq/smp_affinity" 2>/dev/null; then
            echo "${_irq#/proc/irq/}" >>/tmp/irq-unwritable
        fi
    done
}

# writable_irqs: numbers of the IRQs whose affinity can be set.
writable_irqs() {
    for _irq in /proc/irq/[0-9]*; do
        _n=${_irq#/proc/irq/}
        grep -qx "$_n" /tmp/irq-unwritable || echo "$_n"
    done
}

# --- running cpushield ----------------------------------------------------------------------

# cs ARGS...: run cpushield, output in /tmp/cs.out and /tmp/cs.err, exit status in CS_RC.
# With CS_TIMES set (a scenario that watches its cost), each run's wall time is said too.
cs() {
    [ -n "${CS_TIMES:-}" ] && _cs_t0=$(uptime_cs)
    "$CS" "$@" >/tmp/cs.out 2>/tmp/cs.err
    CS_RC=$?
    [ -n "${CS_TIMES:-}" ] && cs_time "cpushield $*" "$_cs_t0"
    return 0
}

# cs_time WHAT START_CS: says how long WHAT took since START_CS (uptime_cs), in seconds.
cs_time() {
    _dt=$(($(uptime_cs) - $2))
    info "took $((_dt / 100)).$(printf '%02d' $((_dt % 100))) s: $(echo "$1" | head -c 120)"
}

# cs_ok NAME ARGS...: run cpushield and PASS NAME if it exits 0, else FAIL with its stderr.
cs_ok() {
    _n=$1; shift
    cs "$@"
    if [ "$CS_RC" = 0 ]; then
        pass "$_n"
    else
        fail "$_n" "cpushield $* exited $CS_RC: $(head -c 400 /tmp/cs.err | tr '\n' ' ')"
    fi
}

# json_top KEY <FILE: the string value of top-level KEY of a JSON document; status 1 if
# there is no such key with a string value. A line-by-line scanner (JSON strings hold no
# raw newlines), enough for cpushield's output without a JSON tool in the guest.
json_top() {
    awk -v key="$1" '
        {
            s = $0; n = length(s); i = 1
            while (i <= n) {
                c = substr(s, i, 1)
                if (c == "\"") {
                    j = i + 1; str = ""
                    while (j <= n) {
                        d = substr(s, j, 1)
                        if (d == "\\") { str = str substr(s, j, 2); j += 2; continue }
                        if (d == "\"") break
                        str = str d; j++
                    }
                    i = j + 1
                    k = i; while (k <= n && substr(s, k, 1) ~ /[ \t\r]/) k++
                    if (substr(s, k, 1) == ":" ) { cur = (depth == 1) ? str : ""; i = k + 1; continue }
                    if (depth == 1 && cur == key && !found) { print str; found = 1 }
                    continue
                }
                if (c == "{" || c == "[") depth++
                else if (c == "}" || c == "]") depth--
                else if (c == "," && depth == 1) cur = ""
                i++
            }
        }
        END { exit !found }'
}

# json_flat <FILE: every scalar of a JSON document as one line `PATH<TAB>VALUE`, the path's
# object keys and array indices (from 0) joined by dots (`scenarios.0.latency.max_ns`),
# strings without their quotes. Line by line, as json_top (no token spans a line in
# cpushield's output).
json_flat() {
    awk '
        function emit(v,   p, x) {
            p = ""
            for (x = 1; x <= d; x++) p = p (x > 1 ? "." : "") key[x]
            print p "\t" v
        }
        {
            s = $0; n = length(s); i = 1
            while (i <= n) {
                c = substr(s, i, 1)
                if (c ~ /[ \t\r]/ || c == ":") { i++; continue }
                if (c == "{") { d++; type[d] = "o"; key[d] = ""; want[d] = 1; i++; continue }
                if (c == "[") { d++; type[d] = "a"; key[d] = 0; i++; continue }
                if (c == "}" || c == "]") { d--; i++; continue }
                if (c == ",") { if (type[d] == "a") key[d]++; else want[d] = 1; i++; continue }
                if (c == "\"") {
                    j = i + 1; str = ""
                    while (j <= n) {
                        e = substr(s, j, 1)
                        if (e == "\\") { str = str substr(s, j, 2); j += 2; continue }
                        if (e == "\"") break
                        str = str e; j++
                    }
                    i = j + 1
                    if (type[d] == "o" && want[d]) { key[d] = str; want[d] = 0 } else emit(str)
                    continue
                }
                j = i
                while (j <= n && substr(s, j, 1) !~ /[],} \t\r]/) j++
                emit(substr(s, i, j - i))
                i = j
            }
        }'
}

# json_at PATH <FLAT: the value at PATH of json_flat's output; status 1 if absent.
json_at() { awk -F '\t' -v p="$1" '$1 == p { print $2; found = 1; exit } END { exit !found }'; }

# expect_show NAME PROCS IRQS LTMR: `cpushield show --json` reports these top-level lists.
expect_show() {
    cs show --json
    if [ "$CS_RC" != 0 ]; then
        fail "$1" "cpushield show --json exited $CS_RC: $(head -c 300 /tmp/cs.err | tr '\n' ' ')"
        return
    fi
    _got="procs=$(json_top procs </tmp/cs.out || echo '<missing>')"
    _got="$_got irqs=$(json_top irqs </tmp/cs.out || echo '<missing>')"
    _got="$_got ltmr=$(json_top ltmr </tmp/cs.out || echo '<missing>')"
    check_eq "$1" "procs=$2 irqs=$3 ltmr=$4" "$_got" "show --json"
}

# finding_json FILE TITLE: the finding of `check --json` output FILE whose title starts
# with TITLE (a grep pattern), as one line; nothing when there is none. The JSON's keys
# are sorted, so a finding's evidence comes before its title: a finding is the object
# from the line that opens it, one level inside the top object, to the line that closes it.
finding_json() {
    awk '
        { line = $0; opens = gsub(/[{]/, "", line); closes = gsub(/[}]/, "", line) }
        depth == 1 && opens > closes { obj = "" }
        depth >= 1 { obj = obj " " $0 }
        { depth += opens - closes }
        depth == 1 && closes > opens { print obj }
    ' "$1" | grep "\"title\": \"$2" | head -n 1
}

# expect_finding NAME FILE TEXT: `check --json` output FILE has a finding whose title
# starts with TEXT (a grep pattern).
expect_finding() {
    if grep -q "\"title\": \"$3" "$2"; then
        pass "$1"
    else
        fail "$1" "no finding '$3' in: $(grep '"title"' "$2" | head -n 12 | sed 's/^ *"title": //' | tr '\n' ' ')"
    fi
}

# expect_no_finding NAME FILE TEXT: no finding whose title starts with TEXT.
expect_no_finding() {
    if grep -q "\"title\": \"$3" "$2"; then
        fail "$1" "$(grep "\"title\": \"$3" "$2" | head -n 3 | tr '\n' ' ')"
    else
        pass "$1"
    fi
}

# findings_of SEVERITY FILE: the titles of `check --json`'s findings of SEVERITY, | apart.
findings_of() {
    grep -A 4 "\"severity\": \"$1\"" "$2" | grep -o '"title": "[^"]*' | sed 's/"title": "//' | tr '\n' '|'
}

# busy_on CPU: a busy loop pinned to CPU in the background (one task running there);
# its PID in BUSY_PID.
busy_on() {
    taskset -c "$1" sh -c 'while :; do :; done' &
    BUSY_PID=$!
}

# expect_refused NAME BEFORE ARGS...: cpushield ARGS exits 1 with exactly one line on
# stderr, and the system is unchanged.
expect_refused() {
    _n=$1; _b=$2; shift 2
    cs "$@"
    if [ "$CS_RC" = 1 ]; then
        pass "$_n/exit-1"
    else
        fail "$_n/exit-1" "cpushield $* exited $CS_RC, expected 1 (stderr: $(head -c 200 /tmp/cs.err | tr '\n' ' '))"
    fi
    _lines=$(($(wc -l </tmp/cs.err)))
    if [ "$_lines" = 1 ]; then
        pass "$_n/one-line"
        info "$_n: $(cat /tmp/cs.err)"
    else
        fail "$_n/one-line" "cpushield $* printed $_lines lines on stderr: $(head -c 400 /tmp/cs.err | tr '\n' '|')"
    fi
    if grep -q -e 'forget the shield' -e 'rm .*state' -e 'remove the state' /tmp/cs.err; then
        fail "$_n/no-advice-that-loses-data" "$(head -c 300 /tmp/cs.err)"
    fi
    snapshot /tmp/snap-refused
    if same_snapshot "$_b" /tmp/snap-refused; then
        pass "$_n/nothing-changed"
    else
        compare_snapshots "$_n/nothing-changed" "$_b" /tmp/snap-refused
    fi
}

# expect_restored NAME BEFORE: a fresh snapshot equals BEFORE in every part.
expect_restored() {
    snapshot /tmp/snap-now
    compare_snapshots "$1" "$2" /tmp/snap-now
}

# cmdline_arg NAME [DEFAULT]: the value of kernel argument cpushield.NAME=VALUE.
cmdline_arg() {
    for _arg in $(cat /proc/cmdline); do
        case "$_arg" in cpushield.$1=*) echo "${_arg#cpushield.$1=}"; return ;; esac
    done
    echo "${2:-}"
}

# spawn_mix COUNT: COUNT sleepers, half with all CPUs and the rest split between only CPU 3,
# CPUs 1-3 and CPU 1 (the affinities the rule treats differently).
spawn_mix() {
    _q=$(($1 / 6))
    spawn_many $(($1 - 3 * _q)) all
    spawn_many "$_q" 3
    spawn_many "$_q" 1-3
    spawn_many "$_q" 1
}

# changed_quick BEFORE: true if the system visibly differs from snapshot BEFORE, looking only
# at the cheap parts (IRQs, workqueue masks, cgroup tree) and at the affinity of the first
# and last 100 tasks (cpushield may work in any order). A full snapshot of thousands of
# tasks takes long in the emulated guest; this is for "did anything change yet?".
changed_quick() {
    _q=/tmp/snap-quick
    rm -rf "$_q"; mkdir -p "$_q"
    { head -n 100 "$1/procs"; tail -n 100 "$1/procs"; } >"$_q/sample"
    for _p in $(awk '{ print $1 }' "$_q/sample"); do
        [ -r "/proc/$_p/status" ] && echo "/proc/$_p/status"
    done | xargs grep -H '^Cpus_allowed_list' 2>/dev/null \
        | sed 's#^/proc/\([0-9]*\)/status:Cpus_allowed_list:[[:space:]]*#\1 #' >"$_q/cpus"
    awk 'NR == FNR { c[$1] = $2; next } ($1 in c) && c[$1] != $3 { found = 1 } END { exit !found }' \
        "$_q/cpus" "$_q/sample" && return 0
    for _irq in /proc/irq/[0-9]*; do
        read -r _v <"$_irq/smp_affinity_list"
        echo "${_irq#/proc/irq/} $_v"
    done | sort -n | cmp -s - "$1/irqs" || return 0
    read -r _v </proc/irq/default_smp_affinity
    [ "$(mask_to_list "$_v")" = "$(cat "$1/irqdefault")" ] || return 0
    [ "$(find "$CGROOT" -type d | wc -l)" = "$(grep -c '/$' "$1/cgtree")" ] || return 0
    return 1
}
