#!/usr/bin/env python3
"""Instructions per layer of pronghorn from callgrind output files.

Reads callgrind's output format directly (not callgrind_annotate's text): every cost line is
attributed to the source file its instructions come from (callgrind's fi=/fe= follow inlined
code), so TCP code inlined into a shard function counts as TCP. Code with no file of ours (the
standard library inlined anywhere, or no debug information) counts for the crate and module
of the function it was compiled into, read from the demangled symbol. A few functions form
layers of their own whatever calls them: copies (memcpy and friends), allocation (malloc, free
and Rust's allocator shims), the mutex, clock reads and libc's system-call wrappers (the
instructions on our side of a system call; the kernel's are not counted by callgrind).

  callgrind_layers.py BEFORE.out AFTER.out --requests N   layers of (AFTER - BEFORE) / N as JSON
  callgrind_layers.py RUN.out                              layers of one run as JSON

The difference of two runs that differ only in the number of requests leaves out setup and
teardown: what remains is the cost of N requests.
"""

import argparse
import json
import re
import sys
from collections import defaultdict

# (layer, prefixes of a module path "crate::module::..."), first match wins.
MODULE_LAYERS = [
    ("runtime: socket, poll and epoll calls", ["runtime::socket", "runtime::poll", "runtime::epoll",
                                               "runtime::fdtable", "runtime::sockopt", "runtime::datagram",
                                               "runtime::urgent", "runtime::lib", "runtime::real"]),
    ("runtime: wait and wakeup", ["runtime::wait"]),
    ("runtime: lock", ["std::sys::sync", "std::sync", "runtime::lockstat"]),
    ("runtime: stack pass and dispatch", ["runtime::accel", "runtime::shards", "runtime::observe"]),
    ("runtime: other", ["runtime"]),
    ("stack: timers", ["stack::shard::timer"]),
    ("stack: connection table, neighbors, routes", ["stack::shard::table", "stack::shard::neighbor",
                                                    "stack::shard::route", "stack::ports", "stack::iface"]),
    ("stack: shard (demux, segments in and out, socket API)", ["stack"]),
    ("tcp: input (segments, ACKs, recovery)", ["tcp::connection::input", "tcp::connection::recovery",
                                               "tcp::connection::ecn", "tcp::rack", "tcp::sent",
                                               "tcp::ranges", "tcp::congestion", "tcp::connection::rtt"]),
    ("tcp: output", ["tcp::connection::output", "tcp::connection::options", "tcp::segment"]),
    ("tcp: socket buffers (application side)", ["tcp::connection::app", "tcp::connection::recv",
                                                "tcp::connection::send", "tcp::ring", "tcp::spare"]),
    ("tcp: other (timers, state)", ["tcp"]),
    ("wire: parsing, emitting, checksums", ["wire"]),
    ("nic: rx and tx (in-memory pair)", ["nic"]),
    ("harness: application loop and test NIC", ["request_cost"]),
]

# (layer, regex on the function name), checked before the module rules.
FUNCTION_LAYERS = [
    ("copies (memcpy, memmove, memset)", r"^__(memcpy|memmove|memset|mempcpy)_|^(memcpy|memmove|memset)$"),
    ("allocation (malloc, free, Rust allocator)",
     r"^(malloc|free|realloc|calloc|cfree|_int_malloc|_int_free|_int_realloc|malloc_consolidate|sysmalloc.*"
     r"|unlink_chunk.*|alloc_perturb|tcache_.*|__libc_(malloc|free|realloc|calloc)|mmap|munmap|munmap_chunk)$"
     r"|^__rustc::__r(ust|dl)_(alloc|dealloc|realloc|alloc_zeroed|no_alloc_shim_is_unstable.*)$"
     r"|^alloc::raw_vec::|^<alloc::raw_vec::"),
    ("clock reads", r"^clock_gettime|^__clock_gettime|Timespec>::(now|sub_timespec)|^<std::time::Instant>::|^__vdso_"),
    ("runtime: lock", r"^<std::sys::sync::mutex::|^pthread_mutex_"),
    ("libc: system-call wrappers", r"^(syscall|poll|__poll|read|write|__libc_read|__libc_write|epoll_wait"
                                   r"|eventfd_read|eventfd_write|__pthread_(enable|disable)_asynccancel)$"),
]

# Our crates' sources: crates/<name>/src/<module path>.rs, and the harness.
FILE_MODULE = [
    (re.compile(r"/crates/([a-z_]+)/src/(.*)\.rs$"), lambda m: module_of(m.group(1), m.group(2))),
    (re.compile(r"/bench/src/bin/request_cost\.rs$"), lambda m: "request_cost"),
    (re.compile(r"library/std/src/(sys/sync/.*|sync/.*)\.rs$"), lambda m: "std::" + m.group(1).replace("/", "::")),
]

