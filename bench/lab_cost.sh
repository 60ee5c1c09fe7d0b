#!/usr/bin/env bash
# System calls and context switches per request of redis-server (GET -c 50) and mariadbd
# (sysbench point_select, 16 threads) in the lab, on the kernel path and under pronghorn: the
# lab side of bench/request_cost.sh's accounting. Needs root, hugepages and the lab's tools
# (scripts/setup.sh). Brings the lab up (and down again if it was not up). Writes
# bench/results/cost-lab.{json,md} (--quick: cost-lab-quick.*). See bench/lab_cost.py.
#   bench/lab_cost.sh [--prefix P] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
prefix=cost
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
cargo build --release -q --workspace
was_up=0
status=$(target/release/pronghorn lab status --prefix "$prefix" 2>/dev/null || true)
case "$status" in *": up"*) was_up=1 ;; esac
target/release/pronghorn lab up --prefix "$prefix" >/dev/null
[ "$was_up" = 1 ] || trap 'target/release/pronghorn lab down --prefix "$prefix" >/dev/null' EXIT
/usr/bin/python3 bench/lab_cost.py --prefix "$prefix" "${args[@]}"
