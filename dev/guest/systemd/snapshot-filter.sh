# snapshot_sd DIR: snapshot (dev/guest/lib/common.sh) without the cgroups of services:
# systemd makes and removes one per running service (this test's own among them), which
# is not state cpushield touches. Slices, scopes, the root and cpushield's own cgroups stay.
snapshot_sd() {
    snapshot "$1"
    grep -v '\.service/' "$1/cgtree" >"$1/cgtree.sd"
    mv "$1/cgtree.sd" "$1/cgtree"
}
