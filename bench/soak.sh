#!/usr/bin/env bash
# The soak (issue 22): does an accelerated server give back what a long churn of connections
# took, with 1% of frames lost?
#
# Run as root from the repository root:  bench/soak.sh [--quick] [--seconds S] [--conns N] [--loss P]
#
# One lab (prefix soak) whose config has `nic.fault = "loss=P"` (default 0.01, both directions),
# one redis-server under `pronghorn run` on CPU 1 (maxclients above N), and bench/soak_client.py
# from side b on CPU 0 keeping N connections (default 10,000) opening, exchanging an ECHO and
# closing (half closed by the client, half by the server through QUIT) for S seconds (default
# 600; --quick: 60 s, 2,000 connections). redis closes a connection idle for 30 s (`--timeout
# 30`), so that a connection whose client gave up (its RST lost) ends too. `pronghorn stat --json`
# and the server's VmRSS are read before the clients start, every 30 s while they run, and after
# they stop, until the sockets are back to the listener alone and TIME-WAIT has drained (at most
# 180 s). Writes bench/results/soak.{json,md} (--quick: soak-quick.*), with a
# verdict: after the run, sockets, TIME-WAIT and the packet pool are back to where they were
# before it, and RSS has not grown past its level after the first 30 s of load by more than 10%.
set -euo pipefail

COMMAND="bench/soak.sh${*:+ $*}"
SECONDS_RUN=600
CONNS=10000
LOSS=0.01
QUICK=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) QUICK=1 SECONDS_RUN=60 CONNS=2000 ;;
        --seconds) SECONDS_RUN=$2; shift ;;
        --conns) CONNS=$2; shift ;;
        --loss) LOSS=$2; shift ;;
        -h | --help) sed -n 2,16p "$0"; exit 0 ;;
        *) echo "soak.sh: unknown option $1 (accepted: --quick, --seconds S, --conns N, --loss P)" >&2; exit 2 ;;
    esac
    shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN_DIR=$ROOT/target/release
PH=$BIN_DIR/pronghorn
[[ -x $PH && -f $BIN_DIR/libpronghorn.so ]] ||
    { echo "soak.sh: no pronghorn and libpronghorn.so in $BIN_DIR: cargo build --release --workspace" >&2; exit 1; }
PREFIX=soak
NAME=soak$([[ $QUICK == 1 ]] && echo -quick || true)
WORK=$(mktemp -d)
SERVER=

source "$ROOT/bench/redis_lab.sh"
trap redis_lab_cleanup EXIT

ulimit -n 20000
"$PH" lab up --prefix $PREFIX >/dev/null
CONFIG=$WORK/soak.toml
sed "s/^\[nic\]$/[nic]\nfault = \"loss=$LOSS\"/" /run/pronghorn/lab/$PREFIX/a.toml >"$CONFIG"
"$PH" config check "$CONFIG" >/dev/null
taskset -c 1 ip netns exec $PREFIX-a "$PH" run --config "$CONFIG" -- \
    redis-server --bind 10.99.0.1 --port 6379 --save '' --appendonly no --protected-mode no \
    --maxclients $((CONNS + 100)) --tcp-backlog 4096 --timeout 30 >"$WORK/server.log" 2>&1 &
SERVER=$!
PID=$(redis_lab_ready soak.sh)

sample() { # label: one JSON line with the stat and RSS
    local rss
    rss=$(awk '/^VmRSS:/ { print $2 }' /proc/"$PID"/status)
    "$PH" stat --json "$PID" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"at": sys.argv[1], "t": float(sys.argv[2]), "rss_kib": int(sys.argv[3]), "stat": d}))' \
        "$1" "$(date +%s.%N)" "$rss" >>"$WORK/samples.jsonl"
}

sample before
echo "soak: $CONNS connections for ${SECONDS_RUN}s at loss=$LOSS against pid $PID" >&2
taskset -c 0 ip netns exec $PREFIX-b bash -c "ulimit -n 20000; exec python3 '$ROOT/bench/soak_client.py' 10.99.0.1 6379 $CONNS $SECONDS_RUN" \
    >"$WORK/client.json" 2>"$WORK/client.err" &
