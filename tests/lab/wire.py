#!/usr/bin/python3
"""TCP on the wire (issue 12): crafted segments, the same to pronghorn and to the Linux kernel.

`wire.py server ADDR[,ADDR6] PORT` runs in side a: the listener the conversations talk to,
under `pronghorn run` on pronghorn's addresses and plainly on the lab's kernel path (10.98.0.1,
fd98::1). On PORT it reads and discards; on PORT + 1 it greets: GREETING bytes as soon as it
accepts, and half as many more after it reads a "g"; on PORT + 2 it never reads (a receive
buffer of SMALL_RCVBUF, so that a few segments close the window).

`wire.py compare PRONGHORN[,PRONGHORN6] KERNEL[,KERNEL6] PORT [CASE...]` runs in side b (root,
Debian's python3-scapy and nftables): each case is a conversation of crafted segments sent with
scapy, played against both listeners (over IPv6 for the cases that say so, when the IPv6
addresses are given); the answers are normalised and compared, and any difference prints both
transcripts and fails (exit 1). `wire.py transcript ADDR[,ADDR6] PORT [CASE...]` prints one
side's.

What a transcript keeps of an answer: the flags, sequence and acknowledgment numbers relative to
the server's ISN ("s+N") or ours ("c+N"), the payload length, the TCP options (kinds and, where
they do not depend on buffer sizes, values: MSS, SACK blocks, the TSecr relative to our
timestamps; the TSval is masked), the IP ECN codepoint and TTL, and the window of a RST (the
only one that does not depend on buffer sizes). Two rules make it about the protocol rather than
about timing: a step collects answers until none has come for QUIET seconds (or until the
segment it waits for), and a pure ACK followed in the same step by a data segment that
acknowledges the same with the same ECE and SACK blocks is left out (Linux acknowledges the
first segments of a connection at once, "quickack", where pronghorn may let the ACK ride on its
reply; both tell the peer the same).

Side b's own kernel answers the segments of connections it knows nothing about (our crafted
ones) with RSTs: an nftables table in side b drops what its kernel sends from our source ports
while the comparison runs, and is removed afterwards.
"""
import json
import logging
import selectors
import socket
import subprocess
import sys
import time

GREETING = 1000
SMALL_RCVBUF = 4096
QUIET = 0.5
STEP_LIMIT = 5.0
FIRST_PORT = 5000  # our source ports: 5000-5999, outside side b's ephemeral range
NFT_TABLE = "pronghorn_wire"
TS_BASE = 1_000_000
FLAG_ORDER = "FSRPAUEC"


# ---------------------------------------------------------------------------------------------
# The listener (side a)
# ---------------------------------------------------------------------------------------------

