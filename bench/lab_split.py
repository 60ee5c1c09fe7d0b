#!/usr/bin/env python3
"""Where the server's core goes per request, on the kernel path and under pronghorn, with the
host's speed measured around every run (run by bench/lab_split.sh; needs root, a build of
pronghorn, a C compiler, perf and the lab's tools: scripts/setup.sh).

Both paths' servers start once, in side a on core 1; their clients run in side b on core 0.
Rounds alternate the paths (kernel first in odd rounds, pronghorn first in even ones). In each
run the client starts, and after WARM_S seconds perf records every task on core 1
(cpu-clock, 4,000 samples a second, with call graphs) for RECORD_S seconds, and the server's own
request counter, read from side b before and after, says how many requests it served in that
window (the reads' interval is a little longer than the recording's: the count is scaled to the
recorded seconds); then the client is stopped.

Each busy sample (not the idle task) goes into one class (`CLASSES`):
- by the object its leaf frame is in, for user code: the application's binary, libpronghorn.so,
  or libc and the other libraries;
- by its task for the XDP veth's NAPI thread (`napi/*`, the nic model's stand-in for a NIC's
  interrupt work);
- for kernel code sending an interprocessor interrupt (the write to the interrupt controller,
  which in this VM is an exit to the hypervisor): that, whatever called it;
- by the innermost kernel entry on its call chain for other kernel code: an interrupt (by its
  vector; a sample where the interrupt's handler unmasks interrupts again was held while they
  were masked, and stands for the interrupt's delivery and the handler's masked part),
  a page fault, or a system call. A system call is classed by what it is for (sending, receiving,
  waiting in poll/epoll/select, futex) and by what ran inside it: a context switch, or network
  receive work (a veth delivers a frame inside its sender's call; softirqs run as a call
  re-enables them; RPS's hand-off of a frame to another core counts as receive work too). Under pronghorn the sends are the AF_XDP socket's kicks (`sendto`) and
  the eventfd writes that wake a sleeping thread.
A class's microseconds per request are its samples times 250 us over the requests. The IPIs
each core received in the window (/proc/interrupts: function calls, reschedules) are counted
per request too, and so are the frames the server's veth sent and received (ip -s link): the
kernel server hands the veth one GSO buffer per answer, pronghorn's AF_XDP socket (no
segmentation offload) one frame per segment, and the client's receive of each runs on the
server's core in the veth model.

libpronghorn.so's samples are split again by layer (`library_layer`: the layers of
bench/request_cost.sh's instruction counts, plus what only the lab runs, DPDK's AF_XDP driver
with its mbufs and mempool and the shim's hooked entries), and its functions with the most
samples are listed. The build inlines much of the stack into few functions: a
sample goes to the innermost function inlined at its address that is ours or DPDK's (the
library's debug information, read with binutils' addr2line), not to the function perf names.

The host's speed: bench/host_speed.c (a walk of dependent loads over 512 KiB) runs on core 1
just before and just after each run. A shared host can be slower for minutes; a run whose
whole core was slow shows it there too. When the two paths' runs walk at the same speed, a
difference in the application's own code per request is the path's doing, not the host's.

Workloads:
- mariadb: mariadbd --user=mysql, sysbench oltp_point_select with 16 threads (a thread per
  connection; issue 21's headline case); requests: the server's `Com_select`. With
  `--sysbench-test oltp_read_only` (or oltp_read_write) the requests are still the SELECTs
  (`Com_select`: 14 a read_only transaction, 10 of one statement row and 4 over 100 rows).
  `--sysbench-threads N` runs N client threads instead of 16 (1: one request at a time, where
  each request's wakeups show instead of a saturated core's batching).
- redis: redis-server, redis-benchmark GET -c 50 -d 3 (an epoll loop); requests: the server's
  `total_commands_processed`.

Writes bench/results/lab-split-MODEL[-BUILD].{json,md} (BUILD: a --build other than
target/release).
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
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_layers  # noqa: E402  (the layers of request_cost's instruction counts)
import core_split  # noqa: E402  (its reading of perf script's samples)
import lab_cost as L  # noqa: E402  (the lab's helpers: servers, addresses, cores, the machine line)

WARM_S, RECORD_S = 2, 5
RUN_S = WARM_S + RECORD_S + 10  # sysbench's --time: beyond the recording (the client is stopped after it)
PERIOD_US = 250  # perf's cpu-clock period: 4,000 samples a second of a busy core
PATHS = ["kernel", "pronghorn"]

CLASSES = [
    "application code",
    "libpronghorn.so",
    "libc and other libraries",
    "send calls",
    "send calls: receive work inside",
    "send calls: switching",
    "receive calls",
    "poll, epoll, select: waits and wakes",
    "poll, epoll, select: switching",
    "futex: waits and wakes",
    "futex: switching",
    "other system calls",
    "returns to user space: preemption, rseq",
    "IPIs sent: the write to the interrupt controller",
    "interrupts: time masked at entry (delivery and handler)",
    "interrupts: network receive (RPS)",
    "interrupts: reschedule",
    "interrupts: other",
    "NIC stand-in: the XDP veth's NAPI thread",
    "page faults",
    "kernel, other",
]

SYSCALL_GROUPS = {
    "send calls": {"sendto", "sendmsg", "sendmmsg", "write", "writev"},
    "receive calls": {"recvfrom", "recvmsg", "recvmmsg", "read", "readv"},
    "poll, epoll, select": {"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"},
    "futex": {"futex", "futex_waitv"},
}
# A system call's kernel entry, by the first of these on the chain from the leaf: the
# `__x64_sys_*` wrappers, or where a wrapper is inlined into the dispatcher, the function it calls.
SYSCALL_PREFIXES = ("__x64_sys_", "__do_sys_", "__se_sys_", "ksys_", "__sys_", "do_sys_")
SYSCALL_FUNCTIONS = {"do_epoll_wait": "epoll_wait", "do_futex": "futex", "core_sys_select": "select"}
SYSCALL_DISPATCH = ("x64_sys_call", "do_syscall_64")
RECEIVE_WORK = ("__netif_receive_skb", "netif_receive_skb", "process_backlog", "net_rx_action", "ip_rcv",
                "ipv6_rcv", "tcp_v4_rcv", "tcp_v6_rcv", "veth_poll", "xsk_rcv", "__xsk_rcv")
SWITCHING = ("__schedule", "schedule", "finish_task_switch")
# Sending an interprocessor interrupt: the write to the local APIC (x2APIC: an MSR write), in a
# VM an exit to the hypervisor. RPS's hand-off of a frame to another core ends in one, and so
# does a wakeup of a task on a busy core.
IPI_SENDING = ("x2apic_send_IPI", "__x2apic_send_IPI", "native_send_call_func", "native_smp_send_reschedule",
               "default_send_IPI", "kvm_send_ipi", "__send_ipi_mask", "apic_send_IPI")
# Where an interrupt's handler unmasks interrupts again: a sample there was held while they were
# masked (perf's cpu-clock sample is itself an interrupt), so it stands for the time of the
# interrupt's delivery and its handler's masked part, not for what follows.
UNMASKING = ("handle_softirqs", "__do_softirq", "irqentry_exit_to_user_mode", "irqentry_exit")
RETURNING = ("exit_to_user_mode", "syscall_exit_to_user_mode", "__rseq_handle_notify_resume")


# libpronghorn.so's leaf functions that bench/request_cost.sh's harness never runs (it has an
# in-memory NIC and no shim), by name, before the harness's layers (`callgrind_layers.layer_of`).
# DPDK is linked into the library: its AF_XDP driver, the mbuf and mempool code (the lock-free
# stack pool), and our C wrappers of its inline functions (`ph_*`, crates/nic's dpdk wrapper).
LIBRARY_OWN_LAYERS = [
    ("DPDK: AF_XDP driver, mbufs, mempool",
     r"^(rte_|__rte_|ph_|af_xdp_|eth_af_xdp|pull_umem_cq|kick_tx|reserve_fill_queue|stack_(en|de)queue|"
     r"common_ring_|bucket_|xsk_)"),
    ("the shim's hooked entries (recv, send, poll, ...)",
     r"^(preload::|(recv|send|recvfrom|sendto|recvmsg|sendmsg|recvmmsg|sendmmsg|read|write|readv|writev|"
     r"poll|ppoll|select|pselect|epoll_\w+|accept4?|connect|close|fcntl|ioctl|setsockopt|getsockopt)$)"),
]
# The harness's layer of the in-memory NIC is the DPDK port's Rust side here.
LIBRARY_RENAMED = {"nic: rx and tx (in-memory pair)": "nic: the port's Rust side (bursts, tx lanes)"}
LIBRARY_TOP = 12


def library_layer(sym):
    """The layer of a libpronghorn.so leaf function (`sym` as perf script names it, with a
    `.constprop.0`-like suffix or an address for a symbol it could not name)."""
    name = re.sub(r"\.(constprop|isra|part|cold)\.\d+.*$", "", sym)
    for layer, pattern in LIBRARY_OWN_LAYERS:
        if re.search(pattern, name):
            return layer
    if "::" not in name:
        return "other (DPDK's other code, unnamed)"
    layer = callgrind_layers.layer_of("libpronghorn.so", "", name)
    return LIBRARY_RENAMED.get(layer, layer)


def is_kernel(obj):
    return obj.startswith("[kernel")


def classify(comm, frames, app):
    """The class (one of `CLASSES`) of a busy sample of task `comm` with call chain `frames`
    (leaf first); `app` is the application binary's file name. None for the idle task."""
    if comm == "swapper" or comm.startswith("swapper/"):
        return None
    if comm.startswith("napi/"):
        return "NIC stand-in: the XDP veth's NAPI thread"
    if not frames:
        return "kernel, other"
    leaf_obj = frames[0][1]
    if not is_kernel(leaf_obj):
        name = os.path.basename(leaf_obj)
        if name == app:
            return "application code"
        if name.startswith("libpronghorn"):
            return "libpronghorn.so"
        return "libc and other libraries"
    if any(is_kernel(obj) and sym.startswith(IPI_SENDING) for sym, obj in frames[:4]):
        return "IPIs sent: the write to the interrupt controller"
    switching = receiving = softirq = returning = False
    for sym, obj in frames:
        if not is_kernel(obj):
            break
        softirq |= sym.startswith(("handle_softirqs", "__do_softirq"))
        returning |= sym.startswith(RETURNING)
        switching |= sym.startswith(SWITCHING)
        receiving |= sym.startswith(RECEIVE_WORK)
        if sym.startswith("asm_sysvec_") or sym.startswith("asm_common_interrupt"):
            if frames[0][0].startswith(UNMASKING):
                return "interrupts: time masked at entry (delivery and handler)"
            if sym == "asm_sysvec_reschedule_ipi":
                return "interrupts: reschedule"
            if receiving:
                return "interrupts: network receive (RPS)"
            if sym.startswith("asm_sysvec_call_function") and softirq:
                # RPS's interrupt: its softirq is the receive the interrupt asked for.
                return "interrupts: network receive (RPS)"
            return "interrupts: other"
        if sym.startswith("asm_exc_page_fault"):
            return "page faults"
        name = SYSCALL_FUNCTIONS.get(sym)
        if name is None and sym.startswith(SYSCALL_PREFIXES):
            name = next(sym.removeprefix(p) for p in SYSCALL_PREFIXES if sym.startswith(p))
        if name is None and sym.startswith(SYSCALL_DISPATCH):
            name = ""
        if name is not None:
            for group, names in SYSCALL_GROUPS.items():
                if name in names:
                    if group == "send calls" and receiving:
                        return "send calls: receive work inside"
                    if switching and group != "receive calls":
                        return f"{group}: switching"
                    if group in ("send calls", "receive calls"):
                        return group
                    return f"{group}: waits and wakes"
            # Past the call's handler, on the way back: a task woken meanwhile preempts here.
            return "returns to user space: preemption, rseq" if returning else "other system calls"
    return "kernel, other"


