#!/usr/bin/env python3
"""Both paths at once: what a transaction (sysbench's point_select by default, or a pgbench case)
costs the server core on the kernel path and under pronghorn, measured in the same seconds (run
by bench/lab_together.sh; needs root, a release build and the lab's tools: scripts/setup.sh).

This shared host's speed differs up to 2x between two runs, so two paths measured one after
the other (`pronghorn bench`, bench/lab_cost.sh) compare badly. Here a kernel-path server
(10.98.0.1) and a pronghorn one (10.99.0.1) run side by side, both pinned to core 1, each
loaded by its own client with 16 connections on core 0, and one `perf record` of core 1 samples
both: whatever the host does to the core, it does to both. The servers: mariadbd under
sysbench (`--workload` oltp_point_select, oltp_read_only or oltp_read_write), or PostgreSQL 15
under pgbench (pgbench_select_only, pgbench_tpcb_like, pgbench_select_only_connect: -S, the
TPC-B-like mix, -S -C; pronghorn's postmaster under `--profile postgres`, its backends on its
shared stack). Per server: the samples (every 100 us of CPU) of its threads and of every
process it forked (told by the forks perf records on the core, so that a -C backend gone before
the end counts too) over the transactions its client completed in the sampled seconds (the
client's per-second report) give us of core per transaction, split by binary. The two servers
share the core's caches, so each one's figures are higher than it alone would show; the ratio
between them is the result. `--model veth` (the default): each
side's receive runs on the sender's core (the kernel server's TCP receive and the XDP veth's
copy into pronghorn's ring on core 0, the client's TCP receive on core 1, on both paths).
`--model nic`: each side's receive on its own side's core, as `pronghorn bench --model nic`
sets the lab (`pronghorn lab model nic` runs this script again with the lab so set, and
restores it after). There a receive on core 1 is not the work of the thread it interrupts:
the kernel server's, steered by RPS, runs in softirq (net_rx_action) inside whichever
thread is on the core, either server's, and pronghorn's XDP veth's runs in its NAPI kthread,
neither server's thread. So the core is sampled with call chains: a sample under
net_rx_action is the kernel path's receive, one of the NAPI kthread pronghorn's, each
counted to its path as "receive" whichever thread it interrupted.
Writes bench/results/together.{json,md} (another workload: together-read_only.*,
together-pgbench_select_only.*, ...; the nic model: together-nic.*, ...; --quick:
together-quick.*).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import lab_cost as L

SAMPLE_US = 100
WINDOW_S = 8
# The clients run RUN_S seconds; perf samples WINDOW_S of them from SKIP_S on.
SKIP_S, RUN_S = 4, 16
PATHS = ["kernel", "pronghorn"]
# The nic model's receive work on the server's core, counted to its path (split_by_server).
RECEIVE = "receive"
WORKLOADS = ["oltp_point_select", "oltp_read_only", "oltp_read_write"]
# pgbench's cases, each at 16 clients on 4 threads as `pronghorn bench pgbench` runs them: the
# workload's options.
PGBENCH = {"pgbench_select_only": ["-S"], "pgbench_tpcb_like": [], "pgbench_select_only_connect": ["-S", "-C"]}
PGBENCH_SCALE = 8


def parse_intervals(out, first, last):
    """sysbench --report-interval=1 lines (`[ 5s ] thds: 16 tps: 1234.56 ...`) -> the mean tps
    over seconds first..last (the seconds that end inside the sampled window)."""
    tps = [float(m.group(2)) for m in re.finditer(r"\[ (\d+)s \][^\n]*? tps: ([\d.]+)", out)
           if first <= int(m.group(1)) <= last]
    if not tps:
        raise SystemExit(f"lab_together: sysbench reported no second between {first} and {last}: {out[-400:]}")
    return sum(tps) / len(tps)


def split_by_server(report, tasks, napi_comm=None):
    """`perf report --sort pid,dso -F sample,pid,dso -t '|'` lines (`  12 |  9045:mariadbd |libc.so.6`,
    the pid being a thread's id) -> samples per binary for each server, given its threads' ids.
    The nic model (`napi_comm`: the start of the XDP veth's NAPI kthread's name) reports a
    fourth column, the parent (`--sort pid,dso,parent --parent net_rx_action`): a sample under
    net_rx_action is the kernel path's "receive" and one of the kthread pronghorn's, whatever
    thread they ran in."""
    per = {name: {} for name in tasks}
    for line in report.splitlines():
        f = [x.strip() for x in line.split("|")]
        m = re.match(r"(\d+):(.*)", f[1]) if len(f) >= 3 and f[0].isdigit() else None
        if not m:
            continue
        tid, comm, n = int(m.group(1)), m.group(2), int(f[0])
        owner, dso = None, f[2]
        if napi_comm is not None and len(f) >= 4 and f[3] == "net_rx_action":
            owner, dso = "kernel", RECEIVE
        elif napi_comm is not None and comm.startswith(napi_comm):
            owner, dso = "pronghorn", RECEIVE
        else:
            owner = next((name for name, tids in tasks.items() if tid in tids), None)
        if owner in per:
            per[owner][dso] = per[owner].get(dso, 0) + n
    return per


def per_transaction(samples, tps):
    """Samples (each SAMPLE_US of CPU, over WINDOW_S seconds) -> us per transaction by binary."""
    return {dso: round(n * SAMPLE_US / (WINDOW_S * tps), 2) for dso, n in samples.items()}


def parse_progress(out, first, last):
    """pgbench --progress=1 lines (`progress: 5.0 s, 1234.5 tps, lat 0.8 ms stddev 0.3, 0 failed`) ->
    the mean tps over seconds first..last (the seconds that end inside the sampled window)."""
    # A report is due every second but comes late when the client is busy (`11.1 s`): a report
    # counts for the second it is nearest to.
    tps = [float(m.group(2)) for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps", out)
           if first <= round(float(m.group(1))) <= last]
    if not tps:
        raise SystemExit(f"lab_together: pgbench reported no second between {first} and {last}: {out[-400:]}")
    return sum(tps) / len(tps)


def parse_forks(script):
    """`perf script -F trace` lines of sched:sched_process_fork (`comm=postgres pid=9045
    child_comm=postgres child_pid=9071`) -> {child: parent} (thread ids, threads included)."""
    return {int(m.group(2)): int(m.group(1))
            for m in re.finditer(r"\bpid=(\d+) child_comm=.*? child_pid=(\d+)", script)}


def proc_parents():
    """Every thread on the host now -> its parent: a process's main thread -> its parent
    process, another thread -> its process."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            parents[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
            for tid in map(int, os.listdir(f"/proc/{pid}/task")):
                if tid != int(pid):
                    parents[tid] = int(pid)
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # gone while read
    return parents


def descendants(roots, parents):
    """roots {path: the server's pid}, parents {thread: parent} -> {path: the root's threads and
    those of every process forked from it, at any depth (a backend and its threads)}."""
    out = {path: {pid} for path, pid in roots.items()}
    owner_of = {pid: path for path, pid in roots.items()}
    for tid in parents:
        chain, t = [], tid
        while t not in owner_of and t in parents and len(chain) < 64:
            chain.append(t)
            t = parents[t]
        owner = owner_of.get(t)
        for c in chain:
            owner_of[c] = owner
            if owner is not None:
                out[owner].add(c)
    return out


def measured(lab, tmp, n, model, roots, clients, client_tps, own, keep):
    """The clients (started) run RUN_S seconds; perf samples the server core for WINDOW_S of
    them and records the forks there, so that a process forked by a server and gone before the
    end (a pgbench -C backend) is counted to it. -> the run's figures per path."""
    forks_data = os.path.join(tmp, f"forks-{n}.data")
    fork_recorder = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_process_fork", "-C", L.SERVER_CPU,
                                      "-o", forks_data, "--", "sleep", str(SKIP_S + WINDOW_S + 1)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parents = proc_parents()
    time.sleep(SKIP_S)
    data = os.path.join(tmp, f"perf-{n}.data")
    chains = ["-g"] if model == "nic" or keep else []
    L.sh(["perf", "record", "-q", "-e", "cpu-clock", "-c", str(SAMPLE_US * 1000), "-C", L.SERVER_CPU] + chains
         + ["-o", data, "--", "sleep", str(WINDOW_S)])
    parents.update(proc_parents())
    outs = {p: c.communicate() for p, c in clients.items()}
    fork_recorder.wait()
    for p, c in clients.items():
        if c.returncode != 0:
            raise SystemExit(f"lab_together: the client on the {p} path failed: {''.join(outs[p])[-400:]}")
    parents.update(parse_forks(L.sh(["perf", "script", "-i", forks_data, "-F", "trace"]).stdout))
    tasks = descendants(roots, parents)
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(data, os.path.join(keep, f"perf-{n}.data"))
        with open(os.path.join(keep, f"tasks-{n}.json"), "w") as f:
            json.dump({p: sorted(t) for p, t in tasks.items()}, f)
    if model == "nic":
        sort = ["--sort", "pid,dso,parent", "-F", "sample,pid,dso,parent", "--parent", "net_rx_action",
                "--no-children", "-g", "none"]
        # The kthread's name, napi/<device>-<napi id>, is cut to a task name's 15 characters.
        napi_comm = f"napi/{lab.prefix}-a0-"[:15]
    else:
        sort, napi_comm = ["--sort", "pid,dso", "-F", "sample,pid,dso"], None
    report = L.sh(["perf", "report", "-i", data, "--stdio", "-q", "-t", "|"] + sort).stdout
    samples = split_by_server(report, tasks, napi_comm)
    run = {}
    for p in PATHS:
        # The seconds the clients report end at 1..RUN_S; those ending inside the window.
        tps = client_tps("".join(outs[p]), SKIP_S + 1, SKIP_S + WINDOW_S)
        us = per_transaction(samples[p], tps)
        run[p] = {"tps": round(tps, 1), "core_us": round(sum(us.values()), 2),
                  "own_us": us.get(own, 0.0), "us_by_dso": us}
    return run


def sysbench_run(lab, tmp, init, n, workload, model, keep):
    homes = {p: os.path.join(tmp, f"{p}-{n}") for p in PATHS}
    servers = {}
    try:
        for p in PATHS:
            L.new_datadir(homes[p])
            # Prepared on the kernel path (untimed), then served by its own path.
            s = start(lab, "kernel", homes[p], init, tmp)
            L.sh(lab.client(sysbench("kernel") + [workload, "prepare"]))
            s.terminate()
            s.wait()
        for p in PATHS:
            servers[p] = start(lab, p, homes[p], init, tmp)
        for p in PATHS:
            L.sh(lab.client(sysbench(p) + ["--threads=16", "--time=2", workload, "run"]))  # warm up
        clients = {p: subprocess.Popen(lab.client(sysbench(p) + ["--threads=16", f"--time={RUN_S}", "--report-interval=1",
                                                                  workload, "run"]),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in PATHS}
        return measured(lab, tmp, n, model, {p: s.pid for p, s in servers.items()}, clients, parse_intervals,
                        "mariadbd", keep)
    finally:
        for s in servers.values():
            s.terminate()
            s.wait()


def pgbench(path, options):
    return ["pgbench", "-h", L.ADDR[path], "-U", "postgres"] + options + ["postgres"]


def postgres_servers(lab, tmp):
    """A postmaster per path on a datadir of its own, filled by `pgbench -i` (untimed)."""
    shutil.chown(tmp, "postgres")  # initdb runs as the postgres user
    servers = {}
    try:
        for p in PATHS:
            data = os.path.join(tmp, f"pg-{p}")
            L.postgres_datadir(data)
            log = open(os.path.join(tmp, f"postgres-{p}.log"), "a")
            # Commits do not wait for the disk (as `pronghorn bench pgbench` runs it).
            servers[p] = L.postgres_server(lab, p, data, log, ["synchronous_commit=off"])
            L.sh(lab.client(pgbench(p, ["-i", "-s", str(PGBENCH_SCALE), "-q"])))
        return servers
    except BaseException:
        L.stop_postgres(servers.values())
        raise


def pgbench_run(lab, tmp, servers, n, workload, model, keep):
    case = ["-n", "-j", "4", "-c", "16"] + PGBENCH[workload]
    for p in PATHS:
        L.sh(lab.client(pgbench(p, case + ["-T", "2"])))  # warm up
    clients = {p: subprocess.Popen(lab.client(pgbench(p, case + ["-T", str(RUN_S), "--progress=1"])),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in PATHS}
    return measured(lab, tmp, n, model, {p: s.pid for p, s in servers.items()}, clients, parse_progress, "postgres",
                    keep)


def start(lab, path, home, init, tmp):
    log = open(os.path.join(tmp, f"mariadb-{os.path.basename(home)}-{path}.log"), "a")
    return L.mariadb_server(lab, path, home, init, log)


def sysbench(path):
    return ["sysbench", "--db-driver=mysql", f"--mysql-host={L.ADDR[path]}", "--mysql-port=3306", "--mysql-user=bench",
            "--mysql-db=sbtest", "--tables=4", "--table-size=100000"]


def summarize(runs):
    """Medians over the runs, and the per-run ratios pronghorn / kernel (median, min, max)."""
    out = {}
    for key in ["tps", "core_us", "own_us"]:
        ratios = [r["pronghorn"][key] / r["kernel"][key] for r in runs if r["kernel"][key]]
        out[key] = {"kernel": statistics.median(r["kernel"][key] for r in runs),
                    "pronghorn": statistics.median(r["pronghorn"][key] for r in runs),
                    "ratio": [round(statistics.median(ratios), 3), round(min(ratios), 3), round(max(ratios), 3)]}
    return out


def by_binary(us_by_dso, core_us):
    """The binaries a run's core time went to, largest first: those with 0.1 us and 0.2% of the
    core or more, then the rest together as `others` (a backend maps some fifty libraries)."""
    floor = max(0.1, core_us * 0.002)
    shown = sorted(((d, v) for d, v in us_by_dso.items() if v >= floor), key=lambda kv: -kv[1])
    rest = sum(v for v in us_by_dso.values() if v < floor)
    return shown + ([("others", round(rest, 2))] if rest >= 0.1 else [])


def write_md(path, result):
    runs, s = result["runs"], result["summary"]
    with open(path, "w") as f:
        f.write(f"# Both paths at once: {result['workload']}'s cost to the server core\n\n")
        f.write(__doc__.split("\n\n", 1)[1].split("`--model veth`")[0].strip().replace("\n", " ") + "\n\n")
        f.write(f"Lab model: {result['model_description']}.")
        if result["model"] == "nic":
            attribution = __doc__.split("There a receive", 1)[1].split("Writes bench")[0]
            f.write(" There a receive" + attribution.rstrip().replace("\n", " "))
        f.write("\n\n")
        f.write(f"{len(runs)} runs; medians, and the median (min-max) of the per-run ratios.\n\n")
        f.write("| per transaction | kernel | pronghorn | pronghorn/kernel |\n|---|---:|---:|---:|\n")
        labels = {"tps": "tps (its client's, in the sampled seconds)", "core_us": "server core, us",
                  "own_us": f"- of it {result['server']}'s own code, us"}
        for key, label in labels.items():
            r = s[key]
            f.write(f"| {label} | {r['kernel']:,.1f} | {r['pronghorn']:,.1f} | "
                    f"{r['ratio'][0]:.2f}x ({r['ratio'][1]:.2f}-{r['ratio'][2]:.2f}) |\n")
        f.write("\nEach run, us of server core per transaction by binary:\n\n| run | path | tps | core | by binary |\n"
                "|---:|---|---:|---:|---|\n")
        for i, r in enumerate(runs, 1):
            for p in PATHS:
                by = ", ".join(f"{d} {v:.1f}" for d, v in by_binary(r[p]["us_by_dso"], r[p]["core_us"]))
                f.write(f"| {i} | {p} | {r[p]['tps']:,.0f} | {r[p]['core_us']:.1f} | {by} |\n")
        f.write("\n")
        L.write_machine(f, result["machine"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="tg", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--quick", action="store_true", help="2 runs instead of 5; together-quick.*")
    ap.add_argument("--runs", type=int, help="this many runs (default 5, --quick 2)")
    ap.add_argument("--model", choices=["veth", "nic"], default="veth",
                    help="the lab model (default veth): where each side's receive runs")
    ap.add_argument("--workload", choices=WORKLOADS + list(PGBENCH), default=WORKLOADS[0],
                    help="what both clients run (default oltp_point_select): a sysbench workload against "
                         "mariadbd, or a pgbench case against PostgreSQL 15 (16 clients; select-only, TPC-B-like, "
                         "select-only with a connection per transaction)")
    ap.add_argument("--build", metavar="DIR",
                    help="pronghorn's path runs DIR/pronghorn (and DIR/libpronghorn.so), not this tree's release "
                         "build: another build against the same kernel path, for A/B; results in "
                         "together-build.* (the build named in them)")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep each run's recording of the core, with call chains (perf-N.data), and the threads "
                         "counted to each server (tasks-N.json) in DIR, for a look by function; the call chains "
                         "cost both paths throughput")
    a = ap.parse_args()
    if os.environ.get("PRONGHORN_LAB_MODEL") != a.model:
        lab_exe = os.path.abspath("target/release/pronghorn")
        os.execv(lab_exe, [lab_exe, "lab", "model", a.model, "--prefix", a.prefix, "--server-cpus", L.SERVER_CPU,
                           "--client-cpus", L.CLIENT_CPU, "--", sys.executable] + sys.argv)
    if a.build:
        L.EXE = os.path.abspath(os.path.join(a.build, "pronghorn"))
        if not os.path.exists(L.EXE):
            raise SystemExit(f"lab_together: --build {a.build}: no pronghorn binary there")
    server = "postgres" if a.workload in PGBENCH else "mariadbd"
    tools = ["pgbench", f"{L.PG_BIN}/postgres", "setpriv"] if server == "postgres" else ["mariadbd", "sysbench"]
    for tool in ["perf"] + tools:
        if not L.shutil.which(tool):
            raise SystemExit(f"lab_together: {tool} is missing (scripts/setup.sh installs it)")
    lab = L.Lab(a.prefix)
    command = "bench/lab_together.sh" + " ".join([""] + sys.argv[1:])
    more = {"servers' core": L.SERVER_CPU, "clients' core": L.CLIENT_CPU}
    if a.build:
        more["pronghorn build"] = L.EXE
    result = {"machine": L.machine(command, **more), "workload": a.workload, "server": server, "model": a.model,
              "model_description": os.environ["PRONGHORN_LAB_MODEL_DESCRIPTION"], "runs": []}
    with tempfile.TemporaryDirectory(prefix="lab-together.") as tmp:
        os.chmod(tmp, 0o755)
        init = os.path.join(tmp, "init.sql")
        with open(init, "w") as f:
            f.write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n"
                    "CREATE DATABASE IF NOT EXISTS sbtest;\n")
        runs = range(a.runs or (2 if a.quick else 5))
        if server == "postgres":
            servers = postgres_servers(lab, tmp)
            try:
                for n in runs:
                    print(f"lab_together: run {n + 1}", file=sys.stderr)
                    result["runs"].append(pgbench_run(lab, tmp, servers, n, a.workload, a.model, a.keep))
            finally:
                L.stop_postgres(servers.values())
        else:
            for n in runs:
                print(f"lab_together: run {n + 1}", file=sys.stderr)
                result["runs"].append(sysbench_run(lab, tmp, init, n, a.workload, a.model, a.keep))
    result["summary"] = summarize(result["runs"])
    name = "together" + ("-build" if a.build else "")
    if a.workload != WORKLOADS[0]:
        name += "-" + a.workload.removeprefix("oltp_")
    if a.model != "veth":
        name += "-" + a.model
    L.write_results("bench/results/" + name + ("-quick" if a.quick else ""), result, write_md)


if __name__ == "__main__":
    main()