def server(addrs, port):
    sel = selectors.DefaultSelector()
    unread = []  # PORT + 2's connections, held open and never read
    for addr in addrs:
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        for p, mode in ((port, "discard"), (port + 1, "greet"), (port + 2, "never-read")):
            l = socket.socket(family, socket.SOCK_STREAM)
            l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if mode == "never-read":
                l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
            l.bind((addr, p))
            l.listen(64)
            l.setblocking(False)
            sel.register(l, selectors.EVENT_READ, ("listener", mode))
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            kind, state = key.data
            if kind == "listener":
                try:
                    c, _ = key.fileobj.accept()
                except BlockingIOError:
                    continue
                if state == "never-read":
                    unread.append(c)
                    continue
                c.setblocking(False)
                state = state == "greet"
                if state:
                    c.send(b"G" * GREETING)
                sel.register(c, selectors.EVENT_READ, ("conn", {"greets": state}))
                continue
            c = key.fileobj
            try:
                data = c.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(c)
                c.close()
                continue
            if state["greets"] and b"g" in data:
                state["greets"] = False
                c.send(b"H" * (GREETING // 2))


# ---------------------------------------------------------------------------------------------
# The crafted side (side b)
# ---------------------------------------------------------------------------------------------

# scapy warns about IPv6 routes for the multicast of its own neighbor solicitations.
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)


def ecn_name(tos):
    return ["not-ect", "ect1", "ect0", "ce"][tos & 3]


class Target:
    """One listener to talk to: its address, the interface that reaches it, a capture socket.
    (scapy is imported where it is used: the listener runs without it.)"""

    def __init__(self, addr, port):
        from scapy.all import conf, getmacbyip, getmacbyip6, IP, IPv6
        self.addr, self.port, self.v6 = addr, port, ":" in addr
        route = conf.route6.route(addr) if self.v6 else conf.route.route(addr)
        self.iface, self.src = route[0], route[1]
        # The listener's stack may still be starting (pronghorn opens its NIC at the first wait).
        for _ in range(10):
            mac = getmacbyip6(addr) if self.v6 else getmacbyip(addr)
            if mac is not None:
                break
        if mac is None:
            raise SystemExit(f"no link-layer address for {addr} (is the listener up?)")
        self.mac = mac
        self.ip = IPv6 if self.v6 else IP
        self.out = conf.L2socket(iface=self.iface)
        self.cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.cap.bind((self.iface, 0))
        self.cap.setblocking(False)
        self.next_port = FIRST_PORT

    def conn(self, dport_offset=0):
        sport = self.next_port
        self.next_port += 1
        return Conn(self, sport, self.port + dport_offset)


class Conn:
    """One crafted connection: our sequence space, the server's as far as we learnt it."""

    def __init__(self, t, sport, dport):
        self.t, self.sport, self.dport = t, sport, dport
        self.isn = 0x10000000 + sport * 0x10000
        self.anchor = self.isn  # what "c+N" in a transcript counts from
        self.nxt = self.isn
        self.srv_isn = None
        self.rcv_nxt = None
        self.ts = TS_BASE
        self.ts_recent = 0
        self.steps = []

    # Segments -------------------------------------------------------------------------------

    def seg(self, flags, seq=None, ack=None, data=b"", tsval=None, tos=0, syn_options=False):
        from scapy.all import TCP, Ether
        if tsval is None:
            self.ts += 1
            tsval = self.ts
        if syn_options:
            opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (tsval, 0)), ("NOP", None), ("WScale", 7)]
        else:
            opts = [("NOP", None), ("NOP", None), ("Timestamp", (tsval, self.ts_recent))]
        if ack is None and "A" in flags:
            ack = self.rcv_nxt
        ip = self.t.ip(src=self.t.src, dst=self.t.addr)
        if self.t.v6:
            ip.tc = tos
            ip.hlim = 64
        else:
            ip.tos = tos
            ip.ttl = 64
            ip.flags = "DF"
        tcp = TCP(sport=self.sport, dport=self.dport, seq=self.nxt if seq is None else seq,
                  ack=ack or 0, flags=flags, window=502 if not syn_options else 64240, options=opts)
        return Ether(dst=self.t.mac) / ip / tcp / data

    def syn(self, flags="S", tos=0):
        self.nxt = self.isn
        p = self.seg(flags, syn_options=True, tos=tos)
        self.nxt = self.isn + 1
        return p

    def data(self, payload, flags="PA", **kw):
        p = self.seg(flags, data=payload, **kw)
        self.nxt += len(payload)
        return p

    # Steps ----------------------------------------------------------------------------------

    def step(self, label, packets, until=None, gap=0.0):
        """Sends `packets` (`gap` seconds apart), collects the answers (until `until(answers)` or
        QUIET seconds pass without one), records them normalised under `label`, and returns them.
        A gap spreads a burst over more than one poll of the receiver, well inside Linux's
        500 ms rate limit of challenge and out-of-window ACKs (tcp_invalid_ratelimit)."""
        t = self.t
        self._drain()
        for i, p in enumerate(packets):
            if i and gap:
                time.sleep(gap)
            t.out.send(p)
        answers = []
        start = last = time.monotonic()
        while True:
            now = time.monotonic()
            if until is not None and until(answers):
                break
            if now - last >= QUIET or now - start >= STEP_LIMIT:
                break
            pkt = self._receive(0.02)
            if pkt is not None:
                answers.append(pkt)
                self._learn(pkt)
                last = time.monotonic()
        self.steps.append([label, self._normalise(answers)])
        return answers

    def _drain(self):
        while self._receive(0) is not None:
            pass

    def _receive(self, timeout):
        from scapy.all import Ether, TCP
        import select as sel
        if timeout and not sel.select([self.t.cap], [], [], timeout)[0]:
            return None
        try:
            frame, meta = self.t.cap.recvfrom(65536)
        except BlockingIOError:
            return None
        if meta[2] == socket.PACKET_OUTGOING:
            return None
        pkt = Ether(frame)
        ip = pkt.getlayer(self.t.ip)
        if ip is None or TCP not in pkt or ip.src != self.t.addr:
            return None
        tcp = pkt[TCP]
        if tcp.dport != self.sport or tcp.sport != self.dport:
            return None
        return pkt

    def _learn(self, pkt):
        from scapy.all import TCP
        tcp = pkt[TCP]
        flags = str(tcp.flags)
        if "S" in flags and "A" in flags:
            self.srv_isn = tcp.seq
            self.rcv_nxt = (tcp.seq + 1) & 0xffffffff
            self.srv_window = tcp.window  # in bytes: a SYN's is never scaled
            self.srv_wscale = 0
            for kind, value in tcp.options:
                if kind == "WScale":
                    self.srv_wscale = value
        elif self.rcv_nxt is not None and "R" not in flags:
            end = (tcp.seq + len(tcp.payload) + ("F" in flags)) & 0xffffffff
            if 0 < (end - self.rcv_nxt) & 0xffffffff < 1 << 30:
                self.rcv_nxt = end
        for kind, value in tcp.options:
            if kind == "Timestamp":
                self.ts_recent = value[0]

    def _rel(self, v, space):
        """`v` as an offset from the server's ISN ("s") or ours ("c"), `space` tried first."""
        anchors = {"s": self.srv_isn, "c": self.anchor}
        for name in (space, "c" if space == "s" else "s"):
            base = anchors[name]
            if base is None:
                continue
            d = (v - base) & 0xffffffff
            if d < 1 << 24:
                return "%s+%d" % (name, d)
            if d > (1 << 32) - (1 << 24):
                return "%s-%d" % (name, (1 << 32) - d)
        return "0" if v == 0 else "?"

    def _normalise(self, answers):
        from scapy.all import TCP
        out = []
        for pkt in answers:
            ip, tcp = pkt.getlayer(self.t.ip), pkt[TCP]
            flags = "".join(f for f in FLAG_ORDER if f in str(tcp.flags))
            opts = []
            for kind, value in tcp.options:
                if kind == "Timestamp":
                    ecr = value[1]
                    opts.append("ts(ecr=%s)" % ("0" if ecr == 0 else "b+%d" % (ecr - TS_BASE)
                                                if 0 <= ecr - TS_BASE < 1 << 30 else "b+?"))
                elif kind == "SAck":
                    blocks = ["%s..%s" % (self._rel(value[i], "c"), self._rel(value[i + 1], "c"))
                              for i in range(0, len(value), 2)]
                    opts.append("sack(%s)" % ",".join(blocks))
                elif kind == "MSS":
                    opts.append("mss=%d" % value)
                elif kind in ("WScale", "SAckOK"):
                    opts.append(kind.lower())
                elif kind not in ("NOP", "EOL"):
                    opts.append("%s" % kind)
            fields = [flags, "seq=" + self._rel(tcp.seq, "s")]
            if "A" in flags:
                fields.append("ack=" + self._rel(tcp.ack, "c"))
            if len(tcp.payload):
                fields.append("len=%d" % len(tcp.payload))
            if "R" in flags:
                fields.append("win=%d" % tcp.window)
            if opts:
                fields.append(" ".join(sorted(opts)))
            tos = ip.tc if self.t.v6 else ip.tos
            ttl = ip.hlim if self.t.v6 else ip.ttl
            fields.append("%s ttl=%d" % (ecn_name(tos), ttl))
            out.append((fields, tcp))
        kept = []
        for i, (fields, tcp) in enumerate(out):
            if self._redundant_ack(tcp, [t for _, t in out[i + 1:]]):
                continue
            kept.append(" ".join(fields))
        return kept

    @staticmethod
    def _redundant_ack(tcp, later):
        """A pure ACK that a later data segment of the step repeats (see the module doc)."""
        flags = str(tcp.flags)
        if len(tcp.payload) or any(f in flags for f in "SFR") or "A" not in flags:
            return False
        def echo(seg):
            return seg.ack, "E" in str(seg.flags), [v for k, v in seg.options if k == "SAck"]
        return any(len(t.payload) and "A" in str(t.flags) and echo(t) == echo(tcp) for t in later)

    # Conversations --------------------------------------------------------------------------

    def establish(self, syn_flags="S", tos=0, label="SYN"):
        """Our SYN (recorded as a step, until the SYN-ACK); the caller sends the ACK."""
        self.step(label, [self.syn(syn_flags, tos)], until=lambda a: any("S" in str(p["TCP"].flags) for p in a))

    def reset(self):
        """The end of a conversation: a RST at exactly the sequence number the server expects."""
        self.step("RST at RCV.NXT", [self.seg("R", ack=None)])