CRATES = ("runtime", "stack", "tcp", "wire", "nic", "request_cost", "std::sys::sync", "std::sync")
SYMBOL_CRATE = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(c) for c in CRATES) + r")((?:::[a-z_][a-z0-9_]*)*)")


def module_of(crate, path):
    """crates/tcp/src/connection/input.rs -> tcp::connection::input; lib.rs and mod.rs name
    their directory."""
    parts = [p for p in path.split("/") if p not in ("lib", "mod")]
    return "::".join([crate] + parts)


def module_from_symbol(fn):
    """The crate and module of a demangled Rust symbol: `<stack::shard::Shard<N>>::poll` ->
    stack::shard::Shard (the caller's prefixes match modules, so a type name at the end is
    harmless)."""
    m = SYMBOL_CRATE.search(fn)
    return m.group(1) + m.group(2) if m else None


def layer_of(obj, file, fn):
    for layer, pattern in FUNCTION_LAYERS:
        if re.search(pattern, fn):
            return layer
    module = None
    for rx, to_module in FILE_MODULE:
        m = rx.search(file)
        if m:
            module = to_module(m)
            break
    if module is None:
        module = module_from_symbol(fn)
    if module is not None:
        for layer, prefixes in MODULE_LAYERS:
            if any(module == p or module.startswith(p + "::") for p in prefixes):
                return layer
    if "libc.so" in obj or "ld-linux" in obj:
        return "libc: other"
    return "other (std collections, thread start)"


class Profile:
    """Exclusive instructions per (object, file, function), and per (caller, callee) the
    instructions of calls (for inclusive costs of chosen functions)."""

    def __init__(self):
        self.exclusive = defaultdict(int)
        self.calls = defaultdict(int)
        self.call_counts = defaultdict(int)
        self.summary = 0
        # The file's events (its `events:` line), and per (object, file, function) the
        # exclusive count of each when there are more than one (a cache simulation's).
        self.events = ["Ir"]
        self.exclusive_events = defaultdict(lambda: [0] * len(self.events))

    def calls_into(self, pattern):
        """Calls made into functions matching `pattern` from functions that do not match it, per
        caller."""
        rx = re.compile(pattern)
        out = defaultdict(int)
        for (caller, callee), n in self.call_counts.items():
            if rx.search(callee) and not rx.search(caller):
                out[caller] += n
        return out

    def inclusive(self, pattern):
        """Instructions spent in functions matching `pattern` and everything they call, counted
        once (calls between two matching functions are not added twice)."""
        rx = re.compile(pattern)
        own = sum(c for (_, _, fn), c in self.exclusive.items() if rx.search(fn))
        out = sum(c for (caller, callee), c in self.calls.items() if rx.search(caller) and not rx.search(callee))
        return own + out


def parse(path):
    """Reads a callgrind output file (format version 1, the `Ir` event first)."""
    p = Profile()
    names = {"ob": {}, "fl": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
               "fn": "fn", "cfn": "fn"}
    obj = fl = cur_file = fn = ""
    callee = None
    in_call = False
    spec = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn)=(.*)$")
    compressed = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def name(kind, value):
        m = compressed.match(value)
        if not m:
            return value
        table = names[kind_of[kind]]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "?")

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            m = spec.match(line)
            if m:
                kind, value = m.group(1), name(m.group(1), m.group(2))
                if kind == "ob":
                    obj = value
                elif kind == "fl":
                    fl = cur_file = value
                elif kind in ("fi", "fe"):
                    cur_file = value
                elif kind == "fn":
                    fn, cur_file = value, fl
                elif kind == "cfn":
                    callee = value
                continue
            if line.startswith("calls="):
                in_call = True
                p.call_counts[(fn, callee)] += int(line[len("calls="):].split()[0])
                continue
            if line.startswith("events:"):
                p.events = line.split()[1:]
                continue
            if line.startswith("summary:") or line.startswith("totals:"):
                p.summary = max(p.summary, int(line.split()[1]))
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                fields = line.split()
                ir = int(fields[1]) if len(fields) > 1 else 0
                if in_call:
                    p.calls[(fn, callee)] += ir
                    in_call = False
                else:
                    p.exclusive[(obj, cur_file, fn)] += ir
                    if len(p.events) > 1:
                        # Events left off the end of a line are zero.
                        acc = p.exclusive_events[(obj, cur_file, fn)]
                        for i, v in enumerate(fields[1:len(p.events) + 1]):
                            acc[i] += int(v)
    return p


def totals(path):
    """The whole run's count of each event of a callgrind output file (its `events:` line names
    them, its `summary:` or `totals:` line counts them), e.g. {"Ir": .., "D1mr": .., ...}."""
    names, counts = None, None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:") or line.startswith("totals:"):
                counts = [int(v) for v in line.split()[1:]]
    if names is None or counts is None:
        raise ValueError(f"{path}: no events or totals line")
    return dict(zip(names, counts + [0] * (len(names) - len(counts))))


