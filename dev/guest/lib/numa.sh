# Memory nodes: the shield's nodes, where a task's pages sit, check's findings, exact
# reset. Sourced by the numa scenarios (a guest of two nodes: CPUs 0-1 on node 0, 2-3
# on node 1; see the guest-numa header in dev/guest/README.md).

# own_pages PID NODE: the pages of PID's own (heap, stack, anonymous: lines of its
# numa_maps without file=) on NODE.
own_pages() {
    awk -v key="N$2=" '!/ file=/ { for (i = 2; i <= NF; i++) if (index($i, key) == 1) n += substr($i, length(key) + 1) }
        END { print n + 0 }' "/proc/$1/numa_maps" 2>/dev/null || echo 0
}

# filler: a shell that keeps 16 MB of its own memory (a variable) and sleeps; prints
# "ready" when it holds it. Its last command is not `sleep`: busybox sh would exec that,
# and the PID would then be a sleep holding none of it.
FILLER='x=$(head -c 16000000 /dev/zero | tr "\0" a); echo ready; sleep 1000; echo "${#x}"'

# wait_ready FILE: until FILE says "ready" (20 s at most).
wait_ready() {
    _i=0
    while [ "$_i" -lt 200 ]; do
        grep -q ready "$1" 2>/dev/null && return 0
        usleep 100000
        _i=$((_i + 1))
    done
    return 1
}

# expect_local NAME PID NODE OTHER: nearly all of PID's own pages sit on NODE, at most 1%
# on OTHER (16 MB is about 4,000 pages).
expect_local() {
    _here=$(own_pages "$2" "$3"); _there=$(own_pages "$2" "$4")
    info "$1: PID $2 has $_here pages on node $3, $_there on node $4"
    if [ "$_here" -ge 3000 ] && [ $((_there * 100)) -le "$_here" ]; then
        pass "$1"
    else
        fail "$1" "PID $2: $_here pages on node $3, $_there on node $4 ($(grep -v ' file=' "/proc/$2/numa_maps" | head -n 5 | tr '\n' '|'))"
    fi
}

# numa_topology: the guest has the two nodes the scenario needs (else FAIL and 1).
numa_topology() {
    _t="$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null) $(cat /sys/devices/system/node/node1/cpulist 2>/dev/null)"
    check_eq numa/topology "0-1 2-3" "$_t" "node0 and node1 cpulist"
    [ "$_t" = "0-1 2-3" ]
}

# cpuset_root: where the cpuset hierarchy of the scenario's cgroup version is mounted.
cpuset_root() {
    if [ "$GUEST_CGROUP" = v1 ]; then echo "$CGROOT/cpuset"; else echo "$CGROOT"; fi
}

# shield_mems: the shield cgroup's memory nodes as the kernel has them.
shield_mems() {
    cat "$(cpuset_root)/cpushield-shield/cpuset.mems.effective" \
        "$(cpuset_root)/cpushield-shield/cpuset.mems" 2>/dev/null | head -n 1
}

# numa_semantics: the whole story on the hierarchy mounted (v1 or v2).
numa_semantics() {
    numa_topology || return
    : >/tmp/spawned
    for cpus in all 0-1 2-3 3; do spawn "t-$cpus" "$cpus"; done
    sleep 1
    probe_irqs
    snapshot /tmp/before

    expect_refused numa/bad-mems /tmp/before shield --all 3 --mems 4

    # The shield takes the nodes of its CPUs; the rest keeps both.
    cs_ok numa/shield shield --all 2-3
    check_eq numa/shield-mems 1 "$(shield_mems)" "shield cpuset's nodes"
    if [ "$GUEST_CGROUP" = v1 ]; then
        check_eq numa/system-mems 0-1 "$(cat "$(cpuset_root)/cpushield-system/cpuset.mems")" "housekeeping cpuset's nodes"
        check_eq numa/memory-migrate 1 "$(cat "$(cpuset_root)/cpushield-shield/cpuset.memory_migrate")" "shield cpuset memory_migrate"
    fi
    cs show
    if grep -q "memory nodes: shield 1 (the nodes of its CPUs)" /tmp/cs.out; then
        pass numa/show
    else
        fail numa/show "$(head -c 400 /tmp/cs.out | tr '\n' '|')"
    fi

    # A task started with --mlock: its pages on its CPU's node.
    "$CS" run --cpus 3 --mlock -- sh -c "$FILLER" >/tmp/local.out 2>&1 &
    if wait_ready /tmp/local.out; then
        pid=$(sed -n 's/^bound the memory of PID \([0-9]*\) to node(s) 1.*/\1/p' /tmp/local.out)
        if [ -n "$pid" ]; then
            pass numa/run-binds
            expect_local numa/run-pages-local "$pid" 1 0
            kill "$pid"
        else
            fail numa/run-binds "$(head -c 300 /tmp/local.out | tr '\n' '|')"
        fi
    else
        fail numa/run-ready "$(head -c 300 /tmp/local.out | tr '\n' '|')"
    fi

    # An existing task with its pages on node 0, adopted with --mlock: its pages move.
    taskset -c 0 sh -c "$FILLER" >/tmp/adopt.out 2>&1 &
    adopted=$!
    if wait_ready /tmp/adopt.out; then
        cs run --cpus 3 --mlock --pid "$adopted"
        if grep -q "moved the pages of PID $adopted to node(s) 1" /tmp/cs.out; then
            pass numa/adopt-moves-pages
        else
            fail numa/adopt-moves-pages "rc $CS_RC: $(cat /tmp/cs.out /tmp/cs.err | head -c 300 | tr '\n' '|')"
        fi
        expect_local numa/adopted-pages-local "$adopted" 1 0
    fi
    kill "$adopted" 2>/dev/null

    cs check --cpus 1-2 --interval 200ms --json
    cp /tmp/cs.out /tmp/check-span
    expect_finding numa/check-spans /tmp/check-span "the checked CPUs 1-2 span memory nodes 0-1"

    wait_gone
    cs_ok numa/reset reset
    expect_restored numa/restored /tmp/before

    # --mems by hand: node 0 for CPUs of node 1; a real-time task there has remote pages.
    cs_ok numa/mems-shield shield --all 2-3 --mems 0
    check_eq numa/mems-asked 0 "$(shield_mems)" "shield cpuset's nodes with --mems 0"
    "$CS" run --cpus 3 --fifo 10 -- sh -c "$FILLER" >/tmp/remote.out 2>&1 &
    if wait_ready /tmp/remote.out; then
        cs check --cpus 3 --interval 200ms --json
        cp /tmp/cs.out /tmp/check-remote
        expect_finding numa/check-remote-pages /tmp/check-remote "real-time task [0-9]* (sh) runs on CPUs 3 (node 1) but"
    else
        fail numa/remote-ready "$(head -c 300 /tmp/remote.out | tr '\n' '|')"
    fi
    pkill_filler
    wait_gone
    cs_ok numa/mems-reset reset
    expect_restored numa/mems-restored /tmp/before
}

