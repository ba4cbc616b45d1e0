#!/usr/bin/env bash
# Runs the tests.
#
#   scripts/test.sh           every test, as CI runs it: installs the test tools, then
#                             formatting, clippy, the manifest validator, unit and
#                             fake-kernel tests, host tests (inside private PID
#                             namespaces), the real-kernel guest tests under QEMU, and the
#                             parsers' long property run. Needs root.
#   scripts/test.sh --quick   formatting, clippy, and the unit and fake-kernel tests: no
#                             root, no change to this machine, no guest (CONTRIBUTING.md
#                             says when it is enough).
#
# Each stage ends with a line `test.sh: NAME took N s (CPU M s)` on stderr.
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

QUICK=0
case "${1:-}" in
    --quick) QUICK=1 ;;
    "") ;;
    *)
        echo "test.sh: unknown argument '$1'; run scripts/test.sh (everything) or scripts/test.sh --quick" >&2
        exit 1
        ;;
esac

STARTED=$SECONDS
TIMES=$(mktemp)
# The process groups of the jobs started beside other stages (below), ended with this
# script should a stage fail first.
BESIDE=()
end_beside() {
    local g
    for g in "${BESIDE[@]}"; do kill -- "-$g" 2>/dev/null || true; done
}
trap 'rm -f "$TIMES"; end_beside' EXIT
# children_cpu: sets CPU_NOW to the CPU seconds (user + system) of every child this
# shell has waited for so far. `times` runs in this shell, its output to a file: in a
# pipe or $(...) it would run in a subshell, which has no children.
children_cpu() {
    times >"$TIMES"
    CPU_NOW=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, t, /m/); n += t[1] * 60 + t[2] } printf "%d", n }' "$TIMES")
}
# stage NAME COMMAND...: runs COMMAND and says how long it took, in wall time and in
# CPU time (which another load on the machine changes less).
stage() {
    local name=$1 t0=$SECONDS c0
    shift
    children_cpu
    c0=$CPU_NOW
    "$@"
    children_cpu
    echo "test.sh: $name took $((SECONDS - t0)) s (CPU $((CPU_NOW - c0)) s)" >&2
}

# The integration test targets that run something for real on this machine: every
# `*_host.rs`, the guest tests, and these. --quick leaves them out; every other target
# (unit tests, fake-kernel and fixture tests) is in both.
REAL_TESTS="guest measure_cli run_cli reserve_cli compare_cli check_cli load_cli c_example trace_real real_run workloads spsc_stress"

