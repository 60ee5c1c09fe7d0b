#!/usr/bin/env python3
"""System calls and context switches per request of a real server in the lab, on the kernel
path and under pronghorn (run by bench/lab_cost.sh; needs root, a release build and the lab's
tools: scripts/setup.sh).

For each path, the server runs in side a pinned to core 1 and the client in side b on core 0
(as `pronghorn bench` places them):
- redis-server, redis-benchmark GET -c 50 -d 3 (Redis's epoll loop),
- mariadbd --user=mysql, sysbench oltp_point_select with 16 threads (a thread per connection).
Server CPU time per request (task-clock of its threads) is split by binary with a second run
under `perf record` (the shares of its samples per DSO: the server, libpronghorn, DPDK, libc,
the kernel).
The client runs with the server's process watched by `perf stat -p` (context switches and
system calls of all its threads, in all and by name through the syscall tracepoints); the
counts are divided by the requests (redis) or transactions (sysbench) of that run. perf watches
the server only while the client runs, so start-up is not counted.
Writes bench/results/cost-lab.{json,md}.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

EXE = os.path.abspath("target/release/pronghorn")
SERVER_CPU, CLIENT_CPU = "1", "0"
ADDR = {"kernel": "10.98.0.1", "pronghorn": "10.99.0.1"}



def breakdown(f, k, p, key, label, fmt):
    """Table rows of one per-name breakdown, both paths side by side, largest first."""
    for name in sorted(set(k[key]) | set(p[key]), key=lambda n: -max(k[key].get(n, 0), p[key].get(n, 0))):
        f.write(f"| {label.format(name)} | {fmt.format(k[key].get(name, 0))} | {fmt.format(p[key].get(name, 0))} |\n")

def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Lab:
    def __init__(self, prefix):
        self.prefix = prefix
        self.config = f"/run/pronghorn/lab/{prefix}/a.toml"

    def server(self, path, argv, log, profile=None):
        cmd = ["ip", "netns", "exec", f"{self.prefix}-a", "taskset", "-c", SERVER_CPU]
        if path == "pronghorn":
            cmd += [EXE, "run", "--config", self.config] + (["--profile", profile] if profile else []) + ["--"]
        # ip netns exec, taskset and pronghorn run exec into the server: the pid is the server's.
        return subprocess.Popen(cmd + argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def client(self, argv):
        return ["ip", "netns", "exec", f"{self.prefix}-b", "taskset", "-c", CLIENT_CPU] + argv


def wait_port(lab, addr, port, server, what):
    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit(f"{what} exited ({server.returncode}) before listening")
        r = subprocess.run(lab.client(["bash", "-c", f"exec 3<>/dev/tcp/{addr}/{port}"]), capture_output=True)
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"{what} does not listen on {addr}:{port}")


# System calls counted by name (the rest is "other"): what a server's request path makes.
NAMED = ["read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg", "epoll_wait",
         "epoll_pwait", "poll", "ppoll", "select", "futex", "sched_yield", "clock_nanosleep", "ioctl"]


# The runtime's own counters (`pronghorn stat`'s process section) reported per request for the
# pronghorn path: its lock (holds, time held, waits for it, time waited) and its waiting.
RUNTIME = ["lock_holds", "lock_hold_us", "lock_waits", "lock_wait_us", "sleeps", "wakeups", "wakeup_syscalls",
           "inline_polls", "skipped_passes"]


def runtime_counters(pid):
    """The server's process counters now (`pronghorn stat --json PID`). The first read of a
    process arms the timing of the lock's holds (~1.6% of a request: docs/design-notes.md)."""
    return json.loads(sh([EXE, "stat", "--json", str(pid)]).stdout)["process"]


def per_request(before, after, n):
    """The RUNTIME counters' growth between two reads, per unit of work."""
    return {k: round((after.get(k, 0) - before.get(k, 0)) / n, 3) for k in RUNTIME}


