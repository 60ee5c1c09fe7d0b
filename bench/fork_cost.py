#!/usr/bin/env python3
"""What one fork costs a server under pronghorn (run by bench/fork_cost.sh; needs root, a
release build, a C compiler and the lab).

A server with a process per connection (PostgreSQL's postmaster, Apache prefork) pays a fork,
the child's life and its exit for every connection, so `pgbench -C` measures mostly that. This
loop (bench/fork_cost.c) listens on a TCP socket in the lab's namespace a, then forks N times:
the child exits at once with _exit (or, --touch, makes and closes a socket first: a child that
uses the runtime) and the parent waits for it. One process, pinned to the server's core, in
four settings, rounds alternating:

- kernel: the plain program, listening on the kernel path's address;
- preloaded: libpronghorn.so preloaded but not started (the process is not the one
  `pronghorn run` named), on the kernel path's address: what the library's presence costs;
- pronghorn: under `pronghorn run`, on pronghorn's address: the NIC is open when it forks, and
  the child (runtime.share off) keeps no runtime;
- family: under `pronghorn run --profile postgres` (runtime.share = "family"): the child joins
  the family and shares the parent's stack, as a PostgreSQL backend does.

Reports the median microseconds per fork + exit + wait of each, and each one's ratio to the
kernel's. Writes bench/results/fork-cost[-BUILD][-touch].{json,md}.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_cost as L  # noqa: E402  (the lab's helpers: addresses, cores, the result's machine line)

SETTINGS = ["kernel", "preloaded", "pronghorn", "family"]
PORT = "7077"


def command(setting, lab, exe, build, forks, touch):
    """The command line that runs the fork loop `exe` in `setting`, with the pronghorn and
    libpronghorn.so of the directory `build`."""
    ns = ["ip", "netns", "exec", f"{lab}-a", "taskset", "-c", L.SERVER_CPU]
    loop = [forks] + (["touch"] if touch else [])
    pronghorn = os.path.join(build, "pronghorn")
    lib = os.path.join(build, "libpronghorn.so")
    config = f"/run/pronghorn/lab/{lab}/a.toml"
    if setting == "kernel":
        return ns + [exe, L.ADDR["kernel"], PORT] + loop
    if setting == "preloaded":
        return ns + ["env", f"LD_PRELOAD={lib}", exe, L.ADDR["kernel"], PORT] + loop
    profile = ["--profile", "postgres"] if setting == "family" else []
    return ns + [pronghorn, "run", "--config", config] + profile + ["--", exe, L.ADDR["pronghorn"], PORT] + loop


def parse_us(out):
    """The loop's "us_per_fork <float>" line."""
    for line in out.splitlines():
        if line.startswith("us_per_fork "):
            return float(line.split()[1])
    raise ValueError(f"no us_per_fork line in {out!r}")


def summarize(runs):
    """Per setting: the median of its rounds, and the median of its per-round ratios to the
    kernel's (with their range)."""
    out = {}
    for s in SETTINGS:
        ratios = [r[s] / r["kernel"] for r in runs]
        out[s] = {"us_per_fork": statistics.median(r[s] for r in runs), "ratio": statistics.median(ratios),
                  "ratio_min": min(ratios), "ratio_max": max(ratios)}
    return out


def write_md(path, result):
    with open(path, "w") as f:
        f.write("# fork cost: a listening process forks, its child exits, it waits\n\n")
        f.write(__doc__.split("\n\n", 1)[1].rsplit("\n\nReports", 1)[0] + "\n\n")
        f.write(f"Build: {result['build']}. {result['forks']} forks per run, {result['rounds']} rounds alternating the settings; "
                f"child: {'socket() and close(), then _exit' if result['touch'] else '_exit at once'}.\n\n")
        f.write("| setting | us per fork + exit + wait (median) | / kernel (min-max) |\n|---|---:|---:|\n")
        for s in SETTINGS:
            v = result["summary"][s]
            f.write(f"| {s} | {v['us_per_fork']:.1f} | {v['ratio']:.2f}x ({v['ratio_min']:.2f}-{v['ratio_max']:.2f}) |\n")
        f.write("\n")
        L.write_machine(f, result["machine"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default="fk", help="the lab (brought up by the wrapper script)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--forks", type=int, default=1000)
    ap.add_argument("--touch", action="store_true", help="the child makes and closes a socket before it exits")
    ap.add_argument("--build", default="target/release",
                    help="the directory of the pronghorn and libpronghorn.so measured (target/pgo: the PGO build)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    with tempfile.TemporaryDirectory(prefix="fork-cost-") as tmp:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, "fork_cost")
        L.sh(["cc", "-O2", "-o", exe, "bench/fork_cost.c"])
        runs = []
        for r in range(a.rounds):
            row = {}
            for s in SETTINGS:
                p = subprocess.run(command(s, a.prefix, exe, build, str(a.forks), a.touch), capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit(f"fork_cost: {s} failed ({p.returncode}): {p.stderr.strip()}")
                row[s] = parse_us(p.stdout)
                print(f"round {r + 1}/{a.rounds} {s}: {row[s]:.1f} us per fork", flush=True)
            runs.append(row)
    args = " ".join(sys.argv[1:])
    result = {"forks": a.forks, "rounds": a.rounds, "touch": a.touch, "build": a.build, "runs": runs,
              "summary": summarize(runs),
              "machine": L.machine(f"bench/fork_cost.sh {args}".strip())}
    build_name = os.path.basename(os.path.normpath(a.build))
    base = "bench/results/fork-cost" + ("" if build_name == "release" else f"-{build_name}") + ("-touch" if a.touch else "")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    write_md(base + ".md", result)
    print(open(base + ".md").read())


if __name__ == "__main__":
    main()
