#!/usr/bin/env bash
# Where each side's receive runs in a lab model: per-CPU counts of the lab's receive events
# during `pronghorn bench latency --quick --rounds 1 --model MODEL` (perf stat -a -A over kernel
# tracepoints filtered by device name). net:netif_receive_skb counts frames entering a kernel
# stack on a device (on the CPU that runs that receive); napi:napi_poll counts polls of the XDP
# veth's NAPI (which moves frames into pronghorn's AF_XDP ring).
#
#   bash bench/lab_model_check.sh veth|nic|dma [PREFIX]     (root; PREFIX default: check)
#
# Results go to a scratch directory, not bench/results. Server on core 1, client on core 0.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: lab_model_check.sh veth|nic|dma [prefix]}
p=${2:-check}
exe=target/release/pronghorn
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
perf stat -a -A -x, -o "$out/perf.csv" \
  -e net:netif_receive_skb --filter "name == \"$p-k0\"" \
  -e net:netif_receive_skb --filter "name == \"$p-k1\"" \
  -e net:netif_receive_skb --filter "name == \"$p-b0\"" \
  -e napi:napi_poll --filter "dev_name == \"$p-a0\"" \
  -- "$exe" bench latency --quick --rounds 1 --model "$model" --prefix "$p" --out "$out" >"$out/bench.log" 2>&1 ||
  { tail -5 "$out/bench.log"; exit 1; }
grep '^lab model' "$out/bench.log" | head -1
# perf lists the events in the order given, each once per CPU.
awk -F, -v p="$p" '
  BEGIN {
    what[0] = p "-k0: the kernel server'"'"'s TCP receive"
    what[1] = p "-k1: the client'"'"'s TCP receive (kernel path)"
    what[2] = p "-b0: the client'"'"'s TCP receive (pronghorn path)"
    what[3] = p "-a0: XDP veth NAPI polls (into pronghorn'"'"'s AF_XDP ring)"
  }
  /^CPU/ { cpu = substr($1, 4); if (!(cpu in seen)) { seen[cpu] = 1; ncpu++ } n[ev[cpu]++, cpu] = $2 }
  END {
    printf "%-62s", "events per CPU"; for (c = 0; c < ncpu; c++) printf " %10s", "CPU" c; print ""
    for (e = 0; e < 4; e++) { printf "%-62s", what[e]; for (c = 0; c < ncpu; c++) printf " %10s", n[e, c]; print "" }
  }' "$out/perf.csv"
