#!/bin/sh
# Build the guest initramfs: busybox, a static cpushield, /init and every scenario.
# Prints the path of the cpio archive on stdout. The scenario to run is chosen at boot
# (kernel argument cpushield.scenario=NAME), so one archive serves all scenarios.
#
#   dev/guest/build-initramfs.sh         # -> target/guest/initramfs.cpio
#
# One archive serves every guest kernel: each fetched kernel's NIC modules are packed
# under /lib/modules/RELEASE.
#
# Environment:
#   GUEST_CACHE         cache dir (default: target/guest)
#   GUEST_CPUSHIELD     use this cpushield binary instead of building one (must be static)
#   GUEST_SKIP_BUILD=1  do not run cargo; reuse the last static build
# Needs: busybox (static), cpio, cargo with the x86_64-unknown-linux-gnu target and glibc's
# static libraries (libc6-dev).
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
BUILD_DIR="$ROOT/target/guest-build"
TARGET=x86_64-unknown-linux-gnu
OUT="$CACHE/initramfs.cpio"

die() { echo "build-initramfs: $*" >&2; exit 1; }

# A binary is static when it has no program interpreter (static-pie included).
is_static() {
    if command -v readelf >/dev/null 2>&1; then
        ! readelf -l "$1" 2>/dev/null | grep -q 'program interpreter'
    else
        file -L "$1" | grep -Eq 'statically linked|static-pie linked'
    fi
}

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || die "busybox not found; apt-get install busybox-static"
is_static "$BUSYBOX" || die "$BUSYBOX is not static; apt-get install busybox-static"
command -v cpio >/dev/null || die "cpio not found; apt-get install cpio"

if [ -n "${GUEST_CPUSHIELD:-}" ]; then
    CPUSHIELD="$GUEST_CPUSHIELD"
else
    CPUSHIELD="$BUILD_DIR/$TARGET/release/cpushield"
    if [ "${GUEST_SKIP_BUILD:-0}" != 1 ]; then
        (cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR="$BUILD_DIR" \
            cargo build --release --target "$TARGET" -p cpushield >&2) \
            || die "static build of cpushield failed (see above)"
    fi
fi
[ -x "$CPUSHIELD" ] || die "no cpushield binary at $CPUSHIELD"
is_static "$CPUSHIELD" || die "$CPUSHIELD is dynamically linked; build with RUSTFLAGS='-C target-feature=+crt-static'"

STAGE="$CACHE/initramfs.d"
rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/sbin" "$STAGE/guest/scenarios" "$STAGE/proc" "$STAGE/sys" \
         "$STAGE/dev" "$STAGE/tmp" "$STAGE/etc" "$STAGE/run" "$STAGE/root"
cp "$BUSYBOX" "$STAGE/bin/busybox"
for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$STAGE/bin/$applet"
done
# The debug info of the release profile is of no use in the guest; strip it if we can.
if command -v strip >/dev/null 2>&1; then
    strip -o "$STAGE/bin/cpushield" "$CPUSHIELD"
else
    cp "$CPUSHIELD" "$STAGE/bin/cpushield"
fi
cp "$ROOT/dev/guest/init.sh" "$STAGE/init"
mkdir -p "$STAGE/guest/lib"
cp "$ROOT"/dev/guest/lib/*.sh "$STAGE/guest/lib/"
cp "$ROOT"/dev/guest/scenarios/*.sh "$STAGE/guest/scenarios/"
# The virtio-net NIC's modules of every fetched kernel (fetch-kernel.sh keeps them, with
# the kernel's config), for
# scenarios that give the guest a NIC (header guest-net); they insmod
# /lib/modules/$(uname -r)/*.ko in the order of its file `order`.
for k in "$CACHE"/kernel/*/; do
    [ -s "$k/modules/order" ] && [ -s "$k/release" ] || continue
    release=$(cat "$k/release")
    mkdir -p "$STAGE/lib/modules/$release"
    cp "$k"/modules/*.ko "$k/modules/order" "$STAGE/lib/modules/$release/"
    # The build config where an installed kernel has it, for check (CONFIG_HZ, and
    # whether an option a boot parameter needs is built in).
    mkdir -p "$STAGE/boot"
    cp "$k/config" "$STAGE/boot/config-$release"
done
# rtla, cyclictest and the libraries they link (fetch-kernel.sh), for the timerlat
# scenarios and compare's anchors.
if [ -x "$CACHE/rtla/usr/bin/rtla" ]; then
    cp -a "$CACHE/rtla/." "$STAGE/"
fi
# Users for the not-root check (busybox su needs them in /etc/passwd).
mkdir -p "$STAGE/etc"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n' >"$STAGE/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$STAGE/etc/group"
chmod 755 "$STAGE/init" "$STAGE/bin/cpushield"

# Uncompressed: the emulated guest would spend longer inflating it than we save copying.
(cd "$STAGE" && find . -print | LC_ALL=C sort | cpio -o -H newc --quiet) > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
rm -rf "$STAGE"
echo "$OUT"
