#!/usr/bin/env bash
# The agent's HTTP endpoint under connections that never finish a request:
# a client holds CONNS connections to `cpushield agent` open (idle: they
# send nothing; with --slow, each trickles a request head one byte every
# 2 s, slowloris), reopening any the agent closes, while a scraper GETs
# /metrics once a second for SECS seconds. Each second prints the scrape's
# status and time, the agent's resident memory and thread count, the
# client's established connections and the ones the agent holds (accepted:
# the server-side sockets its process owns; a connection still in the
# kernel's accept queue, or whose SYN the kernel dropped, is established for
# the client but not held). Passes when every scrape answered 200
# within 100 ms and the resident memory at the end is within 1 MB of the
# memory 5 s in (flat: the connections cost no growth).
#
# No shield is needed: the agent looks at a machine with nothing shielded
# (a private, empty state directory) and serves the same endpoint.
#
# Usage: dev/bench/agent-http.sh [CONNS=1000] [SECS=60] [--slow]
# Needs: curl, perl (IO::Socket, IO::Select).
source "$(dirname "$0")/lib.sh"
bench_args "CONNS=1000 SECS=60 +SLOW" "$@"
bench_need curl perl
bench_bin
[ "$SECS" -ge 10 ] || bench_die "SECS $SECS: give at least 10 (the memory is compared from 5 s in)"
[ "$CONNS" -ge 1 ] || bench_die "CONNS $CONNS: give at least 1"
[ "$(ulimit -n)" -gt $((CONNS + 64)) ] || ulimit -n $((CONNS + 256)) \
    || bench_die "cannot open $CONNS connections (ulimit -n $(ulimit -n)): raise the limit"

WORK=$(mktemp -d)
export CPUSHIELD_STATE_DIR="$WORK/state"
AGENT=
HOLDER=
cleanup() {
    [ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
    [ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
: >"$WORK/cpushield.toml"

"$BIN" agent --config "$WORK/cpushield.toml" --listen 127.0.0.1:0 --interval 1s >"$WORK/agent.log" 2>&1 &
AGENT=$!
PORT=
for _ in $(seq 100); do
    PORT=$(sed -n 's|.*serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$WORK/agent.log")
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || bench_die "the agent did not start: $(head -c 400 "$WORK/agent.log")"

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$AGENT/status"; }
threads() { sed -n 's/^Threads:[[:space:]]*//p' "/proc/$AGENT/status"; }
established() { ss -Htn state established "( dport = :$PORT )" 2>/dev/null | wc -l; }
held() { ss -Htnp state established "( sport = :$PORT )" 2>/dev/null | grep -c "pid=$AGENT,"; }
RSS0=$(rss_kb)

# The holder: CONNS connections, each reopened when the agent closes it.
# shellcheck disable=SC2016
perl -e '
    use strict; use IO::Socket::INET; use IO::Select; use Time::HiRes qw(time sleep);
    my ($port, $n, $slow, $secs) = @ARGV;
    my $head = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " . ("a" x 100000);
    my (@socks, @sent);
    sub open_one { IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Blocking => 0) }
    for my $i (0 .. $n - 1) { $socks[$i] = open_one(); $sent[$i] = 0; }
    my ($end, $next_byte) = (time + $secs, time + 2);
    while (time < $end) {
        my $sel = IO::Select->new(grep { defined } @socks);
        for my $s ($sel->can_read(0.2)) {
            my $buf; my $got = sysread($s, $buf, 4096);
            next if defined $got && $got > 0;
            for my $i (0 .. $#socks) {
                next unless defined $socks[$i] && $socks[$i] == $s;
                close $s; $socks[$i] = open_one(); $sent[$i] = 0;
            }
        }
        if ($slow && time >= $next_byte) {
            for my $i (0 .. $#socks) {
                next unless defined $socks[$i];
                syswrite($socks[$i], substr($head, $sent[$i], 1)) and $sent[$i]++;
            }
            $next_byte = time + 2;
        }
        for my $i (0 .. $#socks) { $socks[$i] //= open_one(); }
    }
' "$PORT" "$CONNS" "$SLOW" "$((SECS + 5))" &
HOLDER=$!

mode=idle
[ "$SLOW" = 1 ] && mode="slowloris (a byte every 2 s)"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $CONNS $mode connections held, a /metrics scrape every second for $SECS s"
echo "# before the connections: RSS $RSS0 kB, $(threads) threads"
printf '%4s %6s %10s %9s %8s %12s %6s\n' s status scrape_ms rss_kb threads established held
fails=0
worst=0
RSS5=
for t in $(seq 1 "$SECS"); do
    sleep 1
    out=$(curl -s -o /dev/null --max-time 5 -w '%{http_code} %{time_total}' "http://127.0.0.1:$PORT/metrics")
    code=${out% *}
    ms=$(awk -v s="${out#* }" 'BEGIN { printf "%.1f", s * 1000 }')
    rss=$(rss_kb)
    [ "$t" = 5 ] && RSS5=$rss
    printf '%4s %6s %10s %9s %8s %12s %6s\n' "$t" "$code" "$ms" "$rss" "$(threads)" "$(established)" "$(held)"
    if [ "$code" != 200 ] || awk -v m="$ms" 'BEGIN { exit !(m > 100) }'; then
        fails=$((fails + 1))
    fi
    worst=$(awk -v a="$worst" -v b="$ms" 'BEGIN { print (b > a ? b : a) }')
done
RSS_END=$(rss_kb)
grew=$((RSS_END - RSS5))
echo "# scrapes: $SECS, over 100 ms or not 200: $fails, slowest $worst ms"
echo "# RSS: $RSS0 kB before, $RSS5 kB at 5 s, $RSS_END kB at the end ($grew kB since 5 s)"
verdict=PASS
[ "$fails" = 0 ] || verdict="FAIL ($fails scrapes late or refused)"
[ "$grew" -le 1024 ] || verdict="FAIL (RSS grew $grew kB)"
echo "# $verdict"
[ "$verdict" = PASS ]