# pkill_filler: ends the fillers this scenario started (their shells are the only
# processes whose command line holds the filler's text).
pkill_filler() {
    for _p in /proc/[0-9]*; do
        grep -q 'head -c 16000000' "$_p/cmdline" 2>/dev/null && kill "${_p#/proc/}" 2>/dev/null
    done
}

# wait_gone: until the fillers and their runs have exited (5 s at most).
wait_gone() {
    pkill_filler
    _i=0
    while [ "$_i" -lt 50 ] && grep -q 'head -c 16000000' /proc/[0-9]*/cmdline 2>/dev/null; do
        usleep 100000
        _i=$((_i + 1))
    done
}

# numa_remote_device: the NIC run.sh puts behind node 0's PCI expander bridge
# (guest-numa-device: 0), its receive IRQ bound by hand to CPU 3 of node 1, as a user
# binds a NIC's queue to the CPU of the task that takes its data: `check --cpus 3` names
# the IRQ, its device's node and the fix; with the IRQ on its node's CPUs (the fix) the
# finding is gone. A moved MSI takes its new CPU when it next fires: a ping to QEMU's
# user-network gateway fires the receive queue's IRQ when its reply comes in. The IRQ's CPUs, the link and its
# address are put back.
numa_remote_device() {
    load_virtio_modules
    _dev=""
    for _d in /sys/bus/pci/devices/*; do
        [ "$(cat "$_d/numa_node" 2>/dev/null)" = 0 ] && [ -d "$_d/msi_irqs" ] && _dev=$_d
    done
    if [ -z "$_dev" ]; then
        fail numa/device-on-node0 "no PCI device with MSI IRQs on node 0: $(for _d in /sys/bus/pci/devices/*; do printf '%s=%s ' "${_d##*/}" "$(cat "$_d/numa_node")"; done)"
        return
    fi
    pass numa/device-on-node0
    _irq=""
    for _i in $(ls "$_dev/msi_irqs"); do
        grep -q "^ *$_i:.*-input\.0\$" /proc/interrupts && _irq=$_i
    done
    if [ -z "$_irq" ]; then
        fail numa/device-rx-irq "no receive-queue IRQ among ${_dev##*/}'s MSI IRQs $(ls "$_dev/msi_irqs" | tr '\n' ' ')"
        return
    fi
    _was=$(cat "/proc/irq/$_irq/smp_affinity_list")
    ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0
    echo 3 >"/proc/irq/$_irq/smp_affinity_list"
    ping -c 1 -W 1 10.0.2.2 >/dev/null 2>&1
    info "numa/device: ${_dev##*/} IRQ $_irq effective $(cat "/proc/irq/$_irq/effective_affinity_list" 2>/dev/null)"
    cs check --cpus 3 --interval 200ms --json
    cp /tmp/cs.out /tmp/check-device
    info "numa/device: check exited $CS_RC"
    expect_finding numa/check-device-remote /tmp/check-device "IRQ $_irq ([^\"]*) is delivered to CPU 3 on node 1, but its device sits on node 0"
    if grep -q "smp_affinity_list (CPUs of node 0)" /tmp/check-device; then
        pass numa/check-device-fix
    else
        fail numa/check-device-fix "no fix naming node 0's CPUs: $(grep -o '"[^"]*smp_affinity_list[^"]*"' /tmp/check-device | head -n 3 | tr '\n' ' ')"
    fi
    # The fix: node 0's CPUs. (Its mask as found, all CPUs, would keep it on CPU 3: the
    # kernel delivers to one CPU of the mask, and 3 is one.)
    echo 0-1 >"/proc/irq/$_irq/smp_affinity_list"
    ping -c 1 -W 1 10.0.2.2 >/dev/null 2>&1
    cs check --cpus 3 --interval 200ms --json
    expect_no_finding numa/check-device-local /tmp/cs.out "IRQ $_irq ([^\"]*) is delivered to CPU 3"
    echo "$_was" >"/proc/irq/$_irq/smp_affinity_list"
    ip addr del 10.0.2.15/24 dev eth0
    ip link set eth0 down
}

