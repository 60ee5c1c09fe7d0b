#!/usr/bin/env python3
"""The kernel side of the lab interop tests: a Linux TCP/UDP peer for pronghorn.

Every mode prints one JSON line on stdout with what it saw (bytes, sha256 of what was sent and
what came back), so the Rust test that drives it compares hashes instead of trusting a status.

  peer.py tcp-echo-client HOST PORT BYTES [--seed S] [--conns N]
      sends BYTES pseudo-random bytes (seeded) on each of N connections, reads the echo back
      concurrently, shuts down its write half, waits for EOF; reports both hashes per connection
  peer.py tcp-echo-server PORT [--once] [--bind ADDR]...
      a kernel echo server (IPv4 and IPv6); prints "ready" when listening. With --bind, on
      those addresses only (a server under pronghorn without nic.share: a wildcard bind stays
      the kernel's)
  peer.py udp-echo-client HOST PORT COUNT [--size N]
      COUNT datagrams, each answered (1 s timeout each); reports how many came back identical
  peer.py udp-echo-server HOST PORT
      (run accelerated, or not) echoes every datagram to HOST PORT back to its sender; prints
      "ready" when bound
  peer.py write-close-exit HOST PORT BYTES [--seed S]
      (the server, under pronghorn) accepts one connection, writes BYTES pseudo-random bytes,
      closes it and exits at once; prints "ready" when listening
  peer.py write-exec HOST PORT BYTES [--seed S] [--hold]
      (the server, under pronghorn) accepts one connection and writes BYTES pseudo-random
      bytes, running /bin/true with subprocess (a vfork child's exec) after the first block;
      then closes it (with --hold: keeps it, close-on-exec) and execs /bin/true at once (which
      exits 0); prints "ready" when listening
  peer.py slow-read HOST PORT BYTES [--seed S] [--rcvbuf N] [--chunk N]
      connects with a small receive buffer and reads CHUNK bytes at a time, pausing between
      reads, until EOF; reports what arrived, whether it ended with EOF or an error, and
      whether it is the BYTES the seed makes
  peer.py self-connect HOST PORT BYTES [--seed S]
      (run accelerated) listens on HOST PORT, connects to it from the same process, echoes
      BYTES pseudo-random bytes through the connection, then connects to PORT+1, where nothing
      listens; reports whether the echo came back whole and how the second connect ended
  peer.py orphan-server HOST PORT CONNS [--seconds S]
      (run accelerated) accepts CONNS connections, queues as much as each takes without
      blocking, closes them all (orphans, their clients not reading), reports what each had
      queued, then lives S seconds more so that the orphans are driven
  peer.py orphan-client HOST PORT CONNS
      opens CONNS connections with a small receive buffer, waits, then reads each to its end;
      reports per connection the bytes and how it ended (eof, reset, timeout)
"""
import argparse
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