def watched(pid, client, count_of, tmp, runtime=False):
    """Runs `client` with `perf stat -p pid` counting context switches and system calls (all, and
    by name through their tracepoints, in the same run); returns them per unit of work
    (count_of(client output)); with `runtime` (a pronghorn server), its runtime's counters too,
    read before and after that run."""
    stat = os.path.join(tmp, "stat")
    events = ["task-clock", "context-switches", "raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in NAMED]
    before = runtime_counters(pid) if runtime else None
    r = sh(["perf", "stat", "-x,", "-o", stat, "-e", ",".join(events), "-p", str(pid), "--"] + client)
    n = count_of(r.stdout)
    after = runtime_counters(pid) if runtime else None
    values = {}
    with open(stat) as f:
        for line in f:
            v = line.strip().split(",")
            if len(v) > 2 and re.match(r"^\d+(\.\d+)?$", v[0]):
                values[v[2]] = float(v[0])
    by_name = {name: values.get(f"syscalls:sys_enter_{name}", 0) / n for name in NAMED}
    total = values.get("raw_syscalls:sys_enter", 0) / n
    by_name["other"] = total - sum(by_name.values())
    cpu_us = values.get("task-clock", 0) * 1000 / n
    return {
        "work": n,
        "cpu_us": round(cpu_us, 2),
        "core_us_by_dso": profile(client, count_of, tmp),
        "context_switches": round(values.get("context-switches", 0) / n, 3),
        "syscalls": round(total, 3),
        "syscalls_by_name": {k: round(v, 3) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1]) if v >= 0.005},
        "runtime": per_request(before, after, n) if runtime else {},
    }


# The server core is sampled every SAMPLE_NS of CPU time (perf's cpu-clock period).
SAMPLE_NS = 100_000


KEEP = {"dir": None, "name": ""}


def profile(client, count_of, tmp):
    """Runs `client` once more with the server's core sampled (`perf record -a -C`, no
    tracepoints: they slow what they count) and splits that core's busy time per request by
    process and binary: the server's own code, libpronghorn, DPDK's drivers, libc, the kernel
    (system calls, and the receive and wakeup work that runs on the core in softirq), and the
    core's other tasks (kworkers, a threaded NAPI). Idle time is left out."""
    data = os.path.join(tmp, "perf.data")
    r = sh(["perf", "record", "-q", "-o", data, "-e", "cpu-clock", "-c", str(SAMPLE_NS), "-a", "-C", SERVER_CPU,
            "--"] + client)
    n = count_of(r.stdout)
    if KEEP["dir"]:
        shutil.copy(data, os.path.join(KEEP["dir"], KEEP["name"] + ".perf.data"))
    report = sh(["perf", "report", "-i", data, "--sort", "comm,dso", "--stdio", "-q", "-F", "sample,comm,dso"]).stdout
    return {key: round(samples * SAMPLE_NS / 1000 / n, 2)
            for key, samples in parse_core_samples(report).items() if samples * SAMPLE_NS / 1000 / n >= 0.05}


def parse_core_samples(report):
    """`perf report --sort comm,dso -F sample,comm,dso --stdio -q` lines (`  12345  mariadbd
    libc.so.6`) -> samples per binary of the server (its threads' names are the server's or
    pronghorn's) and per other task on the core; the idle task is left out."""
    samples = {}
    for line in report.splitlines():
        m = re.match(r"^\s*(\d+)\s+(\S+)\s+(\S.*?)\s*$", line)
        if not m:
            continue
        count, comm, dso = int(m.group(1)), m.group(2), m.group(3)
        if comm == "swapper":
            continue
        server = comm in ("mariadbd", "redis-server", "redis-check-rdb") or comm.startswith(("pronghorn", "eal-"))
        key = dso if server else f"other tasks ({comm.split('/')[0].rstrip(':0123456789-')})"
        samples[key] = samples.get(key, 0) + count
    return samples


# The binary of each workload's own code in the server-core profile (Debian's redis-server is a
# link to redis-check-rdb).
APPLICATION = {"redis": "redis-check-rdb", "mariadb": "mariadbd"}


def normalized(kernel, pronghorn, app):
    """Both paths' server-core time per request at one speed of the machine. The application's own
    code does the same work per request on both paths, but its time per request swings up to 2x
    between two runs on a shared host (the host, not the path: the same build alone swings as
    much), so the us of two runs do not compare. Each path's time in units of its own run's
    application time does: `core_per_app` is busy / application time; `pronghorn_over_kernel`
    is the ratio of the two (< 1: pronghorn costs the server core less per request);
    `pronghorn_us_at_kernel_speed` is pronghorn's breakdown scaled by kernel app / pronghorn app.
    It assumes the application's code runs as fast under both paths (cache pollution by the
    stack would be pronghorn's cost and is hidden by it); None when a run has no application
    samples."""
    k_app, p_app = kernel.get(app, 0), pronghorn.get(app, 0)
    if k_app <= 0 or p_app <= 0:
        return None
    k_per, p_per = sum(kernel.values()) / k_app, sum(pronghorn.values()) / p_app
    return {
        "application": app,
        "kernel_core_per_app": round(k_per, 3),
        "pronghorn_core_per_app": round(p_per, 3),
        "pronghorn_over_kernel": round(p_per / k_per, 3),
        "pronghorn_us_at_kernel_speed": {d: round(v * k_app / p_app, 2) for d, v in pronghorn.items()},
    }


