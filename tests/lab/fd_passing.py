#!/usr/bin/env python3
"""Passing fds over a unix socket (SCM_RIGHTS) under `pronghorn run` (issue 24):
`fd_passing.py HOST PORT` talks to an echo server at HOST:PORT (a kernel host in the accelerated
subnet) and prints one JSON object of observations, each true when pronghorn behaved as it must:

- a pipe, and a TCP socket not yet connected (still the kernel's), pass and work on arrival;
- an accelerated connection does not pass: sendmsg fails with EOPNOTSUPP (its fd here is a
  placeholder the receiver could not use), also among other fds, and nothing arrives;
- the connection still echoes afterwards.
"""
import errno
import json
import os
import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
out = {}


def echo(s, msg):
    s.sendall(msg)
    return s.recv(len(msg), socket.MSG_WAITALL) == msg


def refused(a, fds):
    try:
        socket.send_fds(a, [b"x"], fds)
    except OSError as e:
        return e.errno == errno.EOPNOTSUPP
    return False


def nothing_waits(b):
    b.setblocking(False)
    try:
        b.recv(1)
    except BlockingIOError:
        return True
    finally:
        b.setblocking(True)
    return False


a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
conn = socket.create_connection((host, port), timeout=10)
out["accelerated connection echoes"] = echo(conn, b"before")

r, w = os.pipe()
socket.send_fds(a, [b"p"], [r])
_, fds, _, _ = socket.recv_fds(b, 1, 4)
os.write(w, b"through the pipe")
out["a pipe passes and works"] = len(fds) == 1 and os.read(fds[0], 64) == b"through the pipe"

fresh = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
socket.send_fds(a, [b"t"], [fresh.fileno()])
_, fds, _, _ = socket.recv_fds(b, 1, 4)
got = socket.socket(fileno=fds[0])
out["an unconnected kernel TCP socket passes"] = got.type == socket.SOCK_STREAM and got.family == socket.AF_INET

out["an accelerated connection is refused with EOPNOTSUPP"] = refused(a, [conn.fileno()])
out["also among other fds"] = refused(a, [r, conn.fileno()])
out["and nothing arrives"] = nothing_waits(b)
out["the connection still echoes"] = echo(conn, b"after")
print(json.dumps(out))
