#!/usr/bin/env python3
"""Builds of pronghorn side by side on one workload: sysbench oltp_point_select against
mariadbd --user=mysql (veth model: the server on core 1, the client on core 0), each round running
the kernel path and then every build in turn, so that a regression between two builds shows against
the same kernel rounds (bisection: build each commit once, point this script at the results).

  bench/ab_point_select.py [--seconds S] [--rounds N] [--threads T] [--prefix P] BUILD...

BUILD is `kernel` or a directory holding a `pronghorn` binary with its `libpronghorn.so` beside it
(copy target/release/{pronghorn,libpronghorn.so} of each build there). Needs root, the lab's tools
(scripts/setup.sh) and the lab up (`pronghorn lab up --prefix P`; default prefix `ab`). One datadir
is made and filled once, and copied for every run. Prints each run's tps and p95, then per build
the median tps and its ratio to the kernel's median.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_cost as L  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--seconds", type=int, default=10)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--threads", type=int, default=16)
ap.add_argument("--prefix", default="ab")
ap.add_argument("builds", nargs="+")
a = ap.parse_args()
for b in a.builds:
    if b != "kernel" and not os.path.exists(os.path.join(b, "libpronghorn.so")):
        raise SystemExit(f"ab_point_select: {b} has no libpronghorn.so (copy target/release/pronghorn and libpronghorn.so there)")
lab = L.Lab(a.prefix)
if not os.path.exists(lab.config):
    raise SystemExit(f"ab_point_select: lab {a.prefix} is not up: `pronghorn lab up --prefix {a.prefix}`")
tmp = tempfile.mkdtemp(prefix="ab-point-select.")
os.chmod(tmp, 0o755)
init = os.path.join(tmp, "init.sql")
with open(init, "w") as f:
    f.write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\nCREATE DATABASE IF NOT EXISTS sbtest;\n")


def start(build, home):
    addr = L.ADDR["kernel" if build == "kernel" else "pronghorn"]
    cmd = ["ip", "netns", "exec", f"{a.prefix}-a", "taskset", "-c", L.SERVER_CPU]
    if build != "kernel":
        cmd += [os.path.join(build, "pronghorn"), "run", "--config", lab.config, "--"]
    log = open(os.path.join(tmp, "server.log"), "a")
    server = subprocess.Popen(cmd + ["mariadbd", "--no-defaults", "--user=mysql", f"--datadir={home}/data",
                                     f"--socket={home}/s.sock", f"--pid-file={home}/p.pid", f"--bind-address={addr}",
                                     "--port=3306", "--skip-log-bin", "--skip-name-resolve", "--max-connections=400",
                                     "--innodb-buffer-pool-size=256M", f"--init-file={init}"],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        L.wait_port(lab, addr, 3306, server, "mariadbd")
    except SystemExit as e:
        with open(os.path.join(tmp, "server.log")) as f:
            tail = "".join(f.readlines()[-15:])
        raise SystemExit(f"{e} ({build}); the end of its log:\n{tail}")
    return server, addr


def sysbench(addr):
    return ["sysbench", "--db-driver=mysql", f"--mysql-host={addr}", "--mysql-port=3306", "--mysql-user=bench",
            "--mysql-db=sbtest", "--tables=1", "--table-size=10000"]


try:
    template = os.path.join(tmp, "template")
    L.sh(["install", "-d", "-o", "mysql", "-g", "mysql", template])
    L.sh(["mariadb-install-db", "--no-defaults", "--user=mysql", f"--datadir={template}/data",
          "--auth-root-authentication-method=normal", "--skip-test-db"])
    server, addr = start("kernel", template)
    L.sh(lab.client(sysbench(addr) + ["oltp_point_select", "prepare"]))
    server.terminate()
    server.wait()
    tps = {b: [] for b in a.builds}
    for r in range(a.rounds):
        for b in a.builds:
            home = os.path.join(tmp, "run")
            shutil.rmtree(home, ignore_errors=True)
            L.sh(["cp", "-a", template, home])
            server, addr = start(b, home)
            try:
                L.sh(lab.client(sysbench(addr) + [f"--threads={a.threads}", "--time=2", "oltp_point_select", "run"]))
                out = L.sh(lab.client(sysbench(addr) + [f"--threads={a.threads}", f"--time={a.seconds}",
                                                        "oltp_point_select", "run"])).stdout
            finally:
                server.terminate()
                server.wait()
            tps[b].append(L.sysbench_transactions(out) / a.seconds)
            p95 = next((l.split()[-1] for l in out.splitlines() if "95th percentile" in l), "?")
            print(f"round {r + 1} {b}: {tps[b][-1]:.0f} tps, p95 {p95} ms", flush=True)
    kernel = statistics.median(tps["kernel"]) if "kernel" in tps else None
    print(f"median tps of {a.rounds} rounds, {a.seconds} s each, {a.threads} threads:")
    for b in a.builds:
        m = statistics.median(tps[b])
        ratio = f" {m / kernel:.2f}x the kernel" if kernel else ""
        print(f"  {b}: {m:.0f}{ratio} (runs: {' '.join(f'{x:.0f}' for x in tps[b])})")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