def parse_dso_shares(report):
    """`perf report --sort dso --stdio -q` lines: `  51.45%  request-cost` -> fractions."""
    shares = {}
    for line in report.splitlines():
        m = re.match(r"^\s*(\d+\.\d+)%\s+(\S.*?)\s*$", line)
        if m:
            shares[m.group(2)] = float(m.group(1)) / 100
    return shares


def redis_server(lab, path, log):
    """redis-server without persistence, listening on `path`'s address (port 6379)."""
    addr = ADDR[path]
    server = lab.server(path, ["redis-server", "--bind", addr, "--port", "6379", "--save", "", "--appendonly", "no",
                               "--protected-mode", "no", "--maxclients", "10000"], log)
    try:
        wait_port(lab, addr, 6379, server, "redis-server")
    except BaseException:
        server.terminate()
        server.wait()
        raise
    return server


def redis(lab, path, requests, tmp):
    addr = ADDR[path]
    server = redis_server(lab, path, open(os.path.join(tmp, f"redis-{path}.log"), "w"))
    try:
        bench = lab.client(["redis-benchmark", "-h", addr, "-p", "6379", "-c", "50", "-d", "3", "-t", "set,get",
                            "-n", str(requests), "--csv"])
        sh(bench)  # warm up, and the keys GET reads
        get = lab.client(["redis-benchmark", "-h", addr, "-p", "6379", "-c", "50", "-d", "3", "-t", "get",
                          "-n", str(requests), "--csv"])
        return watched(server.pid, get, lambda _: requests, tmp, runtime=path == "pronghorn")
    finally:
        server.terminate()
        server.wait()


def sysbench_transactions(out):
    m = re.search(r"transactions:\s+(\d+)", out)
    if not m or int(m.group(1)) == 0:
        raise SystemExit(f"sysbench ran no transaction: {out[-500:]}")
    return int(m.group(1))


def new_datadir(home):
    """A fresh mariadb datadir in `home` (made, owned by mysql)."""
    sh(["install", "-d", "-o", "mysql", "-g", "mysql", home])
    sh(["mariadb-install-db", "--no-defaults", "--user=mysql", f"--datadir={home}/data",
        "--auth-root-authentication-method=normal", "--skip-test-db"])


def mariadb_server(lab, path, home, init, log, extra=()):
    """mariadbd --user=mysql on the datadir in `home`, listening on `path`'s address (port 3306),
    with the options in `extra` last."""
    addr = ADDR[path]
    server = lab.server(path, ["mariadbd", "--no-defaults", "--user=mysql", f"--datadir={home}/data",
                               f"--socket={home}/mysqld.sock", f"--pid-file={home}/mysqld.pid",
                               f"--bind-address={addr}", "--port=3306", "--skip-log-bin", "--skip-name-resolve",
                               "--max-connections=400", "--innodb-buffer-pool-size=256M", f"--init-file={init}",
                               *extra], log)
    try:
        wait_port(lab, addr, 3306, server, "mariadbd")
    except BaseException:
        server.terminate()
        server.wait()
        raise
    return server


PG_BIN = "/usr/lib/postgresql/15/bin"
# What postgres, started as the postgres user by setpriv, needs to open the NIC (as the lab
# tests and `pronghorn bench pgbench` start it).
PG_CAPS = "+dac_override,+net_admin,+net_raw,+ipc_lock,+sys_admin,+bpf"


def postgres_datadir(data):
    """initdb of a new datadir as the postgres user (its parent must be theirs to write), with
    side b's clients of both paths trusted."""
    sh(["runuser", "-u", "postgres", "--", f"{PG_BIN}/initdb", "-D", data, "-A", "trust"])
    with open(os.path.join(data, "pg_hba.conf"), "a") as hba:
        hba.write("".join(f"host all all {addr.rsplit('.', 1)[0]}.0/24 trust\n" for addr in ADDR.values()))


