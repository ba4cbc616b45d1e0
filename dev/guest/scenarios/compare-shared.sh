# Scenario compare-shared: the Hyades paper's ARTiS sharing, for the mechanics (timings
# under TCG mean nothing). `cpushield run --share` on the shielded CPU 3 puts the job in
# the shield cgroup on CPU 3 at SCHED_IDLE (policy 5) nice 19; with --fifo it is refused in
# one line. `compare --scenarios shielded,shielded+shared` prints the Table 2 block; its
# report.json carries the batch job (SCHED_IDLE, ops > 0, a CPU share > 0) in
# shielded+shared only and the sharing rows; the shield is reset afterwards.
# guest-test: shared_job_is_sched_idle_in_the_shield_and_compare_reports_table_2
# guest-cost: 21
# guest-boot: shared
# guest-timeout: 400
# guest-tcg: single
GUEST_CGROUP=v2

scenario_main() {
    # 1. run --share on a shielded CPU.
    cs_ok share/shield shield --all 3
    cs run --share --cpus 3 -- sh -c \
        "grep -c cpushield-shield /proc/\$\$/cgroup; \
         sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/\$\$/status; \
         awk '{ print \$41, \$19 }' /proc/\$\$/stat"
    check_eq share/run-exit 0 "$CS_RC" "exit status (stderr: $(head -c 300 /tmp/cs.err))"
    check_eq share/in-shield-cgroup 1 "$(sed -n 1p /tmp/cs.out)"
    check_eq share/on-cpu-3 3 "$(sed -n 2p /tmp/cs.out)"
    check_eq share/sched-idle-nice-19 "5 19" "$(sed -n 3p /tmp/cs.out)"
    cs run --share --fifo 50 --cpus 3 -- true
    check_eq share/fifo-refused 1 "$CS_RC"
    check_eq share/fifo-one-line 1 "$(wc -l </tmp/cs.err | tr -d ' ')" "stderr lines ($(head -c 300 /tmp/cs.err))"
    cs_ok share/reset reset

    # 2. compare with and without sharing.
    cs compare --cpus 3 --scenarios shielded,shielded+shared --duration 3s --runs 2 \
        --work 50ms --load fpu --idle halt --no-attribute --no-anchor --verbose --dir /tmp --out /tmp/cmp
    check_eq share/compare-exit 0 "$CS_RC" "exit status (stderr: $(tail -c 400 /tmp/cs.err | tr '\n' ' '))"
    if grep -q "sharing the shielded CPU's idle time (the Hyades paper's Table 2" /tmp/cs.out &&
        grep -q '^shielded+shared ' /tmp/cs.out && grep -q '^SHARING ' /tmp/cs.out; then
        pass share/table-2
    else
        fail share/table-2 "no Table 2 block: $(tail -c 600 /tmp/cs.out | tr '\n' '|')"
    fi
    json=/tmp/cmp/report.json
    info "$(grep '^SHARING' /tmp/cs.out)"
    check_eq share/schema "cpushield.compare/5" "$(json_top schema <"$json")"
    policy=$(grep -o '"policy": "SCHED_IDLE (nice 19)"' "$json" | head -n 1)
    check_eq share/batch-policy '"policy": "SCHED_IDLE (nice 19)"' "$policy"
    ops=$(awk '/"batch": \{/ { b = 1 } b && /"ops":/ { gsub(/,/, "", $2); print $2; exit }' "$json")
    share=$(grep -o '"cpu_share_pct": [0-9.e+-]*' "$json" | head -n 1 | awk '{ print $2 }')
    info "batch job: $ops ops, $share % of CPU 3"
    if [ -n "$ops" ] && [ "$ops" -gt 0 ]; then pass share/batch-ops; else fail share/batch-ops "ops '$ops'"; fi
    if awk -v s="$share" 'BEGIN { exit !(s + 0 > 0) }'; then
        pass share/batch-share
    else
        fail share/batch-share "cpu_share_pct '$share'"
    fi
    check_eq share/one-batch 1 "$(grep -c '"batch": {' "$json")" "scenarios with a batch job"
    check_eq share/sharing-rows 2 "$(grep -c '"configuration":' "$json")"
    [ ! -e /run/cpushield/state.json ] && pass share/reset-after-compare ||
        fail share/reset-after-compare "shield state left: $(head -c 200 /run/cpushield/state.json)"
}