def got_data(total):
    """A step's end: the server sent `total` bytes of data."""
    def until(answers):
        from scapy.all import TCP
        return sum(len(p[TCP].payload) for p in answers) >= total
    return until


# The cases: each takes a Target and returns its transcript (a list of [step, answers]). ---------

def to_listener(name, label, flags, ack_offset=None, **fields):
    """A case of one segment to the listener, on no connection (RFC 9293 3.10.7.2); with an ACK
    field of our ISN + `ack_offset` if that is given."""
    def case(t):
        c = t.conn()
        ack = None if ack_offset is None else c.isn + ack_offset
        c.step(label, [c.seg(flags, seq=c.isn, ack=ack, **fields)])
        return c.steps
    case.__name__ = name
    return case


LISTENER_CASES = [
    to_listener("listener_syn_rst", "SYN+RST to a listener", "SR"),
    to_listener("listener_fin", "FIN without ACK to a listener", "F"),
    to_listener("listener_data_without_ack", "data without ACK to a listener", "P", data=b"x" * 10),
    to_listener("listener_no_flags", "segment without flags to a listener", ""),
    to_listener("listener_bare_ack", "bare ACK to a listener", "A", ack_offset=7777),
    to_listener("listener_syn_ack", "SYN-ACK to a listener", "SA", ack_offset=7777, syn_options=True),
    to_listener("listener_fin_ack", "FIN-ACK to a listener", "FA", ack_offset=7777),
    to_listener("listener_syn_fin", "SYN+FIN to a listener", "SF", syn_options=True),
]


