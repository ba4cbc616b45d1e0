# Scenario state-faults: nothing escapes the shield and reset is exact or refuses exactly.
# A thread named with invalid UTF-8 is shielded like any other; every fault of the state
# file (damaged file, values that cannot be restored, cgroups and files cpushield does not
# own, another PID namespace, a full or read-only state directory) and a SIGKILL during
# reset end, after the repair the message names, in exactly the state from before the
# first shield; every refusal changes nothing. run --pid --fifo is undone by reset.
# A few hundred tasks: the guest is emulated.
# guest-test: state_faults_are_recovered_or_refused_and_reset_is_exact
# guest-cost: 50
# guest-mem: 768
# guest-tcg: single
# guest-timeout: 900
GUEST_CGROUP=v2

SD=/run/cpushield

# edit_both SED: apply SED to the state file and its copy, as a hand edit would.
edit_both() {
    for _f in "$SD/state.json" "$SD/state.json.bak"; do
        sed -i -e "$1" "$_f"
    done
}
keep() { cp "$SD/state.json" /tmp/keep.json; cp "$SD/state.json.bak" /tmp/keep.bak; }
put_back() {
    rm -rf "$SD/state.json" "$SD/state.json.bak"
    cp /tmp/keep.json "$SD/state.json"; cp /tmp/keep.bak "$SD/state.json.bak"
}

# refused NAME SNAPSHOT TEXT...: the last `cs` exited 1 naming every TEXT, gave no advice
# that loses data, kept the state file, and the system equals SNAPSHOT.
refused() {
    _n=$1; _s=$2; shift 2
    check_eq "$_n/exit-1" 1 "$CS_RC" "exit status ($(head -c 300 /tmp/cs.err | tr '\n' ' '))"
    for _t in "$@"; do
        if grep -qF -- "$_t" /tmp/cs.err; then pass "$_n/names"; else
            fail "$_n/names" "message lacks [$_t]: $(head -c 400 /tmp/cs.err | tr '\n' ' ')"
        fi
    done
    if grep -qE 'forget the shield|rm .*state|remove the state' /tmp/cs.err; then
        fail "$_n/no-data-losing-advice" "$(head -c 300 /tmp/cs.err)"
    fi
    if [ -f "$SD/state.json" ]; then pass "$_n/state-kept"; else fail "$_n/state-kept" "state file gone"; fi
    snapshot /tmp/snap-refused
    if same_snapshot "$_s" /tmp/snap-refused; then pass "$_n/nothing-changed"; else
        compare_snapshots "$_n/nothing-changed" "$_s" /tmp/snap-refused
    fi
}

# policy_of PID: "policy=P prio=R" from /proc/PID/stat (fields 41 and 40; busybox has no
# chrt): SCHED_OTHER is policy=0 prio=0, SCHED_FIFO 10 is policy=1 prio=10.
policy_of() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print "policy=" $39 " prio=" $38 }'
}

