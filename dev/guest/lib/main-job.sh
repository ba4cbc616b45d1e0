# Helpers of the main-job scenarios (main-job-*.sh): cpushield run as a user runs it,
# with its defaults, and what must hold after each command whatever the timings.

# The load of the main-job compares: the default (stress-kernel) as it runs here, without
# compile (no C compiler in this initramfs; main-job-4 checks that the default says so)
# and without crashme, whose random instructions QEMU's TCG cannot run: one crashed QEMU
# ("gen_pinsr: Assertion `vec_len == 16' failed", 6.12-rt) and oopses filled 6.1's
# console. `demo --load` takes the same list.
GUEST_LOAD=ttcp,fifos-mmap,fpu,fs

# lo_up: the loopback interface up, as on any machine a user runs (ttcp, netflood and
# `measure net` talk over 127.0.0.1; this initramfs leaves lo down).
lo_up() {
    ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
}

# own_watch_start: samples every 0.2 s, until own_watch_stop, each thread named cpushield*
# that is not a measuring thread (cpushield-cpuN) or an idle poller (cpushield-pollN), as
# "TIME_CS TID COMM ALLOWED LAST_CPU CPU_TICKS" lines in /tmp/own.seen: where cpushield's own threads (its
# main thread, the tracer's reader, the load's supervisor, the anchor's runner) may run.
own_watch_start() {
    : >/tmp/own.seen
    rm -f /tmp/own-stop
    (
        while [ ! -e /tmp/own-stop ]; do
            _t=$(uptime_cs)
            for _c in $(grep -l '^cpushield' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null); do
                _d=${_c%/comm}
                _n=$(cat "$_c" 2>/dev/null) || continue
                case "$_n" in cpushield-cpu* | cpushield-poll*) continue ;; esac
                _a=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$_d/status" 2>/dev/null)
                # The CPU it last ran on (stat field 39, counted after the comm) and
                # its CPU time so far (utime + stime, fields 14 and 15), in ticks.
                _s=$(sed 's/^.*) //' "$_d/stat" 2>/dev/null | cut -d' ' -f12,13,37)
                _p=${_s##* }
                _r=$(echo "$_s" | awk '{ print $1 + $2 }')
                [ -n "$_a" ] && echo "$_t ${_d##*/} $_n $_a ${_p:-?} ${_r:-0}" >>/tmp/own.seen
            done
            usleep 200000
        done
    ) &
    OWN_WATCH=$!
}

own_watch_stop() {
    touch /tmp/own-stop
    wait "$OWN_WATCH" 2>/dev/null
}

# expect_own_threads_off NAME MEASURED: no thread sampled by own_watch could run and ran
# on a CPU of MEASURED (a CPU list) for 1.5 s or more (a thread asleep all along, such as
# the command's first process waiting for its PID namespace, keeps the CPU it last ran on
# though a partition's change may widen its CPUs on 6.1, so a sample counts only when the
# thread's CPU time grew since its last one): a misplaced thread stays so for a whole
# scenario, while a thread between its start and its placement (the command before its
# checks chose the CPUs, `cpushield run`'s child before it becomes cyclictest) may for
# a moment, which under emulation can last a second.
expect_own_threads_off() {
    awk -v M="$2" "$AWK_CPUS"'
        BEGIN { cpus_parse(M, m) }
        {
            cpus_parse($4, a); hit = 0
            for (c in a) if (c in m) hit = 1
            if (!(($5 + 0) in m)) hit = 0
            # It ran there only if its CPU time grew since its last sample: a thread
            # asleep all along keeps the CPU it last ran on without running on it.
            ran = ($2 in ticks) && $6 > ticks[$2]
            ticks[$2] = $6
            if (!hit || !ran) next
            if (!($2 in first)) { first[$2] = $1; what[$2] = $3 " (" $2 ") allowed " $4 " ran on " $5 }
            last[$2] = $1
        }
        END { for (t in first) if (last[t] - first[t] >= 150) print what[t] " for " (last[t] - first[t]) / 100 " s" }' \
        /tmp/own.seen >/tmp/own.bad
    info "$1: $(wc -l </tmp/own.seen) samples of cpushield's own threads"
    report_diff "$1" "cpushield's own threads on measured CPUs $2" /tmp/own.bad
}