def on_a_connection(body):
    """A case played on a connection we open (its handshake recorded too) and end with an
    exact RST."""
    def case(t):
        c = t.conn()
        c.establish()
        c.step("ACK", [c.seg("A")])
        body(c)
        c.reset()
        return c.steps
    case.__name__ = body.__name__
    return case


@on_a_connection
def challenge_ack_to_in_window_rst(c):
    c.step("RST in the window, not at RCV.NXT", [c.seg("R", seq=c.nxt + 100)])


@on_a_connection
def challenge_ack_to_syn_on_established(c):
    c.step("SYN in the window on an established connection", [c.seg("S", seq=c.nxt + 10, syn_options=True)])


@on_a_connection
def challenge_ack_to_out_of_window_syn(c):
    c.step("SYN outside the window on an established connection",
           [c.seg("S", seq=c.nxt + 0x40000000, syn_options=True)])


@on_a_connection
def challenge_ack_burst(c):
    burst = [c.seg("R", seq=c.nxt + 100 * (i + 1)) for i in range(4)]
    burst += [c.seg("S", seq=c.nxt + 10 * (i + 1), syn_options=True) for i in range(4)]
    c.step("4 RSTs and 4 SYNs in the window, 25 ms apart", burst, gap=0.025)


@on_a_connection
def out_of_window_burst(c):
    far = c.nxt + 1000000
    c.step("3 data segments beyond the window, 25 ms apart",
           [c.seg("PA", seq=far + 10 * i, data=b"f" * 10) for i in range(3)], gap=0.025)
    c.step("3 empty ACKs beyond the window, 25 ms apart",
           [c.seg("A", seq=far + 10 * i) for i in range(3)], gap=0.025)


