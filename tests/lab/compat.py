#!/usr/bin/env python3
"""Socket-semantics scenarios for the compatibility suite.

`compat.py app PEER PORT LOCAL` runs the scenarios as the application under test and prints one JSON
object: scenario -> list of observations (errno names, readiness masks, byte counts, EOF). The
lab test runs it twice, once on the Linux kernel and once under `pronghorn run`, against
`compat.py peer PORT` on the kernel, and compares the transcripts: any difference fails.

The peer takes commands in-band on each connection, one per line:
  send N     send N bytes            shutwr   shut down its write half
  rst        reset (SO_LINGER 0)     close    close normally
  drain      read until EOF, then reply with the count as a line
Observations never depend on timing: every wait is for an event that must come (a generous
timeout turns a missing event into a visible difference, not a hang).
"""
import errno
import json
import os
import select
import socket
import struct
import sys
import threading

WAIT_MS = 5000


def name(e):
    return errno.errorcode.get(e, str(e))


def attempt(f, *a):
    try:
        r = f(*a)
        return "bytes:%d" % len(r) if isinstance(r, bytes) else r
    except OSError as e:
        return "E" + name(e.errno)


def poll_mask(sock, events, timeout=WAIT_MS):
    p = select.poll()
    p.register(sock, events)
    r = p.poll(timeout)
    return sorted(flag for flag, bit in POLL_BITS if r and r[0][1] & bit)


POLL_BITS = [("IN", select.POLLIN), ("OUT", select.POLLOUT), ("ERR", select.POLLERR),
             ("HUP", select.POLLHUP), ("RDHUP", getattr(select, "POLLRDHUP", 0x2000))]


