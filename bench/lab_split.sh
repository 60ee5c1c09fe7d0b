#!/usr/bin/env bash
# Where the server's core goes per request, kernel path against pronghorn, in each lab model
# asked for, with the host's speed measured around every run (bench/lab_split.py). Needs root,
# hugepages, perf, a C compiler and the lab's tools (scripts/setup.sh). Brings the lab up (and
# down again if it was not up). Writes bench/results/lab-split-MODEL[-BUILD].{json,md}.
#   bench/lab_split.sh [--prefix P] [--models veth,nic,dma] [--rounds N] [--workloads mariadb,redis] [--build DIR]
#     [--mariadbd-arg=ARG] [--sysbench-test oltp_read_only|oltp_read_write] [--sysbench-threads N]
#     [--tag NAME: with any of those three]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
prefix=sp
models=veth,nic
build=target/release
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --build) build="$2"; args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ "$build" = target/release ] && cargo build --release -q -p cli -p preload
[ -x "$build/pronghorn" ] && [ -f "$build/libpronghorn.so" ] || { echo "lab_split: no pronghorn and libpronghorn.so in $build (--build)" >&2; exit 2; }
was_up=0
status=$("$build/pronghorn" lab status --prefix "$prefix" 2>/dev/null || true)
case "$status" in *": up"*) was_up=1 ;; esac
"$build/pronghorn" lab up --prefix "$prefix" >/dev/null
[ "$was_up" = 1 ] || trap '"$build/pronghorn" lab down --prefix "$prefix" >/dev/null' EXIT
for model in ${models//,/ }; do
  "$build/pronghorn" lab model "$model" --prefix "$prefix" --server-cpus 1 --client-cpus 0 -- \
    /usr/bin/python3 bench/lab_split.py --prefix "$prefix" --model "$model" "${args[@]}"
done