@on_a_connection
def paws_burst(c):
    c.step("data", [c.data(b"a" * 10)])
    old = [c.seg("PA", data=b"o" * 10, tsval=TS_BASE - 1000) for _ in range(3)]
    c.step("3 data segments with an old TSval, 25 ms apart", old, gap=0.025)
    c.step("3 empty ACKs with an old TSval, 25 ms apart",
           [c.seg("A", tsval=TS_BASE - 1000) for _ in range(3)], gap=0.025)


@on_a_connection
def old_ack_one_below_snd_una(c):
    c.step("data acknowledging one less than SND.UNA",
           [c.seg("PA", ack=(c.rcv_nxt - 1) & 0xffffffff, data=b"x" * 10)])


@on_a_connection
def old_ack_100_below_snd_una(c):
    c.step("data acknowledging 100 less than SND.UNA",
           [c.seg("PA", ack=(c.rcv_nxt - 100) & 0xffffffff, data=b"x" * 10)])


@on_a_connection
def paws_blind_segment_with_unacceptable_ack(c):
    blind = c.seg("PA", ack=(c.rcv_nxt + 100000) & 0xffffffff, data=b"b" * 20, tsval=TS_BASE + (1 << 30))
    c.step("blind in-window data, TSval far ahead, ACK of unsent data", [blind])
    c.step("the real peer's next segment", [c.data(b"r" * 20)])


@on_a_connection
def paws_old_timestamp(c):
    c.step("data", [c.data(b"a" * 10)])
    old = c.seg("PA", data=b"o" * 10, tsval=TS_BASE - 1000)
    c.step("data with a TSval older than TS.Recent", [old])
    c.step("the same data with a current TSval", [c.data(b"o" * 10)])


@on_a_connection
def dsack_for_duplicate_data(c):
    start = c.nxt
    c.step("100 bytes", [c.data(b"d" * 100)])
    c.step("the same 100 bytes again", [c.seg("PA", seq=start, data=b"d" * 100)])
    c.step("50 old and 50 new bytes", [c.seg("PA", seq=start + 50, data=b"d" * 100)])
    c.nxt = start + 150
    c.step("the last 100 bytes 3 times, 25 ms apart",
           [c.seg("PA", seq=start + 50, data=b"d" * 100) for _ in range(3)], gap=0.025)
    c.step("the first 100 bytes (older than the last ACK) 3 times, 25 ms apart",
           [c.seg("PA", seq=start, data=b"d" * 100) for _ in range(3)], gap=0.025)


@on_a_connection
def ack_of_unsent_data(c):
    c.step("data acknowledging 1000 bytes never sent",
           [c.seg("PA", ack=(c.rcv_nxt + 1000) & 0xffffffff, data=b"u" * 10)])
    c.step("the same data with the right ACK", [c.data(b"u" * 10)])


@on_a_connection
def data_with_an_mss_option_of_wrong_length(c):
    """Linux's tcp_parse_options skips a known option whose length is wrong for its kind (here
    an MSS of length 3) and reads on by its length: the segment is processed."""
    from scapy.all import TCP
    p = c.data(b"m" * 10)
    p[TCP].options = [(2, b"\x05"), ("NOP", None)] + p[TCP].options
    c.step("10 bytes with an MSS option of length 3", [p])