def split(lines, app, library=None):
    """Busy samples per class, and all busy samples, of a recording's `perf script` lines; with
    `library` (a Counter), libpronghorn.so's samples are counted there per (object, leaf
    address, leaf symbol) for `library_split`."""
    per = Counter()
    for comm, frames, leaf in core_split.samples(lines, leaf_address=True):
        c = classify(comm, frames, app)
        if c is not None:
            per[c] += 1
        if c == "libpronghorn.so" and library is not None:
            library[(frames[0][1], leaf, frames[0][0])] += 1
    return per, sum(per.values())


# Layers that say only that a function is not ours: an inlined frame in one of them is passed
# over for the frame it was inlined into.
GENERIC_LAYERS = ("other (std collections, thread start)", "other (DPDK's other code, unnamed)")


def charged_function(chain, symbol):
    """The function a library sample is charged to: the innermost of the functions inlined at
    its address (`chain`, innermost first, as addr2line -i gives them) whose layer is a named
    one (std's and core's helpers go to the function that called them), else perf's `symbol`."""
    for fn in chain:
        if library_layer(fn) not in GENERIC_LAYERS:
            return fn
    return symbol


def library_split(leaves, chains):
    """Samples per layer and per charged function of libpronghorn.so's `leaves` (a Counter of
    (object, address, symbol)), with `chains` mapping (object, address) to the functions
    inlined there, innermost first (empty or absent: perf's symbol stands)."""
    layers, functions = Counter(), Counter()
    for (obj, addr, symbol), n in leaves.items():
        fn = charged_function(chains.get((obj, addr), []), symbol)
        layers[library_layer(fn)] += n
        functions[fn] += n
    return layers, functions


