#!/usr/bin/env bash
# Installs what cpushield needs on a Debian machine and builds it:
# the tools its benchmarks and tests compare against (rt-tests, stress-ng,
# cset and tuna),
# the guest test kernel runner (qemu, busybox, cpio), chromium for the report
# test, then `cargo build --release` and a link in /usr/local/bin.
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
# cpuset (cset) and tuna: the peers of bench/shield-vs-peers.sh.
packages=(rt-tests stress-ng qemu-system-x86 busybox-static cpio gcc chromium util-linux jq curl prometheus cpuset tuna bc)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
cargo build --release
ln -sf "$PWD/target/release/cpushield" /usr/local/bin/cpushield
echo "cpushield installed: $(command -v cpushield)"
