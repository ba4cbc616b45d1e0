#!/bin/sh
# The systemd guest test: a Debian bookworm disk (dev/guest/build-rootfs.sh, cached) with
# the cpushield .deb installed by dpkg, cpushield.service enabled and a config shielding
# CPU 3 of 4 from processes and IRQs. Booted twice (two QEMU runs of the same disk): the
# first boot checks the shield is up, `systemctl stop cpushield` restores exactly, a
# restart, a SIGKILLed agent then `cpushield reset`; the second that the shield is back.
# Each boot then runs tuned's steps (dev/guest/systemd/tuned.sh): boot 2 is booted with
# the parameters tuned's profile asked for in boot 1.
# The checks are dev/guest/systemd/test.sh; exit status 0 only if boot 1 printed
# GUEST-BOOT-DONE, boot 2 GUEST-DONE, and neither a GUEST-FAIL line.
#
#   dev/guest/run-systemd.sh
#   GUEST_KERNEL=6.12-rt dev/guest/run-systemd.sh
#
# Environment: GUEST_KERNEL (dev/guest/kernels.sh; default GUEST_KERNEL_DEFAULT), GUEST_CACHE (default target/guest), GUEST_DEB (a .deb to install instead of
# building one with scripts/build-deb.sh), GUEST_REUSE_DEB=1 (reuse the last built .deb),
# GUEST_TIMEOUT (seconds per boot, default 600), GUEST_QUIET=1 (only the GUEST- lines).
# Needs: root (chroot, dpkg into the image), qemu-system-x86_64, debootstrap, mkfs.ext4
# (e2fsprogs >= 1.43 for -d), busybox-static, cpio, cargo-deb unless GUEST_DEB is given.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/dev/guest"
CACHE="${GUEST_CACHE:-$ROOT/target/guest}"
export GUEST_CACHE="$CACHE"
. "$HERE/kernels.sh"
guest_kernel "${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}" || exit 1
# Per kernel: the test may boot on both kernels at once.
WORK="$CACHE/systemd/$KERNEL_NAME"
TIMEOUT=${GUEST_TIMEOUT:-600}
KVER=$KERNEL_RELEASE
KPKG=$KERNEL_PACKAGE
# The block device and ext4, in load order; those the kernel has built in are skipped.
WANTED_MODULES="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk crc16 mbcache jbd2 crc32c_generic ext4"

