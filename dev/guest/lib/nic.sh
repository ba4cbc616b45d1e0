# The virtio-net NIC of a `# guest-net: user PORT` scenario: bring it up, count its
# interrupts, and have the host flood it (run.sh answers GUEST-FLOOD SECS with
# `cpushield load ionet --peer 127.0.0.1:PORT`). The scenario sets PORT.

# load_virtio_modules: insmod the virtio modules the initramfs carries for this kernel
# (fetch-kernel.sh: those Debian builds as modules), in their order; three passes, so
# that one whose dependency failed once is tried again.
load_virtio_modules() {
    _mods=/lib/modules/$(uname -r)
    for _pass in 1 2 3; do
        for _m in $(cat "$_mods/order" 2>/dev/null); do
            grep -q "^$_m " /proc/modules || insmod "$_mods/$_m.ko" 2>/dev/null
        done
    done
}

# nic_up NAME: load the NIC's modules and configure eth0 (10.0.2.15 on QEMU's user
# network); PASS NAME/driver, or FAIL and return 1.
nic_up() {
    load_virtio_modules
    if ! grep -q '^virtio_net ' /proc/modules; then
        fail "$1/driver" "virtio_net did not load: modules $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')"
        return 1
    fi
    ip link set lo up
    ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
    pass "$1/driver"
}

# nic_steer NAME: the NIC's receive IRQs in NIC_IRQS (space-separated), each steered to
# CPU 3 alone, their masks before in NIC_SAVED for nic_restore; FAIL and return 1 when
# the NIC has none.
nic_steer() {
    NIC_IRQS=$(awk '/virtio[0-9]*-input/ { sub(":", "", $1); print $1 }' /proc/interrupts | tr '\n' ' ')
    if [ -z "$NIC_IRQS" ]; then
        fail "$1/irqs" "no virtio input IRQ: $(grep virtio /proc/interrupts | tr '\n' '|')"
        return 1
    fi
    info "NIC receive IRQs: $NIC_IRQS"
    NIC_SAVED=""
    for _i in $NIC_IRQS; do
        read -r _m </proc/irq/$_i/smp_affinity
        NIC_SAVED="$NIC_SAVED $_i:$_m"
        echo 8 >/proc/irq/$_i/smp_affinity || fail "$1/steer" "IRQ $_i refused CPU 3"
    done
}

# nic_restore: the masks nic_steer found, written back.
nic_restore() {
    for _s in $NIC_SAVED; do
        echo "${_s#*:}" >"/proc/irq/${_s%%:*}/smp_affinity" 2>/dev/null
    done
}

# nic_count IRQS CPU: the sum of the IRQs' counts on CPU.
nic_count() {
    _sum=0
    for _i in $1; do
        _c=$(awk -v irq="$_i:" -v col=$(($2 + 2)) '$1 == irq { print $col }' /proc/interrupts)
        _sum=$((_sum + ${_c:-0}))
    done
    echo "$_sum"
}

# nic_flood NAME SECS: ask the host for a flood of SECS seconds and wait until it is over,
# with a receiver counting datagrams on CPUs 0-2; PASS NAME/received if any arrived.
nic_flood() {
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
