# Scenario irq-threads: threaded IRQ handlers (`irq/N-name`: every device IRQ on the
# PREEMPT_RT kernel; 6.1 is booted with threadirqs to have them too). After `shield
# --all 3` each handler thread whose IRQ left CPU 3 left it too, and `show` and `check`
# say so. With the IRQ shield alone (`--irqs 3`: a v2 partition would clamp a thread
# off CPU 3 whatever its pin), one thread pinned back onto CPU 3 by hand is named by
# `show` with its taskset fix and breaks the shield for `check`; the fix puts it right.
# `check` names ksoftirqd/3, and on PREEMPT_RT rcuc/3 and ktimers/3, with what to do. No
# write of a handler thread's affinity is refused (the kernel moves it with its IRQ), and
# under the IRQ shield alone check's verdict judges what that shield promises.
# guest-test: irq_handler_threads_follow_their_irq_off_the_shield_and_one_pinned_by_hand_is_named
# guest-append: threadirqs
# guest-tcg: single
# guest-timeout: 300
GUEST_CGROUP=v2

# irq_threads: "pid irq comm" of every threaded IRQ handler.
irq_threads() {
    for d in /proc/[0-9]*; do
        read -r c <"$d/comm" 2>/dev/null || continue
        case "$c" in
            irq/[0-9]*-*) n=${c#irq/}; echo "${d#/proc/} ${n%%-*} $c" ;;
        esac
    done
}

# threads_off NAME CPU: every handler thread whose IRQ is delivered off CPU (its
# effective affinity: an IO-APIC IRQ whose move is pending stays where it was until its
# next interrupt, and its thread with it) is off CPU too. Lists the pending ones in
# /tmp/irq-pending.
threads_off() {
    _bad=""
    : >/tmp/irq-pending
    irq_threads >/tmp/irq-threads
    while read -r pid irq comm; do
        mask=$(cat "/proc/irq/$irq/smp_affinity_list" 2>/dev/null) || continue
        eff=$(cat "/proc/irq/$irq/effective_affinity_list" 2>/dev/null || echo "$mask")
        aff=$(cpus_of "$pid")
        cpus_contain "$mask" "$2" && continue
        if cpus_contain "$eff" "$2"; then
            echo "$pid $irq $comm" >>/tmp/irq-pending
        elif cpus_contain "$aff" "$2"; then
            _bad="$_bad $comm(IRQ $irq on $mask, delivered to $eff, thread on $aff)"
        fi
    done </tmp/irq-threads
    [ -s /tmp/irq-pending ] && info "$1: IRQ moves pending until their next interrupt: $(cut -d' ' -f3 /tmp/irq-pending | tr '\n' ' ')"
    if [ -z "$_bad" ]; then pass "$1"; else fail "$1" "handler threads left on CPU $2:$_bad"; fi
}

# expect_show_line NAME PATTERN: `cpushield show` prints a line matching PATTERN.
expect_show_line() {
    cs show
    if grep -q "$2" /tmp/cs.out; then pass "$1"; else fail "$1" "$(tr '\n' '|' </tmp/cs.out)"; fi
}

# cpus_contain LIST CPU
cpus_contain() {
    awk -v L="$1" -v C="$2" "$AWK_CPUS"'BEGIN { cpus_parse(L, s); exit !(C in s) }'
}

