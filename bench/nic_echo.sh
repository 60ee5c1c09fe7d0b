#!/usr/bin/env bash
# nic-echo, side by side: frames echoed through each NIC backend (the in-memory pair, DPDK
# net_af_xdp and net_af_packet over a veth pair), in packets per second.
#
# Run as root from anywhere:  bench/nic_echo.sh [--quick] [--rounds R] [options]
#
# For each round and each backend (the order reversed every other round: mem af_xdp af_packet,
# then af_packet af_xdp mem, ...):
#   mem:       `nic-echo mem` pinned to CPU 0;
#   a DPDK PMD: two network namespaces nb-r and nb-g joined by the veth pair nb-r0/nb-g0 (IPv6 off,
#              tx checksum offload off, no addresses: the kernel sends nothing on them), the
#              reflector `nic-echo reflect` in nb-r on CPU 1, the generator `nic-echo generate` in
#              nb-g on CPU 0; the reflector is stopped with SIGTERM and the namespaces removed.
# Writes bench/results/nic-echo.json and nic-echo.md (--quick: nic-echo-quick.*, git-ignored).
# Reserves 256 2 MiB hugepages only when none are free, and gives back exactly those on exit.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: bench/nic_echo.sh [options]   (as root)
  --quick             a smoke run: 1 round, 20000 frames for mem, 5000 for DPDK
  --rounds R          rounds (default 3)
  --frames-mem N      round trips per mem run (default 2000000)
  --frames-dpdk N     round trips per DPDK run (default 500000)
  --window W          frames in flight (default 32)
  --size S            frame size in bytes (default 64)
  --pmds "A B"        DPDK PMDs to run (default "af_xdp af_packet")
  --no-build          use the binary already built
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
COMMAND="bench/nic_echo.sh${*:+ $*}"

ROUNDS=3
FRAMES_MEM=2000000
FRAMES_DPDK=500000
WINDOW=32
SIZE=64
PMDS="af_xdp af_packet"
QUICK=0
BUILD=1
ROUNDS_SET=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1 ;;
        --rounds) ROUNDS=$2; ROUNDS_SET=1; shift ;;
        --frames-mem) FRAMES_MEM=$2; shift ;;
        --frames-dpdk) FRAMES_DPDK=$2; shift ;;
        --window) WINDOW=$2; shift ;;
        --size) SIZE=$2; shift ;;
        --pmds) PMDS=$2; shift ;;
        --no-build) BUILD=0 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "nic_echo.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
if [[ $QUICK == 1 ]]; then
    FRAMES_MEM=20000
    FRAMES_DPDK=5000
    [[ $ROUNDS_SET == 1 ]] || ROUNDS=1
    OUT_NAME=nic-echo-quick
else
    OUT_NAME=nic-echo
fi

die() {
    echo "nic_echo.sh: $*" >&2
    exit 1
}

[[ $EUID -eq 0 ]] || die "needs root (network namespaces, hugepages, AF_XDP): run it with sudo"
for tool in ip ethtool taskset sysctl flock mkfifo python3 pkg-config; do
    command -v "$tool" >/dev/null || die "$tool not found: install it (iproute2, ethtool, util-linux, procps, python3, pkg-config)"
done

NS_R=nb-r
NS_G=nb-g
DEV_R=nb-r0
DEV_G=nb-g0
CPU_REFLECT=1
CPU_GENERATE=0
CPU_MEM=0
HP_DIR=/sys/kernel/mm/hugepages/hugepages-2048kB
HP_WANT=256
HP_RESERVED=0
LOCK_FILE=/run/pronghorn/lab.lock # shared with `pronghorn lab`, which keeps the same accounting
REFL_PID=""
REFL_FD=""
GEN_PID=""
DPDK_PIDS=()
TMP=$(mktemp -d /tmp/nic-echo.XXXXXX)
DPDK_RUN_DIR_EXISTED=0
[[ -d /var/run/dpdk ]] && DPDK_RUN_DIR_EXISTED=1