@on_a_connection
def sack_of_out_of_order_data_with_fin(c):
    """The SACK block for out-of-order data that ends with a FIN covers the FIN (Linux's
    `tcp_data_queue_ofo` counts the FIN in the segment's end_seq)."""
    start = c.nxt
    c.step("100 bytes and FIN, 100 bytes ahead of RCV.NXT",
           [c.seg("FPA", seq=start + 100, data=b"f" * 100)])


def zero_window_probes(t):
    """Probes of a closed window (the listener never reads). Linux 6.x drops a segment whose
    data runs past the window while unread data waits (`tcp_sequence`,
    SKB_DROP_REASON_TCP_INVALID_END_SEQUENCE): a one-byte probe at RCV.NXT is answered with a
    duplicate ACK that echoes TS.Recent, the TSval of the last acceptable segment, not the
    probe's (RFC 7323 section 4.3)."""
    from scapy.all import TCP
    c = t.conn(2)
    c.establish()
    c.step("ACK", [c.seg("A")])
    # Fill the window, a window's worth at a time (how much each stack takes depends on its
    # buffers: recorded only as whether the window closed). Then the TSvals start again from
    # the same value on both.
    closed = False
    for _ in range(30):
        window = c.srv_window
        if window == 0:
            closed = True
            break
        sizes = [min(1000, window - at) for at in range(0, window, 1000)]
        answers = c.step("fill", [c.data(b"z" * n) for n in sizes])
        c.steps.pop()
        acks = [p[TCP] for p in answers if "A" in str(p[TCP].flags)]
        if not acks:
            break
        c.nxt, c.srv_window = acks[-1].ack, acks[-1].window << c.srv_wscale
    c.steps.append(["fill the window", ["the window closed" if closed else "the window stayed open"]])
    # From here "c+N" counts from where the window closed, and TSvals go on from one value.
    c.anchor = c.nxt
    c.ts = TS_BASE + 1000
    c.step("ACK at RCV.NXT", [c.seg("A")])
    c.step("probe: one byte at RCV.NXT", [c.seg("PA", data=b"p")])
    c.step("probe: no data, one below RCV.NXT", [c.seg("A", seq=c.nxt - 1)])
    c.reset()
    return c.steps


