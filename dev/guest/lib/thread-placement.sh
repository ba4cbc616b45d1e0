# Per-thread placement, Sherer's way, shared by thread-v1 and
# thread-v2: a program started normally (not through `cpushield run`) places one of its
# two threads on shielded CPU 3, through the C API (cps_place) and through RtThread::on
# (the hidden `cpushield thread-demo`). Only that thread enters the shield cgroup and
# runs on CPU 3; its sibling stays on the housekeeping CPUs in its own cgroup. A later
# shield change keeps the placed thread; reset takes it out of the shield leaving it the
# CPU it asked for, and restores everything else exactly.

# task_cpus PID TID / task_cgroup PID TID: one thread's affinity and cpuset cgroup line.
task_cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/task/$2/status" 2>/dev/null; }
task_cgroup() {
    if [ "$GUEST_CGROUP" = v1 ]; then
        sed -n 's/^[0-9]*:cpuset://p' "/proc/$1/task/$2/cgroup" 2>/dev/null
    else
        sed -n 's/^0:://p' "/proc/$1/task/$2/cgroup" 2>/dev/null
    fi
}

# start_demo TAG API [CGROUP_DIR]: start `cpushield thread-demo --cpus 3 --api API` in
# the background (in CGROUP_DIR when given); sets DEMO to its "PID PLACED OTHER" line,
# empty if it failed (its output is in /tmp/demo.TAG.out and .err, its exit status in
# DEMO_RC).
start_demo() {
    _out=/tmp/demo.$1.out
    : >"$_out"
    if [ -n "${3:-}" ]; then
        sh -c "echo \$\$ >$3/cgroup.procs && exec $CS thread-demo --cpus 3 --api $2" \
            >"$_out" 2>"/tmp/demo.$1.err" &
    else
        "$CS" thread-demo --cpus 3 --api "$2" >"$_out" 2>"/tmp/demo.$1.err" &
    fi
    DEMO_BG=$!
    DEMO=
    DEMO_RC=
    _i=0
    while [ "$_i" -lt 200 ]; do
        if [ -s "$_out" ]; then DEMO=$(head -n 1 "$_out"); return 0; fi
        if ! kill -0 "$DEMO_BG" 2>/dev/null; then
            wait "$DEMO_BG"
            DEMO_RC=$?
            return 1
        fi
        usleep 50000
        _i=$((_i + 1))
    done
    return 1
}

# expect_placed NAME PID PLACED OTHER HOUSEKEEPING: PLACED alone in the shield on CPU 3,
# OTHER outside it on HOUSEKEEPING.
expect_placed() {
    check_eq "$1/placed-on-cpu-3" 3 "$(task_cpus "$2" "$3")" "affinity of the placed thread $3"
    case "$(task_cgroup "$2" "$3")" in
        /cpushield-shield) pass "$1/placed-in-shield-cgroup" ;;
        *) fail "$1/placed-in-shield-cgroup" "thread $3 is in '$(task_cgroup "$2" "$3")'" ;;
    esac
    check_eq "$1/sibling-on-housekeeping" "$5" "$(task_cpus "$2" "$4")" "affinity of the sibling thread $4"
    case "$(task_cgroup "$2" "$4")" in
        /cpushield-shield) fail "$1/sibling-outside-shield" "sibling thread $4 is in the shield cgroup" ;;
        "") fail "$1/sibling-outside-shield" "no cgroup line for thread $4" ;;
        *) pass "$1/sibling-outside-shield" ;;
    esac
}

