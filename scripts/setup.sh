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
ln -sf "$PWD/target/release/cpushield" /usr/local/bin/cpushield
echo "cpushield installed: $(command -v cpushield)"
