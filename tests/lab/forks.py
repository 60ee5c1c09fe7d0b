#!/usr/bin/env python3
"""fork() under `pronghorn run` (issue 10): `forks.py HOST PORT [family]` talks to an echo
server at HOST:PORT (a kernel host in the accelerated subnet) and prints one JSON object of
observations. `family`: the config says `[runtime] share = "family"` (issue 24 stage 3), and a
child forked after the NIC opened (fork or _Fork) echoes through the inherited connection
instead of failing; the fork child then execs as below (the family keeps the connection for
the parent), the _Fork child exits through exit(), which lets go of its copy of the connection.

- before: a child forked before the process used the network connects and is echoed (it keeps
  the runtime and opens the NIC itself; the parent never does before it ends).
- after: the parent connects (its NIC opens), then forks. The child's use of the inherited
  connection fails with EOPNOTSUPP; it then copies the socket to an fd that is not
  close-on-exec (as an inetd-style child makes a connection its stdin) and execs a program: the
  close-on-exec fd is gone there, and the copy is a socket that was never connected (read:
  ENOTCONN, write: EPIPE), not the placeholder eventfd that takes 8-byte writes and leaves
  reads waiting; the parent's connection still echoes afterwards.
- nic fds: the NIC's AF_XDP or AF_PACKET sockets and BPF objects, once open, are close-on-exec
  (a program the server execs never holds a raw socket on the interface).
- subprocess: a program run with the connection as its stdin (vfork, dup2, exec) finds a
  socket that was never connected there; the parent's connection and fds are untouched (a vfork
  child runs in its parent's memory: its dup2 and closes must not change the parent's runtime).
- posix_spawn: a program given the connection by a dup2 file action (as its stdin), and one
  that inherits it (made inheritable), find a socket that was never connected there.
- _Fork, daemon: glibc's fork without atfork handlers, and daemon(), which forks inside libc,
  make children like fork's: the inherited connection fails with EOPNOTSUPP. daemon() ends the
  parent, so its child prints the observations. With `family` the daemon's child echoes on the
  inherited connection after its parent, the NIC's driver, is gone: a keeper (issue 24 stage 4)
  drives the NIC for it.
"""
import ctypes
import errno
import json
import os
import socket
import subprocess
import sys

from echoing import echo

host, port = sys.argv[1], int(sys.argv[2])
family = sys.argv[3:] == ["family"]


def child_status(pid):
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


out = {}

# A child forked before any socket: its own runtime and NIC.
pid = os.fork()
if pid == 0:
    with socket.create_connection((host, port), timeout=10) as s:
        os._exit(0 if echo(s, b"from the child") else 1)
out["before: child echoed"] = child_status(pid) == 0

# The parent serves; a child forked now cannot use the parent's port.
s = socket.create_connection((host, port), timeout=10)
out["after: parent echoed"] = echo(s, b"parent, first")


