#!/usr/bin/env bash
# The SPSC queue of cpushield-rt against the wait-free SPSC rings rtrb and
# ringbuf, crossbeam's ArrayQueue and std's bounded mpsc, same harness, same
# run (one table row each): throughput between two threads and per-operation
# latency (mean, p50, p99, p99.99, max of push and of pop).
#
#   dev/bench/rt-queue.sh [ITEMS=5000000] [PRODUCER_CPU=1] [CONSUMER_CPU=1]
#   (or --items N --producer-cpu N --consumer-cpu N)
#
# Both threads default to CPU 1: on this 2-CPU host nothing may spin on CPU 0,
# so the throughput figure is two threads taking turns on one CPU. On a larger
# machine pass two spare CPUs for the cross-core figure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_args "ITEMS=5000000 PRODUCER_CPU=1 CONSUMER_CPU=1" "$@"
items=$ITEMS pcpu=$PRODUCER_CPU ccpu=$CONSUMER_CPU
[ "$pcpu" != 0 ] && [ "$ccpu" != 0 ] || bench_die "CPU 0 belongs to the environment: spin on other CPUs"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(nproc) CPUs"
echo "# command: dev/bench/rt-queue.sh $items $pcpu $ccpu"
cargo bench -q -p cpushield-rt --bench queue -- \
  --items "$items" --producer-cpu "$pcpu" --consumer-cpu "$ccpu" 2>&1 |
  grep -v -e '^\s*Compiling' -e '^\s*Finished' -e '^\s*Running'
