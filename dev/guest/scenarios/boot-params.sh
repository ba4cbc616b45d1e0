# Scenario boot-params: `cpushield boot-params --all 3` prints the command-line fragment
# that completes a shield of CPU 3. The fragment is printed as GUEST-BOOTPARAMS for
# dev/guest/run-boot-params.sh, which boots again with it (scenario boot-params-applied).
# guest-test: boot_params_fragment_takes_effect_on_reboot
# guest-runner: run-boot-params.sh
# guest-cost: 40
# guest-timeout: 120
GUEST_CGROUP=v2

scenario_main() {
    cs_ok boot-params/exit-0 boot-params --all 3
    fragment=$(grep -m 1 'nohz_full=' /tmp/cs.out)
    info "boot-params output: $(tr '\n' '|' </tmp/cs.out)"
    for want in nohz_full=3 rcu_nocbs=3 irqaffinity=0-2; do
        case " $fragment " in
            *" $want "*) pass "boot-params/$want" ;;
            *) fail "boot-params/$want" "fragment '$fragment' lacks $want" ;;
        esac
    done
    case " $fragment " in
        *" isolcpus="*managed_irq*domain*3*) pass boot-params/isolcpus ;;
        *) fail boot-params/isolcpus "fragment '$fragment' lacks isolcpus=managed_irq,domain,3" ;;
    esac
    # Nothing changed on the system by printing.
    expect_show boot-params/nothing-shielded "" "" ""
    echo "GUEST-BOOTPARAMS $fragment"
}
