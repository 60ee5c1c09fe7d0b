//! Urgent data (RFC 9293 3.8.5, read as RFC 6093 and Linux do): [`Urgent`] owns the urgent
//! pointer we send (SND.UP) and the one we received, with the out-of-band byte; the
//! connection's methods here take a pointer in, keep the mark that stops reads, and answer the
//! application's calls about it (MSG_OOB, SIOCATMARK, SO_OOBINLINE, POLLPRI). It must not touch
//! the stream's bytes beyond the one urgent byte a new mark drops.

use wire::{TcpFlags, TcpRepr};

use crate::payload::Payload;
use crate::seq;

use super::params::Opt;
use super::{Connection, Error, State, EV_URGENT};

/// Urgent data from the peer, Linux's `urg_data` states. RFC 6093 section 4 (and every stack
/// in use) reads the urgent pointer as the byte *after* the urgent data; Linux keeps one byte of
/// it, the last, out of the stream (unless SO_OOBINLINE) and a newer pointer replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UrgentIn {
    /// No urgent mark ahead of the reader.
    None,
    /// The pointer arrived; the byte it marks has not yet.
    Announced,
    /// The urgent byte, waiting for `recv_urgent`.
    Arrived(u8),
    /// The urgent byte was taken with `recv_urgent`; its mark stays until the reader passes it.
    Taken,
}

/// Urgent data both ways.
#[derive(Debug, Clone, Copy)]
pub(super) struct Urgent {
    /// SND.UP: the sequence number after the last urgent byte sent (Linux's `snd_up`), while
    /// `sending`.
    pub(super) snd_up: u32,
    /// The peer's urgent byte's sequence number (Linux's `urg_seq`), unless `rcv` is `None`.
    pub(super) rcv_up: u32,
    pub(super) rcv: UrgentIn,
    /// Urgent data sent and not yet acknowledged: segments before SND.UP carry URG.
    pub(super) sending: bool,
}

impl Urgent {
    /// None either way; SND.UP at `iss`.
    pub(super) fn new(iss: u32) -> Self {
        Urgent { snd_up: iss, rcv_up: 0, rcv: UrgentIn::None, sending: false }
    }

    /// The peer acknowledged up to `ack`: once beyond SND.UP, no more URG.
    pub(super) fn acked(&mut self, ack: u32) {
        if self.sending && seq::ge(ack, self.snd_up) {
            self.sending = false;
        }
    }

    /// The urgent pointer of a segment at `seq` sent when SND.NXT is `snd_nxt`, if it carries
    /// URG. Every segment before SND.UP says where urgent data ends, probes and pure ACKs too;
    /// a pointer beyond what the 16-bit field reaches is sent as 0xFFFF while that points past
    /// everything sent (Linux's `tcp_transmit_skb`).
    pub(super) fn pointer_at(&self, seq: u32, snd_nxt: u32) -> Option<u16> {
        if !(self.sending && seq::lt(seq, self.snd_up)) {
            return None;
        }
        let up = self.snd_up.wrapping_sub(seq);
        if up <= 0xffff {
            Some(up as u16)
        } else if seq::gt(seq.wrapping_add(0xffff), snd_nxt) {
            Some(0xffff)
        } else {
            None
        }
    }
}

impl Connection {
    /// `send(..., MSG_OOB)`: [`Connection::send`], and the last byte taken is urgent: the urgent
    /// pointer (SND.UP) moves to just after it, as Linux's `tcp_mark_urg` does, and every segment
    /// sent before it carries URG until the peer acknowledges it (RFC 9293 3.8.5; the pointer
    /// names the byte after the urgent data, RFC 6093 section 4). Nagle does not hold urgent
    /// data back.
    pub fn send_urgent(&mut self, data: &[u8]) -> Result<usize, Error> {
        let n = self.send(data)?;
        if n > 0 {
            self.urg.snd_up = self.snd.data_end();
            self.urg.sending = true;
        }
        Ok(n)
    }

