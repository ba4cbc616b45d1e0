#!/usr/bin/env bash
# Runs every test: unit tests, host tests (inside private PID namespaces),
# and the real-kernel guest tests under QEMU.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# One test binary at a time touches IRQs and cgroups; tests inside a binary
# that do so serialise themselves.
cargo test --workspace --release
