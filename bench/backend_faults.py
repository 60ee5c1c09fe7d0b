#!/usr/bin/env python3
"""Page faults of a PostgreSQL backend's life, both paths (run by bench/backend_faults.sh; needs
root, a release build, perf, postgresql 15 and the lab).

A connection to PostgreSQL costs a fork, the backend's life and its exit; in pgbench -C most of
a transaction's server core is that (docs/design-notes.md, "What a stack could give at most"),
and a large part of it is page faults: the child's first writes to its parent's pages (copy on
write), its first reads of pages it never touched, its first instructions on each stretch of
code. Timing them on this shared host moves by a fifth between runs; counting them does not.

Two postmasters run side by side in namespace a, pinned to the server's core: one on the kernel
path, one under `pronghorn run --profile postgres` (runtime.share = "family": the backends share
the postmaster's stack). N psql connections (`select 1`) to each, one after the other, under
`perf record` of the page-fault tracepoints with call graphs and of the forks; each backend is
told by its parent. Per backend, both paths:

- faults by kind: `cow` (a write to a page shared with the parent), `write-new` (a write to a
  page not mapped yet), `read`, `exec` (an instruction fetch), `kernel` (in the kernel's
  copies to or from the user);
- faults by the shared object whose code faulted;
- under pronghorn, the faults with libpronghorn.so in the call chain: by kind, by the mapping
  the address fell in (the heap, the library's data, the family's arena, ...) and by the
  library's function.

Writes bench/results/backend-faults[-BUILD].{json,md} (BUILD: a --build other than
target/release).
"""

import argparse
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_cost as L  # noqa: E402  (the lab's helpers: addresses, cores, the result's machine line)

KINDS = ["cow", "write-new", "read", "exec", "kernel"]


def kind(event, error_code):
    """The kind of one fault from its tracepoint and the x86 error code (bit 0: the page was
    present, bit 1: a write, bit 4: an instruction fetch)."""
    if event.endswith("page_fault_kernel"):
        return "kernel"
    if error_code & 0x10:
        return "exec"
    if error_code & 0x2:
        return "cow" if error_code & 0x1 else "write-new"
    return "read"


HEADER = re.compile(r"^\s*(\S+)\s+(\d+)/\d+\s+(\S+):\s+(.*)$")


def parse(lines):
    """Events of `perf script -F comm,pid,tid,event,ip,sym,dso,trace` with call graphs: faults
    as dicts (pid, kind, addr, frames: [(symbol, dso)]) and forks as (parent, child) pids."""
    faults, forks, cur = [], [], None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            cur = None
            continue
        m = HEADER.match(line)
        if m and m.group(3).startswith(("exceptions:", "sched:")):
            comm, pid, event, trace = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            cur = None
            if event.startswith("sched:sched_process_fork"):
                f = re.search(r"pid=(\d+) child_comm=\S+ child_pid=(\d+)", trace)
                if f:
                    forks.append((int(f.group(1)), int(f.group(2))))
            elif event.startswith("exceptions:page_fault"):
                f = re.search(r"address=(0x[0-9a-f]+) ip=\S+ error_code=(0x[0-9a-f]+)", trace)
                if f:
                    cur = {"pid": pid, "comm": comm, "kind": kind(event, int(f.group(2), 16)),
                           "addr": int(f.group(1), 16), "frames": []}
                    faults.append(cur)
        elif cur is not None:
            parts = line.split(None, 2)
            if len(parts) == 3:
                cur["frames"].append((parts[1], parts[2].strip().strip("()")))
    return faults, forks


def read_maps(path):
    """(start, end, permissions, name) of each mapping in a /proc/PID/maps copy."""
    out = []
    for line in open(path):
        p = line.split()
        a, b = (int(x, 16) for x in p[0].split("-"))
        name = os.path.basename(p[5]) if len(p) > 5 else "[anonymous]"
        out.append((a, b, p[1], name))
    return out