# numa_balancing_step: where the kernel has automatic NUMA balancing (6.1; Debian's
# PREEMPT_RT build has none), `boot-params` on these two nodes turns it off at boot and
# `check` names it while it is on, with the sysctl and the boot fix; where it has none,
# neither says a word of it. The sysctl is put back.
numa_balancing_step() {
    _f=/proc/sys/kernel/numa_balancing
    cs boot-params --all 2-3
    if [ -e "$_f" ]; then
        _was=$(cat "$_f")
        case " $(cat /tmp/cs.out) " in
            *" numa_balancing=disable "*) pass numa/boot-params-balancing ;;
            *) fail numa/boot-params-balancing "no numa_balancing=disable in: $(cat /tmp/cs.out)" ;;
        esac
        echo 1 >"$_f"
        cs check --cpus 3 --interval 200ms --json
        expect_finding numa/check-balancing /tmp/cs.out "automatic NUMA balancing is on (kernel.numa_balancing=1) on a machine of 2 memory nodes"
        echo 0 >"$_f"
        cs check --cpus 3 --interval 200ms --json
        expect_no_finding numa/check-balancing-off /tmp/cs.out "automatic NUMA balancing"
        echo "$_was" >"$_f"
    else
        case "$(cat /tmp/cs.out)" in
            *numa_balancing*) fail numa/boot-params-balancing "numa_balancing on a kernel without it: $(cat /tmp/cs.out)" ;;
            *) pass numa/boot-params-balancing ;;
        esac
        cs check --cpus 3 --interval 200ms --json
        expect_no_finding numa/check-balancing /tmp/cs.out "automatic NUMA balancing"
    fi
}

# node_kthreads: the kernel threads bound to a memory node (kswapd, kcompactd), each with
# its CPUs, one a line.
node_kthreads() {
    for _d in /proc/[0-9]*; do
        read -r _c <"$_d/comm" 2>/dev/null || continue
        case "$_c" in kswapd* | kcompactd*) ;; *) continue ;; esac
        echo "$_c $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$_d/status")"
    done | sort
}

# expect_node_kthreads NAME BEFORE: the node-bound kernel threads have the CPUs they had
# in BEFORE (node_kthreads's output), each.
expect_node_kthreads() {
    node_kthreads >/tmp/kt-now
    if [ -s "$2" ] && cmp -s "$2" /tmp/kt-now; then
        pass "$1"
    else
        fail "$1" "node-bound kernel threads were '$(tr '\n' ' ' <"$2")', are '$(tr '\n' ' ' </tmp/kt-now)'"
    fi
}

# numa_tune_step: `tune --knobs mems` shields CPUs 2-3 (node 1) and tries the shield on
# both nodes, in a private PID namespace, which shows no kernel thread. Making and
# undoing its cgroup v2 partition makes the kernel give the root cgroup's threads the
# root's CPUs: afterwards the node-bound kernel threads (kswapd, kcompactd) have their
# node's CPUs again, each. (compare runs the same way and gives them back the same way.)
numa_tune_step() {
    node_kthreads >/tmp/kt-before
    info "numa/tune: node-bound kernel threads $(tr '\n' ' ' </tmp/kt-before)"
    # 22 s is the smallest budget tune accepts for one knob; it ends in about 10.
    cs tune --cpus 2-3 --load none --knobs mems --budget 22s --out /tmp/tune-numa
    check_eq numa/tune-exit 0 "$CS_RC" "exit status ($(tail -c 300 /tmp/cs.err | tr '\n' ' '))"
    if grep -q "^mems  *1 (the nodes of CPU 2-3) -> 0-1" /tmp/cs.out; then
        pass numa/tune-mems-measured
    else
        fail numa/tune-mems-measured "no mems row from node 1 to 0-1 in: $(head -c 400 /tmp/cs.out | tr '\n' '|')"
    fi
    expect_node_kthreads numa/tune-kthreads-restored /tmp/kt-before
}
