# Scenario nic-irq: interrupts from outside the machine (Brosky & Rotolo's scp/ttcp from a
# foreign host, the Hyades paper's ICMP flood). The guest has a virtio-net NIC on QEMU's
# user network; the host floods it with UDP (run.sh answers each GUEST-FLOOD line with
# `cpushield load ionet --peer 127.0.0.1:PORT`). The NIC's receive IRQs steered to CPU 3
# must count up on CPU 3. Their mask then becomes CPUs 1,3: the kernel keeps an interrupt
# on its current CPU while that stays in the mask, so it still lands on CPU 3, and under
# Brosky's rule a shield of CPU 3 can move it (a mask of CPU 3 alone it would keep). After
# `shield --all 3` a flood must add nothing on CPU 3; `reset` gives back the mask 1,3.
# guest-net: user 47501
# guest-timeout: 420
GUEST_CGROUP=v2
PORT=47501

# nic_count IRQS CPU: the sum of the IRQs' counts on CPU.
nic_count() {
    _sum=0
    for _i in $1; do
        _c=$(awk -v irq="$_i:" -v col=$(($2 + 2)) '$1 == irq { print $col }' /proc/interrupts)
        _sum=$((_sum + ${_c:-0}))
    done
    echo "$_sum"
}

# flood NAME SECS: ask the host for a flood of SECS seconds and wait until it is over,
# with a receiver counting datagrams on CPUs 0-2; PASS NAME/received if any arrived.
flood() {
    "$CS" load ionet --listen "$PORT" --cpus 0-2 --duration "$(($2 + 8))s" --dir /tmp --json /tmp/rx.json \
        >/tmp/rx.out 2>/tmp/rx.err &
    _rx=$!
    sleep 2
    echo "GUEST-FLOOD $2"
    wait "$_rx"
    _got=$(sed -n 's/.*"ops": *\([0-9]*\).*/\1/p' /tmp/rx.json | head -n 1)
    if [ "${_got:-0}" -gt 0 ]; then
        pass "$1/received"
        info "$1: $_got datagrams received"
    else
        fail "$1/received" "no datagram of the host's flood arrived: $(head -c 300 /tmp/rx.err | tr '\n' ' ')"
    fi
}

scenario_main() {
    for _pass in 1 2 3; do
        for m in $(cat /lib/modules/order 2>/dev/null); do
            grep -q "^$m " /proc/modules || insmod "/lib/modules/$m.ko" 2>/dev/null
        done
    done
    if ! grep -q '^virtio_net ' /proc/modules; then
        fail nic-irq/driver "virtio_net did not load: modules $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')"
        return
    fi
    ip link set lo up
    ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
    irqs=$(awk '/virtio[0-9]*-input/ { sub(":", "", $1); print $1 }' /proc/interrupts | tr '\n' ' ')
    if [ -z "$irqs" ]; then
        fail nic-irq/irqs "no virtio input IRQ: $(grep virtio /proc/interrupts | tr '\n' '|')"
        return
    fi
    pass nic-irq/driver
    info "NIC receive IRQs: $irqs"
    saved=""
    for i in $irqs; do
        read -r m </proc/irq/$i/smp_affinity
        saved="$saved $i:$m"
        echo 8 >/proc/irq/$i/smp_affinity || fail nic-irq/steer "IRQ $i refused CPU 3"
    done

    before=$(nic_count "$irqs" 3)
    flood steered 4
    after=$(nic_count "$irqs" 3)
    info "steered to CPU 3: NIC IRQs on CPU 3 went $before -> $after"
    if [ "$after" -gt "$before" ]; then
        pass nic-irq/steered-counts-on-cpu3
    else
        fail nic-irq/steered-counts-on-cpu3 "the flood raised no NIC IRQ on CPU 3 ($before -> $after)"
    fi

    for i in $irqs; do
        echo a >/proc/irq/$i/smp_affinity || fail nic-irq/steer "IRQ $i refused CPUs 1,3"
        eff=$(cat /proc/irq/$i/effective_affinity_list 2>/dev/null)
        check_eq "nic-irq/stays-on-cpu3-irq-$i" 3 "$eff" "IRQ $i effective CPU with mask 1,3"
    done
    cs_ok nic-irq/shield shield --all 3
    for i in $irqs; do
        l=$(cat /proc/irq/$i/smp_affinity_list)
        if cpus_has "$l" 3; then fail nic-irq/shield-moved "IRQ $i still allows CPU 3 ($l)"; fi
    done
    before=$(nic_count "$irqs" 3)
    flood shielded 4
    after=$(nic_count "$irqs" 3)
    info "shielded: NIC IRQs on CPU 3 went $before -> $after"
    # An MSI's new mask takes effect when its next interrupt arrives: that one interrupt
    # per IRQ may still land on CPU 3 (the move); any more broke the shield.
    moves=$(echo $irqs | wc -w)
    if [ "$after" -le $((before + moves)) ]; then
        pass nic-irq/shielded-zero-on-cpu3
    else
        fail nic-irq/shielded-zero-on-cpu3 "the flood raised $((after - before)) NIC IRQs on shielded CPU 3 ($before -> $after; $moves allowed for the moves)"
    fi

    cs_ok nic-irq/reset reset
    for i in $irqs; do
        check_eq "nic-irq/reset-restores-irq-$i" 1,3 "$(cat /proc/irq/$i/smp_affinity_list)" \
            "IRQ $i affinity after reset"
    done
    for s in $saved; do
        echo "${s#*:}" >"/proc/irq/${s%%:*}/smp_affinity" 2>/dev/null
    done
}