def region(maps, addr):
    """The mapping `addr` fell in, named as a reader of the table would: the shared object and
    its permissions, the heap, the stack, or an anonymous mapping with its permissions."""
    for i, (a, b, perm, name) in enumerate(maps):
        if a <= addr < b:
            if name == "[anonymous]" and i > 0 and maps[i - 1][1] == a and maps[i - 1][3].endswith(".so"):
                return f"{maps[i - 1][3]} bss"
            if name == "zero" and "s" in perm:
                return "shared anonymous (the family's arena or its tables)"
            return f"{name} {perm}"
    return "a mapping made after the postmaster's maps were read"


def user_dso(frames):
    """The shared object of the innermost user-space frame."""
    for sym, dso in frames:
        if not dso.endswith("kallsyms]"):
            return os.path.basename(dso)
    return "?"


def census(faults, forks, postmasters, maps):
    """Per path: the backends (children of its postmaster), their faults per backend by kind
    and by shared object; under pronghorn also the library's own, by kind, mapping and
    function."""
    parent = {child: p for p, child in forks}
    by_pid = collections.defaultdict(list)
    for f in faults:
        by_pid[f["pid"]].append(f)
    out = {}
    for path, pm in postmasters.items():
        pids = [pid for pid in by_pid if parent.get(pid) == pm]
        n = len(pids)
        res = {"backends": n}
        if n == 0:
            out[path] = res
            continue
        kinds, dsos = collections.Counter(), collections.Counter()
        lib_kinds, lib_regions, lib_funcs = collections.Counter(), collections.Counter(), collections.Counter()
        for pid in pids:
            for f in by_pid[pid]:
                kinds[f["kind"]] += 1
                dsos[user_dso(f["frames"])] += 1
                lib = [sym for sym, dso in f["frames"] if "libpronghorn" in dso]
                if lib:
                    lib_kinds[f["kind"]] += 1
                    lib_funcs[f"{lib[-1]} ({f['kind']})"] += 1
                    if f["kind"] != "exec":
                        lib_regions[f"{region(maps, f['addr'])} ({f['kind']})"] += 1
        per = lambda c: {k: round(v / n, 1) for k, v in c.most_common()}  # noqa: E731
        res.update({"faults": round(sum(kinds.values()) / n, 1), "by_kind": per(kinds),
                    "by_object": per(dsos), "library": round(sum(lib_kinds.values()) / n, 1),
                    "library_by_kind": per(lib_kinds), "library_by_mapping": per(lib_regions),
                    "library_by_function": per(lib_funcs)})
        out[path] = res
    return out


