# Scenario check-task: a task pinned to CPU 3 that runs during the interval must be named
# by `cpushield check` (pinned: a shield keeps it there; remedy taskset), and a movable
# task that ran there must break the shield with the `shield --procs` remedy.
# guest-test: check_names_a_task_pinned_to_a_shielded_cpu
# guest-cost: 14
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 200
GUEST_CGROUP=v2

# Short bursts of work with pauses: busy enough to be seen, not a spinner.
LOOP='while :; do i=0; while [ $i -lt 300 ]; do i=$((i + 1)); done; usleep 20000; done'

scenario_main() {
    taskset -c 3 sh -c "$LOOP" &
    pinned=$!
    sleep 1
    cs check --cpus 3 --interval 2s --json
    cp /tmp/cs.out /tmp/check-json
    cs check --cpus 3 --interval 1s --verbose
    cp /tmp/cs.out /tmp/check-text
    kill "$pinned"
    if grep -q "\"title\": \"task sh (pid $pinned) is pinned to CPU 3" /tmp/check-json; then
        pass check-task/pinned-named
    else
        fail check-task/pinned-named "no finding naming pid $pinned: $(grep '"title": "task' /tmp/check-json | head -n 5 | tr '\n' ' ')"
    fi
    if grep -q "\"action\": \"taskset -a -pc 0-2 $pinned\"" /tmp/check-json; then
        pass check-task/pinned-remedy
    else
        fail check-task/pinned-remedy "no 'taskset -a -pc 0-2 $pinned' remedy"
    fi
    if grep -q "sh ($pinned)" /tmp/check-text && head -n 1 /tmp/check-text | grep -q '^Verdict: CPU 3'; then
        pass check-task/text
    else
        fail check-task/text "human output lacks the task or does not lead with the verdict: $(head -n 3 /tmp/check-text | tr '\n' ' ')"
    fi

    # A task that ran on CPU 3 and may also run on CPU 2 breaks the shield: it starts on
    # CPU 3 only and is widened to 2-3 half way through the interval.
    taskset -c 3 sh -c "$LOOP" &
    wide=$!
    ( sleep 1; taskset -p -c 2-3 "$wide" >/dev/null ) &
    cs check --cpus 3 --interval 2s --json
    kill "$wide"
    check_eq check-task/movable-exit 3 "$CS_RC" "exit status"
    if grep -q "\"title\": \"task sh (pid $wide) ran on CPU 3 for .* it may run on other CPUs" /tmp/cs.out; then
        pass check-task/movable-named
    else
        fail check-task/movable-named "no breaking finding for pid $wide: $(grep '"title": "task' /tmp/cs.out | head -n 5 | tr '\n' ' ')"
    fi
    if grep -q '"action": "cpushield shield --procs 3"' /tmp/cs.out; then pass check-task/movable-remedy; else fail check-task/movable-remedy "no 'cpushield shield --procs 3'"; fi
}