def connect_nb(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setblocking(False)
    r = s.connect_ex((host, port))
    return s, name(r) if r else "0"


def connected(host, port):
    s = socket.create_connection((host, port), timeout=WAIT_MS / 1000)
    s.settimeout(None)
    return s


def cmd(s, line):
    s.sendall(line.encode() + b"\n")


def scenarios(host, port, local):
    out = {}

    # Non-blocking connect to a closed port: EINPROGRESS, then an error on poll, SO_ERROR.
    s, r = connect_nb(host, 1)
    out["connect_refused"] = [r, poll_mask(s, select.POLLOUT),
                              name(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)),
                              name(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))]
    s.close()

    # Non-blocking connect that succeeds: writable, SO_ERROR 0, the peer's address.
    s, r = connect_nb(host, port)
    obs = [r, poll_mask(s, select.POLLOUT), s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
           s.getpeername()[1] == port, s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)]
    s.setblocking(True)
    cmd(s, "close")
    obs.append(attempt(s.recv, 10))
    out["connect_nonblocking"] = obs
    s.close()

    # Reads: EAGAIN when empty, a short read, FIONREAD, then EOF after the peer's FIN (twice).
    s = connected(host, port)
    s.setblocking(False)
    obs = [attempt(s.recv, 100)]
    cmd(s, "send 10")
    obs.append(poll_mask(s, select.POLLIN))
    import fcntl, termios
    obs.append(struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0])
    obs.append(attempt(s.recv, 3, socket.MSG_PEEK))
    obs.append(attempt(s.recv, 4))
    obs.append(attempt(s.recv, 100))
    obs.append(attempt(s.recv, 100))
    cmd(s, "shutwr")
    obs.append(poll_mask(s, select.POLLIN | POLL_BITS[4][1]))
    obs.append(attempt(s.recv, 100))
    obs.append(attempt(s.recv, 100))
    out["reads_and_eof"] = obs
    s.close()

    # Half-close: after our shutdown(SHUT_WR) the peer sees EOF and we still read its reply.
    s = connected(host, port)
    cmd(s, "drain")
    s.sendall(b"x" * 1000)
    s.shutdown(socket.SHUT_WR)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            break
        reply += chunk
    out["half_close"] = [reply.decode().strip(), attempt(s.recv, 10), attempt(s.send, b"late")]
    s.close()

    # A reset by the peer: ECONNRESET once, then EPIPE on send (MSG_NOSIGNAL), EOF on recv.
    s = connected(host, port)
    cmd(s, "rst")
    obs = [poll_mask(s, select.POLLIN)]
    obs.append(attempt(s.recv, 10))
    obs.append(attempt(s.send, b"x", socket.MSG_NOSIGNAL))
    obs.append(attempt(s.recv, 10))
    out["reset_by_peer"] = obs
    s.close()

    # Listener semantics: EAGAIN on an empty non-blocking accept, EADDRINUSE on a second bind.
    l = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    l.bind((local, 7777))
    l.listen(8)
    l.setblocking(False)
    obs = [attempt(l.accept)]
    l2 = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    obs.append(attempt(l2.bind, (local, 7777)))
    l2.close()
    obs.append(l.getsockname()[1])
    out["listener"] = obs
    l.close()

    # epoll, level- and edge-triggered: a partial read leaves LT ready and ET quiet, until the
    # next arrival wakes ET again.
    obs = []
    for flags, label in ((select.EPOLLIN, "LT"), (select.EPOLLIN | select.EPOLLET, "ET")):
        s = connected(host, port)
        s.setblocking(False)
        ep = select.epoll()
        ep.register(s.fileno(), flags)
        obs.append((label, "empty", len(ep.poll(0))))
        cmd(s, "send 100")
        obs.append((label, "arrived", [e for _, e in ep.poll(WAIT_MS / 1000)] == [select.EPOLLIN]))
        s.recv(10)
        obs.append((label, "partial read", len(ep.poll(0))))
        cmd(s, "send 5")
        obs.append((label, "new arrival", len(ep.poll(WAIT_MS / 1000))))
        ep.close()
        cmd(s, "close")
        s.close()
    out["epoll"] = obs

    # epoll_ctl from another thread while one waits: the waiter gets the new member's event.
    s1, s2 = connected(host, port), connected(host, port)
    cmd(s2, "send 5")
    poll_mask(s2, select.POLLIN)
    ep = select.epoll()
    ep.register(s1.fileno(), select.EPOLLIN)
    got = []
    t = threading.Thread(target=lambda: got.append(ep.poll(WAIT_MS / 1000)))
    t.start()
    ep.register(s2.fileno(), select.EPOLLIN)
    t.join()
    out["epoll_ctl_from_another_thread"] = [[fd == s2.fileno() for fd, _ in got[0]]]
    ep.close()
    for s in (s1, s2):
        cmd(s, "close")
        s.close()

    # A large non-blocking send: short writes, then EAGAIN; the peer drains it all.
    s = connected(host, port)
    cmd(s, "drain")
    s.setblocking(False)
    total, short, eagain = 0, False, False
    for _ in range(10000):
        r = attempt(s.send, b"y" * 65536)
        if r == "EEAGAIN":
            eagain = True
            break
        if r < 65536:
            short = True
        total += r
    s.setblocking(True)
    s.shutdown(socket.SHUT_WR)
    reply = s.makefile().readline().strip()
    out["bulk_nonblocking_send"] = [eagain, int(reply) == total]
    s.close()

    # Options: TCP_NODELAY reads back, SO_ERROR is 0 on a healthy connection.
    s = connected(host, port)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    obs = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
           s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
           s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)]
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 4)
    obs += [s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0,
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            attempt(s.setsockopt, socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 0)]
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    obs.append(list(struct.unpack("ii", s.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8))))
    # SO_RCVTIMEO: a blocking read with nothing to read gives up with EAGAIN.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
    obs.append(list(struct.unpack("ll", s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16))))
    obs.append(attempt(s.recv, 10))
    out["options"] = obs
    cmd(s, "close")
    s.close()
    return out


def peer(port):
    srv = socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=64)
    print("ready", flush=True)

    def serve(c):
        f = c.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                words = line.split()
                if words[0] == b"send":
                    c.sendall(b"z" * int(words[1]))
                elif words[0] == b"shutwr":
                    c.shutdown(socket.SHUT_WR)
                elif words[0] == b"rst":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    c.close()
                    return
                elif words[0] == b"close":
                    c.close()
                    return
                elif words[0] == b"drain":
                    n = len(f.read())
                    c.sendall(b"%d\n" % n)
                    c.close()
                    return
        except OSError:
            return

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "peer":
        peer(int(sys.argv[2]))
    else:
        print(json.dumps(scenarios(sys.argv[2], int(sys.argv[3]), sys.argv[4]), sort_keys=True))
