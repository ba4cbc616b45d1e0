#!/usr/bin/env bash
# Installs what cpushield needs on a Debian machine and builds it:
# the tools its benchmarks and tests compare against (rt-tests, stress-ng,
# sockperf, cset and tuna),
# the guest test kernel runner (qemu, busybox, cpio; debootstrap and e2fsprogs for
# the systemd guest's disk), cargo-deb for the .deb, chromium for the report
# test, time (peak RSS in the probe-memory test and benches), valgrind and binutils
# (scripts/gen-symbol-order.sh), then `cargo build --release` and a link in
# /usr/local/bin.
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
# cpuset (cset) and tuna: the peers of bench/shield-vs-peers.sh.
packages=(rt-tests stress-ng sockperf qemu-system-x86 busybox-static cpio gcc chromium util-linux jq curl prometheus debootstrap e2fsprogs cpuset tuna bc time valgrind binutils)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The Kubernetes manifests' validator (deploy/kubernetes/validate) is a Go
# program over the real Kubernetes API types: Go (this machine kind ships a
# recent one; Debian's golang-go if none), and its modules fetched now from
# the Go module proxy, so scripts/test.sh needs no network for it.
if ! command -v go >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends golang-go
fi
(cd deploy/kubernetes/validate && go mod download) || {
  echo "setup: cannot fetch the Go modules of deploy/kubernetes/validate: it needs Go $(sed -n 's/^go //p' deploy/kubernetes/validate/go.mod) or newer ($(go version)) and the Go module proxy" >&2
  exit 1
}
# The .deb (scripts/build-deb.sh) is built with cargo-deb.
command -v cargo-deb >/dev/null || cargo install cargo-deb --locked
cargo build --release
# Lay out the latency probe's code for this very tree: the linker puts the
# functions `measure latency` runs first in .text from crates/cli/symbol-order.txt,
# whose mangled names depend on where the tree is and how it is built (the
# committed file matches the tree it was made in, and a clone elsewhere keeps only
# part of it: 4.3 instead of 3.5 MB peak). scripts/gen-symbol-order.sh regenerates
# it from this build (callgrind, ~2 min); then the binary is linked again.
if [ "$(id -u)" = 0 ] && grep -qw 1 <(tr ',-' '  ' </sys/devices/system/cpu/online); then
  bash scripts/gen-symbol-order.sh
  cargo build --release
else
  echo "setup: not root or no CPU 1: keeping the committed crates/cli/symbol-order.txt (the probe's peak RSS may be higher)" >&2
fi
ln -sf "$PWD/target/release/cpushield" /usr/local/bin/cpushield
echo "cpushield installed: $(command -v cpushield)"
