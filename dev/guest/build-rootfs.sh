#!/bin/sh
# Build (once) the Debian root filesystem the systemd guest test boots: bookworm, minbase,
# systemd as PID 1. Prints the path of the cached tree on stdout. The tree is rebuilt only
# when the recipe below (this file) changes: its hash is kept next to the tree.
#
#   dev/guest/build-rootfs.sh            # -> target/guest/rootfs/tree
#
# Needs: root, debootstrap, the Debian bookworm archive (the mirror is read from apt's
# sources, as apt-get download uses for the kernel). First build: a few minutes (download).
set -eu

# The recipe. Change it here only; any change to this file rebuilds the tree.
SUITE=bookworm
VARIANT=minbase
# systemd-sysv: systemd as /sbin/init. tuned: Debian's tuned 2.20 for the tuned profile's
# steps (it brings python3, dbus and polkitd; polkitd needs a logind, libpam-systemd).
# Nothing else: the test needs only coreutils, grep, sed, util-linux and dpkg (minbase).
INCLUDE=systemd-sysv,libpam-systemd,tuned

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GUEST_CACHE:-$ROOT/target/guest}/rootfs"
TREE="$CACHE/tree"
STAMP="$CACHE/recipe.sha256"

die() { echo "build-rootfs: $*" >&2; exit 1; }

WANT=$(sha256sum "$0" | cut -d' ' -f1)
if [ -d "$TREE" ] && [ -s "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    echo "$TREE"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, and the tree's files are root's)"
command -v debootstrap >/dev/null || die "debootstrap not found; apt-get install debootstrap (scripts/dev-setup.sh does)"

# The mirror apt uses (deb822 or one-line sources), else Debian's default.
MIRROR=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$MIRROR" ] || MIRROR=$(sed -n 's/^deb  *\(http[^ ]*\/debian\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian

START=$(date +%s)
rm -rf "$CACHE/new" "$STAMP"
mkdir -p "$CACHE"
echo "build-rootfs: debootstrap --variant=$VARIANT --include=$INCLUDE $SUITE from $MIRROR" >&2
debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$CACHE/new" "$MIRROR" >&2 \
    || die "debootstrap failed (see above); log: $CACHE/new/debootstrap/debootstrap.log"
# Keep the cache small: no package cache, lists, docs or man pages.
rm -rf "$CACHE/new/var/cache/apt/archives/"*.deb "$CACHE/new/var/lib/apt/lists/"* \
       "$CACHE/new/usr/share/doc/"* "$CACHE/new/usr/share/man/"* "$CACHE/new/usr/share/locale/"*
rm -rf "$TREE"
mv "$CACHE/new" "$TREE"
echo "$WANT" >"$STAMP"
echo "build-rootfs: built in $(( $(date +%s) - START ))s" >&2
echo "$TREE"