BLOCK = 1 << 20


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def tcp_echo_client(host, port, total, seed):
    s = socket.create_connection((host, port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent_hash = hashlib.sha256()
    recv_hash = hashlib.sha256()
    received = [0]
    error = []

    def reader():
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        try:
            while True:
                n = s.recv_into(view)
                if n == 0:
                    break
                recv_hash.update(view[:n])
                received[0] += n
        except Exception as e:  # reported, not swallowed
            error.append(repr(e))

    t = threading.Thread(target=reader)
    t.start()
    rng = random.Random(seed)
    left = total
    try:
        while left > 0:
            chunk = rng.randbytes(min(BLOCK, left))
            sent_hash.update(chunk)
            s.sendall(chunk)
            left -= len(chunk)
        s.shutdown(socket.SHUT_WR)
    except Exception as e:
        error.append(repr(e))
    t.join()
    s.close()
    return {"sent": total - left, "received": received[0], "sent_sha256": sent_hash.hexdigest(),
            "received_sha256": recv_hash.hexdigest(), "error": error}


def tcp_echo_server(port, once, binds):
    if binds:
        servers = [socket.create_server((addr, port), family=family(addr), backlog=128) for addr in binds]
    else:
        servers = [socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=128)]
    print("ready", flush=True)

    def serve(c):
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        with c:
            while True:
                n = c.recv_into(view)
                if n == 0:
                    break
                c.sendall(view[:n])

    def accept(srv):
        while True:
            c, _ = srv.accept()
            if once:
                serve(c)
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    for srv in servers[1:]:
        threading.Thread(target=accept, args=(srv,), daemon=True).start()
    accept(servers[0])


def udp_echo_client(host, port, count, size):
    s = socket.socket(family(host), socket.SOCK_DGRAM)
    s.settimeout(1.0)
    ok = 0
    rng = random.Random(1)
    for i in range(count):
        msg = rng.randbytes(size)
        s.sendto(msg, (host, port))
        try:
            data, _ = s.recvfrom(65536)
            ok += data == msg
        except socket.timeout:
            pass
    return {"sent": count, "echoed_identical": ok}


def udp_echo_server(host, port):
    s = socket.socket(family(host), socket.SOCK_DGRAM)
    s.bind((host, port))
    print("ready", flush=True)
    while True:
        data, peer = s.recvfrom(65536)
        s.sendto(data, peer)


def resp_command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def resp_read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-", b":"):
        return kind + rest
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    raise ValueError("unexpected reply %r" % line[:40])


def redis_check(host, port):
    """SET and GET of pseudo-random binary values of 1 B, 64 KiB and 4 MiB: byte-identical?"""
    s = socket.create_connection((host, port), timeout=30)
    f = s.makefile("rb")
    rng = random.Random(7)
    results = {}
    for size in (1, 64 * 1024, 4 * 1024 * 1024):
        value = rng.randbytes(size)
        key = "pronghorn-check-%d" % size
        s.sendall(resp_command("SET", key, value))
        ok = resp_read(f)
        s.sendall(resp_command("GET", key))
        got = resp_read(f)
        results[str(size)] = {"set": ok.decode(), "identical": got == value}
    s.close()
    return results


def write_close_exit(host, port, total, seed):
    srv = socket.create_server((host, port), family=family(host))
    print("ready", flush=True)
    c, _ = srv.accept()
    rng = random.Random(seed)
    left = total
    while left > 0:
        chunk = rng.randbytes(min(BLOCK, left))
        c.sendall(chunk)
        left -= len(chunk)
    c.close()
    srv.close()
    return 0


def write_exec(host, port, total, seed, hold):
    srv = socket.create_server((host, port), family=family(host))
    print("ready", flush=True)
    c, _ = srv.accept()
    rng = random.Random(seed)
    sent = 0
    while sent < total:
        chunk = rng.randbytes(min(BLOCK, total - sent))
        c.sendall(chunk)
        if sent == 0:
            # A child that execs in this process's memory must leave its connections alone.
            subprocess.run(["/bin/true"], check=True)
        sent += len(chunk)
    if hold:
        os.set_inheritable(c.fileno(), False)
    else:
        c.close()
    sys.stdout.flush()
    os.execv("/bin/true", ["true"])


def slow_read(host, port, total, seed, rcvbuf, chunk):
    s = socket.socket(family(host), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect((host, port))
    got = hashlib.sha256()
    received = 0
    error = []
    eof = False
    try:
        while True:
            data = s.recv(chunk)
            if not data:
                eof = True
                break
            got.update(data)
            received += len(data)
            time.sleep(0.001)  # a slow reader; the verdict waits for EOF, not for time
    except Exception as e:  # reported, not swallowed
        error.append(repr(e))
    s.close()
    want = hashlib.sha256()
    rng = random.Random(seed)
    left = total
    while left > 0:
        n = min(BLOCK, left)
        want.update(rng.randbytes(n))
        left -= n
    return {"received": received, "eof": eof, "error": error, "identical": got.hexdigest() == want.hexdigest()}


def self_connect(host, port, total, seed):
    ls = socket.socket(family(host), socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(8)
    c = socket.create_connection((host, port), timeout=30)
    conn, _ = ls.accept()

    def drain(s, handle):
        """Hands `handle` what `s` receives, to its end."""
        while True:
            b = s.recv(BLOCK)
            if not b:
                break
            handle(b)

    def echo():
        drain(conn, conn.sendall)
        conn.close()

    data = random.Random(seed).randbytes(total)
    got = bytearray()
    threads = [threading.Thread(target=echo), threading.Thread(target=drain, args=(c, got.extend))]
    for t in threads:
        t.start()
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    for t in threads:
        t.join()
    c.close()
    try:
        socket.create_connection((host, port + 1), timeout=30).close()
        closed_port = "connected"
    except ConnectionRefusedError:
        closed_port = "refused"
    except OSError as e:
        closed_port = str(e)
    return {"echoed": bytes(got) == data, "bytes": len(got), "closed_port": closed_port}


def orphan_server(host, port, conns, seconds):
    s = socket.socket(family(host))
    s.bind((host, port))
    s.listen(conns)
    accepted = [s.accept()[0] for _ in range(conns)]
    queued = []
    for c in accepted:
        c.setblocking(False)
        n = 0
        try:
            while True:
                n += c.send(bytes(BLOCK))
        except BlockingIOError:
            pass
        queued.append(n)
    for c in accepted:
        c.close()
    print(json.dumps({"queued": queued}), flush=True)
    time.sleep(seconds)


def orphan_client(host, port, conns):
    """Connects CONNS times in turn (retrying while nothing listens), then reads each connection.

    The server closes every connection as soon as it has accepted all of them, and resets those
    beyond its orphan limit at once: the last connection's RST can arrive after its handshake
    but before connect() has returned (the client not yet scheduled), and then Linux's connect()
    fails with ECONNRESET (ECONNREFUSED is only for a RST in SYN-SENT). That connection was
    established and reset: it counts as one that ended in a reset with nothing read."""
    deadline = time.monotonic() + 30
    socks = []
    while len(socks) < conns:
        c = socket.socket(family(host))
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            c.connect((host, port))
            socks.append(c)
        except ConnectionResetError:
            c.close()
            socks.append(None)
        except ConnectionRefusedError:
            c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    time.sleep(2)
    results = []
    for c in socks:
        if c is None:
            results.append({"bytes": 0, "end": "reset"})
            continue
        c.settimeout(20)
        got, end = 0, "eof"
        try:
            while True:
                b = c.recv(BLOCK)
                if not b:
                    break
                got += len(b)
        except ConnectionResetError:
            end = "reset"
        except socket.timeout:
            end = "timeout"
        results.append({"bytes": got, "end": end})
    return results


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    def stream_parser(mode):
        """A mode that moves BYTES seeded bytes over a connection to or at HOST PORT."""
        q = sub.add_parser(mode)
        q.add_argument("host")
        q.add_argument("port", type=int)
        q.add_argument("bytes", type=int)
        q.add_argument("--seed", type=int, default=1)
        return q

    c = stream_parser("tcp-echo-client")
    c.add_argument("--conns", type=int, default=1)
    s = sub.add_parser("tcp-echo-server")
    s.add_argument("port", type=int)
    s.add_argument("--once", action="store_true")
    s.add_argument("--bind", action="append", default=[])
    r = sub.add_parser("redis-check")
    r.add_argument("host")
    r.add_argument("port", type=int)
    u = sub.add_parser("udp-echo-client")
    u.add_argument("host")
    u.add_argument("port", type=int)
    u.add_argument("count", type=int)
    u.add_argument("--size", type=int, default=512)
    us = sub.add_parser("udp-echo-server")
    us.add_argument("host")
    us.add_argument("port", type=int)
    stream_parser("write-close-exit")
    we = stream_parser("write-exec")
    we.add_argument("--hold", action="store_true")
    sr = stream_parser("slow-read")
    sr.add_argument("--rcvbuf", type=int, default=8192)
    sr.add_argument("--chunk", type=int, default=4096)
    stream_parser("self-connect")
    o = sub.add_parser("orphan-server")
    o.add_argument("host")
    o.add_argument("port", type=int)
    o.add_argument("conns", type=int)
    o.add_argument("--seconds", type=float, default=10)
    o = sub.add_parser("orphan-client")
    o.add_argument("host")
    o.add_argument("port", type=int)
    o.add_argument("conns", type=int)
    a = p.parse_args()
    if a.mode == "orphan-server":
        orphan_server(a.host, a.port, a.conns, a.seconds)
    elif a.mode == "orphan-client":
        print(json.dumps(orphan_client(a.host, a.port, a.conns)))
    elif a.mode == "tcp-echo-client":
        results = [None] * a.conns
        def run(i):
            results[i] = tcp_echo_client(a.host, a.port, a.bytes, a.seed + i)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(a.conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"connections": results}))
    elif a.mode == "redis-check":
        print(json.dumps(redis_check(a.host, a.port)))
    elif a.mode == "write-close-exit":
        return write_close_exit(a.host, a.port, a.bytes, a.seed)
    elif a.mode == "write-exec":
        write_exec(a.host, a.port, a.bytes, a.seed, a.hold)
    elif a.mode == "self-connect":
        print(json.dumps(self_connect(a.host, a.port, a.bytes, a.seed)))
    elif a.mode == "slow-read":
        print(json.dumps(slow_read(a.host, a.port, a.bytes, a.seed, a.rcvbuf, a.chunk)))
    elif a.mode == "tcp-echo-server":
        tcp_echo_server(a.port, a.once, a.bind)
    elif a.mode == "udp-echo-server":
        udp_echo_server(a.host, a.port)
    else:
        print(json.dumps(udp_echo_client(a.host, a.port, a.count, a.size)))


if __name__ == "__main__":
    sys.exit(main())
