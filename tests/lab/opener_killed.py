#!/usr/bin/env python3
"""Issue 24: the process that drives the NIC for a fork family killed (`share = "family"`).

`opener_killed.py server HOST PORT` (side a, under `pronghorn run`): listens on HOST:PORT (the
NIC opens at the listen), forks a child that echoes every connection on the inherited listener
(one thread, epoll), prints "ready <parent pid> <child pid>" and sleeps. The test kills the
parent with SIGKILL: no exit handler runs, no keeper is forked. The child must go on serving,
its connections and new ones; the test then kills it too.

`opener_killed.py client HOST PORT` (side b, the kernel): connects and has "one" echoed, prints
"echoed", waits for a line on stdin (the test kills the server's parent meanwhile), then has
"two" echoed on the same connection and "three" on a new one, and prints what it saw as JSON.
Every wait is bounded (a socket timeout of 20 s).
"""
import json
import os
import selectors
import signal
import socket
import sys

from echoing import echo

role, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])


def serve(listener):
    sel = selectors.EpollSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is listener:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(True)
                sel.register(conn, selectors.EVENT_READ)
                continue
            data = s.recv(4096)
            if data:
                s.sendall(data)
            else:
                sel.unregister(s)
                s.close()


if role == "server":
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(16)
    child = os.fork()
    if child == 0:
        serve(ls)
    ls.close()
    print("ready", os.getpid(), child, flush=True)
    while True:
        signal.pause()
else:
    out = {}
    first = socket.create_connection((host, port), timeout=20)
    out["one"] = echo(first, b"one")
    print("echoed", flush=True)
    sys.stdin.readline()
    try:
        out["two: the same connection, its driver killed"] = echo(first, b"two")
    except OSError as e:
        out["two: the same connection, its driver killed"] = repr(e)
    try:
        second = socket.create_connection((host, port), timeout=20)
        out["three: a new connection"] = echo(second, b"three")
        second.close()
    except OSError as e:
        out["three: a new connection"] = repr(e)
    first.close()
    print(json.dumps(out, sort_keys=True), flush=True)