def load_segments(readelf_out):
    """(file offset, virtual address, size) of each LOAD segment in `readelf -lW` output."""
    out = []
    for line in readelf_out.splitlines():
        words = line.split()
        if words and words[0] == "LOAD":
            out.append((int(words[1], 16), int(words[2], 16), int(words[4], 16)))
    return out


def to_vaddr(offset, segments):
    """The virtual address (what addr2line takes) of a file `offset` (what perf prints for a
    shared object's frame), or None outside every LOAD segment."""
    for off, vaddr, size in segments:
        if off <= offset < off + size:
            return offset - off + vaddr
    return None


def parse_addr2line(out):
    """`addr2line -a -i -f -C` output: {address: [function, ...]} (innermost first; `??` left
    out)."""
    chains, current = {}, None
    lines = out.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("0x"):
            current = chains.setdefault(int(line, 16), [])
            i += 1
            continue
        if current is not None and line != "??":
            current.append(line)
        i += 2  # a function's line, then its file:line
    return chains


def resolve_chains(leaves):
    """The functions inlined at each library leaf address, from the object's debug information
    (binutils' readelf and addr2line); {} where they are missing or fail: perf's symbols stand."""
    chains = {}
    by_obj = {}
    for obj, addr, _ in leaves:
        if addr is not None:
            by_obj.setdefault(obj, set()).add(addr)
    for obj, addrs in by_obj.items():
        try:
            segments = load_segments(subprocess.run(["readelf", "-lW", obj], capture_output=True, text=True,
                                                    check=True).stdout)
            vaddrs = {a: to_vaddr(a, segments) for a in addrs}
            query = "\n".join(hex(v) for v in vaddrs.values() if v is not None) + "\n"
            out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", obj], input=query, capture_output=True,
                                 text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        found = parse_addr2line(out)
        for a, v in vaddrs.items():
            if v is not None and v in found:
                chains[(obj, a)] = found[v]
    return chains


