"""Scratch: what the server sends per SELECT on each path, by kind (captured on side b's veth):
data segments and pure ACKs, while sysbench runs. Run as root with lab sp up and hugepages."""
import os, sys, subprocess, tempfile, time
sys.path.insert(0, "/work/main/bench")
os.chdir("/work/main")
import lab_cost as L
import lab_split as S
build, test = sys.argv[1], sys.argv[2]
L.EXE = os.path.abspath(f"{build}/pronghorn")
lab = L.Lab("sp")
tmp = tempfile.mkdtemp(prefix="probe-"); os.chmod(tmp, 0o755)
work = S.Mariadb(lab, tmp, [], test)
dev = {"kernel": "sp-k1", "pronghorn": "sp-b0"}
servers = {p: work.start(p) for p in S.PATHS}
try:
    for path in S.PATHS:
        client = subprocess.Popen(work.client(path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)
            pcap = os.path.join(tmp, f"{path}.pcap")
            s0 = work.served(path)
            subprocess.run(["ip", "netns", "exec", "sp-b", "dumpcap", "-q", "-i", dev[path], "-s", "96", "-w", pcap,
                            "-a", "duration:2", "-f", f"src host {L.ADDR[path]}"], capture_output=True)
            n = work.served(path) - s0
        finally:
            client.terminate(); client.wait()
        out = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-e", "tcp.len", "-e", "tcp.flags.push"],
                             capture_output=True, text=True).stdout.split("\n")
        lens = [l.split("\t") for l in out if l.strip()]
        data = [int(x[0]) for x in lens if int(x[0]) > 0]
        pure = sum(1 for x in lens if int(x[0]) == 0)
        big = sum(1 for d in data if d > 1448)
        print(f"{path:9s} SELECTs {n}  frames {len(lens)}  data {len(data)} (over 1448 bytes: {big}, bytes {sum(data)})  pure ACKs {pure}"
              f"  per SELECT: data {len(data)/n:.2f} pure {pure/n:.2f} bytes {sum(data)/n:.0f}", flush=True)
finally:
    for s in servers.values():
        s.terminate(); s.wait()
