#!/usr/bin/env python3
"""The training run of the profile-guided build (scripts/build-pgo.sh): real servers under the
instrumented build's `pronghorn run` in the lab, each loaded from side b for a few seconds, so
that the profile the compiler reads next holds the counts of the code they run (the preload
hooks, the runtime, the stack over DPDK's af_xdp). Two patterns, as the users':
thread-per-connection (mariadbd --user=mysql: recv, EAGAIN, poll, recv, send; sysbench
point_select and read_write, 16 threads) and an epoll event loop (redis-server: redis-benchmark
SET and GET, 50 and 1000 connections). Each server writes its counts when it exits
(LLVM_PROFILE_FILE names one file per process in the raw directory). Needs root, the lab's
tools (scripts/setup.sh) and a lab brought up by the caller (bench/lab_run.sh).

A profile from the in-memory harness alone (bench/request_cost.sh's request-cost) is not
enough: the stack's code is generic over the NIC, and the library runs its DPDK instance, which
the harness does not have, so most of the library found no counts. Measured with
bench/lab_together.sh (docs/design-notes.md, "Profile-guided builds").
"""

import argparse
import os
import sys
import tempfile

import lab_cost as L


def mariadb(lab, tmp):
    home = os.path.join(tmp, "mariadb")
    init = os.path.join(tmp, "init.sql")
    with open(init, "w") as f:
        f.write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n"
                "CREATE DATABASE IF NOT EXISTS sbtest;\n")
    L.new_datadir(home)
    server = L.mariadb_server(lab, "pronghorn", home, init, open(os.path.join(tmp, "mariadb.log"), "w"))
    try:
        sysbench = ["sysbench", "--db-driver=mysql", f"--mysql-host={L.ADDR['pronghorn']}", "--mysql-port=3306",
                    "--mysql-user=bench", "--mysql-db=sbtest", "--tables=1", "--table-size=10000"]
        L.sh(lab.client(sysbench + ["oltp_point_select", "prepare"]))
        L.sh(lab.client(sysbench + ["--threads=16", "--time=5", "oltp_point_select", "run"]))
        L.sh(lab.client(sysbench + ["--threads=16", "--time=3", "oltp_read_write", "run"]))
    finally:
        server.terminate()
        server.wait()


def redis(lab, tmp):
    addr = L.ADDR["pronghorn"]
    server = lab.server("pronghorn", ["redis-server", "--bind", addr, "--port", "6379", "--save", "", "--appendonly",
                                      "no", "--protected-mode", "no", "--maxclients", "10000"],
                        open(os.path.join(tmp, "redis.log"), "w"))
    try:
        L.wait_port(lab, addr, 6379, server, "redis-server")
        for clients, requests in [(50, 100_000), (1000, 100_000)]:
            L.sh(lab.client(["redis-benchmark", "-h", addr, "-p", "6379", "-c", str(clients), "-d", "3", "-t",
                             "set,get", "-n", str(requests), "-q"]))
    finally:
        server.terminate()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="pgo", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--exe", required=True, help="the instrumented build's pronghorn binary")
    ap.add_argument("--raw", required=True, help="where the servers write their counts (one file per process)")
    a = ap.parse_args()
    for tool in ["mariadbd", "sysbench", "redis-server", "redis-benchmark"]:
        if not L.shutil.which(tool):
            raise SystemExit(f"pgo_train: {tool} is missing (scripts/setup.sh installs it)")
    L.EXE = os.path.abspath(a.exe)
    raw = os.path.abspath(a.raw)
    # The servers drop root (mariadbd runs as mysql) before they exit and write their counts.
    os.makedirs(raw, exist_ok=True)
    os.chmod(raw, 0o1777)
    os.environ["LLVM_PROFILE_FILE"] = os.path.join(raw, "%p-%m.profraw")
    lab = L.Lab(a.prefix)
    with tempfile.TemporaryDirectory(prefix="pgo-train.") as tmp:
        os.chmod(tmp, 0o755)
        for name, workload in [("mariadb", mariadb), ("redis", redis)]:
            print(f"pgo_train: {name}", file=sys.stderr)
            workload(lab, tmp)
    if not any(f.endswith(".profraw") for f in os.listdir(raw)):
        raise SystemExit(f"pgo_train: the servers wrote no counts to {raw}: was {a.exe} built with -Cprofile-generate?")


if __name__ == "__main__":
    main()
