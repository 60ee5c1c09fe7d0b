import os, sys, subprocess, tempfile, time, json, collections, re
sys.path.insert(0, "/work/main/bench"); os.chdir("/work/main")
import lab_cost as L, lab_split as S
L.EXE = os.path.abspath(os.environ.get("BUILD", "target/pgo") + "/pronghorn")
lab = L.Lab("sp"); tmp = tempfile.mkdtemp(prefix="probe-"); os.chmod(tmp, 0o755)
work = S.Mariadb(lab, tmp, sys.argv[2:], sys.argv[1])
srv = work.start("pronghorn")
try:
    c = subprocess.Popen(work.client("pronghorn"), stdout=subprocess.DEVNULL)
    time.sleep(3)
    s0 = work.served("pronghorn")
    data = f"{tmp}/p.data"
    subprocess.run(["perf", "record", "-q", "-o", data, "-p", str(srv.pid), "-e", "syscalls:sys_enter_poll", "-e", "syscalls:sys_exit_poll", "--", "sleep", "2"], check=True, capture_output=True)
    s1 = work.served("pronghorn")
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,event,trace"], capture_output=True, text=True).stdout
    c.kill(); c.wait()
    n = s1 - s0
    enter = collections.Counter(); ret = collections.Counter()
    for line in out.splitlines():
        if "sys_enter_poll" in line:
            m = re.search(r"nfds: (0x[0-9a-f]+), timeout_msecs: (0x[0-9a-f]+)", line)
            tid = line.split()[0]
            enter[(tid, int(m.group(1),16), int(m.group(2),16) if int(m.group(2),16) < 1<<31 else -1)] += 1
        elif "sys_exit_poll" in line:
            tid = line.split()[0]
            r = int(line.split("0x")[-1], 16)
            ret[(tid, "timeout" if r == 0 else "ready")] += 1
    print("requests", n)
    for k, v in enter.most_common(10): print("enter", k, v, f"{v/n:.3f}/req")
    for k, v in ret.most_common(10): print("exit", k, v, f"{v/n:.3f}/req")
finally:
    srv.terminate(); srv.wait()