def ecn_setup_syn(t):
    """RFC 3168 6.1.1: an ECN-setup SYN (ECE, CWR) is answered with ECE on the SYN-ACK; then
    data is ECT(0), CE is echoed with ECE until our CWR, and our ECE makes the server set CWR
    on its next new data."""
    c = t.conn(1)
    c.establish(syn_flags="SEC", label="ECN-setup SYN")
    c.step("ACK; the server greets", [c.seg("A")], until=got_data(GREETING))
    c.step("ACK of the greeting with ECE, and a 'g'", [c.data(b"g", flags="PAE")],
           until=got_data(GREETING // 2))
    c.step("ACK of the second greeting", [c.seg("A")])
    c.step("data, CE-marked", [c.data(b"c" * 10, tos=3)])
    c.step("data, ECT(0)", [c.data(b"e" * 10, tos=2)])
    c.step("data with CWR", [c.data(b"w" * 10, flags="PAC", tos=2)])
    c.reset()
    return c.steps


def ecn_setup_syn_over_ipv6(t):
    """As ecn_setup_syn, with the ECN field in IPv6's traffic class."""
    return ecn_setup_syn(t)


ecn_setup_syn_over_ipv6.ipv6 = True


def ecn_not_asked(t):
    """A SYN without ECE and CWR: no ECN; data goes Not-ECT, a CE mark is not echoed."""
    c = t.conn(1)
    c.establish()
    c.step("ACK; the server greets", [c.seg("A")], until=got_data(GREETING))
    c.step("ACK of the greeting", [c.seg("A")])
    c.step("data, CE-marked", [c.data(b"c" * 10, tos=3)])
    c.reset()
    return c.steps


def ecn_setup_syn_with_ece_only(t):
    c = t.conn()
    c.establish(syn_flags="SE", label="SYN with ECE but no CWR")
    c.reset()
    return c.steps


def ecn_setup_syn_that_is_ect(t):
    c = t.conn()
    c.establish(syn_flags="SEC", tos=2, label="ECN-setup SYN sent ECT(0)")
    c.reset()
    return c.steps


CASES = LISTENER_CASES + [
    challenge_ack_to_in_window_rst, challenge_ack_to_syn_on_established, challenge_ack_to_out_of_window_syn,
    challenge_ack_burst, out_of_window_burst,
    paws_blind_segment_with_unacceptable_ack, paws_old_timestamp, paws_burst,
    dsack_for_duplicate_data, ack_of_unsent_data, old_ack_one_below_snd_una, old_ack_100_below_snd_una,
    data_with_an_mss_option_of_wrong_length, sack_of_out_of_order_data_with_fin, zero_window_probes,
    ecn_setup_syn, ecn_setup_syn_over_ipv6, ecn_not_asked, ecn_setup_syn_with_ece_only, ecn_setup_syn_that_is_ect,
]


def chosen(names):
    by_name = {f.__name__: f for f in CASES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit("unknown cases %s; known: %s" % (unknown, ", ".join(by_name)))
    return [by_name[n] for n in names] if names else CASES


class SideBQuiet:
    """Side b's kernel stays out of our crafted connections: it would answer every segment of
    theirs with a RST (it holds no socket for them)."""

    def __enter__(self):
        last = FIRST_PORT + 999
        rules = (f"table inet {NFT_TABLE} {{\n chain out {{\n type filter hook output priority 0; policy accept;\n"
                 f" tcp sport {FIRST_PORT}-{last} drop\n }}\n}}\n")
        subprocess.run(["nft", "-f", "-"], input=rules.encode(), check=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], check=False)


def transcripts(addrs, port, cases, port_base):
    """Each case's transcript against the listener at `addrs` (IPv4, then IPv6 if given); the
    IPv6 cases are left out without an IPv6 address."""
    targets = [Target(addr, port) for addr in addrs]
    for t in targets:
        t.next_port = port_base
    out = {}
    for case in cases:
        v6 = getattr(case, "ipv6", False)
        if v6 and len(targets) < 2:
            continue
        out[case.__name__] = case(targets[1] if v6 else targets[0])
    return out


def render(steps):
    lines = []
    for label, answers in steps:
        lines.append("  > " + label)
        lines.extend("    < " + a for a in answers)
        if not answers:
            lines.append("    < (nothing)")
    return "\n".join(lines)


def main(argv):
    if len(argv) >= 3 and argv[0] == "server":
        server(argv[1].split(","), int(argv[2]))
        return 0
    if len(argv) >= 3 and argv[0] == "transcript":
        with SideBQuiet():
            got = transcripts(argv[1].split(","), int(argv[2]), chosen(argv[3:]), FIRST_PORT)
        for name, steps in got.items():
            print(name)
            print(render(steps))
        return 0
    if len(argv) >= 4 and argv[0] == "compare":
        pronghorn, kernel, port = argv[1].split(","), argv[2].split(","), int(argv[3])
        cases = chosen(argv[4:])
        with SideBQuiet():
            k = transcripts(kernel, port, cases, FIRST_PORT)
            p = transcripts(pronghorn, port, cases, FIRST_PORT + 500)
        failed = [n for n in k if k[n] != p[n]]
        for name in k:
            print("%s: %s" % (name, "differs" if name in failed else "same"))
        for name in failed:
            print("\n%s differs.\nLinux kernel:\n%s\npronghorn:\n%s" % (name, render(k[name]), render(p[name])))
        print(json.dumps({"cases": len(k), "differ": failed}))
        return 1 if failed else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
