#!/usr/bin/env python3
"""pgbench cases one path after the other (kernel, then pronghorn, per round) against one
pair of postmasters, printing tps and the server core's busy us per transaction; --perf DIR also
records core 1 (cpu-clock, every 100 us) and counts its context switches during each run.
Run as root from anywhere, with a lab up: pronghorn lab up --prefix sq; then
  python3 bench/results/stop44/pgseq.py --rounds 3 --secs 15 -- "-c16" "-c16 -N" "-c4"
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
os.chdir(ROOT)
import lab_cost as L
ap = argparse.ArgumentParser()
ap.add_argument("--prefix", default="sq")
ap.add_argument("--model", default="veth")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--secs", type=int, default=15)
ap.add_argument("--scale", type=int, default=8)
ap.add_argument("--build")
ap.add_argument("--nice")
ap.add_argument("--perf")
ap.add_argument("cases", nargs="+")  # e.g. "-c16" "-c16 -N" "-c4" "-c16 -S"
a = ap.parse_args()
if os.environ.get("PRONGHORN_LAB_MODEL") != a.model:
    exe = os.path.abspath("target/release/pronghorn")
    os.execv(exe, [exe, "lab", "model", a.model, "--prefix", a.prefix, "--server-cpus", "1", "--client-cpus", "0", "--", sys.executable] + sys.argv)
if a.build:
    L.EXE = os.path.abspath(os.path.join(a.build, "pronghorn"))
lab = L.Lab(a.prefix)
def core1():
    for l in open("/proc/stat"):
        if l.startswith("cpu1 "):
            f = [int(x) for x in l.split()[1:]]
            return sum(f), f[3] + f[4]
def renice():
    if not a.nice: return
    for t in os.listdir("/proc"):
        if not t.isdigit(): continue
        try:
            for tid in os.listdir(f"/proc/{t}/task"):
                if open(f"/proc/{t}/task/{tid}/comm").read().startswith("pronghorn-st"):
                    subprocess.run(["renice", "-n", a.nice, "-p", tid], capture_output=True)
        except OSError: pass
def pg(path, opts):
    return lab.client(["pgbench", "-h", L.ADDR[path], "-U", "postgres"] + opts + ["postgres"])
with tempfile.TemporaryDirectory(prefix="pgseq.") as tmp:
    os.chmod(tmp, 0o755); shutil.chown(tmp, "postgres")
    servers = {}
    try:
        for p in ["kernel", "pronghorn"]:
            data = os.path.join(tmp, f"pg-{p}")
            L.postgres_datadir(data)
            servers[p] = L.postgres_server(lab, p, data, open(os.path.join(tmp, f"{p}.log"), "a"), ["synchronous_commit=off"])
            L.sh(pg(p, ["-i", "-s", str(a.scale), "-q"]))
        res = {}
        for r in range(a.rounds):
            for case in a.cases:
                for p in ["kernel", "pronghorn"]:
                    opts = ["-n", "-j", "4"] + case.split() + ["-T", str(a.secs)]
                    renice()
                    t0 = core1()
                    rec = None
                    if a.perf:
                        os.makedirs(a.perf, exist_ok=True)
                        tag = f"{case.replace(' ', '')}-{p}-{r+1}"
                        rec = subprocess.Popen(["perf", "record", "-q", "-C", "1", "-e", "cpu-clock", "-c", "100000", "-o", f"{a.perf}/{tag}.data", "--", "sleep", str(a.secs - 2)])
                        st = subprocess.Popen(["perf", "stat", "-C", "1", "-x,", "-e", "context-switches", "-o", f"{a.perf}/{tag}.stat", "--", "sleep", str(a.secs - 2)])
                    out = L.sh(pg(p, opts)).stdout
                    if rec: rec.wait(); st.wait()
                    t1 = core1()
                    tps = float(re.search(r"tps = ([\d.]+) \(without", out).group(1))
                    n = int(re.search(r"actually processed: (\d+)", out).group(1))
                    busy = ((t1[0] - t0[0]) - (t1[1] - t0[1])) * 1e6 / os.sysconf("SC_CLK_TCK")
                    res.setdefault((case, p), []).append((tps, busy / n))
                    print(f"round {r+1} {case:12} {p:9} tps {tps:9.1f} core us/tx {busy/n:8.1f}", flush=True)
        for case in a.cases:
            k, q = res[(case, "kernel")], res[(case, "pronghorn")]
            ratios = [qq[0] / kk[0] for kk, qq in zip(k, q)]
            cr = [qq[1] / kk[1] for kk, qq in zip(k, q)]
            print(f"SUMMARY {case:12} tps ratio median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})  core/tx ratio {statistics.median(cr):.2f} ({min(cr):.2f}-{max(cr):.2f})  kernel tps {statistics.median([x[0] for x in k]):.0f} us/tx {statistics.median([x[1] for x in k]):.0f}  pronghorn tps {statistics.median([x[0] for x in q]):.0f} us/tx {statistics.median([x[1] for x in q]):.0f}")
    finally:
        L.stop_postgres(servers.values())