def layers(profile):
    """Instructions per layer, and per layer per function."""
    out, by_fn = defaultdict(int), defaultdict(lambda: defaultdict(int))
    for (obj, file, fn), ir in profile.exclusive.items():
        layer = layer_of(obj, file, fn)
        out[layer] += ir
        by_fn[layer][fn] += ir
    return out, by_fn


def layer_events(profile, wanted):
    """Per layer, the exclusive sum of the events named in `wanted` (e.g. D1mr and D1mw: the
    L1 data misses) of a profile read from a cache simulation's output."""
    out = defaultdict(int)
    for (layer, _), n in function_events(profile, wanted).items():
        out[layer] += n
    return out


def function_events(profile, wanted):
    """Per (layer, function), the exclusive sum of the events named in `wanted`: where a
    layer's misses are, by the function the inlined code was charged to."""
    idx = [profile.events.index(e) for e in wanted if e in profile.events]
    out = defaultdict(int)
    for (obj, file, fn), counts in profile.exclusive_events.items():
        out[(layer_of(obj, file, fn), fn)] += sum(counts[i] for i in idx)
    return out


# Entry points whose inclusive cost is reported (regex on the function name).
INCLUSIVE = {
    "socket calls (recv, send, poll, epoll_wait) and all below":
        r"^runtime::(socket|poll|epoll::calls)::<impl runtime::accel::Accel<N>>::(recv|recv_vectored|send|send_vectored"
        r"|send_marked|poll|epoll_wait)$",
    "stack passes (Runtime::poll_one: NIC, shard, TCP, dispatch)": r"^runtime::accel::Runtime<N>::poll_one$",
    "shard passes (Shard::poll: NIC, shard, TCP)": r"^stack::shard::Shard<N>::poll$",
    "flushes (Runtime::flush_shard)": r"^runtime::accel::Runtime<N>::flush_shard$",
    "dispatch (Runtime::dispatch: readiness changes to wakeups)": r"^runtime::accel::Runtime<N>::dispatch$",
    "waiting (wait::sleep: the user side of futex and poll sleeps)": r"^runtime::wait::sleep$",
}


# Calls counted per request (regex on the callee), with their callers.
CALLS = {
    "shard passes (Shard::poll calls)": r"^stack::shard::Shard<N>::poll$",
    # The allocator shims and Vec's growth count as the allocator: their callers are named.
    "allocations (malloc, calloc, realloc)": r"^(malloc|calloc|realloc|__rustc::__r(ust|dl)_(alloc|alloc_zeroed|realloc)"
                                             r"|alloc::raw_vec::.*)$",
    "frees": r"^(free|__rustc::__r(ust|dl)_dealloc)$",
    "futex system calls (syscall())": r"^syscall$",
    "poll(2) calls": r"^poll$",
    "read(2) calls": r"^read$",
    "write(2) calls": r"^write$",
}


def report(before, after, requests, top=5):
    (lb, fb), (la, fa) = (layers(before) if before else ({}, {})), layers(after)
    names = sorted(set(lb) | set(la))
    per = {n: (la.get(n, 0) - lb.get(n, 0)) / requests for n in names}
    functions = {}
    for n in names:
        after_fns, before_fns = fa.get(n, {}), fb.get(n, {})
        diff = {f: (after_fns.get(f, 0) - before_fns.get(f, 0)) / requests for f in set(after_fns) | set(before_fns)}
        functions[n] = {f: round(v, 1) for f, v in sorted(diff.items(), key=lambda kv: -kv[1])[:top] if v >= 1}
    total = (after.summary - (before.summary if before else 0)) / requests
    inclusive = {k: (after.inclusive(rx) - (before.inclusive(rx) if before else 0)) / requests
                 for k, rx in INCLUSIVE.items()}
    return {
        "instructions_per_request": round(total, 1),
        "layers": {n: round(v, 1) for n, v in sorted(per.items(), key=lambda kv: -kv[1])},
        "inclusive": {k: round(v, 1) for k, v in inclusive.items()},
        "top_functions": functions,
        "calls": {k: calls_per_request(before, after, rx, requests, top) for k, rx in CALLS.items()},
    }


def calls_per_request(before, after, pattern, requests, top):
    a, b = after.calls_into(pattern), (before.calls_into(pattern) if before else {})
    diff = {c: (a.get(c, 0) - b.get(c, 0)) / requests for c in set(a) | set(b)}
    callers = {c: round(v, 3) for c, v in sorted(diff.items(), key=lambda kv: -kv[1])[:top] if v > 0.001}
    return {"per_request": round(sum(diff.values()), 3), "callers": callers}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="RUN.out, or BEFORE.out AFTER.out")
    ap.add_argument("--requests", type=float, default=1.0, help="requests in AFTER minus those in BEFORE")
    a = ap.parse_args()
    if len(a.files) > 2:
        ap.error("one or two files")
    before = parse(a.files[0]) if len(a.files) == 2 else None
    after = parse(a.files[-1])
    json.dump(report(before, after, a.requests), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