def postgres_server(lab, path, data, log, settings=()):
    """PostgreSQL 15 on `data` as the postgres user (setpriv, with the NIC's capabilities),
    listening on `path`'s address (port 5432), its unix socket in the datadir; pronghorn's path
    under `--profile postgres` (the backends share the postmaster's stack). setpriv and
    `pronghorn run` exec into postgres: the pid is the postmaster's."""
    argv = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"--inh-caps={PG_CAPS}",
            f"--ambient-caps={PG_CAPS}", f"{PG_BIN}/postgres", "-D", data,
            "-c", f"listen_addresses={ADDR[path]}", "-c", f"unix_socket_directories={data}"]
    for setting in settings:
        argv += ["-c", setting]
    server = lab.server(path, argv, log, profile="postgres")
    try:
        wait_port(lab, ADDR[path], 5432, server, f"postgres ({path})")
    except BaseException:
        server.terminate()
        server.wait()
        raise
    return server


def stop_postgres(servers):
    """Fast shutdown (SIGINT) of the postmasters `servers` (Popen objects), killed after 30 s."""
    for s in servers:
        s.send_signal(signal.SIGINT)
    for s in servers:
        try:
            s.wait(timeout=30)
        except subprocess.TimeoutExpired:
            s.kill()
            s.wait()


def mariadb(lab, path, seconds, tmp):
    addr = ADDR[path]
    home = os.path.join(tmp, f"mariadb-{path}")
    init = os.path.join(tmp, "init.sql")
    with open(init, "w") as f:
        f.write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n"
                "CREATE DATABASE IF NOT EXISTS sbtest;\n")
    os.chmod(tmp, 0o755)
    new_datadir(home)
    server = mariadb_server(lab, path, home, init, open(os.path.join(tmp, f"mariadb-{path}.log"), "w"))
    try:
        sysbench = ["sysbench", "--db-driver=mysql", f"--mysql-host={addr}", "--mysql-port=3306",
                    "--mysql-user=bench", "--mysql-db=sbtest", "--tables=1", "--table-size=10000"]
        sh(lab.client(sysbench + ["oltp_point_select", "prepare"]))
        run = lab.client(sysbench + ["--threads=16", f"--time={seconds}", "oltp_point_select", "run"])
        sh(lab.client(sysbench + ["--threads=16", "--time=2", "oltp_point_select", "run"]))  # warm up
        return watched(server.pid, run, sysbench_transactions, tmp, runtime=path == "pronghorn")
    finally:
        server.terminate()
        server.wait()


def write_md(path, result):
    with open(path, "w") as f:
        f.write("# System calls and context switches per request, real servers in the lab\n\n")
        f.write("The server in side a on core 1, the client in side b on core 0; the kernel path over a plain veth, "
                "pronghorn over AF_XDP on its veth. Counted by perf on the server's process (all its threads) while "
                "the client runs (`perf stat -p`: context switches, and system calls through the raw_syscalls and "
                "syscalls tracepoints, which slow the process: its task-clock is shown last). The server core's busy "
                "time comes from a second run without tracepoints: its core sampled every 100 us of CPU (`perf record "
                "-a -C`), split by binary of the server's threads and by the core's other tasks, idle left out; it "
                "includes the receive and wakeup work that runs on that core in softirq (the client's TCP receive, on "
                "both paths in this veth model). Debian's redis-server is a link to redis-check-rdb. Per request (redis "
                "GET) or per transaction (sysbench point_select: one SELECT each). The runtime rows are pronghorn's "
                "own counters (`pronghorn stat --json`, read before and after the perf stat run; the first read arms "
                "the timing of the lock's holds): its lock's holds, time held and waits, and its sleeps and wakeups. "
                "The two paths run one after the other, and this shared host's speed differs between two runs by up "
                "to 2x (the same build's application code alone takes 17 to 30 us per point_select from one run to "
                "the next): compare the us of one path with the other's only through the rows in units of the "
                "application's own code, which does the same work per request on both paths (bold; the rows after "
                "it scale pronghorn's run to the kernel run's speed).\n\n")
        for w in result["workloads"]:
            f.write(f"## {w['name']}\n\n| per request | kernel | pronghorn |\n|---|---:|---:|\n")
            k, p = w["kernel"], w["pronghorn"]
            f.write(f"| requests counted | {k['work']:,} | {p['work']:,} |\n")
            kc, pc = sum(k["core_us_by_dso"].values()), sum(p["core_us_by_dso"].values())
            f.write(f"| server core busy, us (second run, sampled) | {kc:.1f} | {pc:.1f} |\n")
            breakdown(f, k, p, "core_us_by_dso", "- in {}, us", "{:.1f}")
            n = w.get("normalized")
            if n:
                f.write(f"| **server core busy per us of {n['application']}'s own code** (same machine speed) | "
                        f"**{n['kernel_core_per_app']:.2f}** | **{n['pronghorn_core_per_app']:.2f}** "
                        f"({n['pronghorn_over_kernel']:.2f}x) |\n")
                at = n["pronghorn_us_at_kernel_speed"]
                f.write(f"| pronghorn's busy time at the kernel run's speed, us | {kc:.1f} | {sum(at.values()):.1f} |\n")
                for d, v in sorted(at.items(), key=lambda kv: -kv[1]):
                    f.write(f"| - in {d}, at the kernel run's speed, us | {k['core_us_by_dso'].get(d, 0):.1f} | {v:.1f} |\n")
            f.write(f"| server process task-clock under perf stat, us | {k['cpu_us']:.1f} | {p['cpu_us']:.1f} |\n")
            f.write(f"| context switches | {k['context_switches']:.2f} | {p['context_switches']:.2f} |\n")
            f.write(f"| system calls | {k['syscalls']:.2f} | {p['syscalls']:.2f} |\n")
            breakdown(f, k, p, "syscalls_by_name", "{}", "{:.2f}")
            for name in RUNTIME:
                if name in p.get("runtime", {}):
                    f.write(f"| runtime `{name}` (pronghorn stat) | - | {p['runtime'][name]:.3f} |\n")
            f.write("\n")
        write_machine(f, result["machine"])


