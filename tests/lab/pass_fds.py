#!/usr/bin/env python3
"""Sockets passed within a fork family (issue 24, SCM_RIGHTS): `pass_fds.py HOST PORT`, run
under `pronghorn run` with `[runtime] share = "family"`, listens on HOST:PORT (printing "ready"),
forks a worker, accepts one connection and passes it to the worker over a unix socketpair
(closing its own); the worker echoes everything on it until the client's end of stream, then
passes it back and exits; the parent checks the connection it got back still answers (its
peer has shut its write half: the parent only closes it). Prints one JSON object of
observations, each true when pronghorn behaved as it must, and exits 0 when all are.
"""
import json
import os
import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
srv = socket.create_server((host, port))
pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
print("ready", flush=True)

pid = os.fork()
if pid == 0:
    pair[0].close()
    _, fds, _, _ = socket.recv_fds(pair[1], 1, 1)
    ok = len(fds) == 1
    if ok:
        # A placeholder the runtime did not take as the socket is an eventfd: ENOTSOCK here.
        c = socket.socket(fileno=fds[0])
        while True:
            data = c.recv(1 << 16)
            if not data:
                break
            c.sendall(data)
        socket.send_fds(pair[1], [b"c"], [c.fileno()])
        c.close()
    os._exit(0 if ok else 1)

pair[1].close()
conn, _ = srv.accept()
out = {}
try:
    socket.send_fds(pair[0], [b"c"], [conn.fileno()])
    out["the connection passes to the worker"] = True
except OSError as e:
    out["the connection passes to the worker"] = str(e)
    # The worker then sees the end of the pair and fails; so does the client (our close ends
    # the connection).
    pair[0].shutdown(socket.SHUT_RDWR)
conn.close()
_, fds, _, _ = socket.recv_fds(pair[0], 1, 1)
back = socket.socket(fileno=fds[0]) if len(fds) == 1 else None
out["the worker passes it back"] = back is not None and back.getpeername()[0] != ""
_, status = os.waitpid(pid, 0)
out["the worker echoed and exited"] = os.waitstatus_to_exitcode(status) == 0
if back is not None:
    back.close()
print(json.dumps(out), flush=True)
sys.exit(0 if all(v is True for v in out.values()) else 1)