# The unit tests of every crate and the integration test targets that touch nothing,
# as `cargo test` arguments.
QUICK_TARGETS=(--workspace --lib --bins)
for f in crates/*/tests/*.rs; do
    name=$(basename "$f" .rs)
    case " $REAL_TESTS " in *" $name "*) continue ;; esac
    case "$name" in *_host) continue ;; esac
    QUICK_TARGETS+=(--test "$name")
done

# The host tests: the integration test targets --quick leaves out, but the guest tests
# (a stage of their own).
HOST_TARGETS=(--workspace)
for f in crates/*/tests/*.rs; do
    name=$(basename "$f" .rs)
    [ "$name" = guest ] && continue
    case " $REAL_TESTS " in *" $name "*) HOST_TARGETS+=(--test "$name") && continue ;; esac
    case "$name" in *_host) HOST_TARGETS+=(--test "$name") ;; esac
done

# beside LOG COMMAND...: starts COMMAND in its own process group, its output to LOG, and
# sets BESIDE_PGID to that group (its PID; setsid does not fork from a background job,
# which leads no group).
beside() {
    local log=$1
    shift
    setsid "$@" >"$log" 2>&1 &
    BESIDE_PGID=$!
    BESIDE+=("$BESIDE_PGID")
}

# wait_beside PGID LOG WHAT: waits for the job of `beside`, shows its output; the job
# failing fails the stage.
wait_beside() {
    local rc=0
    wait "$1" || rc=1
    cat "$2" >&2
    [ "$rc" = 0 ] || echo "test.sh: $3 failed (above)" >&2
    return "$rc"
}

# clippy_beside_build ARGS...: clippy, while `cargo test ARGS --no-run` builds the test
# binaries the next stage runs. Either alone leaves one of two CPUs idle much of the time
# (clippy alone: 143 s of CPU in 111 s on the CI machine), and clippy's checking cannot
# serve a build. Clippy checks into target/clippy, so that neither waits for the other's
# lock on target/. The build's output follows clippy's; either failing fails the stage.
clippy_beside_build() {
    local log=target/test-build.log build rc=0
    mkdir -p target
    cargo test "$@" --no-run >"$log" 2>&1 &
    build=$!
    CARGO_TARGET_DIR=target/clippy cargo clippy --workspace --all-targets -- -D warnings || rc=1
    wait "$build" || rc=1
    cat "$log" >&2
    [ "$rc" = 0 ] || echo "test.sh: clippy or the build of the tests failed (above)" >&2
    return "$rc"
}

if [ "$QUICK" = 1 ]; then
    stage fmt cargo fmt --all -- --check
    stage clippy-and-test-build clippy_beside_build "${QUICK_TARGETS[@]}"
    stage unit-and-fake-kernel-tests cargo test "${QUICK_TARGETS[@]}"
    echo "test.sh: --quick passed in $((SECONDS - STARTED)) s" >&2
    exit 0
fi

# The tools of the tests and benchmarks (the product's own are scripts/setup.sh's).
stage dev-setup bash scripts/dev-setup.sh

# The guest tests' downloads (the Debian kernels and rtla, the systemd guest's Debian
# tree) wait on the network, not the CPU: they run while clippy compiles.
mkdir -p target
PREPARE_LOG=target/guest-prepare.log
(dev/guest/fetch-kernel.sh --all >/dev/null && dev/guest/build-rootfs.sh >/dev/null) \
    >"$PREPARE_LOG" 2>&1 &
PREPARE_PID=$!

stage fmt cargo fmt --all -- --check
# The release build of the tests (the unit, fake-kernel and host tests' stage below, the
# guest tests' binary) compiles beside clippy.
stage clippy-and-test-build clippy_beside_build --workspace --release

t0=$SECONDS
if ! wait "$PREPARE_PID"; then
    cat "$PREPARE_LOG" >&2
    echo "test.sh: the guest tests' kernels or Debian tree could not be prepared (above)" >&2
    exit 1
fi
echo "test.sh: waiting for the guest downloads took $((SECONDS - t0)) s" >&2

# Every test runs cpushield with a state directory of its own (the guests' host side
# too: dev/guest/run.sh), so where the machine had no /run/cpushield at the start, the
# tests may leave none: one that forgot leaves its tracefs lock there. Said, listed and
# removed; the run fails.
RUN_STATE_ABSENT=0
[ -e /run/cpushield ] || RUN_STATE_ABSENT=1
no_state_left() {
    if [ "$RUN_STATE_ABSENT" = 1 ] && [ -e /run/cpushield ]; then
        echo "test.sh: the $1 left /run/cpushield: a test ran cpushield without a state directory of its own" >&2
        ls -la /run/cpushield >&2
        rm -rf /run/cpushield
        return 1
    fi
}

# One test binary at a time touches IRQs and cgroups; tests inside a binary that do so
# serialise themselves. Nothing else runs while the host tests measure: the unit,
# fake-kernel and doc tests run beside the next stages, the guest tests after them.
stage host-tests cargo test --release "${HOST_TARGETS[@]}"
no_state_left "host tests"

# The unit and fake-kernel tests (--quick's) and the doc tests touch nothing on this
# machine and take 25-35 s, with some 9 s of CPU: mostly waiting (the fake runner's and
# the agent's sleeps, one test binary after another). They run beside the scale bench
# and the packages' check, which keep one CPU of two busy; their stage below is what is
# left of them.
beside target/unit-tests.log bash -c \
    'cargo test --release "$@" && cargo test --release --workspace --doc' \
    unit-tests "${QUICK_TARGETS[@]}"
UNIT_PGID=$BESIDE_PGID

# The parsers' property/fuzz suite once more with many more cases, with overflow checks
# and debug assertions on (profile fuzz, not optimised: Cargo.toml says why), so an
# overflow is a reported crash, not a silent wrap. Its build (every crate again, in its
# own profile's directory) and its run take some 175 s of CPU; alone after the guest tests
# they took 93 s of wall time. The stages from here leave CPU time unused: the guests
# wait (halted vCPUs, sleeps, a boot's disk), and in a guest stage of 1,310 s on two CPUs
# (2,620 s of CPU) they and their harness used some 2,270 s, which left some 350 s for
# this run and the Go checks below (about 310 s together). So it runs beside them in the
# idle scheduling class (SCHED_IDLE: it runs only on a CPU nothing else wants, and a
# waking task of any other class preempts it at once), its output kept for the end.
# Nothing from here measures wall-clock latency on the host:
# the scale bench counts CPU time in units of a reference work timed beside each step,
# and the guests' time limits allow for a host shared with other work.
FUZZ_STARTED=$SECONDS
beside target/fuzz-long.log chrt --idle 0 env CPUSHIELD_FUZZ_CASES="${CPUSHIELD_FUZZ_LONG_CASES:-20000}" \
    cargo test --profile fuzz -p cpushield-fuzz --test parsers
FUZZ_PGID=$BESIDE_PGID

# The Go checks: the Kubernetes manifests, decoded strictly into the real Kubernetes
# types (an unknown or misspelt field fails), then the Grafana dashboard
# (dist/grafana/cpushield.json is what its generator makes; the live check of its queries
# is in crates/cli/tests/agent_host.rs). With Go's build cache cold, as on a fresh CI
# machine, compiling the Kubernetes API types and the Grafana SDK makes them 70 s of wall
# and 134 s of CPU time alone on the CI machine; warm, 3 s. They touch and measure
# nothing, so they run beside the guests in the idle class, as the long property run above
# does, their output kept for the end. -timeout: a test binary may wait long for an idle
# CPU while the guests run; the guard against a hang stays, longer than the guest stage.
beside target/go-checks.log chrt --idle 0 bash -c '
    for d in dev/manifest-check dev/grafana-dashboard; do
        echo "test.sh: $d: gofmt, go vet, go test"
        (cd "$d" && gofmt -l . | (! grep .) && go vet ./... && go test -timeout 30m ./...) || exit 1
    done'
GO_PGID=$BESIDE_PGID

# How shield, reset, show, check and the agent's look grow (dev/bench/scale.sh --ci): each on
# fake machines of a quarter and all of 512 CPUs, 4,096 IRQs and 100,000 threads, in one run;
# a step that grows faster than linear from one to the other, or misses its budget at the
# full size, fails. CPU time and heap, not wall time: this machine is shared. About 30 s.
stage scale-bench dev/bench/scale.sh --ci

# The RPM beside the .deb: rpmlint, installed into a scratch root, the same files as the
# .deb (about 30 s on the release build above).
stage packages scripts/check-packages.sh

stage unit-fake-kernel-and-doc-tests wait_beside "$UNIT_PGID" target/unit-tests.log \
    "the unit, fake-kernel or doc tests"

# The real-kernel tests boot Debian's 6.1 and 6.12 PREEMPT_RT kernels under QEMU
# (dev/guest/), two at once (GUEST_JOBS), the short scenarios several to a boot
# (crates/cli/tests/guest.rs, dev/guest/README.md); CPUSHIELD_GUEST=1 makes
# a missing QEMU or kernel a failure, not a skip. The test binary was built above.
# (--workspace, not -p cpushield: the same features as above, so nothing is rebuilt.)
stage guest-tests env CPUSHIELD_GUEST="${CPUSHIELD_GUEST:-1}" \
    cargo test --workspace --release --test guest
no_state_left "guest tests"

# What is left of the long property run and of the Go checks once the guests are done has
# the machine to itself, or shares it with other tenants at their class: back to the
# normal class (the processes cargo and go start from here inherit it from them). Each
# stage's time is what is left of its job. (A job run beside others has its CPU time counted in the stage during
# which it ends, when this shell reaps it.)
for pid in $(pgrep -g "$FUZZ_PGID") $(pgrep -g "$GO_PGID"); do
    chrt --other --all-tasks --pid 0 "$pid" 2>/dev/null || true
done
stage go-checks wait_beside "$GO_PGID" target/go-checks.log \
    "the Go checks (dev/manifest-check, dev/grafana-dashboard)"
stage fuzz-long wait_beside "$FUZZ_PGID" target/fuzz-long.log "the parsers' long property run"
echo "test.sh: fuzz-long ran $((SECONDS - FUZZ_STARTED)) s from its start beside the scale bench" >&2

echo "test.sh: everything passed in $((SECONDS - STARTED)) s" >&2
