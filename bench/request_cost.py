#!/usr/bin/env python3
"""What one request costs through pronghorn's runtime, per layer (run by bench/request_cost.sh).

For each case (a request/response pattern over the in-memory NIC, target/release/request-cost),
runs the harness twice, with FEW and MANY requests, and divides the difference by MANY - FEW
(setup, connection handshakes and teardown cancel out):
- under callgrind (instructions per layer, calls into malloc, futex, poll, read, write; the
  client thread left out with --toggle-collect), and again with its cache simulator (misses of
  this machine's L1d and L2 sizes per request),
- under `perf stat` (the runtime's counters: stack passes, sleeps, wakeups; and context
  switches of the server's threads: the process's minus the client thread's),
- under `perf trace -s` (system calls by name of the server's threads).
Native runs are pinned to one core (taskset -c 1, as the lab pins the server). Writes
bench/results/cost.{json,md} (--quick: cost-quick.*).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_layers  # noqa: E402

BIN = "target/release/request-cost"
CASES = [
    ("threads-inline", "thread per connection (MariaDB: recv, EAGAIN, poll, recv, send), 16 threads, "
                       "NIC driven inline (mariadbd pinned to one core stays inline)",
     ["--pattern", "threads", "--connections", "16", "--drive", "inline"]),
    ("threads-dedicated", "the same with a stack thread (drive = dedicated: mariadbd on two cores or more)",
     ["--pattern", "threads", "--connections", "16", "--drive", "dedicated"]),
    ("epoll", "one epoll event loop (Redis: epoll_wait, read, write), 50 connections, inline",
     ["--pattern", "epoll", "--connections", "50", "--drive", "inline"]),
    ("epoll-1000", "the same loop with 1,000 connections (redis-benchmark -c 1000): each request finds its "
                   "connection's state, rings and table entries colder",
     ["--pattern", "epoll", "--connections", "1000", "--drive", "inline"]),
]
# The caches callgrind models for the misses per request: this machine's L1d per core (32 KiB,
# 8-way) and its L2 per core (1 MiB, 16-way) as the "last level": a miss there goes to the L3
# (shared by the cores, and by the other side of the lab).
CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64"]
# Functions listed per case with the most misses of the modelled L2.
L2_TOP_FUNCTIONS = 10
COUNTERS = ["stack_thread_polls", "inline_polls", "skipped_passes", "sleeps", "wakeups", "tcp_rx_segments", "tcp_tx_segments",
            "tx_kicks", "rx_fd_signals", "rx_fd_clears"]
PIN = ["taskset", "-c", "1"]
REQUEST_BYTES, RESPONSE_BYTES = 64, 256


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def harness(args, requests):
    sizes = ["--request-bytes", str(REQUEST_BYTES), "--response-bytes", str(RESPONSE_BYTES)]
    return [BIN] + args + sizes + ["--requests", str(requests)]


def differential(few_value, many_value, few, many):
    return round((many_value - few_value) / (many - few), 3)


def counters_and_switches(args, few, many):
    """The runtime's counters per request, and context switches of the server's threads (perf
    stat's count for the process minus the client thread's own, from the same run)."""
    perf = shutil.which("perf")
    runs = []
    for n in (few, many):
        cmd = PIN + (["perf", "stat", "-x,", "-e", "context-switches"] if perf else []) + harness(args, n)
        r = run(cmd)
        out = json.loads(r.stdout)
        switches = next((int(l.split(",")[0]) for l in r.stderr.splitlines()
                         if l.endswith("context-switches") or ",context-switches," in l), None)
        out["server_context_switches"] = None if switches is None else switches - out["client_context_switches"]
        runs.append(out)
    keys = COUNTERS + (["server_context_switches"] if runs[0]["server_context_switches"] is not None else [])
    return {k: differential(runs[0][k], runs[1][k], few, many) for k in keys}


def callgrind(args, few, many, tmp):
    outs = []
    for n in (few, many):
        out = os.path.join(tmp, f"callgrind.{n}.out")
        run(PIN + ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   # The client's thread is the peer, not the server: left out. (--toggle-collect
                   # implies --collect-atstart=no unless it is said after.)
                   "--toggle-collect=request_cost::client_thread", "--collect-atstart=yes"] + harness(args, n))
        profile = callgrind_layers.parse(out)
        if profile.inclusive(r"^request_cost::(client_thread|Client::answer)$") > 0:
            raise SystemExit("callgrind counted the client's thread: --toggle-collect no longer names its function")
        outs.append(profile)
    return callgrind_layers.report(outs[0], outs[1], many - few)


def cache_misses(args, few, many, tmp):
    """Cache misses per request of the server's threads, as callgrind's simulator models them
    ([`CACHES`]): L1 data misses, and misses of the 1 MiB level (data and instructions)."""
    totals, l1_by_layer, l2_by_function = [], [], []
    for n in (few, many):
        out = os.path.join(tmp, f"cachesim.{n}.out")
        run(PIN + ["valgrind", "--tool=callgrind", "--cache-sim=yes"] + CACHES + [
            f"--callgrind-out-file={out}", "--toggle-collect=request_cost::client_thread",
            "--collect-atstart=yes"] + harness(args, n))
        totals.append(callgrind_layers.totals(out))
        profile = callgrind_layers.parse(out)
        l1_by_layer.append(callgrind_layers.layer_events(profile, ["D1mr", "D1mw"]))
        l2_by_function.append(callgrind_layers.function_events(profile, ["DLmr", "DLmw"]))
    per = {k: differential(totals[0][k], totals[1][k], few, many) for k in totals[0]}

    def per_request(runs):
        return {k: differential(runs[0].get(k, 0), runs[1].get(k, 0), few, many) for k in set(runs[0]) | set(runs[1])}

    l1_layers = per_request(l1_by_layer)
    l2_functions = per_request(l2_by_function)
    l2_layers = defaultdict(float)
    for (layer, _), v in l2_functions.items():
        l2_layers[layer] += v
    top = sorted(l2_functions.items(), key=lambda kv: -kv[1])[:L2_TOP_FUNCTIONS]
    return {"l1d_misses": round(per["D1mr"] + per["D1mw"], 2),
            "l2_misses": round(per["DLmr"] + per["DLmw"], 2),
            "l2_instruction_misses": per["ILmr"],
            "l1d_misses_by_layer": {l: round(v, 2) for l, v in sorted(l1_layers.items(), key=lambda kv: -kv[1])},
            "l2_misses_by_layer": {l: round(v, 2) for l, v in sorted(l2_layers.items(), key=lambda kv: -kv[1])},
            "l2_top_functions": [{"layer": l, "function": fn, "per_request": round(v, 2)} for (l, fn), v in top]}


def syscalls(args, few, many, tmp):
    """System calls by name per request of the server's threads (perf trace -s counts per
    thread; the thread named `client` is left out)."""
    if not shutil.which("perf"):
        return None
    per = []
    for n in (few, many):
        out = os.path.join(tmp, f"trace.{n}")
        if subprocess.run(PIN + ["perf", "trace", "-s", "-o", out] + harness(args, n), capture_output=True).returncode:
            return None
        per.append(parse_trace_summary(open(out).read(), leave_out="client"))
    names = set(per[0]) | set(per[1])
    diff = {k: differential(per[0].get(k, 0), per[1].get(k, 0), few, many) for k in names}
    return {k: v for k, v in sorted(diff.items(), key=lambda kv: -kv[1]) if v > 0.001}


def parse_trace_summary(text, leave_out):
    """`perf trace -s`: per thread, a header `COMM (TID), N events, P%` and a table of
    `syscall calls errors total min avg max stddev`. Sums the calls of every thread but those
    whose COMM is `leave_out`."""
    calls, counted = {}, False
    for line in text.splitlines():
        head = re.match(r"^\s*(\S.*) \((\d+)\), \d+ events", line)
        if head:
            counted = head.group(1) != leave_out
            continue
        f = line.split()
        if counted and len(f) >= 3 and re.match(r"^[a-z_0-9]+$", f[0]) and f[1].isdigit() and f[2].isdigit():
            calls[f[0]] = calls.get(f[0], 0) + int(f[1])
    return calls


def machine(command):
    return {
        "command": command,
        "cores": os.cpu_count(), "kernel": platform.release(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": run(["git", "rev-parse", "--short", "HEAD"]).stdout.strip(),
        "valgrind": run(["valgrind", "--version"]).stdout.strip(),
    }


def write_miss_table(f, cases, key):
    """A table of misses per request by layer (`key` of each case's `caches`), one column per
    case, the layers by their largest count, those under 0.05 in every case left out."""
    f.write("| layer | " + " | ".join(c["name"] for c in cases) + " |\n|---|" + "---:|" * len(cases) + "\n")
    layers = sorted({l for c in cases for l in c["caches"][key]},
                    key=lambda l: -max(c["caches"][key].get(l, 0) for c in cases))
    for l in layers:
        if any(c["caches"][key].get(l, 0) >= 0.05 for c in cases):
            f.write(f"| {l} | " + " | ".join(f"{c['caches'][key].get(l, 0):.2f}" for c in cases) + " |\n")


def write_md(path, result):
    cases = result["cases"]
    names = [c["name"] for c in cases]
    layers = sorted({l for c in cases for l in c["callgrind"]["layers"]},
                    key=lambda l: -max(c["callgrind"]["layers"].get(l, 0) for c in cases))
    with open(path, "w") as f:
        f.write("# request-cost: what one request costs through the runtime, per layer\n\n")
        f.write("The runtime (`runtime::Accel`: socket, poll and epoll calls, its lock, stack passes, waits and "
                "wakeups, the shard, TCP, the NIC) serves request/response exchanges over the in-memory NIC pair; "
                "a client shard on a thread of its own (left out of every count) answers each response with the "
                "next request. Requests of "
                f"{cases[0]['request_bytes']} bytes, answers of {cases[0]['response_bytes']} bytes, TCP_NODELAY. "
                "Every figure is per request: (run with MANY requests - run with FEW) / (MANY - FEW), so setup "
                "and teardown cancel out. Instructions are callgrind's (user space only: the kernel's side of "
                "a system call is not in them; under valgrind the threads run one at a time). Not covered: the "
                "preload shim's hook entry (it needs the process-wide DPDK runtime) and a real NIC driver.\n\n")
        for c in cases:
            f.write(f"- **{c['name']}**: {c['what']}\n")
        if any(c["name"] == "epoll-1000" for c in cases):
            f.write("\nUnder valgrind the harness runs tens of times slower while the stack's timers keep real "
                    "time: with 1,000 connections an answer comes more than the delayed ACK's 40 ms after its "
                    "request, and the server sends a pure ACK first, about one per request (in a per-thread "
                    "profile of 8,000 requests, 8,664 segments came from `Connection::poll_transmit`, the "
                    "path of a segment without data). So epoll-1000's instructions and misses include a "
                    "segment per request that native runs do not send (their counters below: one segment each "
                    "way per request).\n")
        f.write("\n## Instructions per request, by layer (exclusive)\n\n")
        f.write("| layer | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n")
        for l in layers:
            f.write(f"| {l} | " + " | ".join(f"{c['callgrind']['layers'].get(l, 0):,.0f}" for c in cases) + " |\n")
        f.write("| **total** | " + " | ".join(f"**{c['callgrind']['instructions_per_request']:,.0f}**"
                                             for c in cases) + " |\n")
        if all(c.get("caches", {}).get("l1d_misses_by_layer") for c in cases):
            f.write("\n## L1 data misses per request, by layer (callgrind's cache model, exclusive)\n\n")
            f.write("The lines each layer touches that the 32 KiB L1 no longer held, beside its instructions: "
                    "the lab's time per layer (bench/lab_split.sh; docs/design-notes.md, \"The library's time "
                    "by layer, in the lab\") has both in it. The harness's requests follow each other closely "
                    "with no application work between them, so a real server misses more, in every layer.\n\n")
            write_miss_table(f, cases, "l1d_misses_by_layer")
        if all(c.get("caches", {}).get("l2_misses_by_layer") for c in cases):
            f.write("\n## Misses of a 1 MiB L2 per request, by layer (callgrind's cache model, data, exclusive)\n\n")
            f.write("The lines each layer touches that had left the L2 as well (this machine's L2 is 1 MiB per core; a "
                    "miss there goes to the L3 the cores share, or to memory). With a few connections the "
                    "harness's whole working set stays in the L2; with 1,000 (Redis at -c 1000) each request finds "
                    "its connection's lines gone from it: these are that case's cost beyond the instructions.\n\n")
            write_miss_table(f, cases, "l2_misses_by_layer")
            f.write(f"\nThe {L2_TOP_FUNCTIONS} functions with the most L2 data misses per request (inlined code is "
                    "charged to the function it was inlined into, and its layer to the file it came from):\n\n")
            for c in cases:
                f.write(f"- **{c['name']}**: " + "; ".join(f"`{t['function']}` ({t['layer']}) {t['per_request']:.2f}"
                                                         for t in c["caches"]["l2_top_functions"]) + "\n")
        f.write("\n## Inclusive instructions per request of chosen functions\n\n")
        f.write("| function (and what it calls) | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n")
        for k in cases[0]["callgrind"]["inclusive"]:
            f.write(f"| {k} | " + " | ".join(f"{c['callgrind']['inclusive'][k]:,.0f}" for c in cases) + " |\n")
        f.write("\n## Events per request\n\n")
        f.write("| event | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n")
        rows = [("stack passes by application threads (runtime counter)", lambda c: c["counters"]["inline_polls"]),
                ("stack passes poll() left out (runtime counter)", lambda c: c["counters"]["skipped_passes"]),
                ("stack passes by the stack thread (runtime counter)", lambda c: c["counters"]["stack_thread_polls"]),
                ("sleeps (runtime counter)", lambda c: c["counters"]["sleeps"]),
                ("wakeups asked for (runtime counter)", lambda c: c["counters"]["wakeups"]),
                ("TCP segments received / sent", lambda c: f"{c['counters']['tcp_rx_segments']:.2f} / "
                                                           f"{c['counters']['tcp_tx_segments']:.2f}"),
                ("tx kicks (the NIC's write: AF_XDP's sendto)", lambda c: c["counters"]["tx_kicks"]),
                ("rx fd clears (the NIC's read: not on AF_XDP)", lambda c: c["counters"]["rx_fd_clears"])]
        for k in cases[0]["callgrind"]["calls"]:
            rows.append((f"callgrind: {k}", lambda c, k=k: c["callgrind"]["calls"][k]["per_request"]))
        if all(c.get("caches") for c in cases):
            rows += [("callgrind's cache model: L1 data misses (32 KiB)", lambda c: c["caches"]["l1d_misses"]),
                     ("callgrind's cache model: misses of a 1 MiB L2, data", lambda c: c["caches"]["l2_misses"]),
                     ("callgrind's cache model: misses of a 1 MiB L2, instructions",
                      lambda c: c["caches"]["l2_instruction_misses"])]
        if all("server_context_switches" in c["counters"] for c in cases):
            rows.append(("context switches of the server's threads (perf stat)",
                         lambda c: c["counters"]["server_context_switches"]))
        if all(c["syscalls"] for c in cases):
            rows.append(("system calls of the server's threads (perf trace)", lambda c: sum(c["syscalls"].values())))
        for label, get in rows:
            f.write(f"| {label} | " + " | ".join(v if isinstance(v, str) else f"{v:.2f}" for v in map(get, cases))
                    + " |\n")
        if all(c["syscalls"] for c in cases):
            f.write("\n## System calls per request by name, the server's threads (perf trace -s, native)\n\n")
            calls = sorted({k for c in cases for k in c["syscalls"]},
                           key=lambda k: -max(c["syscalls"].get(k, 0) for c in cases))
            f.write("| system call | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n")
            for k in calls:
                f.write(f"| {k} | " + " | ".join(f"{c['syscalls'].get(k, 0):.2f}" for c in cases) + " |\n")
        f.write("\nOf the harness's own system calls: the tx kick (a `write` on the kick eventfd, one per transmit "
                "burst) stands for AF_XDP's `sendto` kick; the `read` that clears the rx eventfd "
                "(`rx_fd_clears`) has no counterpart on AF_XDP.\n")
        f.write("\n## Who makes the calls (callgrind, calls per request by caller)\n\n")
        for c in cases:
            f.write(f"- **{c['name']}**: " + "; ".join(
                f"{k}: " + ", ".join(f"`{fn}` {v:.2f}" for fn, v in d["callers"].items())
                for k, d in c["callgrind"]["calls"].items() if d["callers"]) + "\n")
        f.write("\n## Top functions per layer (exclusive instructions per request)\n\n")
        for c in cases:
            f.write(f"<details><summary>{c['name']}</summary>\n\n")
            for l, fns in c["callgrind"]["top_functions"].items():
                if fns:
                    f.write(f"- {l}: " + "; ".join(f"`{fn}` {v:,.0f}" for fn, v in fns.items()) + "\n")
            f.write("\n</details>\n\n")
        m = result["machine"]
        f.write(f"Command: `{m['command']}` ({result['few']} and {result['many']} requests per case)\n\n")
        f.write("Machine: " + ", ".join(f"{k} {v}" for k, v in m.items() if k != "command") + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer requests, results in cost-quick.*")
    a = ap.parse_args()
    few, many = (800, 2400) if a.quick else (4000, 12000)
    base = "bench/results/cost-quick" if a.quick else "bench/results/cost"
    command = "bench/request_cost.sh" + (" --quick" if a.quick else "")
    result = {"machine": machine(command), "few": few, "many": many, "cases": []}
    with tempfile.TemporaryDirectory(prefix="request-cost.") as tmp:
        for name, what, args in CASES:
            print(f"request-cost: {name}", file=sys.stderr)
            result["cases"].append({
                "name": name, "what": what, "args": args,
                "request_bytes": REQUEST_BYTES, "response_bytes": RESPONSE_BYTES,
                "counters": counters_and_switches(args, few, many),
                "callgrind": callgrind(args, few, many, tmp),
                "caches": cache_misses(args, few, many, tmp),
                "syscalls": syscalls(args, few, many, tmp),
            })
    json.dump(result, open(base + ".json", "w"), indent=1)
    write_md(base + ".md", result)
    print(open(base + ".md").read())


if __name__ == "__main__":
    main()