def write_md(path, result):
    k, p = result["paths"]["kernel"], result["paths"]["pronghorn"]
    with open(path, "w") as f:
        f.write("# Page faults per PostgreSQL backend\n\n")
        L.write_machine(f, result["machine"])
        f.write("\n")
        f.write(f"{result['connections']} psql connections (`select 1`) per path; backends counted: "
                f"kernel {k['backends']}, pronghorn {p['backends']}.\n\n")
        f.write("| per backend | kernel | pronghorn |\n|---|---:|---:|\n")
        f.write(f"| page faults | {k.get('faults', 0)} | {p.get('faults', 0)} |\n")
        for kd in KINDS:
            f.write(f"| {kd} | {k.get('by_kind', {}).get(kd, 0)} | {p.get('by_kind', {}).get(kd, 0)} |\n")
        f.write(f"| with libpronghorn.so in the call chain | - | {p.get('library', 0)} |\n\n")
        f.write("By the shared object whose code faulted (the ten largest on either path):\n\n")
        f.write("| object | kernel | pronghorn |\n|---|---:|---:|\n")
        objs = set(k.get("by_object", {})) | set(p.get("by_object", {}))
        top = sorted(objs, key=lambda o: -max(k["by_object"].get(o, 0), p["by_object"].get(o, 0)))[:10]
        for o in top:
            f.write(f"| {o} | {k['by_object'].get(o, 0)} | {p['by_object'].get(o, 0)} |\n")
        f.write("\npronghorn's own (libpronghorn.so in the call chain), by kind: "
                + ", ".join(f"{kd} {v}" for kd, v in p.get("library_by_kind", {}).items()) + "\n\n")
        f.write("| where the library's data faults fell (kind) | per backend |\n|---|---:|\n")
        for r, v in p.get("library_by_mapping", {}).items():
            f.write(f"| {r} | {v} |\n")
        f.write("\n| the library's outermost function (kind), 0.5 or more per backend | per backend |\n|---|---:|\n")
        for fn, v in p.get("library_by_function", {}).items():
            if v >= 0.5:
                f.write(f"| `{fn}` | {v} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="bf", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--connections", type=int, default=20, help="psql connections per path (default 20)")
    ap.add_argument("--build", metavar="DIR", help="the pronghorn binary's directory (default target/release)")
    a = ap.parse_args()
    if a.build:
        L.EXE = os.path.abspath(os.path.join(a.build, "pronghorn"))
        if not os.path.exists(L.EXE):
            raise SystemExit(f"backend_faults: --build {a.build}: no pronghorn binary there")
    for tool in ["perf", "psql", f"{L.PG_BIN}/postgres", "setpriv"]:
        if not (os.path.exists(tool) or subprocess.run(["which", tool], capture_output=True).returncode == 0):
            raise SystemExit(f"backend_faults: {tool} is missing (scripts/setup.sh installs it)")
    lab = L.Lab(a.prefix)
    with tempfile.TemporaryDirectory(prefix="backend-faults.") as tmp:
        os.chmod(tmp, 0o755)
        shutil.chown(tmp, "postgres")  # initdb runs as the postgres user
        servers, postmasters = [], {}
        try:
            for path in ["kernel", "pronghorn"]:
                data = os.path.join(tmp, path)
                L.postgres_datadir(data)
                log = open(os.path.join(tmp, f"{path}.log"), "w")
                # No autovacuum worker forked among the backends counted.
                server = L.postgres_server(lab, path, data, log, ["autovacuum=off"])
                servers.append(server)
                postmasters[path] = server.pid
            maps = os.path.join(tmp, "postmaster.maps")
            with open(maps, "w") as out:
                out.write(open(f"/proc/{postmasters['pronghorn']}/maps").read())
            psql = " ; ".join(
                f"for i in $(seq {a.connections}); do {shlex.join(lab.client(['psql', '-h', L.ADDR[path], '-U', 'postgres', '-qAt', '-c', 'select 1', 'postgres']))} >/dev/null || exit 1; done"
                for path in ["pronghorn", "kernel"])
            data = os.path.join(tmp, "perf.data")
            subprocess.run(["perf", "record", "-q", "-g", "-a", "-o", data, "-e", "exceptions:page_fault_user",
                            "-e", "exceptions:page_fault_kernel", "-e", "sched:sched_process_fork", "--",
                            "bash", "-c", psql], check=True, stdout=subprocess.DEVNULL)
            script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,event,ip,sym,dso,trace"],
                                    capture_output=True, text=True, check=True).stdout
        finally:
            L.stop_postgres(servers)
        faults, forks = parse(script.splitlines())
        paths = census(faults, forks, postmasters, read_maps(maps))
    build = os.path.relpath(os.path.dirname(L.EXE))
    command = "bench/backend_faults.sh" + (f" --build {a.build}" if a.build else "") + \
        (f" --connections {a.connections}" if a.connections != 20 else "")
    result = {"machine": L.machine(command, **{"server core": L.SERVER_CPU, "client core": L.CLIENT_CPU}),
              "connections": a.connections, "paths": paths}
    base = "bench/results/backend-faults" + ("" if build == "target/release" else "-" + os.path.basename(build))
    L.write_results(base, result, write_md)
    for path, r in paths.items():
        if r["backends"] < a.connections:
            raise SystemExit(f"backend_faults: {r['backends']} backends seen on the {path} path, not {a.connections}")


if __name__ == "__main__":
    main()