scenario_main() {
    irq_threads >/tmp/irq-threads
    count=$(wc -l </tmp/irq-threads)
    info "kernel $(uname -v | grep -o 'PREEMPT[_A-Z]*' | tr '\n' ' '); $count handler threads: $(cut -d' ' -f3 /tmp/irq-threads | tr '\n' ' ')"
    if [ "$count" -gt 0 ]; then pass irq-threads/exist; else fail irq-threads/exist "no irq/N-* thread"; return; fi
    snapshot /tmp/before

    cs_ok irq-threads/shield shield --all 3
    # The kernel moves a handler thread with its IRQ: no write of its affinity refused.
    if grep -q 'irq/[0-9]*-[^)]*) refused affinity' /tmp/cs.out /tmp/cs.err; then
        fail irq-threads/no-refused-thread "$(grep -h 'irq/[0-9]*-[^)]*) refused affinity' /tmp/cs.out /tmp/cs.err | head -n 3 | tr '\n' ' ')"
    else
        pass irq-threads/no-refused-thread
    fi
    threads_off irq-threads/followed 3
    expect_show_line irq-threads/show-followed "^CPU 3: [0-9]* IRQ handler threads\? followed"
    cs check --cpus 3 --interval 2s --json
    cp /tmp/cs.out /tmp/check-all.json
    expect_finding irq-threads/check-followed /tmp/check-all.json "[0-9]* IRQ handler threads\\? followed"
    expect_no_finding irq-threads/check-none-left /tmp/check-all.json "IRQ [0-9]*'s handler thread"
    expect_finding irq-threads/ksoftirqd /tmp/check-all.json "ksoftirqd/3 (pid [0-9]*, [^)]*) on CPU 3 runs the softirqs"
    if uname -v | grep -q PREEMPT_RT; then
        expect_finding irq-threads/ktimers /tmp/check-all.json "ktimers/3 (pid [0-9]*, SCHED_FIFO [0-9]*) on CPU 3 expires"
        expect_finding irq-threads/rcuc /tmp/check-all.json "rcuc/3 (pid [0-9]*, SCHED_FIFO [0-9]*) on CPU 3"
        expect_finding irq-threads/unthreaded /tmp/check-all.json "[0-9]* IRQs\\? ha[sv]e\\? no handler thread"
    fi
    cs_ok irq-threads/reset reset

    # The IRQ shield alone; one handler thread pinned back onto CPU 3 by hand.
    cs_ok irq-threads/shield-irqs shield --irqs 3
    threads_off irq-threads/irqs-followed 3
    # A thread whose IRQ has moved (not pending).
    set -- $(grep -v -x -F -f /tmp/irq-pending /tmp/irq-threads | head -n 1)
    pid=$1; irq=$2; comm=$3
    [ -n "$pid" ] || { fail irq-threads/one-moved "every IRQ's move is pending: $(cat /tmp/irq-pending | tr '\n' ' ')"; return; }
    taskset -p -c 0-3 "$pid" >/dev/null
    info "pinned $comm ($pid) to $(cpus_of "$pid"); IRQ $irq on $(cat /proc/irq/$irq/smp_affinity_list)"
    expect_show_line irq-threads/show-left "^CPU 3: IRQ $irq's handler thread .*($pid) may still run here .*pinned by hand): taskset -pc"
    cs check --cpus 3 --interval 2s --json
    cp /tmp/cs.out /tmp/check-left.json
    check_eq irq-threads/left-breaks 3 "$CS_RC" "check exit status"
    # The IRQ shield alone is judged on what it promises, and the verdict says so.
    if grep -q '"verdict": "CPU 3 NOT shielded: [0-9]* findings\? breaks\? what the shield in force promises (--irqs: device IRQs kept off' /tmp/check-left.json; then
        pass irq-threads/irqs-alone-verdict
    else
        fail irq-threads/irqs-alone-verdict "$(grep '"verdict"' /tmp/check-left.json)"
    fi
    expect_finding irq-threads/check-left /tmp/check-left.json "IRQ $irq's handler thread [^ ]* (pid $pid) may run on CPU 3 though IRQ $irq is kept on"
    fix=$(finding_json /tmp/check-left.json "IRQ $irq's handler thread" | grep -o '"action": "taskset -pc [^"]*' | head -n 1 | sed 's/"action": "//')
    info "fix: $fix"
    $fix >/dev/null
    cs check --cpus 3 --interval 2s --json
    expect_no_finding irq-threads/fixed /tmp/cs.out "IRQ $irq's handler thread"
    cs_ok irq-threads/reset-irqs reset
}
