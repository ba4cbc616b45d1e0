#!/usr/bin/env bash
# Installs what the tests and benchmarks need beyond the product
# (scripts/setup.sh): the peers the benchmarks compare against (stress-ng,
# sockperf, cset, tuna), the guest runner (qemu, busybox, cpio; debootstrap and
# e2fsprogs for the systemd guest's disk), chromium (the report's page test),
# prometheus (promtool checks the alert rules and the dashboard's queries), GNU time, jq
# and bc (benchmarks), Go and the modules of dev/manifest-check (the Kubernetes manifests'
# validator) and dev/grafana-dashboard (the Grafana dashboard's generator), cargo-deb (the
# .deb the systemd guest installs), and rpm and rpmlint (the RPM, built and checked). scripts/test.sh runs it
# first; running it again installs nothing new.
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
packages=(rt-tests stress-ng sockperf qemu-system-x86 busybox-static cpio gcc chromium util-linux jq curl prometheus debootstrap e2fsprogs cpuset tuna bc time rpm rpmlint)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if ! command -v go >/dev/null 2>&1; then
    missing+=(golang-go)
fi
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The validator decodes the manifests into the real Kubernetes API types, the dashboard
# generator builds with the Grafana Foundation SDK; their modules are fetched now so that
# the tests need no network for them.
for module in dev/manifest-check dev/grafana-dashboard; do
    (cd "$module" && go mod download) || {
        echo "dev-setup: cannot fetch the Go modules of $module: it needs Go $(sed -n 's/^go //p' "$module/go.mod") or newer ($(go version)) and the Go module proxy" >&2
        exit 1
    }
done
command -v cargo-deb >/dev/null || cargo install cargo-deb --locked
