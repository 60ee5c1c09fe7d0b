"""One path after the other (stop 41's look at where a point_select transaction's server core goes):
mariadbd --user=mysql on core 1 (bench/lab_cost.py's), sysbench oltp_point_select 16 threads from
side b on core 0 for SECONDS per path; per transaction: each core's interrupts (/proc/interrupts),
the client's packets, each core's user/sys/softirq/steal (/proc/stat); with PROBES=1 a second run
counts calls of mariadbd functions (uprobes made first with `perf probe -x /usr/sbin/mariadbd -a
dispatch_command` and likewise do_command, mysql_execute_command, alloc_root). EXE picks the
pronghorn binary (its libpronghorn.so beside it). Root, from the repository root, the lab up:
    python3 bench/results/stop41/sequential.py PREFIX [SECONDS] [kernel,pronghorn]"""
import sys, os, tempfile, subprocess, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import lab_cost as lc
prefix = sys.argv[1]; seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
paths = sys.argv[3].split(",") if len(sys.argv) > 3 else ["kernel", "pronghorn"]
if os.environ.get("EXE"): lc.EXE = os.environ["EXE"]
lab = lc.Lab(prefix)
def irqs():
    out = {}
    for line in open("/proc/interrupts").read().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3:
            name = parts[0].rstrip(":")
            try: out[name] = (int(parts[1]), int(parts[2]))
            except ValueError: pass
    return out
def pkts():
    r = {}
    for dev in (f"{prefix}-b0", f"{prefix}-k1"):
        out = subprocess.run(["ip", "netns", "exec", f"{prefix}-b", "cat", f"/sys/class/net/{dev}/statistics/rx_packets", f"/sys/class/net/{dev}/statistics/tx_packets"], capture_output=True, text=True).stdout.split()
        r[dev] = tuple(map(int, out))
    return r
def stat():
    r = {}
    for l in open("/proc/stat"):
        if l.startswith("cpu0 ") or l.startswith("cpu1 "):
            f = l.split(); r[f[0]] = list(map(int, f[1:]))
    return r
with tempfile.TemporaryDirectory(prefix="irq.") as tmp:
    os.chmod(tmp, 0o755)
    init = os.path.join(tmp, "init.sql")
    open(init, "w").write("CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\nCREATE DATABASE IF NOT EXISTS sbtest;\n")
    for path in paths:
        addr = lc.ADDR[path]
        home = os.path.join(tmp, f"m-{path}")
        lc.new_datadir(home)
        server = lc.mariadb_server(lab, path, home, init, open(os.path.join(tmp, f"{path}.log"), "w"))
        try:
            sb = ["sysbench", "--db-driver=mysql", f"--mysql-host={addr}", "--mysql-port=3306", "--mysql-user=bench",
                  "--mysql-db=sbtest", "--tables=1", "--table-size=10000"]
            lc.sh(lab.client(sb + ["oltp_point_select", "prepare"]))
            lc.sh(lab.client(sb + ["--threads=16", "--time=2", "oltp_point_select", "run"]))
            i0, s0, p0 = irqs(), stat(), pkts()
            out = lc.sh(lab.client(sb + ["--threads=16", f"--time={seconds}", "oltp_point_select", "run"])).stdout
            i1, s1, p1 = irqs(), stat(), pkts()
            n = lc.sysbench_transactions(out)
            print(f"== {path}: {n} transactions, {n/seconds:.0f} tps")
            for k in sorted(i1):
                d0 = i1[k][0] - i0.get(k, (0, 0))[0]; d1 = i1[k][1] - i0.get(k, (0, 0))[1]
                if d0 + d1 > 0: print(f"  {k:6} cpu0 {d0/n:7.3f}  cpu1 {d1/n:7.3f} per tx   ({d0}, {d1})")
            for dev in p0:
                print(f"  {dev}: client rx {(p1[dev][0]-p0[dev][0])/n:.2f} tx {(p1[dev][1]-p0[dev][1])/n:.2f} packets per tx")
            for c in ("cpu0", "cpu1"):
                d = [b - a for a, b in zip(s0[c], s1[c])]
                tot = sum(d)
                print(f"  {c}: user {100*d[0]/tot:.0f}% sys {100*d[2]/tot:.0f}% idle {100*d[3]/tot:.0f}% irq {100*d[5]/tot:.0f}% softirq {100*d[6]/tot:.0f}% steal {100*d[7]/tot:.0f}%")
            if os.environ.get("PROBES"):
                st = os.path.join(tmp, "pstat")
                ev = "probe_mariadbd:dispatch_command,probe_mariadbd:do_command,probe_mariadbd:mysql_execute_command,probe_mariadbd:alloc_root"
                r = subprocess.run(["perf", "stat", "-x,", "-o", st, "-e", ev, "-p", str(server.pid), "--"] + lab.client(sb + ["--threads=16", "--time=4", "oltp_point_select", "run"]), capture_output=True, text=True)
                m = lc.sysbench_transactions(r.stdout)
                for l in open(st):
                    f = l.strip().split(",")
                    if len(f) > 2 and f[0].replace('.', '').isdigit(): print(f"  {f[2]}: {int(f[0])/m:.2f} per tx")
        finally:
            server.terminate(); server.wait()
