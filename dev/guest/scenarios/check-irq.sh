# Scenario check-irq: an IRQ bound to CPU 3 that fires during the interval must be named
# by `cpushield check` with the runtime remedy, and break the shield (exit 3). The source
# is the serial console's IRQ (ttyS0): writing to the console raises it.
# guest-test: check_names_an_irq_bound_to_a_shielded_cpu_with_its_remedy
# guest-cost: 9
# guest-boot: shared
# guest-tcg: single
# guest-timeout: 200
GUEST_CGROUP=v2

scenario_main() {
    irq=$(awk -F: '/ttyS0/ { gsub(/ /, "", $1); print $1; exit }' /proc/interrupts)
    if [ -z "$irq" ]; then
        fail check-irq/source "no ttyS0 line in /proc/interrupts: $(tr '\n' '|' </proc/interrupts | head -c 400)"
        return
    fi
    read -r old </proc/irq/$irq/smp_affinity
    if ! echo 8 >/proc/irq/$irq/smp_affinity; then
        fail check-irq/bind "IRQ $irq (ttyS0) refused affinity CPU 3"
        return
    fi
    # Console output all through the check's interval.
    ( i=0; while [ $i -lt 60 ]; do echo "noise $i ................................................................................................"; i=$((i + 1)); usleep 40000; done ) &
    noise=$!
    cs check --cpus 3 --interval 2s --json
    wait "$noise"
    echo "$old" >/proc/irq/$irq/smp_affinity
    check_eq check-irq/exit 3 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    if grep -q "\"title\": \"IRQ $irq (ttyS0) arrives on CPU 3" /tmp/cs.out; then
        pass check-irq/named
    else
        fail check-irq/named "no finding naming IRQ $irq (ttyS0): $(grep '"title"' /tmp/cs.out | head -n 8 | tr '\n' ' ')"
    fi
    if grep -q '"action": "cpushield shield --irqs 3"' /tmp/cs.out; then
        pass check-irq/remedy
    else
        fail check-irq/remedy "no 'cpushield shield --irqs 3' remedy"
    fi
    if grep -q '"severity": "breaks-shield"' /tmp/cs.out; then pass check-irq/severity; else fail check-irq/severity "no breaks-shield finding"; fi
    # Read-only: the IRQ's affinity is what we left, nothing else moved.
    check_eq check-irq/affinity-restored "$old" "$(cat /proc/irq/$irq/smp_affinity)"
}
