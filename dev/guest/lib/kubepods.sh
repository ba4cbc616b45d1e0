# Kubernetes pods are left alone (scenarios kubepods-v1, kubepods-v2): tasks in cgroups
# laid out as the kubelet lays them out (cgroupfs driver on v1, systemd driver on v2),
# pinned the way the static CPU manager pins them (the pod cgroup's cpuset.cpus), are
# neither moved nor narrowed by `shield`, and `reset` does not touch them, while the
# node's own tasks are shielded and restored as usual. docs/fleet.md.

# kubepods_semantics v1|v2
kubepods_semantics() {
    mode=$1
    : >/tmp/spawned
    case "$mode" in
        v1)
            top="$CGROOT/cpuset/kubepods"
            shared="$top/burstable/pod1"
            on3="$top/pod2"
            on1="$top/pod3"
            mkdir -p "$shared" "$on3" "$on1"
            for d in "$top" "$top/burstable" "$shared" "$on3" "$on1"; do
                echo 0-3 >"$d/cpuset.cpus"
                echo 0 >"$d/cpuset.mems"
            done
            ;;
        v2)
            top="$CGROOT/kubepods.slice"
            shared="$top/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
            on3="$top/kubepods-pod2.slice"
            on1="$top/kubepods-pod3.slice"
            mkdir -p "$top/kubepods-burstable.slice"
            echo +cpuset >"$top/cgroup.subtree_control"
            echo +cpuset >"$top/kubepods-burstable.slice/cgroup.subtree_control"
            mkdir -p "$shared" "$on3" "$on1"
            ;;
    esac
    # Guaranteed pods the static CPU manager pinned to CPU 3 and to CPU 1.
    echo 3 >"$on3/cpuset.cpus"
    echo 1 >"$on1/cpuset.cpus"
    spawn pod-shared all "$shared"
    pod_shared=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn pod-on-3 all "$on3"
    pod_on3=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn pod-on-1 all "$on1"
    pod_on1=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    spawn host all
    host=$(tail -n 1 /tmp/spawned | cut -d' ' -f1)
    sleep 1
    pods_cgroups() { for p in $pod_shared $pod_on3 $pod_on1; do echo "$p $(cgroups_of "$p")"; done; }
    pods_cgroups >/tmp/pods-cg-before
    info "pods before: $(for p in $pod_shared $pod_on3 $pod_on1; do echo "$p:$(cpus_of "$p")"; done | tr '\n' ' ')"
    check_eq kubepods/setup/pinned "3 1" "$(cpus_of "$pod_on3") $(cpus_of "$pod_on1")" "pod affinities"
    find "$top" -name 'cpuset.cpus' -exec grep -H '' {} + | sort >/tmp/kubepods-files-before

    # expect_pods STEP: the pods' cgroups as before, the kubepods files as before, and
    # the affinities only the kernel may have changed.
    expect_pods() {
        pods_cgroups >/tmp/pods-cg-now
        if cmp -s /tmp/pods-cg-before /tmp/pods-cg-now; then
            pass "kubepods/$1/pod-tasks-not-moved"
        else
            fail "kubepods/$1/pod-tasks-not-moved" "was [$(tr '\n' ' ' </tmp/pods-cg-before)] now [$(tr '\n' ' ' </tmp/pods-cg-now)]"
        fi
        find "$top" -name 'cpuset.cpus' -exec grep -H '' {} + | sort >/tmp/kubepods-files-now
        if cmp -s /tmp/kubepods-files-before /tmp/kubepods-files-now; then
            pass "kubepods/$1/kubepods-files-unchanged"
        else
            fail "kubepods/$1/kubepods-files-unchanged" "$(diff /tmp/kubepods-files-before /tmp/kubepods-files-now | tr '\n' ' ')"
        fi
        check_eq "kubepods/$1/pod-on-1-kept" 1 "$(cpus_of "$pod_on1")" "affinity of pod task $pod_on1"
        if [ "$mode" = v1 ]; then
            check_eq "kubepods/$1/pod-shared-not-narrowed" 0-3 "$(cpus_of "$pod_shared")" "affinity of pod task $pod_shared"
            check_eq "kubepods/$1/pod-on-3-kept" 3 "$(cpus_of "$pod_on3")" "affinity of pod task $pod_on3"
        else
            # v2: the isolated partition makes the kernel clamp every task outside it
            # (scenario kernel-partition), pods included; cpushield warns of it.
            info "$1: pod affinities after the kernel's clamp: $(for p in $pod_shared $pod_on3; do echo "$p:$(cpus_of "$p")"; done | tr '\n' ' ')"
            if [ "$1" != reset ]; then
                # While the shield is up, its partition takes CPU 3 from every cgroup
                # outside it: the shared pod keeps the rest of its cpuset.
                check_eq "kubepods/$1/pod-shared-clamped-off-3" 0-2 "$(cpus_of "$pod_shared")" "affinity of pod task $pod_shared"
            else
                # With the partition gone, the kernel gives each pod task its cpuset's CPUs back.
                check_eq "kubepods/$1/pod-shared-gets-its-cpuset-back" 0-3 "$(cpus_of "$pod_shared")" "affinity of pod task $pod_shared"
                check_eq "kubepods/$1/pod-on-3-gets-its-cpuset-back" 3 "$(cpus_of "$pod_on3")" "affinity of pod task $pod_on3"
            fi
        fi
    }

    cs_ok kubepods/shield/exit-0 shield --all 3
    cat /tmp/cs.out /tmp/cs.err >/tmp/shield-said
    grep -q "tasks of Kubernetes pods" /tmp/shield-said \
        && pass kubepods/shield/warns-of-pod-tasks \
        || fail kubepods/shield/warns-of-pod-tasks "no warning about pod tasks: $(tr '\n' ' ' </tmp/shield-said | head -c 600)"
    if [ "$mode" = v2 ]; then
        grep -q "isolated partition takes CPUs 3 out of the Kubernetes pods' cgroup /kubepods.slice" /tmp/shield-said \
            && pass kubepods/shield/warns-of-partition \
            || fail kubepods/shield/warns-of-partition "no warning about the partition: $(tr '\n' ' ' </tmp/shield-said | head -c 600)"
    fi
    expect_off kubepods/shield/host-task-off-cpu-3 "$host" 3
    expect_pods shield

    agent_leaves_pods "$pod_shared $pod_on3 $pod_on1"
    expect_pods agent

    cs_ok kubepods/reset/exit-0 reset
    check_eq kubepods/reset/host-task-restored 0-3 "$(cpus_of "$host")" "affinity of host task $host"
    expect_pods reset

    if [ "$mode" = v1 ]; then
        # A pod's task busy on the shielded CPU while compare --system traces it:
        # the whole-machine shield leaves it there, and compare charges its time
        # to a pod's task (kind "pod") with the kubelet's fix, not a shield command.
        sh -c "echo \$\$ >$on3/cgroup.procs && exec taskset -c 3 sh -c 'while :; do :; done'" &
        busy=$!
        # Every sample is explained (1 us): few of them (200, the idle policy
        # fixed), as each explanation is slow under TCG on a busy host.
        cs compare --cpus 3 --system --scenarios shielded --duration 2s --rate 100 --idle halt \
            --runs 0 --load fpu --no-anchor --attribute-above 1us --dir /tmp --out /tmp/cmp-pod
        kill "$busy" 2>/dev/null
        info "compare --system with a busy pod task on CPU 3: exit $CS_RC; $(grep -m 1 '^SHIELD' /tmp/cs.out)"
        json=/tmp/cmp-pod/report.json
        if grep -q '"kind": "pod"' "$json" 2>/dev/null; then
            pass kubepods/compare/charged-to-the-pod
        else
            fail kubepods/compare/charged-to-the-pod "no cause of kind pod: $(grep -o '"kind": "[a-z-]*"' "$json" 2>/dev/null | sort | uniq -c | tr '\n' ' ') (stderr: $(tail -c 300 /tmp/cs.err | tr '\n' ' '))"
        fi
        if grep -A 8 '"kind": "pod"' "$json" 2>/dev/null | grep -q '"fix": "kubelet: static CPU manager'; then
            pass kubepods/compare/kubelet-fix
        else
            fail kubepods/compare/kubelet-fix "the pod cause's fix is not the kubelet's: $(grep -A 8 '"kind": "pod"' "$json" 2>/dev/null | tr '\n' ' ' | head -c 400)"
        fi
        # Whatever kind it was given, the busy task's fix is not a shield command.
        busy_cause=$(grep -A 8 "\"name\": \"[^\"]* ($busy)\"" "$json" 2>/dev/null | tr '\n' ' ')
        case "$busy_cause" in
            "") fail kubepods/compare/no-shield-command "no cause names the busy pod task $busy" ;;
            *"shield --procs"*) fail kubepods/compare/no-shield-command "the busy pod task's fix is a shield command: $(echo "$busy_cause" | head -c 400)" ;;
            *) pass kubepods/compare/no-shield-command ;;
        esac
    fi
    for p in $pod_shared $pod_on3 $pod_on1 $host; do kill "$p" 2>/dev/null; done
}

