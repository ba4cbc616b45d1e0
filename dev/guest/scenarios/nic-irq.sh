# Scenario nic-irq: interrupts from outside the machine (Brosky & Rotolo's scp/ttcp from a
# foreign host, the Hyades paper's ICMP flood). The guest has a virtio-net NIC on QEMU's
# user network; the host floods it with UDP (run.sh answers each GUEST-FLOOD line with
# `cpushield load ionet --peer 127.0.0.1:PORT`). The NIC's receive IRQs steered to CPU 3
# must count up on CPU 3. Their mask then becomes CPUs 1,3: the kernel keeps an interrupt
# on its current CPU while that stays in the mask, so it still lands on CPU 3, and under
# Brosky's rule a shield of CPU 3 can move it (a mask of CPU 3 alone it would keep). After
# `shield --all 3` a flood must add nothing on CPU 3; `reset` gives back the mask 1,3.
# guest-test: nic_irqs_from_a_host_flood_reach_cpu3_until_shielded_and_reset_restores_them
# guest-cost: 40
# guest-net: user 47501
# guest-tcg: single
# guest-timeout: 420
GUEST_CGROUP=v2
PORT=47501

scenario_main() {
    nic_up nic-irq || return
    nic_steer nic-irq || return
    irqs=$NIC_IRQS

    before=$(nic_count "$irqs" 3)
    nic_flood steered 4
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
    nic_flood shielded 4
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
    nic_restore
}