def parse_host_speed(out):
    m = re.search(r"^ns_per_step ([\d.]+)$", out, re.M)
    if not m:
        raise ValueError(f"no ns_per_step line in {out!r}")
    return float(m.group(1))


# The interprocessor interrupts counted per CPU in /proc/interrupts: function calls (RPS's
# hand-off, among others) and reschedules (a wakeup of a task on a busy core).
IPI_ROWS = {"CAL": "function calls", "RES": "reschedules"}


def parse_ipis(text):
    """The IPI_ROWS rows of /proc/interrupts: {row: [count of CPU0, CPU1, ...]}."""
    cpus = len(text.splitlines()[0].split())
    out = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name.strip() in IPI_ROWS:
            out[name.strip()] = [int(v) for v in rest.split()[:cpus]]
    missing = set(IPI_ROWS) - set(out)
    if missing:
        raise ValueError(f"no {', '.join(sorted(missing))} row in /proc/interrupts")
    return out


def ipis_per_request(before, after, served):
    """IPIs each core received per request between two parse_ipis readings: {"core N: what": n}."""
    return {f"core {cpu}: {IPI_ROWS[row]}": round((after[row][cpu] - before[row][cpu]) / served, 3)
            for row in IPI_ROWS for cpu in range(len(before[row]))}