# measured_cpus REPORT_JSON: the union of every scenario's measured CPUs, as a list.
measured_cpus() {
    json_flat <"$1" | awk -F '\t' '$1 ~ /^scenarios\.[0-9]+\.measured_cpus$/ { print $2 }' |
        tr '\n' ',' | sed 's/,$//'
}

# expect_report NAME DIR SCENARIO...: DIR has report.json and report.html, and
# report.json a row for each SCENARIO.
expect_report() {
    _n=$1 _dir=$2; shift 2
    for _f in report.json report.html; do
        if [ -s "$_dir/$_f" ]; then pass "$_n/$_f"; else fail "$_n/$_f" "no $_dir/$_f"; fi
    done
    json_flat <"$_dir/report.json" 2>/dev/null | awk -F '\t' '$1 ~ /^scenarios\.[0-9]+\.name$/ { print $2 }' >/tmp/rows
    for _s in "$@"; do
        if grep -qx "$_s" /tmp/rows; then
            pass "$_n/row-$_s"
        else
            fail "$_n/row-$_s" "no scenario $_s in $_dir/report.json (rows: $(tr '\n' ' ' </tmp/rows))"
        fi
    done
}

# expect_no_own_blame NAME FILE...: no verdict, finding, row of a report's cause tables (the
# probes' and the anchors') or line of output in FILEs names a cpushield process as what
# reached a measured CPU (a task "cpushield (PID)", "cpushield-trace (PID)",
# "cpushield-load (PID)"...), nor calls itself cpushield's bug.
expect_no_own_blame() {
    _n=$1; shift
    cat "$@" 2>/dev/null |
        grep -h -o -E 'cpushield(-[a-z0-9]+)* \([0-9]+\)|a bug in cpushield, not a leak' |
        grep -v -E '^cpushield-(cpu|poll)[0-9]+ \(' | sort -u | head -n 5 >/tmp/blame.names
    : >/tmp/blame
    while read -r _name; do
        # Each with what comes before it, to say where it was named.
        grep -h -o -F -- "$_name" "$@" >/dev/null 2>&1 || continue
        grep -h -- "$_name" "$@" 2>/dev/null | head -n 1 |
            awk -v n="$_name" '{ i = index($0, n); s = i > 150 ? i - 150 : 1; print substr($0, s, i - s + length(n)) }' >>/tmp/blame
    done </tmp/blame.names
    report_diff "$_n" "lines naming cpushield's own threads" /tmp/blame
    # Where in a report: the lines before each name (the cause's kind, its scenario).
    while read -r _name; do
        for _f in "$@"; do
            case "$_f" in *.json) grep -n -B 12 -F -- "$_name" "$_f" | tr -s ' ' | tr '\n' '|' |
                sed "s#^#GUEST-INFO   $_n: in $_f: #"; echo ;; esac
        done
    done </tmp/blame.names
}

# var_tmp SIZE_MIB|none: /var/tmp as a tmpfs of SIZE_MIB, or absent.
var_tmp() {
    umount /var/tmp 2>/dev/null
    rm -rf /var/tmp
    [ "$1" = none ] && return
    mkdir -p /var/tmp
    mount -t tmpfs -o "size=${1}m,mode=1777" tmpfs /var/tmp
}

# expect_one_line_refusal NAME BEFORE BAD_PATTERN ARGS...: cpushield ARGS is refused in one
# line, nothing changed (expect_refused), no message repeats itself, and no line
# matches BAD_PATTERN (an extended grep pattern: advice the command cannot take).
expect_one_line_refusal() {
    _n=$1 _b=$2 _bad=$3; shift 3
    expect_refused "$_n" "$_b" "$@"
    _msg=$(head -n 1 /tmp/cs.err)
    # Said twice: some 30 characters of it come back further on.
    if awk '{ for (i = 1; i + 29 <= length($0); i++) if (seen[substr($0, i, 30)]++) { r = 1; exit } }
            END { exit !r }' /tmp/cs.err; then
        fail "$_n/said-once" "$_msg"
    else
        pass "$_n/said-once"
    fi
    # (-e: a pattern may start with a dash, such as --size.)
    if grep -q -E -e "$_bad" /tmp/cs.err; then
        fail "$_n/remedy-exists" "$_msg"
    else
        pass "$_n/remedy-exists"
    fi
}
