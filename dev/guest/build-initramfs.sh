#!/bin/sh
# Build the guest initramfs: busybox, cpushield with the libraries it links, /init and
# every scenario. Prints the path of the cpio archive on stdout. The scenario to run is
# chosen at boot (kernel argument cpushield.scenario=NAME), so one archive serves all
# scenarios.
#
#   dev/guest/build-initramfs.sh         # -> target/guest/initramfs.cpio
#
# One archive serves every guest kernel: each fetched kernel's NIC modules are packed
# under /lib/modules/RELEASE.
#
# The binary is the ordinary release build (`cargo build --release -p cpushield`, the one
# scripts/setup.sh makes and users run), packed with the shared libraries it links as
# this host resolves them (ldd) and their dynamic loader: no second, static build.
#
# Environment:
#   GUEST_CACHE         cache dir (default: target/guest)
#   GUEST_CPUSHIELD     pack this cpushield binary instead of building one (static or
#                       dynamic; a dynamic one brings its libraries)
#   GUEST_SKIP_BUILD=1  do not run cargo; pack the last release build
# Needs: busybox (static), cpio, ldd, cargo.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
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

# glibc_version LIBC_SO: the version a libc.so.6 reports when run (it is executable), or
# nothing.
glibc_version() {
    "$1" 2>/dev/null | sed -n 's/.* version \([0-9][0-9.]*\)\.$/\1/p' | head -n 1
}

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || die "busybox not found; apt-get install busybox-static"
is_static "$BUSYBOX" || die "$BUSYBOX is not static; apt-get install busybox-static"
command -v cpio >/dev/null || die "cpio not found; apt-get install cpio"

if [ -n "${GUEST_CPUSHIELD:-}" ]; then
    CPUSHIELD="$GUEST_CPUSHIELD"
else
    CPUSHIELD="$ROOT/target/release/cpushield"
    if [ "${GUEST_SKIP_BUILD:-0}" != 1 ]; then
        (cd "$ROOT" && cargo build --release -p cpushield >&2) \
            || die "release build of cpushield failed (see above)"
    fi
fi
[ -x "$CPUSHIELD" ] || die "no cpushield binary at $CPUSHIELD; build it (cargo build --release -p cpushield) or set GUEST_CPUSHIELD"

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
# The libraries a dynamic binary links, at the paths this host's loader found them (the
# guest's loader searches the same default directories), and the loader at the path the
# binary names.
if ! is_static "$CPUSHIELD"; then
    LIBS=$(ldd "$CPUSHIELD" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p')
    [ -n "$LIBS" ] || die "ldd found no libraries for the dynamic binary $CPUSHIELD"
    for lib in $LIBS; do
        mkdir -p "$STAGE$(dirname "$lib")"
        cp -L "$lib" "$STAGE$lib"
    done
fi
cp "$ROOT/dev/guest/init.sh" "$STAGE/init"
mkdir -p "$STAGE/guest/lib"
cp "$ROOT"/dev/guest/lib/*.sh "$STAGE/guest/lib/"
cp "$ROOT"/dev/guest/scenarios/*.sh "$STAGE/guest/scenarios/"
# The virtio modules of every fetched kernel (fetch-kernel.sh keeps them, with the
# kernel's config), for scenarios that give the guest a NIC (header guest-net) or a
# virtio-serial port (guest-vm-watch); they insmod /lib/modules/$(uname -r)/*.ko in the
# order of its file `order` (load_virtio_modules).
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
# scenarios and compare's anchors. Their C library and loader are Debian bookworm's; where
# cpushield brought its own, the newer glibc of the two is kept (a binary runs on a newer
# glibc, not on an older one).
if [ -x "$CACHE/rtla/usr/bin/rtla" ]; then
    HOST_LIBC=$(find "$STAGE/lib" "$STAGE/usr/lib" "$STAGE/lib64" -name libc.so.6 2>/dev/null | head -n 1)
    KEEP_HOST=0
    if [ -n "$HOST_LIBC" ]; then
        host_v=$(glibc_version "$HOST_LIBC")
        rtla_v=$(glibc_version "$CACHE/rtla/lib/x86_64-linux-gnu/libc.so.6")
        newest=$(printf '%s\n%s\n' "$host_v" "$rtla_v" | sort -V | tail -n 1)
        [ -n "$host_v" ] && [ "$newest" = "$host_v" ] && KEEP_HOST=1
    fi
    if [ "$KEEP_HOST" = 1 ]; then
        # Everything of rtla's tree but its C library and loader.
        (cd "$CACHE/rtla" && find . ! -type d ! -name 'libc.so.6' ! -name 'ld-linux-x86-64.so.2' -print) |
            while read -r f; do
                mkdir -p "$STAGE/$(dirname "$f")"
                cp -a "$CACHE/rtla/$f" "$STAGE/$f"
            done
    else
        find "$STAGE" \( -name libc.so.6 -o -name ld-linux-x86-64.so.2 \) -exec rm -f {} +
        cp -a "$CACHE/rtla/." "$STAGE/"
    fi
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
