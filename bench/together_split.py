#!/usr/bin/env python3
"""Where each path's server core went in a run of bench/lab_together.sh --keep DIR: the samples
of each server's threads (DIR/tasks-N.json, which lab_together wrote: the server's and those of
every process it forked) split by bench/core_split.py's classes (pronghorn, kernel net, fork,
exit, page faults, rest), and the leaf functions whose time per transaction differs most
between the paths.

    python3 bench/together_split.py DIR RESULTS.json [RUN]

RESULTS.json is the run's result (bench/results/together-*.json: the tps of each path, per run);
RUN counts from 1 (default 1). Needs perf (perf script of DIR/perf-N.data)."""
import json
import os
import re
import subprocess
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import core_split  # noqa: E402
from lab_together import SAMPLE_US, WINDOW_S  # noqa: E402

FRAME = re.compile(r"\s*[0-9a-f]+\s+(\S+)\s+\((.*)\)\s*$")


def by_server(lines, tasks):
    """`perf script -F comm,tid,ip,sym,dso` lines -> {path: that server's sample blocks' lines,
    {(leaf function, its binary's file name): samples}}; a sample is its server's by its
    thread id (the header's second field)."""
    out = {p: ([], Counter()) for p in tasks}
    owner, first = None, False
    for line in lines:
        line = line.rstrip("\n")
        if line and not line[0].isspace():
            f = line.split()
            tid = int(f[1]) if len(f) > 1 and f[1].isdigit() else None
            owner = next((p for p, t in tasks.items() if tid in t), None)
            first = True
        if owner is None:
            continue
        out[owner][0].append(line)
        m = FRAME.match(line) if line[:1].isspace() else None
        if m and first:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
            out[owner][1][(sym, os.path.basename(m.group(2)))] += 1
            first = False
    return out


def us_per_tx(samples, tps):
    return samples * SAMPLE_US / (WINDOW_S * tps)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    keep, results = sys.argv[1], json.load(open(sys.argv[2]))
    run = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    n = run - 1
    tasks = {p: set(t) for p, t in json.load(open(os.path.join(keep, f"tasks-{n}.json"))).items()}
    tps = {p: results["runs"][n][p]["tps"] for p in tasks}
    script = subprocess.run(["perf", "script", "-i", os.path.join(keep, f"perf-{n}.data"), "-F",
                             "comm,tid,ip,sym,dso"], capture_output=True, text=True, check=True).stdout
    split = by_server(script.splitlines(), tasks)
    net = core_split.net_prefixes()
    print(f"run {run}, us of server core per transaction by class")
    print(f"{'class':12}" + "".join(f" {p:>10}" for p in tasks))
    classes = {p: core_split.split(lines, net) for p, (lines, _) in split.items()}
    for cls in core_split.CLASSES + ["total"]:
        row = [sum(classes[p].values()) if cls == "total" else classes[p][cls] for p in tasks]
        print(f"{cls:12}" + "".join(f" {us_per_tx(v, tps[p]):10.1f}" for p, v in zip(tasks, row)))
    leaves = {p: leaf for p, (_, leaf) in split.items()}
    if set(leaves) == {"kernel", "pronghorn"}:
        diff = {k: us_per_tx(leaves["pronghorn"][k], tps["pronghorn"]) - us_per_tx(leaves["kernel"][k], tps["kernel"])
                for k in set(leaves["kernel"]) | set(leaves["pronghorn"])}
        print("\nleaf functions, us per transaction: kernel, pronghorn, difference (largest 30)")
        for k in sorted(diff, key=lambda k: -abs(diff[k]))[:30]:
            print(f"{k[0][:48]:48} {k[1][:22]:22} {us_per_tx(leaves['kernel'][k], tps['kernel']):8.1f} "
                  f"{us_per_tx(leaves['pronghorn'][k], tps['pronghorn']):8.1f} {diff[k]:8.1f}")


if __name__ == "__main__":
    main()
