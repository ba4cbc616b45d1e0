#!/usr/bin/env bash
# Installs what cpushield needs at run time and builds it: rt-tests (cyclictest,
# the independent anchor of `compare` and `demo`) and a C compiler (the
# stress-kernel load compiles), then `cargo build --release` of the binary and a
# link in /usr/local/bin. Nothing for development or CI: scripts/test.sh
# installs that itself (scripts/dev-setup.sh).
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo >/dev/null || {
    echo "setup: cargo not found: install Rust 1.85 or newer (https://rustup.rs), then run scripts/setup.sh again" >&2
    exit 1
}
packages=(rt-tests gcc)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# --workspace: the features the whole workspace resolves (the shield's `fake`, which
# the fake-kernel benchmark turns on and the binary never calls), as the packages and
# scripts/test.sh's release build resolve them. With `-p cpushield` alone, the test
# build after this one compiled thirteen crates a second time.
cargo build --release --workspace --bin cpushield
ln -sf "$PWD/target/release/cpushield" /usr/local/bin/cpushield
echo "cpushield installed: $(command -v cpushield)"
