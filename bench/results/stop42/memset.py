"""us per transaction of libc's memset on the server core, in the stack thread and in the
backends, from split-builds.sh's kept recordings (KEEP=1):
    python3 bench/results/stop42/memset.py DIR LABEL-ROUND=TPS ..."""
import collections, subprocess, sys
for spec in sys.argv[2:]:
    label, tps = spec.split("="); tx = float(tps) * 10  # transactions in the 10 recorded seconds
    out = subprocess.run(["perf", "script", "-i", f"{sys.argv[1]}/{label}.data", "-F", "comm,ip,sym"],
                         capture_output=True, text=True).stdout
    c, comm, first = collections.Counter(), None, True
    for line in out.splitlines():
        if not line.strip():
            comm = None
        elif not line[0].isspace():
            comm, first = line.split()[0], True
        elif comm and first:
            first = False
            if line.split()[1].startswith("__memset"):
                c["stack thread" if comm.startswith("pronghorn-st") else comm] += 1
    # perf's cpu-clock samples 4000 times a second: 250 us each.
    print(label, ", ".join(f"{k} {v * 250 / tx:.1f}" for k, v in sorted(c.items())), "us per transaction")