thread_placement() {
    : >/tmp/spawned
    spawn_mix 10
    sleep 1
    snapshot /tmp/before
    cs_ok thread/shield shield --all 3
    if [ "$GUEST_CGROUP" = v2 ]; then
        check_eq thread/shield-threaded threaded "$(cat "$CGROOT/cpushield-shield/cgroup.type")" "cgroup.type of the shield"
        check_eq thread/shield-isolated isolated "$(cat "$CGROOT/cpushield-shield/cpuset.cpus.partition")" "partition of the threaded shield"
    fi

    for api in c rust; do
        if start_demo "$api" "$api"; then
            set -- $DEMO
            info "$api: process $1, placed thread $2, sibling $3"
            expect_placed "thread/$api" "$1" "$2" "$3" 0-2
            eval "DEMO_$api='$DEMO'"
        else
            fail "thread/$api-started" "thread-demo exited ${DEMO_RC:-?}: $(head -c 400 "/tmp/demo.$api.err" | tr '\n' ' ')"
            eval "DEMO_$api=''"
        fi
    done

    # A second shield keeps the placed thread (adopted with CPU 3 as its request).
    cs_ok thread/reshield shield --procs 2
    if [ -n "$DEMO_c" ]; then
        set -- $DEMO_c
        expect_placed thread/reshield "$1" "$2" "$3" 0-1
    fi

    if [ "$GUEST_CGROUP" = v2 ]; then
        # A process outside the root cgroup (another threaded domain) cannot send one
        # thread into the shield: one line naming its cgroup and the remedy, exit 1.
        mkdir "$CGROOT/thread-other"
        if start_demo refused c "$CGROOT/thread-other"; then
            fail thread/v2-other-domain-refused "placed from /thread-other: $DEMO"
            kill "$DEMO_BG"
        else
            check_eq thread/v2-other-domain-exit 1 "$DEMO_RC"
            if grep -q "only from a process in the root cgroup" /tmp/demo.refused.err \
                && grep -q "/thread-other" /tmp/demo.refused.err; then
                pass thread/v2-other-domain-refused
            else
                fail thread/v2-other-domain-refused "$(head -c 400 /tmp/demo.refused.err | tr '\n' ' ')"
            fi
        fi
        rmdir "$CGROOT/thread-other" || fail thread/v2-other-rmdir "cannot remove $CGROOT/thread-other"
    fi

    # A reservation of CPU 3: measure there and unshield of it are refused
    # naming the holder, nothing changed; reset proceeds and says whose shield it lifts.
    "$CS" run --cpus 3 --reserve -- sleep 1000 >/tmp/holder.out 2>&1 &
    runner=$!
    holder=$(reserve_holder 3 "$runner")
    if [ -n "$holder" ]; then
        cs measure latency --cpus 3 --duration 1s
        check_eq thread/reserved-measure-exit 1 "$CS_RC"
        grep -q "CPU 3 is reserved by PID $holder (sleep 1000)" /tmp/cs.err \
            && pass thread/reserved-measure-names-holder \
            || fail thread/reserved-measure-names-holder "$(head -c 300 /tmp/cs.err)"
        cs unshield --all 3
        check_eq thread/reserved-unshield-exit 1 "$CS_RC"
        grep -q "CPU 3 is reserved by PID $holder (sleep 1000).*cpushield reset" /tmp/cs.err \
            && pass thread/reserved-unshield-names-holder-and-reset \
            || fail thread/reserved-unshield-names-holder-and-reset "$(head -c 300 /tmp/cs.err)"
        if [ -d "$CGROOT/cpushield-shield" ] || [ -d "$CGROOT/cpuset/cpushield-shield" ]; then
            pass thread/reserved-unshield-kept-shield
        else
            fail thread/reserved-unshield-kept-shield "the shield cgroup is gone"
        fi
    else
        fail thread/reserved "CPU 3 never reserved: $(head -c 300 /tmp/holder.out)"
    fi

    # Reset: the placed threads leave the shield and keep CPU 3, the only CPU they asked
    # for; their siblings get every CPU back; the rest is exactly as before.
    cs_ok thread/reset reset
    if [ -n "$holder" ]; then
        grep -q "CPU 3 is reserved by PID $holder.*reset proceeds" /tmp/cs.err \
            && pass thread/reset-names-the-holder \
            || fail thread/reset-names-the-holder "$(head -c 300 /tmp/cs.err)"
        kill "$holder"
    fi
    wait "$runner" 2>/dev/null
    for api in c rust; do
        eval "_d=\$DEMO_$api"
        [ -n "$_d" ] || continue
        set -- $_d
        check_eq "thread/reset-$api-placed-keeps-request" 3 "$(task_cpus "$1" "$2")"
        check_eq "thread/reset-$api-sibling" 0-3 "$(task_cpus "$1" "$3")"
        check_eq "thread/reset-$api-same-cgroup" "$(task_cgroup "$1" "$3")" "$(task_cgroup "$1" "$2")" "cgroup of the placed thread"
        kill "$1"
        wait "$1" 2>/dev/null
    done
    expect_restored thread/reset-rest /tmp/before
}
