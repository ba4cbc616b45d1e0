#!/usr/bin/env bash
# Model-checks the SPSC queue with loom and runs its tests (typed, byte and C
# queue) under Miri. Slow (loom builds its own dependency tree: ~5 min on 2
# cores the first time), so not part of `cargo test`.
#
#   dev/check-concurrency.sh [loom|miri|all]
#
# Miri needs the nightly toolchain with the miri component:
#   rustup toolchain install nightly && rustup component add miri --toolchain nightly
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
base=${CARGO_TARGET_DIR:-target}
if [ "$what" = loom ] || [ "$what" = all ]; then
  echo "== loom: every interleaving of producer and consumer"
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR="$base-loom" \
    cargo test -p cpushield-rt --test loom_spsc --release
fi
if [ "$what" = miri ] || [ "$what" = all ]; then
  echo "== miri: undefined behaviour in the queues' unsafe code"
  CARGO_TARGET_DIR="$base-miri" \
    cargo +nightly miri test -p cpushield-rt --lib -- spsc capi::tests::the_c_queue
fi
