#!/usr/bin/env bash
# Builds the .deb and the RPM and checks them against each other, as CI runs it:
#   1. rpmlint on the RPM (dist/rpm/rpmlint.toml filters what is accepted, each with why);
#   2. the RPM installed into a scratch root with `rpm --root` (no scripts: nothing
#      runs against this machine), its files listed by rpm from that root's database;
#   3. that list compared with the .deb's (dpkg-deb -c), after the layout differences of
#      the two worlds (below); any other difference fails.
#
#   scripts/check-packages.sh       # needs cargo-deb, rpmbuild, rpmlint (scripts/dev-setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "check-packages: FAILED: $*" >&2; exit 1; }
start=$(date +%s)
deb=$(scripts/build-deb.sh | tail -n 1)
rpmfile=$(scripts/build-rpm.sh | tail -n 1)
echo "check-packages: built $deb and $rpmfile in $(( $(date +%s) - start ))s"

lint=$(rpmlint -c dist/rpm/rpmlint.toml "$rpmfile" 2>&1) || { echo "$lint" >&2; fail "rpmlint found errors in $rpmfile"; }
echo "$lint"
# A warning fails too: each accepted one is filtered in rpmlint.toml with its reason.
echo "$lint" | grep -q ' 0 errors, 0 warnings' || fail "rpmlint warned about $rpmfile"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
rpm --root "$scratch" --initdb
# --nodeps: the scratch root has no systemd; --noscripts: the scriptlets would run here.
rpm --root "$scratch" -i --nodeps --noscripts "$rpmfile" || fail "rpm --root $scratch -i $rpmfile"
rpm --root "$scratch" -q cpushield >/dev/null || fail "cpushield not in the scratch root's database"
rpm --root "$scratch" -V --nodeps --noscripts cpushield || fail "rpm -V: installed files differ from the package"
[ -x "$scratch/usr/bin/cpushield" ] || fail "no /usr/bin/cpushield in the scratch root"
"$scratch/usr/bin/cpushield" --version >/dev/null || fail "the installed binary does not run"

# The two layouts, normalised to one: RPMs put units in /usr/lib/systemd/system and zsh
# completions in site-functions where the .deb uses /lib/systemd/system and
# vendor-completions; cargo-deb gzips man pages and adds Debian's copyright and
# changelog.Debian (RPM headers hold those).
normalise() {
    sed -e 's#^/lib/systemd/#/usr/lib/systemd/#' \
        -e 's#^/usr/share/zsh/vendor-completions/#/usr/share/zsh/site-functions/#' \
        -e 's#\.gz$##' |
        grep -vx -e '/usr/share/doc/cpushield/copyright' -e '/usr/share/doc/cpushield/changelog.Debian' |
        LC_ALL=C sort
}
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | normalise >"$scratch/deb.list"
rpm --root "$scratch" -ql cpushield | while read -r f; do
    [ -d "$scratch$f" ] || echo "$f"
done | normalise >"$scratch/rpm.list"
if ! diff -u "$scratch/deb.list" "$scratch/rpm.list"; then
    fail "the RPM's files (+) differ from the .deb's (-)"
fi
echo "check-packages: rpmlint clean, RPM installed into a scratch root, $(wc -l <"$scratch/rpm.list") files as in the .deb ($(( $(date +%s) - start ))s)"
