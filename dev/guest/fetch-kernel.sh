#!/bin/sh
# Fetch a guest kernel's image (not installed: only unpacked) and the guest's rtla userland.
# Prints the path of the image to boot on stdout. Idempotent: does nothing if they are
# already there.
#
#   dev/guest/fetch-kernel.sh [NAME]     # -> target/guest/kernel/NAME/vmlinux
#   dev/guest/fetch-kernel.sh --all      # every kernel of dev/guest/kernels.sh
#
# The image to boot is vmlinux, the kernel uncompressed out of Debian's vmlinuz, which
# QEMU starts directly at its PVH entry point: no firmware boot loader and no
# decompression under emulation, which took 1 s (zstd, 6.12-rt) to 3 s (xz, 6.1) of each
# boot. The kernel is the same; only KASLR, which the decompressor does, is not applied.
# GUEST_BZIMAGE=1 prints vmlinuz instead (booted through the firmware, as a boot loader
# would), as does a kernel without a PVH entry point.
#
# NAME is one of dev/guest/kernels.sh's GUEST_KERNELS (default $GUEST_KERNEL, else
# GUEST_KERNEL_DEFAULT). Beside vmlinuz: the kernel's config and the modules of the
# guest's virtio-net NIC. In target/guest/rtla/: rtla, cyclictest and the libraries they
# link, as a tree to copy into the initramfs.
#
# Needs: apt-get (with the Debian bookworm and bookworm-security archives in its
# sources), dpkg-deb.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/kernels.sh"
GUEST="${GUEST_CACHE:-$ROOT/target/guest}"

if [ "${1:-}" = --all ]; then
    for k in $GUEST_KERNELS; do "$0" "$k"; done
    exit 0
fi
guest_kernel "${1:-${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}}" || exit 1

CACHE="$GUEST/kernel/$KERNEL_NAME"
VMLINUZ="$CACHE/vmlinuz"

# The modules of the guest's virtio devices that Debian builds as modules, in load order:
# the virtio-net NIC (scenario nic-irq) and the virtio-serial port (virtio_console: the
# host-side channel of vm-blame; 6.12 builds it in, 6.1 as a module). Kept uncompressed in
# $CACHE/modules, with the list they were fetched for (a cache fetched for another list
# is fetched again).
GUEST_MODULES="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net virtio_console"
MODULES="$CACHE/modules"

# download DIR PACKAGE...: apt-get download into DIR, or a line naming the remedy.
download() {
    _dir=$1; shift
    mkdir -p "$_dir"
    if ! (cd "$_dir" && apt-get download "$@" >&2); then
        echo "fetch-kernel: apt-get download $* failed;" \
             "run 'apt-get update' (Debian bookworm and bookworm-security sources needed) and retry," \
             "or name an available version in dev/guest/kernels.sh" >&2
        exit 1
    fi
}