def nic_fds():
    """The fds of the NIC: AF_PACKET (17) or AF_XDP (44) sockets, BPF maps and programs."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("anon_inode:bpf"):
            found.append(int(name))
        elif link.startswith("socket:") and socket_domain(int(name)) in (17, 44):
            found.append(int(name))
    return found


def socket_domain(fd):
    """SO_DOMAIN (Python's socket(fileno=) needs getsockname, which AF_XDP lacks)."""
    value, size = ctypes.c_int(), ctypes.c_uint(4)
    libc = ctypes.CDLL(None)
    if libc.getsockopt(fd, socket.SOL_SOCKET, 39, ctypes.byref(value), ctypes.byref(size)) != 0:
        return None
    return value.value


def cloexec(fd):
    with open(f"/proc/self/fdinfo/{fd}") as f:
        flags = next(line for line in f if line.startswith("flags:")).split()[1]
    return int(flags, 8) & 0o2000000 != 0


fds = nic_fds()
out["nic fds: the NIC's sockets and BPF fds are close-on-exec"] = bool(fds) and all(cloexec(fd) for fd in fds)
if not out["nic fds: the NIC's sockets and BPF fds are close-on-exec"]:
    out["nic fds: not close-on-exec"] = [(fd, os.readlink(f"/proc/self/fd/{fd}")) for fd in fds if not cloexec(fd)]
EXEC_PROBE = """
import errno, os, signal, sys
signal.alarm(10)
closed, copy = sys.argv[1], int(sys.argv[2])
try:
    if closed != "-":
        os.fstat(int(closed))
        sys.exit(21)
except OSError:
    pass
try:
    os.read(copy, 8)
    sys.exit(22)
except OSError as e:
    if e.errno != errno.ENOTCONN:
        sys.exit(23)
try:
    os.write(copy, b"x")
    sys.exit(24)
except OSError as e:
    sys.exit(0 if e.errno == errno.EPIPE else 25)
"""
sys.stdout.flush()
pid = os.fork()
if pid == 0 and family:
    # The parent drives the NIC; this child's calls work on the shared stack. Its exec then
    # leaves the family: the copy it kept is not connected there, and the parent's connection
    # stays open (the parent still holds it).
    if not echo(s, b"the child, on the family's stack"):
        os._exit(12)
    copy = os.dup2(s.fileno(), 100)
    os.execv(sys.executable, [sys.executable, "-c", EXEC_PROBE, str(s.fileno()), str(copy)])
if pid == 0:
    try:
        s.send(b"x")
        code = 10
    except OSError as e:
        code = 0 if e.errno == errno.EOPNOTSUPP else 11
    if code == 0:
        # The program it runs next does not see the (close-on-exec) socket, and its inheritable
        # copy fails as a socket with no connection (an alarm ends a read that would wait).
        copy = os.dup2(s.fileno(), 100)
        os.execv(sys.executable, [sys.executable, "-c", EXEC_PROBE, str(s.fileno()), str(copy)])
    os._exit(code)
code = child_status(pid)
if family:
    out["after: child echoes through the inherited connection, and a copy kept across exec is not connected"] = code == 0
else:
    out["after: child send gets EOPNOTSUPP, exec closes it, and a copy kept across exec is not connected"] = code == 0
if code != 0:
    out["after: child exit code"] = code
out["after: parent still echoes"] = echo(s, b"parent, after the child")


def inherited_send_fails():
    try:
        s.send(b"x")
        return False
    except OSError as e:
        return e.errno == errno.EOPNOTSUPP


libc = ctypes.CDLL(None, use_errno=True)
pid = libc._Fork()
if pid == 0 and family:
    sys.exit(0 if echo(s, b"the _Fork child") else 1)
if pid == 0:
    os._exit(0 if inherited_send_fails() else 1)
if family:
    out["_Fork: child echoes through the inherited connection"] = child_status(pid) == 0
else:
    out["_Fork: child send gets EOPNOTSUPP"] = child_status(pid) == 0
out["_Fork: parent still echoes"] = echo(s, b"parent, after _Fork")

# A program run with the connection as its stdin (Python's subprocess: vfork, dup2 to 0,
# exec): its dup and its closes change its own fds only, so the parent's connection echoes on
# and the parent's fd 0 is what it was; the program's stdin is a socket that was never
# connected (ENOTCONN), not the placeholder eventfd.
STDIN_PROBE = """
import errno, os, signal, sys
signal.alarm(10)
try:
    os.read(0, 8)
    sys.exit(31)
except OSError as e:
    sys.exit(0 if e.errno == errno.ENOTCONN else 32)
"""
# The parent's own stdin: a pipe holding a known line (the child's dup2 to its fd 0 once made
# the parent's runtime take the parent's fd 0 for the connection: its reads went to the socket).
r, w = os.pipe()
os.write(w, b"stdin\n")
os.close(w)
os.dup2(r, 0)
os.close(r)
code = subprocess.run([sys.executable, "-c", STDIN_PROBE], stdin=s.fileno(), timeout=30).returncode
out["subprocess: its stdin is a socket with no connection, the parent's fds are as they were"] = (
    code == 0 and echo(s, b"parent, after the subprocess") and os.read(0, 16) == b"stdin\n"
)
if code != 0:
    out["subprocess: exit code"] = code

# posix_spawn: glibc's child dups and execs through internal calls no hook sees, so the parent
# does it in the file actions' hooks and posix_spawn's: a dup2 action from the connection (the
# program's stdin) dups a socket that was never connected instead, and so does one added for
# the connection made inheritable, which the program would otherwise get as it is.
pid = os.posix_spawn(
    sys.executable, [sys.executable, "-c", STDIN_PROBE], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, s.fileno(), 0)]
)
codes = [child_status(pid)]
os.set_inheritable(s.fileno(), True)
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", EXEC_PROBE, "-", str(s.fileno())], os.environ)
codes.append(child_status(pid))
os.set_inheritable(s.fileno(), False)
out["posix_spawn: a dup2 action's copy and an inherited fd are sockets with no connection"] = codes == [0, 0] and echo(
    s, b"parent, after posix_spawn"
)
if codes != [0, 0]:
    out["posix_spawn: exit codes"] = codes

sys.stdout.flush()
if libc.daemon(1, 1) != 0:
    out["daemon: failed"] = ctypes.get_errno()
# Only the daemon's child gets here (the parent exited inside daemon()). With `family` it
# shares the stack, which a keeper forked at its parent's exit drives (the parent drove the
# NIC); without, it gets EOPNOTSUPP.
if family:
    out["daemon: child echoes through the inherited connection, its parent gone"] = echo(s, b"the daemon")
else:
    out["daemon: child send gets EOPNOTSUPP"] = inherited_send_fails()
print(json.dumps(out, sort_keys=True), flush=True)
os._exit(0)