def machine(command, **more):
    """What a result file says of its run: the command, when, the commit, the cores."""
    return {"command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git": sh(["git", "rev-parse", "--short", "HEAD"]).stdout.strip(), "cores": os.cpu_count(), **more}


def write_machine(f, m):
    f.write(f"Command: `{m['command']}`\n\nMachine: " + ", ".join(f"{k} {v}" for k, v in m.items()
                                                               if k != "command") + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="cost", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter runs; cost-lab-quick.*")
    ap.add_argument("--keep-profiles", metavar="DIR",
                    help="keep each run's server-core profile as DIR/<workload>-<path>.perf.data (perf report -i)")
    ap.add_argument("--only", choices=["redis", "mariadb"], help="run one workload (results are not written)")
    a = ap.parse_args()
    if a.keep_profiles:
        os.makedirs(a.keep_profiles, exist_ok=True)
        KEEP["dir"] = a.keep_profiles
    for tool in ["perf", "redis-server", "redis-benchmark", "mariadbd", "sysbench"]:
        if not shutil.which(tool):
            raise SystemExit(f"lab_cost: {tool} is missing (scripts/setup.sh installs it)")
    requests, seconds = (20000, 3) if a.quick else (100000, 10)
    lab = Lab(a.prefix)
    result = {"workloads": [], "machine": machine("bench/lab_cost.sh" + (" --quick" if a.quick else ""),
                                                  **{"server core": SERVER_CPU, "client core": CLIENT_CPU})}
    with tempfile.TemporaryDirectory(prefix="lab-cost.") as tmp:
        for short, name, run in [("redis", f"redis-benchmark GET -c 50 -d 3, {requests:,} requests",
                                  lambda p: redis(lab, p, requests, tmp)),
                                 ("mariadb", f"sysbench oltp_point_select, 16 threads, {seconds} s",
                                  lambda p: mariadb(lab, p, seconds, tmp))]:
            if a.only and a.only != short:
                continue
            w = {"name": name}
            for path in ["kernel", "pronghorn"]:
                print(f"lab_cost: {name}, {path}", file=sys.stderr)
                KEEP["name"] = f"{short}-{path}"
                w[path] = run(path)
            w["normalized"] = normalized(w["kernel"]["core_us_by_dso"], w["pronghorn"]["core_us_by_dso"],
                                         APPLICATION[short])
            result["workloads"].append(w)
    if a.only:
        for w in result["workloads"]:
            print(json.dumps(w, indent=1))
        return
    write_results("bench/results/cost-lab" + ("-quick" if a.quick else ""), result, write_md)


def write_results(base, result, write_md):
    """BASE.json and BASE.md (written by `write_md(path, result)`), and the markdown shown."""
    json.dump(result, open(base + ".json", "w"), indent=1)
    write_md(base + ".md", result)
    print(open(base + ".md").read())


if __name__ == "__main__":
    main()
