# Scenario irq-pending: the state a fresh boot leaves, on purpose. The NIC's receive IRQs
# are placed on CPU 3 (mask CPU 3, a flood, then the wide mask back: the kernel keeps an
# interrupt on its CPU while that is in the mask). `shield --all 3` writes masks without
# CPU 3, but on x86 without interrupt remapping the kernel moves an MSI only at its next
# interrupt, which still lands on CPU 3: until then the move is pending. `shield` and
# `show` (text and --json) must name each such IRQ; `check` must call it a pending move
# (at most one more interrupt), not an IRQ arriving, and advise no shield command the
# shield already applies. A flood then fires each IRQ: the moves complete, at most one
# interrupt each lands on CPU 3, and neither `show` nor `check` names them any more.
# guest-test: irq_moves_pending_off_the_shielded_cpu_are_named_until_their_one_interrupt_completes_them
# guest-cost: 45
# guest-net: user 47502
# guest-tcg: single
# guest-timeout: 420
GUEST_CGROUP=v2
PORT=47502

# has_word LINE N: LINE names N as a whole number.
has_word() {
    echo "$1" | tr -c '0-9' ' ' | tr ' ' '\n' | grep -qx "$2"
}

# pending_in_show <FILE: the IRQ numbers of every irq_moves_pending list of `show --json`.
pending_in_show() {
    awk '/"irq_moves_pending": \[\]/ { next }
         /"irq_moves_pending": \[/ { inside = 1; next }
         inside && /^ *\]/ { inside = 0 }
         inside && /"irq":/ { gsub(/[^0-9]/, ""); print }'
}

scenario_main() {
    nic_up irq-pending || return
    nic_steer irq-pending || return
    irqs=$NIC_IRQS
    nic_flood placed 3
    for i in $irqs; do
        echo f >/proc/irq/$i/smp_affinity || fail irq-pending/widen "IRQ $i refused CPUs 0-3"
        check_eq "irq-pending/placed-on-cpu3-irq-$i" 3 "$(cat /proc/irq/$i/effective_affinity_list)" \
            "IRQ $i effective CPU with mask 0-3 (the fresh-boot state)"
    done

    # The shield writes masks without CPU 3: each move is pending.
    cs_ok irq-pending/shield shield --all 3 --json
    cp /tmp/cs.out /tmp/shield-json
    for i in $irqs; do
        l=$(cat /proc/irq/$i/smp_affinity_list)
        e=$(cat /proc/irq/$i/effective_affinity_list)
        info "after the shield: IRQ $i mask $l, effective $e"
        if cpus_has "$l" 3 || ! cpus_has "$e" 3; then
            fail irq-pending/move-pending-irq-$i "IRQ $i: mask $l, effective $e (expected a mask without CPU 3 and effective 3)"
        fi
    done
    note=$(grep '"text": "move pending for IRQ' /tmp/shield-json)
    for i in $irqs; do
        if has_word "$note" "$i"; then
            pass irq-pending/shield-names-irq-$i
        else
            fail irq-pending/shield-names-irq-$i "shield's notes do not name IRQ $i as pending: $(grep '"text"' /tmp/shield-json | tr '\n' ' ' | head -c 600)"
        fi
    done
    case "$note" in
        *"at most one more interrupt each"*) pass irq-pending/shield-says-what-it-means ;;
        *) fail irq-pending/shield-says-what-it-means "note: $note" ;;
    esac

    cs_ok irq-pending/show-json show --json
    listed=$(pending_in_show </tmp/cs.out | tr '\n' ' ')
    cs_ok irq-pending/show show
    line=$(grep '^CPU 3 move pending for IRQs' /tmp/cs.out)
    for i in $irqs; do
        if has_word "$listed" "$i"; then pass irq-pending/show-json-irq-$i; else fail irq-pending/show-json-irq-$i "irq_moves_pending lists [$listed]"; fi
        if has_word "$line" "$i"; then pass irq-pending/show-irq-$i; else fail irq-pending/show-irq-$i "show: $(grep -i pending /tmp/cs.out | head -c 300)"; fi
    done

    cs check --interval 2s --json
    cp /tmp/cs.out /tmp/check-pending
    titles=$(grep '"title": "move pending for IRQ.* off CPU 3' /tmp/check-pending)
    for i in $irqs; do
        if has_word "$titles" "$i"; then
            pass irq-pending/check-names-pending-irq-$i
        elif grep -q "\"title\": \"IRQ $i .*completed its pending move" /tmp/check-pending; then
            # Something reached the NIC meanwhile: its one interrupt completed the move.
            info "IRQ $i completed its move during the check"
            pass irq-pending/check-names-pending-irq-$i
        else
            fail irq-pending/check-names-pending-irq-$i "check: $(grep '"title"' /tmp/check-pending | grep -e IRQ -e pending | tr '\n' ' ' | head -c 600)"
        fi
        if grep -q "\"title\": \"IRQ $i (.*) arrives on CPU 3" /tmp/check-pending; then
            fail irq-pending/check-no-leak-irq-$i "check calls IRQ $i an IRQ arriving: $(grep "\"title\": \"IRQ $i " /tmp/check-pending)"
        else
            pass irq-pending/check-no-leak-irq-$i
        fi
    done
    if grep -qE '"action": "cpushield shield --(all|procs|irqs|ltmr) 3",?$' /tmp/check-pending; then
        fail irq-pending/check-no-applied-remedy "check advises what the shield already does: $(grep '"action": "cpushield shield' /tmp/check-pending | tr '\n' ' ')"
    else
        pass irq-pending/check-no-applied-remedy
    fi

    # Each IRQ fires: its one interrupt on CPU 3 completes the move.
    before=$(nic_count "$irqs" 3)
    nic_flood moved 3
    after=$(nic_count "$irqs" 3)
    moves=$(echo $irqs | wc -w)
    info "flood under the shield: NIC IRQs on CPU 3 went $before -> $after"
    if [ "$after" -le $((before + moves)) ]; then
        pass irq-pending/at-most-one-interrupt-each
    else
        fail irq-pending/at-most-one-interrupt-each "$((after - before)) NIC interrupts on CPU 3 for $moves pending moves"
    fi
    for i in $irqs; do
        e=$(cat /proc/irq/$i/effective_affinity_list)
        if cpus_has "$e" 3; then fail irq-pending/moved-irq-$i "IRQ $i still effective on $e after the flood"; else pass irq-pending/moved-irq-$i; fi
    done
    cs_ok irq-pending/show-after show --json
    listed=$(pending_in_show </tmp/cs.out | tr '\n' ' ')
    cs check --interval 2s --json
    for i in $irqs; do
        if has_word "$listed" "$i"; then fail irq-pending/show-forgets-irq-$i "still listed pending: [$listed]"; else pass irq-pending/show-forgets-irq-$i; fi
        if grep '"title"' /tmp/cs.out | grep -q -e "IRQ $i " -e "move pending for IRQ.*[ ,]$i[ ,:]"; then
            fail irq-pending/check-forgets-irq-$i "$(grep '"title"' /tmp/cs.out | grep -e "IRQ $i " -e 'move pending' | head -c 400)"
        else
            pass irq-pending/check-forgets-irq-$i
        fi
    done

    cs_ok irq-pending/reset reset
    nic_restore
}
