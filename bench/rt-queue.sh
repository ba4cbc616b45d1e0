#!/usr/bin/env bash
# The SPSC queue of cpushield-rt against the wait-free SPSC rings rtrb and
# ringbuf, crossbeam's ArrayQueue and std's bounded mpsc, same harness, same
# run (one table row each): throughput between two threads and per-operation
# latency (mean, p50, p99, p99.99, max of push and of pop).
#
#   bench/rt-queue.sh [ITEMS] [PRODUCER_CPU] [CONSUMER_CPU]
#
# Both threads default to CPU 1: on this 2-CPU host nothing may spin on CPU 0,
# so the throughput figure is two threads taking turns on one CPU. On a larger
# machine pass two spare CPUs for the cross-core figure.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-5000000}
pcpu=${2:-1}
ccpu=${3:-1}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -r) $(nproc) CPUs"
echo "# command: bench/rt-queue.sh $items $pcpu $ccpu"
cargo bench -q -p cpushield-rt --bench queue -- \
  --items "$items" --producer-cpu "$pcpu" --consumer-cpu "$ccpu" 2>&1 |
  grep -v -e '^\s*Compiling' -e '^\s*Finished' -e '^\s*Running'
