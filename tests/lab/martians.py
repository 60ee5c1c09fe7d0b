#!/usr/bin/python3
"""Segments from sources no peer may use (issue 22): the server must drop them and keep serving.

Runs in side b (root, Debian's python3-scapy) against a `wire.py server ADDR,ADDR6 PORT` under
pronghorn in side a (which greets with wire.py's GREETING on PORT + 1).

`martians.py send ADDR,ADDR6 PORT` sends, with scapy, SYNs to the listener on PORT and SYNs and
ACKs to a closed port from sources Linux treats as martian: to ADDR6 from the IPv4-mapped
address of side b (::ffff:a.b.c.d, which used to abort an accelerated server on its answer),
from ::1, ff02::1 and ADDR6 itself; to ADDR from 255.255.255.255, 224.0.0.1, 127.0.0.1, 0.0.0.0
and ADDR itself. Prints {"sent": N, "answers": [...]}; exits 1 if anything was answered.

`martians.py serves ADDR,ADDR6 PORT`: an ordinary connection over each family must still get
the greeting. Prints {"served": {...}}; exits 1 if one did not.
"""
import json
import socket
import sys
import time

GREETING = 1000
CLOSED = 50  # PORT + CLOSED: nobody listens there
FIRST_PORT = 6000  # our crafted segments' source ports


def send(addr4, addr6, port):
    from scapy.all import conf, getmacbyip, getmacbyip6, Ether, IP, IPv6, TCP
    iface, mine4 = conf.route.route(addr4)[0], conf.route.route(addr4)[1]
    mac4, mac6 = getmacbyip(addr4), getmacbyip6(addr6)
    if mac4 is None or mac6 is None:
        raise SystemExit(f"no link-layer address for {addr4} or {addr6} (is the server up?)")
    sources = [(IPv6, mac6, addr6, s) for s in (f"::ffff:{mine4}", "::1", "ff02::1", addr6)]
    sources += [(IP, mac4, addr4, s) for s in ("255.255.255.255", "224.0.0.1", "127.0.0.1", "0.0.0.0", addr4)]
    out = conf.L2socket(iface=iface)
    cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    cap.bind((iface, 0))
    cap.setblocking(False)
    sent = 0
    for k, (ip, mac, dst, src) in enumerate(sources):
        for dport, flags in ((port, "S"), (port + CLOSED, "S"), (port + CLOSED, "A")):
            tcp = TCP(sport=FIRST_PORT + k, dport=dport, flags=flags, seq=1000, ack=1)
            out.send(Ether(dst=mac) / ip(src=src, dst=dst) / tcp)
            sent += 1
    # Anything from the server to one of our crafted ports is an answer it must not have sent.
    time.sleep(0.5)
    answers = []
    while True:
        try:
            pkt = Ether(cap.recv(65535))
        except BlockingIOError:
            break
        if TCP in pkt and FIRST_PORT <= pkt[TCP].dport < FIRST_PORT + len(sources):
            answers.append(pkt.summary())
    print(json.dumps({"sent": sent, "answers": answers}))
    return 1 if answers else 0


def serves(addr4, addr6, port):
    served = {}
    for dst in (addr4, addr6):
        try:
            with socket.create_connection((dst, port + 1), timeout=5) as c:
                got = b""
                while len(got) < GREETING:
                    chunk = c.recv(GREETING - len(got))
                    if not chunk:
                        break
                    got += chunk
                served[dst] = got == b"G" * GREETING
        except OSError as e:
            served[dst] = str(e)
    print(json.dumps({"served": served}))
    return 0 if all(v is True for v in served.values()) else 1


def main(argv):
    addr4, addr6 = argv[1].split(",")
    return {"send": send, "serves": serves}[argv[0]](addr4, addr6, int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
