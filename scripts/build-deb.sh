#!/usr/bin/env bash
# Build the cpushield .deb: release binary, man pages and shell completions (generated
# from the binary's own clap definition), the systemd units and the default config.
# Prints the path of the .deb on stdout (the last line).
#
#   scripts/build-deb.sh            # -> target/debian/cpushield_VERSION-1_amd64.deb
#
# Needs cargo-deb (scripts/dev-setup.sh installs it: cargo install cargo-deb --locked).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo-deb >/dev/null || {
    echo "build-deb: cargo-deb not found; run scripts/dev-setup.sh (or cargo install cargo-deb --locked)" >&2
    exit 1
}
# --workspace: the features of scripts/test.sh's release build (the shield's `fake`,
# which cpushield-scale turns on), so CI rebuilds nothing; the binary uses none of it.
cargo build --release --workspace --bin cpushield >&2
rm -rf target/release/deb-extra
target/release/cpushield generate man target/release/deb-extra/man >/dev/null
target/release/cpushield generate completions target/release/deb-extra/completions >/dev/null
# --no-build: the binary above is the one packaged (same profile, no second build);
# --strip: the release profile keeps line tables for perf, the package need not.
cargo deb -p cpushield --no-build --strip >&2
ls -t target/debian/cpushield_*.deb | head -n 1
