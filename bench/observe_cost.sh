#!/usr/bin/env bash
# What watching costs: one accelerated redis-server, redis-benchmark against it with and without
# a `pronghorn stat --interval 1` reader running, side by side (issue 11: "the stats cost nothing
# measurable").
#
# Run as root from the repository root:  bench/observe_cost.sh [--quick] [--rounds R] [--requests N]
#
# One lab (prefix obs), one redis-server under `pronghorn run` on CPU 1 for the whole run. Each
# round runs the client twice, once with no reader and once with `pronghorn stat --interval 1`
# (which also asks the process for its NIC counters over the control socket every second) on
# the server's core; the order flips every round. The client is `redis-benchmark -c 50 -t
# set,get -d 3` from side b on CPU 0. Reported: per-case medians of rps and p99, and the median
# (min, max) of the per-round ratios with/without. Writes bench/results/observe.{json,md}
# (--quick: observe-quick.*, git-ignored).
set -euo pipefail

COMMAND="bench/observe_cost.sh${*:+ $*}"
ROUNDS=5
REQUESTS=300000
QUICK=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1 ;;
        --rounds) ROUNDS=$2; shift ;;
        --requests) REQUESTS=$2; shift ;;
        -h | --help) sed -n 2,14p "$0"; exit 0 ;;
        *) echo "observe_cost.sh: unknown option $1 (accepted: --quick, --rounds R, --requests N)" >&2; exit 2 ;;
    esac
    shift
done
[[ $QUICK == 1 ]] && { ROUNDS=1; REQUESTS=20000; }
[[ $EUID -eq 0 ]] || { echo "observe_cost.sh: needs root (lab namespaces, hugepages, AF_XDP)" >&2; exit 1; }
for tool in redis-server redis-benchmark taskset python3; do
    command -v "$tool" >/dev/null || { echo "observe_cost.sh: $tool not found: run scripts/setup.sh" >&2; exit 1; }
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# PRONGHORN_BIN_DIR: binaries copied elsewhere, so that a rebuild during the run changes nothing.
BIN_DIR=${PRONGHORN_BIN_DIR:-$ROOT/target/release}
PH=$BIN_DIR/pronghorn
[[ -x $PH && -f $BIN_DIR/libpronghorn.so ]] ||
    { echo "observe_cost.sh: no pronghorn and libpronghorn.so in $BIN_DIR: cargo build --release --workspace" >&2; exit 1; }
PREFIX=obs
NAME=observe$([[ $QUICK == 1 ]] && echo -quick || true)
WORK=$(mktemp -d)
SERVER=
READER=

source "$ROOT/bench/redis_lab.sh"
cleanup() {
    [[ -n $READER ]] && kill "$READER" 2>/dev/null || true
    redis_lab_cleanup
}
trap cleanup EXIT

"$PH" lab up --prefix $PREFIX >/dev/null
taskset -c 1 "$PH" lab exec --prefix $PREFIX a -- "$PH" run -- \
    redis-server --bind 10.99.0.1 --port 6379 --save '' --appendonly no --protected-mode no \
    >"$WORK/server.log" 2>&1 &
SERVER=$!
PID=$(redis_lab_ready observe_cost.sh)

client() { # label round
    taskset -c 0 "$PH" lab exec --prefix $PREFIX b -- \
        redis-benchmark -h 10.99.0.1 -c 50 -n "$REQUESTS" -t set,get -d 3 --csv >"$WORK/$1.$2.csv"
}

for round in $(seq "$ROUNDS"); do
    order="none reader"
    ((round % 2 == 0)) && order="reader none"
    for label in $order; do
        if [[ $label == reader ]]; then
            taskset -c 1 "$PH" stat --interval 1 "$PID" >"$WORK/reader.$round.txt" &
            READER=$!
        fi
        client "$label" "$round"
        if [[ -n $READER ]]; then
            kill "$READER"
            wait "$READER" 2>/dev/null || true
            READER=
            [[ -s $WORK/reader.$round.txt ]] || { echo "observe_cost.sh: the stat reader printed nothing" >&2; exit 1; }
        fi
        echo "round $round $label: $(tr '\n' ' ' <"$WORK/$label.$round.csv")" >&2
    done
done

python3 - "$WORK" "$ROUNDS" "$ROOT/bench/results" "$NAME" "$COMMAND" "$REQUESTS" <<'EOF'
import csv, json, os, platform, statistics, sys
work, rounds, out, name, command, requests = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
runs = {}
for label in ("none", "reader"):
    for r in range(1, rounds + 1):
        rows = list(csv.reader(open(f"{work}/{label}.{r}.csv")))
        head = rows[0]
        for row in rows[1:]:
            d = dict(zip(head, row))
            runs.setdefault((label, d["test"]), []).append({"rps": float(d["rps"]), "p99_ms": float(d["p99_latency_ms"])})
cases = sorted({c for _, c in runs})
result = {"command": command, "requests": int(requests), "rounds": rounds, "kernel": platform.release(),
          "cases": {}}
lines = [f"# observe: redis-benchmark with and without a `pronghorn stat --interval 1` reader", "",
         f"Command: `{command}` (redis-benchmark -c 50 -n {requests} -t set,get -d 3 from side b on CPU 0; "
         "redis-server under `pronghorn run` on CPU 1, the reader on CPU 1 too; order flipped every round). "
         f"Kernel {platform.release()}, {os.cpu_count()} cores.", "",
         "| case | rps without | rps with reader | ratio with/without (min, max) | p99 ms without | p99 ms with |",
         "|---|---|---|---|---|---|"]
for c in cases:
    a, b = runs[("none", c)], runs[("reader", c)]
    ratios = [y["rps"] / x["rps"] for x, y in zip(a, b)]
    med = lambda v, k: statistics.median(x[k] for x in v)
    result["cases"][c] = {"without": a, "with_reader": b, "rps_ratio_median": statistics.median(ratios),
                          "rps_ratio_min": min(ratios), "rps_ratio_max": max(ratios)}
    lines.append(f"| {c} | {med(a,'rps'):.0f} | {med(b,'rps'):.0f} | {statistics.median(ratios):.3f} "
                 f"({min(ratios):.3f}, {max(ratios):.3f}) | {med(a,'p99_ms'):.3f} | {med(b,'p99_ms'):.3f} |")
os.makedirs(out, exist_ok=True)
json.dump(result, open(f"{out}/{name}.json", "w"), indent=1)
open(f"{out}/{name}.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