scenario_main() {
    : >/tmp/spawned
    spawn_mix 150
    spawn t-all all
    S=$(awk '$3 == "t-all" { print $1 }' /tmp/spawned)
    # A task named "worker-xéééé" cut at 15 bytes, mid-character, as prctl(PR_SET_NAME) does.
    # A task may only rename itself: the shell renames itself, then waits on a sleeper (a
    # loop, so that the shell does not exec the last command and lose the name).
    sh -c 'printf "worker-x\303\251\303\251\303\251\303" >/proc/self/comm; while :; do sleep 1000; done' &
    W=$!
    sleep 1
    probe_irqs
    policy_before=$(policy_of "$S")
    snapshot /tmp/before
    info "$(wc -l </tmp/before/procs) tasks; task $W named $(od -An -c "/proc/$W/comm" | tr -s ' ' | head -n 1)"

    # --- Nothing escapes: the non-UTF-8 name is shielded like any other task. ---
    cs_ok utf8/shield shield --all 3
    snapshot /tmp/shielded
    expect_rule utf8 /tmp/before /tmp/shielded 3 3
    check_eq utf8/non-utf8-task-moved "$(cpus_rule "$(awk -v p="$W" '$1 == p { print $3 }' /tmp/before/procs)" 3)" \
        "$(cpus_of "$W")" "affinity of the task with the non-UTF-8 name"
    keep

    # --- A damaged state file is recovered from its verified copy. ---
    for damage in truncated empty invalid missing-key non-utf8 directory; do
        put_back
        case $damage in
            truncated) head -c 200 /tmp/keep.json >"$SD/state.json" ;;
            empty) : >"$SD/state.json" ;;
            invalid) echo '{]' >"$SD/state.json" ;;
            missing-key) sed -i 's/"masks":/"maskz":/' "$SD/state.json" ;;
            non-utf8) sed -i "s/\"tasks\":{/\"tasks\":{\"$(printf '\377')\":1,/" "$SD/state.json" ;;
            directory) rm "$SD/state.json"; mkdir "$SD/state.json" ;;
        esac
        cs shield --all 3
        check_eq "damaged-$damage/shield-exit-0" 0 "$CS_RC" "exit ($(head -c 300 /tmp/cs.err | tr '\n' ' '))"
        if grep -q 'damaged' /tmp/cs.out; then pass "damaged-$damage/reported"; else
            fail "damaged-$damage/reported" "no word of the damage: $(head -c 300 /tmp/cs.out | tr '\n' ' ')"
        fi
        snapshot /tmp/snap-now
        if same_snapshot /tmp/shielded /tmp/snap-now; then pass "damaged-$damage/same-shield"; else
            compare_snapshots "damaged-$damage/same-shield" /tmp/shielded /tmp/snap-now
        fi
    done
    keep

    # --- Values that cannot be restored, in both copies: refused, nothing changed. ---
    # The first match is the saved masks; the shield's records ("set") come after them.
    irq=$(grep -o '"irqs":{"[0-9]*"' "$SD/state.json" | head -n 1 | grep -o '[0-9]*')
    # A saved task is {"tgid":S,"comm":"sleep","starttime":N,"affinity":"0-3",...}.
    aff_of_s="s/\"$S\":{\"tgid\":$S,\"comm\":\"\([^\"]*\)\",\"starttime\":\([0-9]*\),\"affinity\":\"[^\"]*\"/\"$S\":{\"tgid\":$S,\"comm\":\"\1\",\"starttime\":\2,\"affinity\":\"AFF\"/"
    edit_both "$(echo "$aff_of_s" | sed 's/AFF/5000-8191/')"
    cs reset
    refused bad-affinity /tmp/shielded "task $S" "saved affinity '5000-8191'"
    put_back
    edit_both "$(echo "$aff_of_s" | sed 's/AFF//')"
    edit_both "s/\"irqs\":{\"$irq\":\"[^\"]*\"/\"irqs\":{\"$irq\":\"zz\"/"
    cs reset
    refused empty-affinity-bad-irq /tmp/shielded "task $S" "saved affinity ''" "IRQ $irq: saved affinity mask 'zz'"
    put_back

    # --- Cgroups and files cpushield does not own. ---
    mkdir "$CGROOT/foreign"
    snapshot /tmp/shielded-foreign
    edit_both "s#\"created_cgroups\":\[#\"created_cgroups\":[\"$CGROOT/foreign\",\"cpushield-shield\",\"$CGROOT/../../tmp\",#"
    edit_both 's#"files":{#"files":{"/etc/cpushield-test":"1",#'
    cs reset
    refused not-ours /tmp/shielded-foreign "cgroup $CGROOT/foreign: not one cpushield creates" \
        "cgroup cpushield-shield: not one" "file /etc/cpushield-test: not a file cpushield changes"
    [ -e /etc/cpushield-test ] && fail not-ours/no-write-outside "/etc/cpushield-test written"
    rmdir "$CGROOT/foreign"
    put_back
    # A cgroup with our name that cpushield did not create (no mark), in use: given a CPU.
    # (One left as mkdir made it is what a shield killed before marking it leaves, and
    # reset removes it: shield_host's shield_killed_half_way test.)
    mkdir "$CGROOT/cpushield-system"
    echo 0 >"$CGROOT/cpushield-system/cpuset.cpus"
    snapshot /tmp/shielded-foreign
    edit_both "s#\"created_cgroups\":\[#\"created_cgroups\":[\"$CGROOT/cpushield-system\",#"
    cs reset
    refused unmarked /tmp/shielded-foreign "cgroup $CGROOT/cpushield-system: has no cpushield mark"
    rmdir "$CGROOT/cpushield-system"
    put_back

    # --- Another PID namespace: the state's and a live second scope sharing the dir. ---
    edit_both 's#"pid_namespace":"[^"]*"#"pid_namespace":"pid:[1]"#'
    cs shield --all 3
    refused other-namespace-shield /tmp/shielded "PID namespace pid:[1]"
    cs reset
    refused other-namespace-reset /tmp/shielded "PID namespace pid:[1]" "--namespace-gone"
    put_back
    for verb in "shield --all 3" "reset" "unshield --all 3"; do
        unshare -p -f -m --mount-proc sh -c "$CS $verb" >/tmp/cs.out 2>/tmp/cs.err
        CS_RC=$?
        refused "second-scope-${verb%% *}" /tmp/shielded "PID namespace"
    done
    # reset --namespace-gone from that second scope while the shield's namespace lives:
    # refused before any change (cgroup v2 shows our cgroups populated to any reader).
    unshare -p -f -m --mount-proc sh -c "$CS reset --namespace-gone" >/tmp/cs.out 2>/tmp/cs.err
    CS_RC=$?
    refused second-scope-reset-namespace-gone /tmp/shielded "which still exists"

    # --- run --pid --fifo, then a reset killed half way, then reset. ---
    cs_ok fifo/run run --cpus 3 --pid "$S" --fifo 10
    check_eq fifo/set "policy=1 prio=10" "$(policy_of "$S")" "policy after run"
    CPUSHIELD_TEST_STEP_DELAY_US=3000 "$CS" reset >/dev/null 2>&1 &
    victim=$!
    t0=$(uptime_cs)
    while [ $(($(uptime_cs) - t0)) -lt 300 ] && ! changed_quick /tmp/shielded 2>/dev/null; do usleep 20000; done
    if kill -9 "$victim" 2>/dev/null; then
        info "reset killed after $(($(uptime_cs) - t0))0 ms"
        if [ -f "$SD/state.json" ]; then pass sigkill/state-kept; else fail sigkill/state-kept "state file gone"; fi
    else
        fail sigkill/killed "reset had finished before the kill"
    fi
    wait "$victim" 2>/dev/null
    cs_ok sigkill/reset reset
    expect_restored sigkill/restored /tmp/before
    check_eq fifo/restored "$policy_before" "$(policy_of "$S")" "policy after reset"
    for f in state.json state.json.bak state.json.tmp state.json.bak.tmp; do
        [ -e "$SD/$f" ] && fail sigkill/state-removed "$SD/$f left after reset"
    done

    # --- A full state directory: refused with path and remedy, nothing left, nothing changed. ---
    mkdir -p /run/small
    mount -t tmpfs -o size=2m tmpfs /run/small
    mkdir /run/small/state
    dd if=/dev/zero of=/run/small/fill bs=4k count=1000 2>/dev/null
    export CPUSHIELD_STATE_DIR=/run/small/state
    cs shield --all 3
    check_eq disk-full/exit-1 1 "$CS_RC" "exit status"
    if grep -q '/run/small/state/state.json.*free space in /run/small/state' /tmp/cs.err; then
        pass disk-full/path-and-remedy
    else
        fail disk-full/path-and-remedy "$(head -c 300 /tmp/cs.err)"
    fi
    check_eq disk-full/nothing-left "lock" "$(ls /run/small/state | tr '\n' ' ' | sed 's/ $//')" "state dir"
    expect_restored disk-full/nothing-changed /tmp/before

    # --- A read-only state directory: reset restores all and says what it could not remove. ---
    rm /run/small/fill
    cs_ok read-only/shield shield --all 3
    mount -o remount,ro /run/small
    cs reset
    check_eq read-only/exit-1 1 "$CS_RC" "exit status"
    if grep -q 'everything was restored.*/run/small/state/state.json' /tmp/cs.err; then
        pass read-only/says-what-was-not-done
    else
        fail read-only/says-what-was-not-done "$(head -c 300 /tmp/cs.err)"
    fi
    expect_restored read-only/restored /tmp/before
    mount -o remount,rw /run/small
    cs_ok read-only/reset-again reset
    [ -e /run/small/state/state.json ] && fail read-only/state-removed "state left"
    unset CPUSHIELD_STATE_DIR
    umount /run/small

    expect_restored final/restored /tmp/before
}
