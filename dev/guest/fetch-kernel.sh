#!/bin/sh
# Fetch Debian's 6.1 kernel image (not installed: only unpacked) for the guest tests.
# Prints the path of vmlinuz on stdout. Idempotent: does nothing if it is already there.
#
#   dev/guest/fetch-kernel.sh            # -> target/guest/kernel/vmlinuz
#
# Needs: apt-get (with the Debian bookworm archive in its sources), dpkg-deb.
set -eu

# The one kernel the guest tests run on. Change it here only.
KERNEL_PACKAGE="linux-image-6.1.0-50-amd64-unsigned"
KERNEL_RELEASE="6.1.0-50-amd64"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GUEST_CACHE:-$ROOT/target/guest}/kernel"
VMLINUZ="$CACHE/vmlinuz"

# The modules of the guest's virtio-net NIC (scenario nic-irq; the image has them as
# modules), in load order. Kept uncompressed in $CACHE/modules.
NET_MODULES="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net"
MODULES="$CACHE/modules"

if [ -s "$VMLINUZ" ] && [ -s "$MODULES/virtio_net.ko" ]; then
    echo "$VMLINUZ"
    exit 0
fi

mkdir -p "$CACHE/download"
cd "$CACHE/download"
if ! ls ./"${KERNEL_PACKAGE}"_*.deb >/dev/null 2>&1; then
    if ! apt-get download "$KERNEL_PACKAGE" >&2; then
        echo "fetch-kernel: apt-get download $KERNEL_PACKAGE failed;" \
             "run 'apt-get update' (Debian bookworm sources needed) and retry" >&2
        exit 1
    fi
fi
DEB=$(ls ./"${KERNEL_PACKAGE}"_*.deb | head -n 1)
rm -rf "$CACHE/unpacked"
dpkg-deb -x "$DEB" "$CACHE/unpacked"
# Only the image and the NIC's modules are needed; drop the rest to keep the cache small.
cp "$CACHE/unpacked/boot/vmlinuz-$KERNEL_RELEASE" "$VMLINUZ.tmp"
rm -rf "$MODULES"
mkdir -p "$MODULES"
for m in $NET_MODULES; do
    f=$(find "$CACHE/unpacked/lib/modules/$KERNEL_RELEASE" -name "$m.ko*" | head -n 1)
    [ -n "$f" ] || { echo "fetch-kernel: module $m not in $KERNEL_PACKAGE" >&2; exit 1; }
    case "$f" in
        *.ko.xz) xz -dc "$f" >"$MODULES/$m.ko" ;;
        *.ko.zst) zstd -dcq "$f" >"$MODULES/$m.ko" ;;
        *) cp "$f" "$MODULES/$m.ko" ;;
    esac
done
echo "$NET_MODULES" >"$MODULES/order"
cp "$CACHE/unpacked/boot/config-$KERNEL_RELEASE" "$CACHE/config"
rm -rf "$CACHE/unpacked" "$CACHE/download"
mv "$VMLINUZ.tmp" "$VMLINUZ"
echo "$VMLINUZ"
