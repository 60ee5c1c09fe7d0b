#!/usr/bin/env python3
"""Where one core's time went, from `perf record -e cpu-clock -g -C CORE` of a server: each
sample is put in one class by its thread's name and its call chain, the first that matches:

  pronghorn      a pronghorn thread (`pronghorn-*`), the XDP veth's NAPI kthread (`napi/*`), or
                 a frame in libpronghorn.so (its socket calls, the runtime, the stack, a fork's
                 or an exit's handling, the AF_XDP kicks it makes)
  kernel net     a kernel frame of the kernel's socket, TCP/IP, packet or event-wait code
                 (`pronghorn bench --sample-server`'s `NET_PREFIXES`, read from its source)
  fork           clone (`copy_process`)
  exit           a process's exit (`do_exit`, `exit_mmap`)
  page faults    `asm_exc_page_fault`
  rest           everything else: the application's code, libc, other system calls

So on the kernel path "kernel net" is what a network stack could take over, and the ratio
total / (total - kernel net) is the most any user-space stack could give a server whose core is
saturated, were its own cost zero and everything else unchanged.

    perf script -i perf.data -F comm,pid,ip,sym,dso | python3 bench/core_split.py [TRANSACTIONS]

With TRANSACTIONS (completed in the recorded seconds) it also prints us per transaction, taking
each sample as 1/4000 s (perf's default cpu-clock frequency)."""
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def net_prefixes(source=os.path.join(HERE, "..", "crates", "cli", "src", "bench", "sampled.rs")):
    """The kernel's network functions' name prefixes: `NET_PREFIXES` of `pronghorn bench
    --sample-server` (crates/cli/src/bench/sampled.rs), read from there so the two agree."""
    text = open(source).read()
    body = re.search(r"const NET_PREFIXES: &\[&str\] = &\[(.*?)\];", text, re.S)
    if not body:
        sys.exit(f"core_split: no NET_PREFIXES in {source}")
    return tuple(re.findall(r'"([^"]+)"', body.group(1)))


CLASSES = ["pronghorn", "kernel net", "fork", "exit", "page faults", "rest"]
HZ = 4000.0


def classify(comm, frames, net):
    """The class of a sample of task `comm` whose call chain is `frames`, (symbol, dso) pairs,
    given the network's prefixes `net`."""
    if comm.startswith(("pronghorn-", "napi/")) or any("libpronghorn" in dso for _, dso in frames):
        return "pronghorn"
    syms = [sym for sym, _ in frames]
    if any(dso == "[kernel.kallsyms]" and sym.startswith(net) for sym, dso in frames):
        return "kernel net"
    if "copy_process" in syms:
        return "fork"
    if "do_exit" in syms or "exit_mmap" in syms:
        return "exit"
    if "asm_exc_page_fault" in syms:
        return "page faults"
    return "rest"


def samples(lines, leaf_address=False):
    """The samples of `perf script -F comm,pid,ip,sym,dso` output of a recording with call
    graphs: a header line (the task's name, which may hold spaces, then its pid), a
    tab-indented `address symbol (object)` line per frame, leaf first (a symbol may hold spaces,
    as C++'s do), then an empty line. Yields (comm, [(symbol, object), ...]), offsets
    (`+0x..`) cut from the symbols; with `leaf_address`, (comm, frames, address) where address
    is the leaf frame's as perf prints it (in a shared object: its offset in the file), an int
    or None."""
    comm, frames, leaf = None, [], None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield (comm, frames, leaf) if leaf_address else (comm, frames)
            comm, frames, leaf = None, [], None
        elif not line[0].isspace():
            if comm is not None:
                yield (comm, frames, leaf) if leaf_address else (comm, frames)
            words = line.split()
            comm, frames, leaf = " ".join(words[:-1]) if len(words) > 1 else words[0], [], None
        else:
            addr_sym, _, obj = line.strip().rpartition(" (")
            addr, _, sym = addr_sym.partition(" ")
            if sym:
                if not frames:
                    try:
                        leaf = int(addr, 16)
                    except ValueError:
                        leaf = None
                frames.append((re.sub(r"\+0x[0-9a-f]+$", "", sym.strip()), obj.rstrip(")")))
    if comm is not None:
        yield (comm, frames, leaf) if leaf_address else (comm, frames)


def split(lines, net):
    """Samples per class of `perf script -F comm,pid,ip,sym,dso` output; the idle task's are
    left out."""
    counts = Counter()
    for comm, frames in samples(lines):
        if comm != "swapper":
            counts[classify(comm, frames, net)] += 1
    return counts


def main():
    counts = split(sys.stdin, net_prefixes())
    total = sum(counts.values())
    tx = float(sys.argv[1]) if len(sys.argv) > 1 else None
    print(f"{'class':12} {'samples':>8} {'share':>7}" + (f" {'us/tx':>8}" if tx else ""))
    for cls in CLASSES + ["total"]:
        n = total if cls == "total" else counts[cls]
        row = f"{cls:12} {n:8d} {100.0 * n / max(total, 1):6.1f}%"
        if tx:
            row += f" {n / HZ / tx * 1e6:8.0f}"
        print(row)
    net = counts["kernel net"]
    if total > net:
        print(f"total / (total - kernel net) = {total / (total - net):.3f}")


if __name__ == "__main__":
    main()
