#!/usr/bin/env python3
"""The soak's client (bench/soak.sh): CONNS connections to a redis-server at once, each opening,
exchanging and closing, for SECONDS.

  soak_client.py HOST PORT CONNS SECONDS

Each connection sends ECHO with a random payload (16 to 2048 bytes) and checks that the reply
is that payload; then every other connection closes first, the others send QUIT so that the
server closes first (and its side goes through TIME-WAIT). A closed connection is replaced at
once by a new one, so CONNS stay open or opening all along. A connection that fails (reset,
refused, a wrong reply, no answer within 60 s) is counted, not retried. At the end it prints one
JSON line: connections completed and failed, bytes checked, and the failures by kind.
"""
import errno
import json
import os
import random
import selectors
import socket
import sys
import time

STALL_S = 60.0


class Conn:
    __slots__ = ("sock", "want", "sent", "got", "quit", "started", "phase")


def request(payload):
    return b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(payload), payload)


def main():
    host, port, conns, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sel = selectors.DefaultSelector()
    rng = random.Random(22)
    stats = {"completed": 0, "failed": 0, "bytes_checked": 0, "failures": {}}
    end = time.monotonic() + seconds
    serial = [0]

    def fail(c, why):
        stats["failed"] += 1
        stats["failures"][why] = stats["failures"].get(why, 0) + 1
        close(c)

    def close(c):
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def open_one():
        c = Conn()
        c.sock = socket.socket(family, socket.SOCK_STREAM)
        c.sock.setblocking(False)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\0" * 8)  # an ordinary close
        payload = rng.randbytes(rng.randint(16, 2048)).replace(b"\r", b"r").replace(b"\n", b"n")
        serial[0] += 1
        c.quit = serial[0] % 2 == 0
        c.want = b"$%d\r\n%s\r\n" % (len(payload), payload)
        c.sent = request(payload) + (b"*1\r\n$4\r\nQUIT\r\n" if c.quit else b"")
        c.got = b""
        c.started = time.monotonic()
        c.phase = "connect"
        err = c.sock.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            fail(c, errno.errorcode.get(err, str(err)))
            return
        sel.register(c.sock, selectors.EVENT_WRITE, c)

    for _ in range(conns):
        open_one()
    last_check = time.monotonic()
    while True:
        now = time.monotonic()
        live = len(sel.get_map())
        if now >= end and live == 0:
            break
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            try:
                if c.phase == "connect":
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        fail(c, errno.errorcode.get(err, str(err)))
                    else:
                        c.sock.sendall(c.sent)  # at most a few KiB: fits the send buffer
                        c.phase = "reply"
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                    if c.phase == "connect" and time.monotonic() < end:
                        open_one()
                    continue
                data = c.sock.recv(65536)
                if data:
                    c.got += data
                    if not c.want.startswith(c.got[: len(c.want)]):
                        fail(c, "wrong reply")
                    elif len(c.got) >= len(c.want) and not c.quit:
                        stats["completed"] += 1
                        stats["bytes_checked"] += len(c.want)
                        close(c)
                    else:
                        continue
                elif c.quit and c.got == c.want + b"+OK\r\n":
                    stats["completed"] += 1  # the server closed first, after its +OK
                    stats["bytes_checked"] += len(c.want)
                    close(c)
                else:
                    fail(c, "early EOF")
            except OSError as e:
                fail(c, errno.errorcode.get(e.errno, str(e.errno)))
            if time.monotonic() < end:
                open_one()
        if now - last_check >= 5.0:
            last_check = now
            for key in list(sel.get_map().values()):
                c = key.data
                if now - c.started > STALL_S:
                    fail(c, "stalled")
                    if now < end:
                        open_one()
    print(json.dumps(stats))
    return 0 if stats["completed"] > 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