# The server's end of each path's veth, in side a (`pronghorn lab up`): the kernel server's
# addresses are on k0; a0 is the interface pronghorn's DPDK port owns.
SERVER_VETH = {"kernel": "{}-k0", "pronghorn": "{}-a0"}


def parse_link_packets(text):
    """(frames sent, frames received) by one interface, from `ip -s -j link show dev X`. The
    veth counts what crosses it: a kernel GSO buffer once, an AF_XDP frame once."""
    stats = json.loads(text)[0]["stats64"]
    return stats["tx"]["packets"], stats["rx"]["packets"]


def link_packets(lab, path):
    dev = SERVER_VETH[path].format(lab.prefix)
    return parse_link_packets(L.sh(["ip", "-n", f"{lab.prefix}-a", "-s", "-j", "link", "show", "dev", dev]).stdout)


def frames_per_request(before, after, served):
    """Frames the server's veth sent and received per request between two link_packets readings."""
    return {"sent": round((after[0] - before[0]) / served, 3), "received": round((after[1] - before[1]) / served, 3)}


def parse_status_value(out, name):
    """A counter from `SHOW GLOBAL STATUS` (tab-separated) or `INFO` (name:value) output."""
    m = re.search(rf"^{re.escape(name)}[\t:](\d+)\s*$", out, re.M)
    if not m:
        raise ValueError(f"no {name} in {out!r}")
    return int(m.group(1))


def binary_name(command):
    """The file name perf gives the binary that `command` runs (Debian's redis-server is a
    link to redis-check-rdb)."""
    return os.path.basename(os.path.realpath(shutil.which(command) or command))


class Mariadb:
    app = binary_name("mariadbd")

    def __init__(self, lab, tmp, server_args=(), test="oltp_point_select", threads=16):
        self.lab, self.tmp, self.server_args, self.test = lab, tmp, list(server_args), test
        self.threads = threads
        self.init = os.path.join(tmp, "init.sql")
        with open(self.init, "w") as f:
            f.write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n"
                    "CREATE DATABASE IF NOT EXISTS sbtest;\n")

    def sysbench(self, path):
        return ["sysbench", "--db-driver=mysql", f"--mysql-host={L.ADDR[path]}", "--mysql-port=3306",
                "--mysql-user=bench", "--mysql-db=sbtest", "--tables=1", "--table-size=10000"]

    def start(self, path):
        home = os.path.join(self.tmp, f"mariadb-{path}")
        L.new_datadir(home)
        log = open(os.path.join(self.tmp, f"mariadb-{path}.log"), "w")
        server = L.mariadb_server(self.lab, path, home, self.init, log, self.server_args)
        L.sh(self.lab.client(self.sysbench(path) + [self.test, "prepare"]))
        L.sh(self.lab.client(self.sysbench(path) + ["--threads=16", "--time=2", self.test, "run"]))
        return server

    def client(self, path):
        return self.lab.client(self.sysbench(path) + [f"--threads={self.threads}", f"--time={RUN_S}", self.test, "run"])

    def served(self, path):
        out = L.sh(self.lab.client(["mariadb", "-h", L.ADDR[path], "-u", "bench", "-N", "-B", "-e",
                                    "SHOW GLOBAL STATUS LIKE 'Com_select'"])).stdout
        return parse_status_value(out, "Com_select")


class Redis:
    app = binary_name("redis-server")

    def __init__(self, lab, tmp):
        self.lab, self.tmp = lab, tmp

    def start(self, path):
        addr = L.ADDR[path]
        server = L.redis_server(self.lab, path, open(os.path.join(self.tmp, f"redis-{path}.log"), "w"))
        L.sh(self.lab.client(["redis-benchmark", "-h", addr, "-c", "50", "-d", "3", "-t", "set", "-n", "100000", "-q"]))
        return server

    def client(self, path):
        # Longer than the run: stopped when the run's time is up.
        return self.lab.client(["redis-benchmark", "-h", L.ADDR[path], "-c", "50", "-d", "3", "-t", "get",
                                "-n", "100000000", "-q"])

    def served(self, path):
        out = L.sh(self.lab.client(["redis-cli", "-h", L.ADDR[path], "info", "stats"])).stdout.replace("\r", "")
        return parse_status_value(out, "total_commands_processed")


