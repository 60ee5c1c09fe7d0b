#!/usr/bin/env bash
# Stack-level scale benchmark: ns per 64-byte request/response over the in-memory NIC pair as
# idle connections grow 10 -> 1,000,000, and bytes per idle connection. Writes
# bench/results/stack-scale.{json,md,png}. Needs no root and no lab.
#   bench/stack_scale.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
idle="10,100,1000,10000,100000,1000000"; trips=200000; name=stack-scale
if [ "${1:-}" = "--quick" ]; then idle="10,100,1000"; trips=10000; name=stack-scale-quick; fi

cargo build --release -q -p pronghorn-bench
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [ "$(id -u)" -eq 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null
fi
cmd="taskset -c 1 target/release/stack-scale --json --idle $idle --round-trips $trips"
out=$(mktemp)
$cmd >"$out"
/usr/bin/python3 - "$out" "bench/results/$name" "bench/stack_scale.sh ${1:-}" <<'PY'
import json, os, platform, subprocess, sys, datetime
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base, command = sys.argv[2], sys.argv[3]
facts = {
    "cores": os.cpu_count(), "kernel": platform.release(),
    "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
    "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
    "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
    "pinning": "taskset -c 1 (both shards in one thread)",
}
json.dump({"command": command, "machine": facts, "rows": rows}, open(base + ".json", "w"), indent=1)
first = rows[0]["ns_per_round_trip"]
with open(base + ".md", "w") as f:
    f.write("# stack-scale: request/response cost as idle connections grow\n\n")
    f.write("Two shards over the in-memory NIC pair in one thread; N idle TCP connections open (no timers "
            "armed), then one more connection runs 64-byte request/response exchanges (TCP_NODELAY both "
            "ends). The time covers both stacks and the NIC pair. Memory is the growth of the resident "
            "set per idle connection added, both ends of the connection together.\n\n")
    f.write("| idle connections | ns per request/response | vs 10 idle | RSS MiB | bytes per idle connection (both ends) |\n|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write(f"| {r['idle_connections']:,} | {r['ns_per_round_trip']:.0f} | {r['ns_per_round_trip']/first:.2f} | "
                f"{r['rss_bytes']/2**20:.0f} | {r['bytes_per_idle_connection_both_sides']:.0f} |\n")
    f.write(f"\nCommand: `{command}` (runs `{rows and 'target/release/stack-scale'}` with {rows[0]['round_trips']} exchanges per step)\n\n")
    f.write("Machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["idle_connections"] for r in rows]
    ax[0].plot(xs, [r["ns_per_round_trip"] for r in rows], "o-")
    ax[0].set_xscale("log"); ax[0].set_ylim(bottom=0)
    ax[0].set_xlabel("idle connections"); ax[0].set_ylabel("ns per 64 B request/response")
    ax[0].set_title("cost per request vs idle connections")
    ax[1].plot(xs[1:], [r["bytes_per_idle_connection_both_sides"] for r in rows[1:]], "o-", color="tab:orange")
    ax[1].set_xscale("log"); ax[1].set_ylim(bottom=0)
    ax[1].set_xlabel("idle connections"); ax[1].set_ylabel("bytes per idle connection (both ends)")
    ax[1].set_title("memory per idle connection")
    fig.tight_layout(); fig.savefig(base + ".png", dpi=90)
except ImportError:
    print("matplotlib missing: no PNG (apt-get install python3-matplotlib)", file=sys.stderr)
print(open(base + ".md").read())
PY
rm -f "$out"
