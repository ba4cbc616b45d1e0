#!/usr/bin/env bash
# Runs every test: unit tests, host tests (inside private PID namespaces),
# and the real-kernel guest tests under QEMU.
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
# The tools of the tests and benchmarks (the product's own are scripts/setup.sh's).
bash scripts/dev-setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The Kubernetes manifests, decoded strictly into the real Kubernetes types
# (an unknown or misspelt field fails); a few seconds.
(cd dev/manifest-check && gofmt -l . | (! grep .) && go vet ./... && go test ./...)
# The Grafana dashboard: dist/grafana/cpushield.json is what its generator makes (the
# live check of its queries is in crates/cli/tests/agent_host.rs); a few seconds.
(cd dev/grafana-dashboard && gofmt -l . | (! grep .) && go vet ./... && go test ./...)
# One test binary at a time touches IRQs and cgroups; tests inside a binary
# that do so serialise themselves.
# The real-kernel tests boot Debian's 6.1 and 6.12 PREEMPT_RT kernels under QEMU (dev/guest/);
# CPUSHIELD_GUEST=1 makes a missing QEMU or kernel a failure, not a skip.
dev/guest/fetch-kernel.sh --all >/dev/null
export CPUSHIELD_GUEST="${CPUSHIELD_GUEST:-1}"
cargo test --workspace --release
# The RPM beside the .deb: rpmlint, installed into a scratch root, the same files as the
# .deb (about 30 s on the release build above).
scripts/check-packages.sh
# The parsers' property/fuzz suite once more with many more cases, optimised
# but with overflow checks on (profile fuzz), so an overflow is a reported
# crash, not a silent wrap (about 2 minutes, build included).
CPUSHIELD_FUZZ_CASES="${CPUSHIELD_FUZZ_LONG_CASES:-100000}" \
    cargo test --profile fuzz -p cpushield-fuzz --test parsers
