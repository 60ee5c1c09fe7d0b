"""Scratch: two pronghorn builds A/B on redis-server GET, per request: the server's CPU (perf stat
task-clock of redis-server) and requests/s, rounds alternating A, B, B, A ... Run as root with the
lab `sp` up and hugepages reserved.
  redis_ab.py BUILD_A BUILD_B CLIENTS ROUNDS"""
import os, sys, subprocess, time, tempfile
sys.path.insert(0, "/work/main/bench")
os.chdir("/work/main")
import lab_cost as L
import lab_split as S
a, b, clients, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lab = L.Lab("sp")
tmp = tempfile.mkdtemp(prefix="probe-"); os.chmod(tmp, 0o755)
work = S.Redis(lab, tmp)
addr = L.ADDR["pronghorn"]
def one(build):
    L.EXE = os.path.abspath(f"{build}/pronghorn")
    server = L.redis_server(lab, "pronghorn", open(os.path.join(tmp, "redis.log"), "w"))
    try:
        L.sh(lab.client(["redis-benchmark", "-h", addr, "-c", "50", "-d", "3", "-t", "set", "-n", "100000", "-q"]))
        client = subprocess.Popen(lab.client(["redis-benchmark", "-h", addr, "-c", clients, "-d", "3", "-t", "get",
                                              "-n", "100000000", "-q"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)
            s0 = work.served("pronghorn"); t0 = time.monotonic()
            st = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", "-p", str(server.pid), "--", "sleep", "6"],
                                capture_output=True, text=True).stderr
            n = work.served("pronghorn") - s0; dt = time.monotonic() - t0
        finally:
            client.terminate(); client.wait()
    finally:
        server.terminate(); server.wait()
    tc = next(float(l.split(",")[0]) for l in st.splitlines() if "task-clock" in l)
    n6 = n * 6 / dt
    return n / dt, tc * 1000 / n6
res = {a: [], b: []}
for r in range(rounds):
    for build in ((a, b) if r % 2 == 0 else (b, a)):
        rps, us = one(build)
        res[build].append((rps, us))
        print(f"{build:28s} {rps:9.0f} req/s  server task-clock {us:6.2f} us/request", flush=True)
for build in (a, b):
    us = sorted(x[1] for x in res[build]); rps = sorted(x[0] for x in res[build])
    print(f"median {build:21s} {rps[len(rps)//2]:9.0f} req/s  {us[len(us)//2]:6.2f} us/request")