# rtla, cyclictest and their libraries, shared by every kernel: a root tree (usr/bin/rtla,
# usr/bin/cyclictest, the libraries, the dynamic loader at the path they name).
RTLA="$GUEST/rtla"
if [ ! -x "$RTLA/usr/bin/rtla" ] || [ ! -x "$RTLA/usr/bin/cyclictest" ]; then
    rm -rf "$RTLA.download" "$RTLA.tmp"
    # shellcheck disable=SC2086 # a list of package names
    download "$RTLA.download" $GUEST_RTLA_PACKAGES
    mkdir -p "$RTLA.tmp/x" "$RTLA.tmp/tree/usr/bin" "$RTLA.tmp/tree/lib/x86_64-linux-gnu" "$RTLA.tmp/tree/lib64"
    for deb in "$RTLA.download"/*.deb; do dpkg-deb -x "$deb" "$RTLA.tmp/x"; done
    cp "$RTLA.tmp/x/usr/bin/rtla" "$RTLA.tmp/x/usr/bin/cyclictest" "$RTLA.tmp/tree/usr/bin/"
    # Only the libraries they link (ldd cannot be trusted on a foreign tree; the list is
    # their NEEDED entries and theirs, which is this).
    for lib in libtracefs.so.1 libtraceevent.so.1 libnuma.so.1 librt.so.1 libpthread.so.0 \
        libc.so.6 ld-linux-x86-64.so.2; do
        f=$(find "$RTLA.tmp/x" -name "$lib" | head -n 1)
        [ -n "$f" ] || { echo "fetch-kernel: $lib not in $GUEST_RTLA_PACKAGES" >&2; exit 1; }
        cp -L "$f" "$RTLA.tmp/tree/lib/x86_64-linux-gnu/$lib"
    done
    ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$RTLA.tmp/tree/lib64/ld-linux-x86-64.so.2"
    rm -rf "$RTLA" "$RTLA.download"
    mv "$RTLA.tmp/tree" "$RTLA"
    rm -rf "$RTLA.tmp"
fi

# extract_vmlinux: writes $CACHE/vmlinux, the ELF kernel inside vmlinuz (the compressed
# payload found by its magic number, as the kernel's scripts/extract-vmlinux does), if it
# has a PVH entry point (the Xen note PHYS32_ENTRY, 0x12). Otherwise leaves none.
extract_vmlinux() {
    # A private temporary name: two runs (two guests on one kernel) may extract at once.
    _tmp="$CACHE/vmlinux.tmp.$$"
    for method in "xz -dc:\xFD\x37\x7A\x58\x5A\x00" "zstd -dcq:\x28\xB5\x2F\xFD" "gzip -dc:\x1F\x8B\x08"; do
        _tool=${method%%:*}
        command -v "${_tool%% *}" >/dev/null || continue
        for _at in $(LC_ALL=C grep -obUaP "${method#*:}" "$VMLINUZ" | cut -d: -f1); do
            # The payload is followed by other data: the decompressor's error is expected.
            tail -c "+$((_at + 1))" "$VMLINUZ" | $_tool >"$_tmp" 2>/dev/null || true
            if readelf -n "$_tmp" 2>/dev/null | grep -q 'Unknown note type: (0x00000012)'; then
                mv "$_tmp" "$CACHE/vmlinux"
                return 0
            fi
        done
    done
    rm -f "$_tmp"
    return 1
}

# image: the path to boot (see the header).
image() {
    if [ "${GUEST_BZIMAGE:-0}" != 1 ] && [ -s "$CACHE/vmlinux" ]; then
        echo "$CACHE/vmlinux"
    else
        echo "$VMLINUZ"
    fi
}

if [ -s "$VMLINUZ" ] && [ "$(cat "$MODULES/wanted" 2>/dev/null)" = "$GUEST_MODULES" ] && [ -s "$CACHE/config" ]; then
    [ -s "$CACHE/vmlinux" ] || [ -e "$CACHE/vmlinux.none" ] || extract_vmlinux || true
    [ -s "$CACHE/vmlinux" ] || : >"$CACHE/vmlinux.none"
    image
    exit 0
fi

rm -rf "$CACHE/download" "$CACHE/unpacked"
download "$CACHE/download" "$KERNEL_PACKAGE"
dpkg-deb -x "$(ls "$CACHE"/download/*.deb | head -n 1)" "$CACHE/unpacked"
# Only the image, its config and the virtio modules are needed; drop the rest to keep the
# cache small.
cp "$CACHE/unpacked/boot/vmlinuz-$KERNEL_RELEASE" "$VMLINUZ.tmp"
rm -rf "$MODULES"
mkdir -p "$MODULES"
LOADED=""
for m in $GUEST_MODULES; do
    f=$(find "$CACHE/unpacked/lib/modules/$KERNEL_RELEASE" -name "$m.ko*" | head -n 1)
    if [ -z "$f" ]; then
        # Built into the image (6.12 has virtio and virtio_pci built in): nothing to load.
        grep -q "/$m\.ko\$" "$CACHE/unpacked/lib/modules/$KERNEL_RELEASE/modules.builtin" && continue
        echo "fetch-kernel: module $m not in $KERNEL_PACKAGE, neither as a module nor built in" >&2
        exit 1
    fi
    LOADED="$LOADED $m"
    case "$f" in
        *.ko.xz) xz -dc "$f" >"$MODULES/$m.ko" ;;
        *.ko.zst) zstd -dcq "$f" >"$MODULES/$m.ko" ;;
        *) cp "$f" "$MODULES/$m.ko" ;;
    esac
done
echo "${LOADED# }" >"$MODULES/order"
echo "$GUEST_MODULES" >"$MODULES/wanted"
echo "$KERNEL_RELEASE" >"$CACHE/release"
cp "$CACHE/unpacked/boot/config-$KERNEL_RELEASE" "$CACHE/config"
rm -rf "$CACHE/unpacked" "$CACHE/download"
mv "$VMLINUZ.tmp" "$VMLINUZ"
rm -f "$CACHE/vmlinux.none"
extract_vmlinux || true
[ -s "$CACHE/vmlinux" ] || : >"$CACHE/vmlinux.none"
image