# agent_leaves_pods "PIDS": the agent's look (`agent --once`) names each pod task whose
# affinity reaches the shielded CPU 3 in its own line (the kubelet's CPU manager owns
# it), re-applies nothing, and names no pod task as drift or as a task the shield
# cannot move.
agent_leaves_pods() {
    cs agent --once
    check_eq kubepods/agent/exit-0 0 "$CS_RC" "agent --once exit status ($(head -c 300 /tmp/cs.err | tr '\n' ' '))"
    grep '^cpushield agent:' /tmp/cs.out >/tmp/agent-said
    info "agent: $(head -c 1200 /tmp/agent-said | tr '\n' ' ')"
    named=0
    for p in $1; do
        if cpus_has "$(cpus_of "$p")" 3; then
            named=$((named + 1))
            if grep -q "task $p (.*) of a Kubernetes pod (cgroup [^)]*kubepods[^)]*) has affinity .* on shielded CPU 3: pods belong to the kubelet's CPU manager" /tmp/agent-said; then
                pass "kubepods/agent/pod-task-$p-named"
            else
                fail "kubepods/agent/pod-task-$p-named" "no pod line for task $p ($(cpus_of "$p")): $(tr '\n' ' ' </tmp/agent-said | head -c 600)"
            fi
        fi
        if grep -qE "(correction: task $p |task $p .*the shield cannot move it)" /tmp/agent-said; then
            fail "kubepods/agent/pod-task-$p-not-drift" "$(grep -E "task $p " /tmp/agent-said | head -c 400)"
        else
            pass "kubepods/agent/pod-task-$p-not-drift"
        fi
    done
    info "agent: $named pod task(s) on CPU 3"
    if grep -q 're-applied the shield' /tmp/agent-said; then
        fail kubepods/agent/no-reshield "$(grep 're-applied the shield' /tmp/agent-said | head -c 600)"
    else
        pass kubepods/agent/no-reshield
    fi
    grep -q '^cpushield_pod_tasks_on_shield '"$named"'$' /tmp/cs.out \
        && pass kubepods/agent/pod-gauge \
        || fail kubepods/agent/pod-gauge "want cpushield_pod_tasks_on_shield $named: $(grep pod_tasks /tmp/cs.out)"
}