WORKLOADS = {"mariadb": Mariadb, "redis": Redis}
SYSBENCH_TESTS = ["oltp_point_select", "oltp_read_only", "oltp_read_write"]


def host_speed(exe):
    return parse_host_speed(L.sh(["taskset", "-c", L.SERVER_CPU, exe]).stdout)


def measure(work, path, speed_exe, tmp, keep=None):
    """One run of `work`'s client against `path`: the core's samples per class over the
    requests served in the recorded window, and the host's speed before and after."""
    before_speed = host_speed(speed_exe)
    client = subprocess.Popen(work.client(path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(WARM_S)
        data = os.path.join(tmp, "perf.data")
        frames_before = link_packets(work.lab, path)
        served_before, start = work.served(path), time.monotonic()
        ipis_before = parse_ipis(open("/proc/interrupts").read())
        L.sh(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-c", str(PERIOD_US * 1000), "-a", "-C", L.SERVER_CPU,
              "-o", data, "--", "sleep", str(RECORD_S)])
        ipis_after = parse_ipis(open("/proc/interrupts").read())
        # The two reads span perf's start and stop as well as the recorded seconds: the
        # requests of the recording are their share of what was served in between.
        served_between = work.served(path) - served_before
        served = served_between * RECORD_S / (time.monotonic() - start)
        frames_after = link_packets(work.lab, path)
    finally:
        # Its results are not read: the server's counter said what was served.
        client.terminate()
        client.wait()
    after_speed = host_speed(speed_exe)
    if served <= 0:
        raise SystemExit(f"lab_split: the {path} server served nothing while perf recorded")
    script = subprocess.Popen(["perf", "script", "-F", "comm,pid,ip,sym,dso", "-i", data], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    leaves = Counter()
    per, busy = split(script.stdout, work.app, leaves)
    if script.wait() != 0 or busy == 0:
        raise SystemExit(f"lab_split: perf script read no busy sample of the {path} run")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.move(data, os.path.join(keep, f"{work.app}-{path}-{time.strftime('%H%M%S')}.data"))
    else:
        os.remove(data)
    us = {c: round(per.get(c, 0) * PERIOD_US / served, 3) for c in CLASSES}
    layers, functions = library_split(leaves, resolve_chains(leaves))
    lib = {part: {k: round(n * PERIOD_US / served, 3) for k, n in counts.items()}
           for part, counts in (("layers", layers), ("functions", functions))}
    return {"path": path, "requests_per_s": round(served / RECORD_S), "busy_us": round(busy * PERIOD_US / served, 3),
            "busy_percent": round(100 * busy * PERIOD_US / (RECORD_S * 1e6), 1), "us": us,
            "ipis": ipis_per_request(ipis_before, ipis_after, served_between),
            "frames": frames_per_request(frames_before, frames_after, served_between),
            "host_ns_per_step": [before_speed, after_speed], "library": lib}


def summarize(runs):
    """Per path: the median over rounds of each class's us per request, and of the busy total."""
    out = {}
    for path in PATHS:
        mine = [r for r in runs if r["path"] == path]
        out[path] = {"busy_us": statistics.median(r["busy_us"] for r in mine),
                     "us": {c: statistics.median(r["us"][c] for r in mine) for c in CLASSES},
                     "ipis": {k: statistics.median(r["ipis"][k] for r in mine) for k in mine[0]["ipis"]},
                     # Runs recorded before the frames were counted have none.
                     "frames": median_of_keys([r["frames"] for r in mine if "frames" in r]),
                     "library": {part: median_of_keys([r.get("library", {}).get(part, {}) for r in mine])
                                 for part in ("layers", "functions")}}
    return out


def median_of_keys(dicts):
    """Per key of any of `dicts`, the median over all of them (a key one lacks counts 0 there)."""
    keys = sorted({k for d in dicts for k in d})
    return {k: statistics.median(d.get(k, 0.0) for d in dicts) for k in keys}


def write_md(f, name, result):
    s = result["summary"]
    f.write(f"## {name}\n\n")
    f.write("| class | kernel path, us per request | pronghorn, us per request | pronghorn - kernel |\n|---|---:|---:|---:|\n")
    for c in CLASSES:
        k, p = s["kernel"]["us"][c], s["pronghorn"]["us"][c]
        if k >= 0.05 or p >= 0.05:
            f.write(f"| {c} | {k:.2f} | {p:.2f} | {p - k:+.2f} |\n")
    k, p = s["kernel"]["busy_us"], s["pronghorn"]["busy_us"]
    f.write(f"| **the core, busy** | **{k:.2f}** | **{p:.2f}** | **{p - k:+.2f}** |\n\n")
    f.write("| IPIs received per request (/proc/interrupts; the server is core 1) | kernel path | pronghorn |\n"
            "|---|---:|---:|\n")
    for key in s["kernel"]["ipis"]:
        f.write(f"| {key} | {s['kernel']['ipis'][key]:.2f} | {s['pronghorn']['ipis'][key]:.2f} |\n")
    f.write("\n")
    k, p = s["kernel"].get("frames"), s["pronghorn"].get("frames")
    if k and p:
        f.write("| frames per request on the server's veth (ip -s link: a kernel GSO buffer counts once) | "
                "kernel path | pronghorn |\n|---|---:|---:|\n")
        for key in ("sent", "received"):
            f.write(f"| {key} | {k[key]:.2f} | {p[key]:.2f} |\n")
        f.write("\n")
    write_library_md(f, s["pronghorn"]["library"])
    f.write("| round | path | requests/s (recorded window) | core busy | busy us per request | "
            "host speed before / after (ns per step) |\n|---:|---|---:|---:|---:|---|\n")
    for i, r in enumerate(result["runs"]):
        f.write(f"| {i // 2 + 1} | {r['path']} | {r['requests_per_s']:,} | {r['busy_percent']}% | {r['busy_us']:.2f} | "
                f"{r['host_ns_per_step'][0]:.2f} / {r['host_ns_per_step'][1]:.2f} |\n")
    f.write("\n")


def write_library_md(f, library):
    """libpronghorn.so's microseconds per request by layer, and its top functions (medians)."""
    layers, functions = library["layers"], library["functions"]
    if not layers:
        return
    f.write("| libpronghorn.so by layer (of the function each sample is charged to) | pronghorn, us per request |\n"
            "|---|---:|\n")
    for layer, us in sorted(layers.items(), key=lambda kv: -kv[1]):
        if us >= 0.01:
            f.write(f"| {layer} | {us:.2f} |\n")
    f.write(f"| **all of libpronghorn.so (the medians' sum)** | **{sum(layers.values()):.2f}** |\n\n")
    f.write(f"| libpronghorn.so's {LIBRARY_TOP} functions with the most samples (inlined ones apart) | layer "
            "| us per request |\n|---|---|---:|\n")
    for fn, us in sorted(functions.items(), key=lambda kv: -kv[1])[:LIBRARY_TOP]:
        f.write(f"| `{fn}` | {library_layer(fn)} | {us:.2f} |\n")
    f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="sp", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--model", required=True, choices=["veth", "nic", "dma"],
                    help="the lab model the wrapper set (`pronghorn lab model`); checked against the environment")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default="mariadb,redis", help="a comma-separated list of: " + ", ".join(WORKLOADS))
    ap.add_argument("--build", default="target/release",
                    help="the directory of the pronghorn and libpronghorn.so measured (target/pgo: the PGO build)")
    ap.add_argument("--keep-profiles", metavar="DIR", help="keep each run's perf.data in DIR")
    ap.add_argument("--mariadbd-arg", action="append", default=[], metavar="ARG",
                    help="one more mariadbd option on both paths, e.g. --mariadbd-arg=--thread-handling=pool-of-threads "
                         "(repeatable; needs --tag)")
    ap.add_argument("--sysbench-test", default="oltp_point_select", choices=SYSBENCH_TESTS,
                    help="the mariadb workload's sysbench test (another than oltp_point_select needs --tag)")
    ap.add_argument("--sysbench-threads", type=int, default=16, metavar="N",
                    help="the mariadb workload's client threads (another number than 16 needs --tag)")
    ap.add_argument("--tag", help="a name added to the results' file names (lab-split-MODEL[-BUILD]-TAG)")
    a = ap.parse_args()
    if a.sysbench_threads < 1:
        raise SystemExit(f"lab_split: --sysbench-threads must be 1 or more, got {a.sysbench_threads}")
    if a.sysbench_threads != 16 and not a.tag:
        raise SystemExit(f"lab_split: --sysbench-threads {a.sysbench_threads} changes the workload: give --tag NAME "
                         "so that its results do not overwrite the 16 threads'")
    if a.mariadbd_arg and not a.tag:
        raise SystemExit("lab_split: --mariadbd-arg changes the server: give --tag NAME so that its results "
                         "do not overwrite the default server's")
    if a.sysbench_test != "oltp_point_select" and not a.tag:
        raise SystemExit(f"lab_split: --sysbench-test {a.sysbench_test} changes the workload: give --tag NAME so "
                         "that its results do not overwrite point_select's")
    if os.environ.get("PRONGHORN_LAB_MODEL") != a.model:
        raise SystemExit(f"lab_split: run under `pronghorn lab model {a.model}` (bench/lab_split.sh does)")
    names = a.workloads.split(",")
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"lab_split: unknown workload {n!r} in --workloads (known: {', '.join(WORKLOADS)})")
    L.EXE = os.path.abspath(os.path.join(a.build, "pronghorn"))
    lab = L.Lab(a.prefix)
    results = {}
    with tempfile.TemporaryDirectory(prefix="lab-split-") as tmp:
        os.chmod(tmp, 0o755)
        speed_exe = os.path.join(tmp, "host_speed")
        L.sh(["cc", "-O2", "-o", speed_exe, "bench/host_speed.c"])
        for name in names:
            work = (Mariadb(lab, tmp, a.mariadbd_arg, a.sysbench_test, a.sysbench_threads) if name == "mariadb"
                    else WORKLOADS[name](lab, tmp))
            servers = []
            try:
                for path in PATHS:
                    servers.append(work.start(path))
                runs = []
                for r in range(a.rounds):
                    for path in (PATHS if r % 2 == 0 else PATHS[::-1]):
                        run = measure(work, path, speed_exe, tmp, a.keep_profiles)
                        print(f"{name} round {r + 1}/{a.rounds} {path}: {run['requests_per_s']:,} requests/s, "
                              f"{run['busy_us']:.1f} us of core 1 per request, host {run['host_ns_per_step']} ns/step",
                              flush=True)
                        runs.append(run)
                results[name] = {"runs": runs, "summary": summarize(runs)}
            finally:
                for s in servers:
                    s.terminate()
                    s.wait()
    args = " ".join(sys.argv[1:])
    build_name = os.path.basename(os.path.normpath(a.build))
    machine = L.machine(f"bench/lab_split.sh {args}".strip(), build=a.build,
                        model=os.environ.get("PRONGHORN_LAB_MODEL_DESCRIPTION", a.model))
    base = f"bench/results/lab-split-{a.model}" + ("" if build_name == "release" else f"-{build_name}")
    base += f"-{a.tag}" if a.tag else ""
    with open(base + ".json", "w") as f:
        json.dump({"rounds": a.rounds, "workloads": results, "machine": machine}, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write(f"# Where the server's core goes per request, lab model {a.model}\n\n")
        f.write(__doc__.split("\n\n", 1)[1].rsplit("\n\nWrites", 1)[0] + "\n\n")
        f.write(f"Build: {a.build}. Medians over {a.rounds} rounds; classes under 0.05 us on both paths left out.\n\n")
        if a.mariadbd_arg:
            f.write(f"mariadbd's options added on both paths: `{' '.join(a.mariadbd_arg)}`.\n\n")
        if a.sysbench_test != "oltp_point_select":
            f.write(f"The mariadb workload runs sysbench's {a.sysbench_test}; its requests are the SELECTs "
                    "(`Com_select`), not transactions.\n\n")
        if a.sysbench_threads != 16:
            f.write(f"sysbench runs {a.sysbench_threads} client threads (not 16).\n\n")
        for name in names:
            write_md(f, name, results[name])
        L.write_machine(f, machine)
    print(open(base + ".md").read())


if __name__ == "__main__":
    main()
