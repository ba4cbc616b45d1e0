#!/usr/bin/env bash
# The periodic loop of cpushield-rt against cyclictest, side by side in one run,
# on one CPU (default 1; never 0 on this host): worst deviation from the
# deadline without and with advance (Sherer §5), then cyclictest with the
# same period, cycle count, priority and CPU.
#
#   dev/bench/rt-periodic.sh [CPU=1] [CYCLES=5000] [PERIOD_US=1000] [ADVANCE_US=50]
#   (or --cpu N --cycles N --period-us N --advance-us N)
#
# Run from the repository root. Needs cyclictest (rt-tests). Both run at
# SCHED_FIFO 80 with memory locked when permitted.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "CPU=1 CYCLES=5000 PERIOD_US=1000 ADVANCE_US=50" "$@"
cpu=$CPU cycles=$CYCLES period=$PERIOD_US advance=$ADVANCE_US
[ "$cpu" != 0 ] || bench_die "CPU 0 belongs to the environment: use CPU 1"
bench_need cyclictest

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(nproc) CPUs; CPU $cpu unshielded unless a shield is set up"
echo "# command: dev/bench/rt-periodic.sh $cpu $cycles $period $advance"
echo
echo "## cpushield-rt Periodic (deviation = return from wait_next - deadline)"
cargo bench -q -p cpushield-rt --bench periodic -- \
  --cpu "$cpu" --cycles "$cycles" --period-us "$period" --advance-us "$advance" 2>&1 |
  grep -v -e '^\s*Compiling' -e '^\s*Finished' -e '^\s*Running'
echo
echo "## cyclictest (latency = wakeup - deadline), same CPU, period, cycles, priority"
cyclictest -q -N -m -a "$cpu" -t 1 -p 80 -i "$period" -l "$cycles" 2>&1 | grep -E '^T:|Max'
