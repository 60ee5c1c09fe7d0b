#!/usr/bin/env bash
# Runs one of the lab's Python benchmarks with the release build and a lab: brings the lab up
# (and down again if it was not up). Used by bench/lab_cost.sh and bench/lab_together.sh.
#   bench/lab_run.sh SCRIPT.py DEFAULT_PREFIX [--prefix P] [the script's arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
script=$1
prefix=$2
shift 2
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
/usr/bin/python3 "$script" --prefix "$prefix" "${args[@]}"
