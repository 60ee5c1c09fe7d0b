"""Scratch: per SELECT, context switches of mariadbd (perf stat; and from /proc/PID/task/*/status, voluntary
and involuntary apart), reschedule IPIs on core 1,
and (pronghorn) the runtime's wait counters, while sysbench runs. Run under `pronghorn lab model veth`.
  switches.py BUILD TEST [mariadbd args...]"""
import os, sys, subprocess, tempfile, time, json, re
sys.path.insert(0, "/work/main/bench")
os.chdir("/work/main")
import lab_cost as L
import lab_split as S
build, test, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
L.EXE = os.path.abspath(f"{build}/pronghorn")
lab = L.Lab("sp")
tmp = tempfile.mkdtemp(prefix="probe-"); os.chmod(tmp, 0o755)
work = S.Mariadb(lab, tmp, extra, test)
T = os.environ.get("THREADS", "16")
work.client = lambda path: lab.client(work.sysbench(path) + [f"--threads={T}", f"--time={S.RUN_S}", test, "run"])
servers = {p: work.start(p) for p in S.PATHS}
def ctx(pid):
    v = n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"): v += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"): n += int(line.split()[1])
        except OSError:
            pass
    return v, n
def res1():
    for line in open("/proc/interrupts"):
        if line.strip().startswith("RES:"):
            return int(line.split()[2])
KEYS = ["sleeps", "wakeups", "wakeup_syscalls", "inline_polls", "epoll_waits", "epoll_events",
        "roles_taken_from_accept_loop", "roles_given_back_to_accept_loop"]
try:
    for rnd in range(2):
        for path in (S.PATHS if rnd == 0 else S.PATHS[::-1]):
            pid = servers[path].pid
            client = subprocess.Popen(work.client(path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(3)
            before = L.runtime_counters(pid) if path == "pronghorn" else None
            s0 = work.served(path); r0 = res1(); c0 = ctx(pid)
            st = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches,task-clock", "-p", str(pid), "--", "sleep", "5"],
                                capture_output=True, text=True).stderr
            s1 = work.served(path); r1 = res1(); c1 = ctx(pid)
            after = L.runtime_counters(pid) if path == "pronghorn" else None
            client.kill(); client.wait()
            n = s1 - s0
            vals = {}
            for line in st.splitlines():
                f = line.split(",")
                if len(f) > 3 and f[0].replace(".", "").isdigit():
                    vals[f[2]] = float(f[0])
            cs = vals.get("context-switches", 0)
            tc = vals.get("task-clock", 0)
            out = f"{path:9s} {n/5:8.0f} SELECT/s  switches/SELECT {cs/n:.3f}  task-clock us/SELECT {tc*1000/n:.1f}  RES core1/SELECT {(r1-r0)/n:.3f}  vol {(c1[0]-c0[0])/n:.3f} invol {(c1[1]-c0[1])/n:.3f}"
            if after:
                out += "  " + " ".join(f"{k}={(after.get(k,0)-before.get(k,0))/n:.3f}" for k in KEYS)
            print(out, flush=True)
finally:
    for s in servers.values():
        s.terminate(); s.wait()
