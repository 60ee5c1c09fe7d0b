#!/usr/bin/env bash
# What one request costs through pronghorn's runtime, per layer: instructions (callgrind), system
# calls and context switches (perf stat, strace -c) and the runtime's own counters (stack passes,
# sleeps, wakeups), for a thread-per-connection server (MariaDB's pattern) and an epoll loop
# (Redis's) over the in-memory NIC. Needs no root, no DPDK port and no lab; needs valgrind (and
# perf and strace for the system-call counts: scripts/setup.sh installs them). Writes
# bench/results/cost.{json,md} (--quick: cost-quick.*, about 20 s). See bench/request_cost.py; the
# parsers' tests: python3 -m unittest discover -s bench/tests
#   bench/request_cost.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p pronghorn-bench --bin request-cost
exec /usr/bin/python3 bench/request_cost.py "$@"