CLIENT=$!
while kill -0 $CLIENT 2>/dev/null; do
    for _ in $(seq 30); do kill -0 $CLIENT 2>/dev/null && sleep 1; done
    kill -0 $CLIENT 2>/dev/null && sample load
done
wait $CLIENT || { echo "soak.sh: the client failed: $(tail -3 "$WORK/client.err")" >&2; exit 1; }
sample stopped
for _ in $(seq 18); do
    sleep 10
    sample after
    python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); sys.exit(0 if all(s["time_wait"] == 0 for s in d["stat"]["shards"]) and sum(s["sockets"] for s in d["stat"]["shards"]) <= 1 else 1)' \
        "$WORK/samples.jsonl" && break
done
kill -0 "$PID" || { echo "soak.sh: the server died: $(tail -3 "$WORK/server.log")" >&2; exit 1; }

python3 - "$WORK" "$ROOT/bench/results" "$NAME" "$COMMAND" "$CONNS" "$SECONDS_RUN" "$LOSS" <<'EOF'
import json, os, platform, sys
work, out, name, command, conns, secs, loss = sys.argv[1:8]
samples = [json.loads(l) for l in open(f"{work}/samples.jsonl")]
client = json.loads(open(f"{work}/client.json").read())
t0 = samples[0]["t"]

def shard_sum(s, key):
    return sum(sh.get(key, 0) for sh in s["stat"]["shards"])

def mib(s, key):
    return s["stat"]["mib"].get(key, 0)

cols = [("sockets", lambda s: shard_sum(s, "sockets")), ("time_wait", lambda s: shard_sum(s, "time_wait")),
        ("pool_in_use", lambda s: shard_sum(s, "pool_in_use")), ("rss_kib", lambda s: s["rss_kib"]),
        ("TcpPassiveOpens", lambda s: mib(s, "TcpPassiveOpens")), ("TcpRetransSegs", lambda s: mib(s, "TcpRetransSegs")),
        ("TcpOutRsts", lambda s: mib(s, "TcpOutRsts"))]
before, last = samples[0], samples[-1]
first_load = next((s for s in samples if s["at"] == "load"), before)
checks = {
    "sockets back to before": cols[0][1](last) == cols[0][1](before),
    "TIME-WAIT drained": cols[1][1](last) == 0,
    "packet pool back to before": cols[2][1](last) <= cols[2][1](before),
    "RSS within 10% of its level after 30 s of load": last["rss_kib"] <= first_load["rss_kib"] * 1.10,
    "frames were lost and retransmitted": mib(last, "TcpRetransSegs") > 0,
    "no connection failed": client["failed"] == 0,
}
lines = [f"# soak: {conns} connections churning for {secs} s at loss={loss}", "",
         f"Command: `{command}`. redis-server under `pronghorn run` (CPU 1) with `nic.fault = \"loss={loss}\"` "
         f"(both directions); bench/soak_client.py from side b (CPU 0) keeps {conns} connections opening, "
         "exchanging one ECHO (16-2048 bytes, checked) and closing (half by the client, half by the server "
         f"after QUIT). Kernel {platform.release()}, {os.cpu_count()} cores.", "",
         f"Client: {client['completed']:,} connections completed, {client['failed']} failed "
         f"{client['failures'] or ''}, {client['bytes_checked']:,} bytes checked.", "",
         "| when | s | " + " | ".join(c for c, _ in cols) + " |", "|---|---|" + "---|" * len(cols)]
for s in samples:
    lines.append(f"| {s['at']} | {s['t'] - t0:.0f} | " + " | ".join(str(int(f(s))) for _, f in cols) + " |")
lines += ["", "| check | |", "|---|---|"] + [f"| {k} | {'yes' if v else 'NO'} |" for k, v in checks.items()]
os.makedirs(out, exist_ok=True)
json.dump({"command": command, "client": client, "samples": samples, "checks": checks}, open(f"{out}/{name}.json", "w"))
open(f"{out}/{name}.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if all(checks.values()) else 1)
EOF
