#!/usr/bin/env bash
# Build the cpushield RPM beside the .deb (scripts/build-deb.sh): the same release binary
# (stripped), man pages and completions generated from it, the systemd units (shipped
# disabled), the default config, the tuned profile, the Prometheus rules and the Grafana
# dashboard, from dist/rpm/cpushield.spec with Debian's rpm tooling (rpmbuild).
# Prints the path of the .rpm on stdout (the last line).
#
#   scripts/build-rpm.sh            # -> target/rpm/RPMS/x86_64/cpushield-VERSION-1.x86_64.rpm
#
# Needs rpmbuild (Debian package rpm; scripts/dev-setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v rpmbuild >/dev/null || {
    echo "build-rpm: rpmbuild not found; run scripts/dev-setup.sh (or apt-get install rpm)" >&2
    exit 1
}
# --workspace: the features of scripts/test.sh's release build, as build-deb.sh.
cargo build --release --workspace --bin cpushield >&2
top="$PWD/target/rpm"
stage="$top/stage"
rm -rf "$stage" "$top/RPMS" "$top/BUILD" "$top/BUILDROOT"
mkdir -p "$stage"
cp target/release/cpushield "$stage/cpushield"
strip "$stage/cpushield"
target/release/cpushield generate man "$stage/man" >/dev/null
target/release/cpushield generate completions "$stage/completions" >/dev/null
cp -r dist "$stage/dist"
cp README.md "$stage/"
version=$(target/release/cpushield --version | awk '{ print $2 }')
rpmbuild -bb --quiet \
    --define "_topdir $top" \
    --define "version $version" \
    --define "staging $stage" \
    dist/rpm/cpushield.spec >&2
ls -t "$top"/RPMS/*/cpushield-"$version"-*.rpm | head -n 1
