# Test only: snapshot DIR of the machine state (dev/guest/lib/common.sh), run by
# cpushield-guest-snapshot.service before cpushield.service.
export PATH=/guest/bin:/usr/sbin:/usr/bin:/sbin:/bin
for lib in /guest/lib/*.sh; do . "$lib"; done
. /guest/systemd-snapshot-filter.sh
snapshot_sd "$1"
