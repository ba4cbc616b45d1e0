#!/bin/sh
# Three boots: the first asks `cpushield boot-params --all 3` for the kernel command-line
# fragment, the second boots with that fragment and checks the kernel took it (check
# finds each parameter in effect), the third boots with the fragment less its isolcpus=
# word and checks that check names it and exits 3.
#   dev/guest/run-boot-params.sh
#   GUEST_KERNEL=6.12-rt dev/guest/run-boot-params.sh
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE="${GUEST_CACHE:-$HERE/../../target/guest}"
. "$HERE/kernels.sh"
guest_kernel "${GUEST_KERNEL:-$GUEST_KERNEL_DEFAULT}" || exit 1
"$HERE/run.sh" boot-params
FRAGMENT=$(sed -n 's/.*GUEST-BOOTPARAMS //p' "$CACHE/logs/$KERNEL_NAME/boot-params.log" | head -n 1)
[ -n "$FRAGMENT" ] || { echo "run-boot-params.sh: first boot printed no fragment" >&2; exit 1; }
# The initramfs was built by the first boot.
GUEST_NO_BUILD=1 "$HERE/run.sh" boot-params-applied $FRAGMENT
WITHOUT=$(echo "$FRAGMENT" | tr ' ' '\n' | grep -v '^isolcpus=' | tr '\n' ' ')
GUEST_NO_BUILD=1 "$HERE/run.sh" boot-params-missing $WITHOUT