say() { echo "run-systemd.sh: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot and dpkg into the disk image)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found; apt-get install qemu-system-x86"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found; apt-get install e2fsprogs"
BUSYBOX=$(command -v busybox) || die "busybox not found; apt-get install busybox-static"

KERNEL=$("$HERE/fetch-kernel.sh" "$KERNEL_NAME")
START=$(date +%s)
mkdir -p "$CACHE/systemd"
# The disk tree and the .deb are shared by every kernel's run: one run makes them while
# another waits (fd 9 holds the lock until the .deb is chosen below).
exec 9>"$CACHE/systemd/prepare.lock"
flock 9
TREE=$("$HERE/build-rootfs.sh")

# The kernel's modules the boot needs (cached beside the kernel).
MODDIR="$CACHE/kernel/$KERNEL_NAME/modules-systemd"
if [ ! -s "$MODDIR/ext4.ko" ] || [ ! -s "$MODDIR/order" ]; then
    DL="$CACHE/kernel/$KERNEL_NAME/mod-download"
    rm -rf "$DL"; mkdir -p "$DL"
    (cd "$DL" && apt-get download "$KPKG" >&2) \
        || die "apt-get download $KPKG failed; run apt-get update (Debian bookworm sources)"
    dpkg-deb -x "$DL"/*.deb "$DL/x"
    rm -rf "$MODDIR.tmp"; mkdir -p "$MODDIR.tmp"
    : >"$MODDIR.tmp/order"
    for m in $WANTED_MODULES; do
        f=$(find "$DL/x/lib/modules/$KVER" -name "$m.ko*" | head -n 1)
        if [ -z "$f" ]; then
            grep -q "/$m\.ko\$" "$DL/x/lib/modules/$KVER/modules.builtin" \
                || die "module $m not in $KPKG, neither as a module nor built in"
            continue
        fi
        case "$f" in
            *.ko.xz) xz -dc "$f" >"$MODDIR.tmp/$m.ko" ;;
            *.ko.zst) zstd -dcq "$f" >"$MODDIR.tmp/$m.ko" ;;
            *) cp "$f" "$MODDIR.tmp/$m.ko" ;;
        esac
        echo "$m" >>"$MODDIR.tmp/order"
    done
    rm -rf "$MODDIR" "$DL"
    mv "$MODDIR.tmp" "$MODDIR"
fi

# The .deb.
if [ -n "${GUEST_DEB:-}" ]; then
    DEB=$GUEST_DEB
elif [ "${GUEST_REUSE_DEB:-0}" = 1 ] && ls "$ROOT"/target/debian/cpushield_*.deb >/dev/null 2>&1; then
    DEB=$(ls -t "$ROOT"/target/debian/cpushield_*.deb | head -n 1)
else
    DEB=$("$ROOT/scripts/build-deb.sh" | tail -n 1)
fi
case "$DEB" in /*) ;; *) DEB="$ROOT/$DEB" ;; esac
[ -s "$DEB" ] || die "no .deb at $DEB"
mkdir -p "$WORK"
cp "$DEB" "$WORK/cpushield.deb"
DEB="$WORK/cpushield.deb"
flock -u 9
say "installing $DEB into a copy of $TREE"

# The disk: the cached tree, the .deb installed by dpkg, the test's config and units.
STAGE="$WORK/stage"
rm -rf "$STAGE" "$WORK/disk.img"
cp -a "$TREE" "$STAGE"
cp "$DEB" "$STAGE/tmp/cpushield.deb"
chroot "$STAGE" /usr/bin/dpkg -i /tmp/cpushield.deb >"$WORK/dpkg.log" 2>&1 \
    || { cat "$WORK/dpkg.log" >&2; die "dpkg -i of the .deb in the image failed"; }
rm -f "$STAGE/tmp/cpushield.deb"
[ -x "$STAGE/usr/bin/cpushield" ] && [ -f "$STAGE/lib/systemd/system/cpushield.service" ] \
    || die "the .deb did not install /usr/bin/cpushield and cpushield.service"
cp "$HERE/systemd/cpushield.toml" "$STAGE/etc/cpushield/cpushield.toml"
mkdir -p "$STAGE/guest/bin" "$STAGE/guest/lib"
cp "$BUSYBOX" "$STAGE/guest/bin/busybox"
for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$STAGE/guest/bin/$applet"
done
cp "$HERE"/lib/*.sh "$STAGE/guest/lib/"
cp "$HERE/systemd/test.sh" "$STAGE/guest/systemd-test.sh"
cp "$HERE/systemd/snapshot.sh" "$STAGE/guest/systemd-snapshot.sh"
cp "$HERE/systemd/snapshot-filter.sh" "$STAGE/guest/systemd-snapshot-filter.sh"
cp "$HERE/systemd/tuned.sh" "$STAGE/guest/systemd-tuned.sh"
cp "$HERE"/systemd/*.service "$STAGE/etc/systemd/system/"
chroot "$STAGE" /usr/bin/systemctl enable cpushield.service cpushield-guest-snapshot.service \
    cpushield-guest-test.service >>"$WORK/dpkg.log" 2>&1 || die "systemctl enable in the image failed"
# tuned (systemd-tuned.sh) starts only when a step starts it, with no profile loaded.
if [ -f "$STAGE/lib/systemd/system/tuned.service" ]; then
    chroot "$STAGE" /usr/bin/systemctl disable tuned.service >>"$WORK/dpkg.log" 2>&1 \
        || die "systemctl disable tuned in the image failed"
    : >"$STAGE/etc/tuned/active_profile"
    echo manual >"$STAGE/etc/tuned/profile_mode"
fi
# No login prompts on the test console; a fixed machine id (no first-boot setup).
for u in serial-getty@ttyS0.service getty@tty1.service; do
    ln -sf /dev/null "$STAGE/etc/systemd/system/$u"
done
echo 0123456789abcdef0123456789abcdef >"$STAGE/etc/machine-id"
echo cpushield-guest >"$STAGE/etc/hostname"

IMG="$WORK/disk.img"
truncate -s 1G "$IMG"
mkfs.ext4 -q -F -L cpushield-root -d "$STAGE" "$IMG" >&2 || die "mkfs.ext4 -d failed"
rm -rf "$STAGE"

# A small initramfs: busybox loads the modules, mounts the disk, and hands over to systemd.
IRD="$WORK/initramfs.d"
mkdir -p "$IRD/bin" "$IRD/proc" "$IRD/sys" "$IRD/dev" "$IRD/newroot" "$IRD/modules"
cp "$BUSYBOX" "$IRD/bin/busybox"
cp "$MODDIR"/*.ko "$IRD/modules/"
MODULES=$(tr '\n' ' ' <"$MODDIR/order")
cat >"$IRD/init" <<INIT
#!/bin/busybox sh
B=/bin/busybox
\$B mount -t proc proc /proc
\$B mount -t sysfs sysfs /sys
\$B mount -t devtmpfs devtmpfs /dev
for m in $MODULES; do
    \$B insmod /modules/\$m.ko || echo "GUEST-FAIL initramfs: insmod \$m failed"
done
i=0
while [ ! -b /dev/vda ] && [ \$i -lt 100 ]; do \$B usleep 100000; i=\$((i + 1)); done
\$B mount -t ext4 -o rw /dev/vda /newroot || { echo "GUEST-FAIL initramfs: cannot mount /dev/vda"; \$B poweroff -f; }
\$B umount /proc /sys /dev
exec \$B switch_root /newroot /sbin/init
INIT
chmod 755 "$IRD/init"
(cd "$IRD" && find . -print | LC_ALL=C sort | cpio -o -H newc --quiet) >"$WORK/initramfs.cpio"
rm -rf "$IRD"
say "image ready in $(( $(date +%s) - START ))s"

LOGS="$CACHE/logs/$KERNEL_NAME"
mkdir -p "$LOGS"
# One host thread for the four vCPUs (tcg,thread=single), as run.sh's `guest-tcg: single`
# says why: the harness boots two guests on two host CPUs.
boot() {
    LOG="$LOGS/systemd-boot$1.log"
    say "boot $1 (smp 4, 1024M, timeout ${TIMEOUT}s)"
    T0=$(date +%s)
    set +e
    timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
        -accel tcg,thread=single -cpu max -smp 4 -m 1024 \
        -kernel "$KERNEL" -initrd "$WORK/initramfs.cpio" \
        -append "console=ttyS0 quiet panic=-1 no_timer_check systemd.show_status=0${BOOT_EXTRA:+ $BOOT_EXTRA}" \
        -drive "file=$IMG,format=raw,if=virtio" \
        -nographic -no-reboot -monitor none -serial stdio -nodefaults \
        </dev/null >"$LOG" 2>&1
    RC=$?
    set -e
    sed -i 's/\r$//; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' "$LOG"
    if [ "${GUEST_QUIET:-0}" = 1 ]; then grep 'GUEST-' "$LOG" || true; else cat "$LOG"; fi
    say "boot $1 took $(( $(date +%s) - T0 ))s (qemu exit $RC; log: $LOG)"
    if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then die "boot $1 did not finish within ${TIMEOUT}s"; fi
    if grep -q 'GUEST-FAIL ' "$LOG"; then
        grep 'GUEST-FAIL ' "$LOG" >&2
        die "boot $1: $(grep -c 'GUEST-FAIL ' "$LOG") checks failed"
    fi
    grep -q "$2" "$LOG" || die "boot $1 stopped without $2 (log: $LOG)"
}
boot 1 GUEST-BOOT-DONE
# The boot parameters tuned's profile asked for in boot 1 (its bootloader plugin's
# /etc/tuned/bootcmdline, kept by the test): boot 2 gets them, as from the bootloader.
BOOT_EXTRA=$(debugfs -R "cat /var/lib/guest/tuned-bootcmdline" "$IMG" 2>/dev/null \
    | sed -n 's/^TUNED_BOOT_CMDLINE="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p')
[ -n "$BOOT_EXTRA" ] || die "boot 1 left no tuned boot line in /var/lib/guest/tuned-bootcmdline"
say "boot 2 with tuned's boot parameters: $BOOT_EXTRA"
boot 2 GUEST-DONE
PASSES=$(cat "$LOGS/systemd-boot1.log" "$LOGS/systemd-boot2.log" | grep -c 'GUEST-PASS ' || true)
[ "$PASSES" -gt 0 ] || die "no check ran"
# Host CPU time of the boots beside the wall time, as run.sh reports it.
# (`times` redirected, not piped: a pipeline would run it in a subshell with no children.)
times >"$LOGS/systemd.times"
CPU_S=$(tail -n 1 "$LOGS/systemd.times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /m/); n += t[1] * 60 + t[2] } printf "%d", n }')
say "systemd on $KERNEL_NAME: ok, $PASSES passed in two boots ($(( $(date +%s) - START )) s, host CPU ${CPU_S} s)"
