#!/usr/bin/env python3
"""The opener of a fork family execs while its child serves (issue 24): HAProxy's master
re-execs itself into its "wait mode" right after forking its workers. `exec_opener.py HOST
PORT`, run under `pronghorn run` with `[runtime] share = "family"`: listens on HOST:PORT (the
NIC opens there: this process is the family's opener), forks a child that accepts one
connection and echoes it until the client's end of stream, prints "ready", then execs a new
program (Python again) that waits for that child and exits with its status.
"""
import os
import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
srv = socket.create_server((host, port))
pid = os.fork()
if pid == 0:
    conn, _ = srv.accept()
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        conn.sendall(data)
    conn.close()
    os._exit(0)
srv.close()
print("ready", flush=True)
wait = f"import os, sys; _, st = os.waitpid({pid}, 0); sys.exit(os.waitstatus_to_exitcode(st))"
os.execv(sys.executable, [sys.executable, "-c", wait])