# ---------------------------------------------------------------------------------------------
# Cleanup: whatever happens, no process, namespace, hugepage or DPDK runtime directory of ours
# stays behind.

stop_pid() { # pid: SIGTERM, a grace period, then SIGKILL
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

remove_namespaces() {
    local ns
    for ns in $NS_R $NS_G; do
        if [[ -e /run/netns/$ns ]]; then
            ip netns del "$ns"
        fi
    done
}

with_lock() { # command...: run it holding the lab lock
    mkdir -p "$(dirname "$LOCK_FILE")"
    (
        flock 9
        "$@"
    ) 9>"$LOCK_FILE"
}

reserve_hugepages_locked() {
    local free=0 f before after
    for f in /sys/kernel/mm/hugepages/*/free_hugepages; do
        free=$((free + $(cat "$f")))
    done
    if [[ $free -gt 0 ]]; then
        echo 0
        return
    fi
    before=$(cat $HP_DIR/nr_hugepages)
    echo $((before + HP_WANT)) >$HP_DIR/nr_hugepages
    after=$(cat $HP_DIR/nr_hugepages)
    echo $((after - before))
}

release_hugepages_locked() {
    local now
    now=$(cat $HP_DIR/nr_hugepages)
    echo $((now > HP_RESERVED ? now - HP_RESERVED : 0)) >$HP_DIR/nr_hugepages
}

cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    [[ -n $GEN_PID ]] && stop_pid "$GEN_PID"
    [[ -n $REFL_PID ]] && stop_pid "$REFL_PID"
    [[ -n $REFL_FD ]] && exec {REFL_FD}<&-
    remove_namespaces
    if [[ $HP_RESERVED -gt 0 ]]; then
        with_lock release_hugepages_locked
        echo "gave back $HP_RESERVED hugepages (2 MiB)" >&2
    fi
    local p
    for p in "${DPDK_PIDS[@]}"; do
        # A process that did not get to clean its EAL up leaves its runtime directory.
        [[ -d /var/run/dpdk/pronghorn-$p ]] && rm -rf "/var/run/dpdk/pronghorn-$p"
    done
    # The EAL creates /var/run/dpdk itself; remove it again if it was not there before (and is empty).
    [[ $DPDK_RUN_DIR_EXISTED == 0 && -d /var/run/dpdk ]] && rmdir /var/run/dpdk 2>/dev/null
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# Build and set up.

BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/nic-echo
if [[ $BUILD == 1 ]]; then
    command -v cargo >/dev/null || die "cargo not found in PATH (under sudo, try: sudo env PATH=\$PATH bench/nic_echo.sh)"
    (cd "$ROOT" && cargo build --release -p pronghorn-bench)
fi
[[ -x $BIN ]] || die "$BIN is missing: build it with cargo build --release -p pronghorn-bench"

HP_RESERVED=$(with_lock reserve_hugepages_locked)
if [[ $HP_RESERVED -gt 0 ]]; then
    echo "reserved $HP_RESERVED hugepages (2 MiB); given back on exit" >&2
fi

make_link() {
    remove_namespaces
    ip netns add $NS_R
    ip netns add $NS_G
    ip link add $DEV_R netns $NS_R type veth peer name $DEV_G netns $NS_G
    local ns dev
    for pair in "$NS_R $DEV_R" "$NS_G $DEV_G"; do
        read -r ns dev <<<"$pair"
        # No IPv6 (no router solicitation, no DAD) and no address: the kernel sends nothing here.
        ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1"
        ip netns exec "$ns" ethtool -K "$dev" tx off >/dev/null
        ip -n "$ns" link set "$dev" up
    done
}

# ---------------------------------------------------------------------------------------------
# One run per backend. Each leaves its JSON result in RESULT (and the reflector's in REFL_JSON).

RESULT=""
REFL_JSON=""

run_mem() {
    RESULT=$(taskset -c $CPU_MEM "$BIN" mem --frames "$FRAMES_MEM" --window "$WINDOW" --size "$SIZE" --json 2>"$TMP/mem.err") || {
        cat "$TMP/mem.err" >&2
        die "the mem run failed"
    }
    REFL_JSON=null
}

run_dpdk() {
    local pmd=$1 line
    make_link
    # The reflector's stdout comes through a fifo: the script reads its `ready` line (no sleeping),
    # and later its counters.
    rm -f "$TMP/refl.fifo"
    mkfifo "$TMP/refl.fifo"
    ip netns exec $NS_R taskset -c $CPU_REFLECT "$BIN" reflect --pmd "$pmd" --iface $DEV_R --json \
        >"$TMP/refl.fifo" 2>"$TMP/refl-$pmd.err" &
    REFL_PID=$!
    DPDK_PIDS+=("$REFL_PID")
    exec {REFL_FD}<"$TMP/refl.fifo"
    local ready=0
    while IFS= read -r -t 60 -u "$REFL_FD" line; do
        if [[ $line == ready ]]; then
            ready=1
            break
        fi
    done
    if [[ $ready == 0 ]]; then
        cat "$TMP/refl-$pmd.err" >&2
        die "the $pmd reflector did not come up on $DEV_R"
    fi

    ip netns exec $NS_G taskset -c $CPU_GENERATE "$BIN" generate --pmd "$pmd" --iface $DEV_G \
        --frames "$FRAMES_DPDK" --window "$WINDOW" --size "$SIZE" --json >"$TMP/gen.out" 2>"$TMP/gen-$pmd.err" &
    GEN_PID=$!
    DPDK_PIDS+=("$GEN_PID")
    local gen_rc=0
    wait "$GEN_PID" || gen_rc=$?
    GEN_PID=""
    if [[ $gen_rc != 0 ]]; then
        cat "$TMP/gen-$pmd.err" >&2
        die "the $pmd generator failed (exit $gen_rc)"
    fi
    RESULT=$(grep '^{' "$TMP/gen.out" | tail -n 1)

    kill -TERM "$REFL_PID"
    REFL_JSON=null
    while IFS= read -r -t 30 -u "$REFL_FD" line; do
        [[ $line == \{* ]] && REFL_JSON=$line
    done
    exec {REFL_FD}<&-
    REFL_FD=""
    local refl_rc=0
    wait "$REFL_PID" || refl_rc=$?
    REFL_PID=""
    if [[ $refl_rc != 0 || $REFL_JSON == null ]]; then
        cat "$TMP/refl-$pmd.err" >&2
        die "the $pmd reflector did not stop cleanly (exit $refl_rc)"
    fi
    remove_namespaces
}

summary() { # one json result -> a short human line
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("%8.3f Mpps echoed (%.3f M round trips/s, %.3f s), lost %d, errors %d"
      % (r["frames_per_s"] / 1e6, r["round_trips_per_s"] / 1e6, r["seconds"], r["lost"], r["errors"]))
' "$1"
}

BACKENDS=(mem $PMDS)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "nic-echo: $ROUNDS round(s) of: ${BACKENDS[*]}; window $WINDOW, $SIZE B frames, $FRAMES_MEM round trips (mem), $FRAMES_DPDK (DPDK)"
echo "pinning: mem on CPU $CPU_MEM; DPDK generator on CPU $CPU_GENERATE, reflector on CPU $CPU_REFLECT"
: >"$TMP/runs.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
    order=("${BACKENDS[@]}")
    if ((round % 2 == 0)); then
        order=()
        for ((i = ${#BACKENDS[@]} - 1; i >= 0; i--)); do order+=("${BACKENDS[i]}"); done
    fi
    for backend in "${order[@]}"; do
        if [[ $backend == mem ]]; then run_mem; else run_dpdk "$backend"; fi
        printf '{"round":%d,"backend":"%s","result":%s,"reflector":%s}\n' "$round" "$backend" "$RESULT" "$REFL_JSON" >>"$TMP/runs.jsonl"
        line=$(summary "$RESULT")
        printf 'round %d/%d  %-10s %s\n' "$round" "$ROUNDS" "$backend" "$line"
    done
done

# ---------------------------------------------------------------------------------------------
# Results.

mkdir -p "$HERE/results"
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(grep -m1 -E '^(model name|Model|cpu model)' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
git_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null | head -n 1) ]]; then git_rev="$git_rev (with uncommitted changes)"; fi
export NE_RUNS="$TMP/runs.jsonl" NE_JSON="$HERE/results/$OUT_NAME.json" NE_MD="$HERE/results/$OUT_NAME.md"
export NE_COMMAND="$COMMAND" NE_NPROC=$(nproc) NE_KERNEL=$(uname -r) NE_DPDK=$(pkg-config --modversion libdpdk 2>/dev/null || echo unknown)
export NE_CPU="${cpu_model:-unknown}" NE_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) NE_GIT="$git_rev"
export NE_ROUNDS=$ROUNDS NE_WINDOW=$WINDOW NE_SIZE=$SIZE NE_FRAMES_MEM=$FRAMES_MEM NE_FRAMES_DPDK=$FRAMES_DPDK
export NE_BACKENDS="${BACKENDS[*]}" NE_HP_RESERVED=$HP_RESERVED NE_LOAD_START="$LOAD_START" NE_LOAD_END="$LOAD_END"
export NE_PINNING="mem: taskset -c $CPU_MEM; DPDK: generator taskset -c $CPU_GENERATE (netns $NS_G, $DEV_G), reflector taskset -c $CPU_REFLECT (netns $NS_R, $DEV_R)"
python3 - <<'PY'
import json, os, statistics as st

env = os.environ
runs = [json.loads(l) for l in open(env["NE_RUNS"]) if l.strip()]
backends = env["NE_BACKENDS"].split()
mem_by_round = {r["round"]: r["result"]["frames_per_s"] for r in runs if r["backend"] == "mem"}

summary = {}
for b in backends:
    rs = [r for r in runs if r["backend"] == b]
    fps = [r["result"]["frames_per_s"] for r in rs]
    rtps = [r["result"]["round_trips_per_s"] for r in rs]
    ratios = [r["result"]["frames_per_s"] / mem_by_round[r["round"]] for r in rs if mem_by_round.get(r["round"])]
    summary[b] = {
        "rounds": len(rs),
        "median_frames_per_s": st.median(fps),
        "min_frames_per_s": min(fps),
        "max_frames_per_s": max(fps),
        "median_round_trips_per_s": st.median(rtps),
        "median_ratio_to_mem": st.median(ratios) if ratios else None,
        "min_ratio_to_mem": min(ratios) if ratios else None,
        "max_ratio_to_mem": max(ratios) if ratios else None,
        "lost": sum(r["result"]["lost"] for r in rs),
        "errors": sum(r["result"]["errors"] for r in rs),
    }

errors = sum(s["errors"] for s in summary.values())
mem_lost = summary.get("mem", {}).get("lost", 0)
machine = {
    "nproc": int(env["NE_NPROC"]),
    "kernel": env["NE_KERNEL"],
    "dpdk": env["NE_DPDK"],
    "cpu_model": env["NE_CPU"],
    # Other work on the machine skews the numbers: the 1/5/15-minute load averages before the run
    # and after it (the latter includes the benchmark's own two busy-polling processes).
    "loadavg_start": env["NE_LOAD_START"],
    "loadavg_end": env["NE_LOAD_END"],
}
doc = {
    "benchmark": "nic-echo",
    "description": "Frames echoed through each NIC backend: a generator keeps `window` frames in flight, "
    "a reflector sends each back with the MACs swapped; each round trip is 2 frames through the backend. "
    "frames_per_s counts echoed frames (both directions).",
    "command": env["NE_COMMAND"],
    "date": env["NE_DATE"],
    "git": env["NE_GIT"],
    "machine": machine,
    "pinning": env["NE_PINNING"],
    "settings": {
        "rounds": int(env["NE_ROUNDS"]),
        "window": int(env["NE_WINDOW"]),
        "size": int(env["NE_SIZE"]),
        "frames_mem": int(env["NE_FRAMES_MEM"]),
        "frames_dpdk": int(env["NE_FRAMES_DPDK"]),
        "order": "backends alternate within each round, the order reversed every other round",
        "hugepages_reserved_by_script": int(env["NE_HP_RESERVED"]),
    },
    "valid": errors == 0 and mem_lost == 0,
    "summary": summary,
    "runs": runs,
}
with open(env["NE_JSON"], "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")

def mpps(x):
    return f"{x / 1e6:.3f}"

def ratio(s):
    if s["median_ratio_to_mem"] is None:
        return "-"
    return f"{s['median_ratio_to_mem']:.3f} ({s['min_ratio_to_mem']:.3f}-{s['max_ratio_to_mem']:.3f})"

rows = [
    "| backend | median Mpps (echoed frames) | min | max | median M round trips/s | ratio to mem, median of rounds (min-max) | lost | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
]
for b in backends:
    s = summary[b]
    rows.append(
        f"| {b} | {mpps(s['median_frames_per_s'])} | {mpps(s['min_frames_per_s'])} | {mpps(s['max_frames_per_s'])} | "
        f"{mpps(s['median_round_trips_per_s'])} | {ratio(s)} | {s['lost']} | {s['errors']} |"
    )
table = "\n".join(rows)

per_round = ["| round | backend | Mpps | M round trips/s | seconds | lost | errors |", "|---:|---|---:|---:|---:|---:|---:|"]
for r in runs:
    x = r["result"]
    per_round.append(
        f"| {r['round']} | {r['backend']} | {mpps(x['frames_per_s'])} | {mpps(x['round_trips_per_s'])} | {x['seconds']:.3f} | {x['lost']} | {x['errors']} |"
    )

md = f"""# nic-echo: frames echoed through each NIC backend

A generator keeps {env['NE_WINDOW']} frames of {env['NE_SIZE']} bytes in flight; a reflector sends each one back with
the MACs swapped; the generator checks every echo (addresses, sequence number, payload). Each
round trip is 2 frames through the backend; **Mpps counts echoed frames** (both directions).
`mem` is the in-memory pair in one thread (the NIC layer's own cost); `af_xdp` and `af_packet` are
DPDK 22.11 PMDs on the two ends of a veth pair, generator and reflector in separate processes and
network namespaces. {env['NE_ROUNDS']} round(s), backends alternating within each round.

{table}

Valid run (no errors, nothing lost on mem): {'yes' if doc['valid'] else '**NO**'}.

Command: `{env['NE_COMMAND']}` ({env['NE_FRAMES_MEM']} round trips per mem run, {env['NE_FRAMES_DPDK']} per DPDK run)

Machine: {machine['nproc']} cores, {machine['cpu_model']}, kernel {machine['kernel']}, DPDK {machine['dpdk']}; load average {machine['loadavg_start']} before, {machine['loadavg_end']} after; {env['NE_DATE']}, git {env['NE_GIT']}.

Pinning: {env['NE_PINNING']}.

## All rounds

{chr(10).join(per_round)}
"""
with open(env["NE_MD"], "w") as f:
    f.write(md)

print()
print(table)
print()
print(f"wrote {env['NE_JSON']} and {env['NE_MD']}")
if not doc["valid"]:
    print("INVALID RUN: errors were reported (see the JSON)")
    raise SystemExit(3)
PY
