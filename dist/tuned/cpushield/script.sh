#!/bin/sh
# The script of tuned profile `cpushield`. tuned runs it with `start` when the
# profile loads, `stop [full_rollback]` when it unloads and `verify [ignore_missing]`
# for `tuned-adm verify`, in this directory, with the profile's variables in the
# environment (TUNED_isolated_cores, ...).
#
#   start   cpushield apply    the shield /etc/cpushield/cpushield.toml declares
#   stop    cpushield reset    restores what cpushield changed, leaves what tuned set
#   verify  cpushield check    fails (so verify fails) when something breaks the shield
#
# tuned logs what a script prints on stderr (as an error) and whether it failed;
# check's report goes there only when it fails.
PATH=/usr/bin:/usr/local/bin:/usr/sbin:/bin:/sbin
CPUSHIELD=${CPUSHIELD:-cpushield}

case "$1" in
    start)
        exec "$CPUSHIELD" apply >/dev/null
        ;;
    stop)
        exec "$CPUSHIELD" reset >/dev/null
        ;;
    verify)
        out=$("$CPUSHIELD" check --interval 1s 2>&1)
        rc=$?
        if [ "$rc" != 0 ]; then
            printf 'cpushield check exited %s:\n%s\n' "$rc" "$out" >&2
        fi
        exit "$rc"
        ;;
    *)
        echo "usage: $0 start|stop|verify" >&2
        exit 2
        ;;
esac