    /// `recv(..., MSG_OOB)`: the urgent byte, as Linux's `tcp_recv_urg` answers. It never waits:
    /// `Err(WouldBlock)` while the pointer has arrived and the byte has not; `Err(InvalidInput)`
    /// (EINVAL) with SO_OOBINLINE, without urgent data, or once it was taken; `Err(NotConnected)`
    /// on a connection that ended without the peer's FIN; `Ok(None)` (end of stream) after it.
    /// `peek` (MSG_PEEK) leaves the byte to be read again.
    pub fn recv_urgent(&mut self, peek: bool) -> Result<Option<u8>, Error> {
        if self.p.has(Opt::OobInline) || matches!(self.urg.rcv, UrgentIn::None | UrgentIn::Taken) {
            return Err(Error::InvalidInput);
        }
        if self.state == State::Closed && !self.rcv.fin_received {
            return Err(Error::NotConnected);
        }
        if let UrgentIn::Arrived(byte) = self.urg.rcv {
            if !peek {
                self.urg.rcv = UrgentIn::Taken;
            }
            return Ok(Some(byte));
        }
        if self.rcv.fin_received || self.state == State::Closed {
            return Ok(None);
        }
        Err(Error::WouldBlock)
    }

    /// Bytes between the reader and the urgent mark (`Some(0)`: at the mark, SIOCATMARK), or
    /// `None` without urgent data ahead.
    pub fn urgent_mark(&self) -> Option<usize> {
        (self.urg.rcv != UrgentIn::None).then(|| self.urg.rcv_up.wrapping_sub(self.rcv.read_seq()) as usize)
    }

    /// SO_OOBINLINE: the urgent byte stays in the stream (`recv` returns it, `recv_urgent` says
    /// EINVAL); reads still stop at the mark and SIOCATMARK still finds it.
    pub fn set_oob_inline(&mut self, inline: bool) {
        self.p.opts.set(Opt::OobInline, inline);
    }

    /// EPOLLPRI: the urgent byte has arrived and was not taken yet (with SO_OOBINLINE too).
    pub fn has_urgent(&self) -> bool {
        matches!(self.urg.rcv, UrgentIn::Arrived(_))
    }

    /// What a read takes from the receive buffer: `(skip, len)`, the urgent byte skipped at the
    /// mark (unless SO_OOBINLINE) and `len` bytes after it, ending at a mark ahead.
    pub(super) fn readable_span(&self) -> (usize, usize) {
        let avail = self.rcv.buf.len();
        match self.urgent_mark() {
            Some(0) if !self.p.has(Opt::OobInline) && avail > 0 => (1, avail - 1),
            Some(ahead) if ahead > 0 => (0, ahead.min(avail)),
            _ => (0, avail),
        }
    }

    /// After a read: once the reader is past the mark there is no urgent data any more.
    pub(super) fn passed_urgent_mark(&mut self) {
        if self.urg.rcv != UrgentIn::None && seq::gt(self.rcv.read_seq(), self.urg.rcv_up) {
            self.urg.rcv = UrgentIn::None;
        }
    }

    /// RFC 9293 3.10.7.4's sixth step for an acceptable segment (`seq` after trimming a
    /// duplicate SYN): a new urgent pointer, and the urgent byte itself, taken from whichever
    /// acceptable segment carries it, in order or not (Linux's `tcp_urg`; it also stays in the
    /// stream). Always inlined: it is on every segment's path, and most segments have neither.
    #[inline(always)]
    pub(super) fn urgent_arrival(&mut self, seg: &TcpRepr, seq: u32, payload: Payload) {
        if seg.flags.contains(TcpFlags::URG) {
            self.urgent_pointer(seg.seq_number, seg.urgent_at);
        }
        if self.urg.rcv == UrgentIn::Announced {
            let at = self.urg.rcv_up.wrapping_sub(seq) as usize;
            if let Some(byte) = payload.get(at) {
                self.urg.rcv = UrgentIn::Arrived(byte);
            }
        }
    }

    /// An urgent pointer (Linux's `tcp_check_urg`): `up` is the offset of the byte after the
    /// urgent data (RFC 6093 section 4; Linux with `tcp_stdurg` 0, its default, so 0 names the
    /// segment's first byte). One that points at data already received, or not beyond the
    /// mark we have, is not news: a sender repeats its pointer on every segment until it is
    /// acknowledged. A new one replaces the old mark; if the reader stands at that old mark
    /// with its byte unread, the byte goes (else it would turn up in the stream).
    fn urgent_pointer(&mut self, seg_seq: u32, up: u16) {
        let at = seg_seq.wrapping_add(u32::from(up.saturating_sub(1)));
        if seq::lt(at, self.rcv.nxt) || (self.urg.rcv != UrgentIn::None && seq::le(at, self.urg.rcv_up)) {
            return;
        }
        self.events |= EV_URGENT;
        if self.urgent_mark() == Some(0) && !self.p.has(Opt::OobInline) && self.rcv.buf.len() > 0 {
            self.rcv.buf.pop(1);
        }
        self.urg.rcv = UrgentIn::Announced;
        self.urg.rcv_up = at;
    }
}
