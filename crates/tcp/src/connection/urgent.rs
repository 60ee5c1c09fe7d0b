//! Urgent data (RFC 9293 3.8.5, read as RFC 6093 and Linux do): the urgent pointer we send
//! (SND.UP) and the one we received, the out-of-band byte, the mark that stops reads, and the
//! application calls about them (MSG_OOB, SIOCATMARK, SO_OOBINLINE, POLLPRI).

use super::*;

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

impl Connection {
    /// `send(..., MSG_OOB)`: [`Connection::send`], and the last byte taken is urgent: the urgent
    /// pointer (SND.UP) moves to just after it, as Linux's `tcp_mark_urg` does, and every segment
    /// sent before it carries URG until the peer acknowledges it (RFC 9293 3.8.5; the pointer
    /// names the byte after the urgent data, RFC 6093 section 4). Nagle does not hold urgent
    /// data back.
    pub fn send_urgent(&mut self, data: &[u8]) -> Result<usize, Error> {
        let n = self.send(data)?;
        if n > 0 {
            self.snd_up = self.snd.data_end();
            self.snd_urgent = true;
        }
        Ok(n)
    }

    /// `recv(..., MSG_OOB)`: the urgent byte, as Linux's `tcp_recv_urg` answers. It never waits:
    /// `Err(WouldBlock)` while the pointer has arrived and the byte has not; `Err(InvalidInput)`
    /// (EINVAL) with SO_OOBINLINE, without urgent data, or once it was taken; `Err(NotConnected)`
    /// on a connection that ended without the peer's FIN; `Ok(None)` (end of stream) after it.
    /// `peek` (MSG_PEEK) leaves the byte to be read again.
    pub fn recv_urgent(&mut self, peek: bool) -> Result<Option<u8>, Error> {
        if self.p.has(Opt::OobInline) || matches!(self.rcv_urg, UrgentIn::None | UrgentIn::Taken) {
            return Err(Error::InvalidInput);
        }
        if self.state == State::Closed && !self.rcv.fin_received {
            return Err(Error::NotConnected);
        }
        if let UrgentIn::Arrived(byte) = self.rcv_urg {
            if !peek {
                self.rcv_urg = UrgentIn::Taken;
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
        (self.rcv_urg != UrgentIn::None).then(|| self.rcv_up.wrapping_sub(self.rcv.read_seq()) as usize)
    }

    /// SO_OOBINLINE: the urgent byte stays in the stream (`recv` returns it, `recv_urgent` says
    /// EINVAL); reads still stop at the mark and SIOCATMARK still finds it.
    pub fn set_oob_inline(&mut self, inline: bool) {
        self.p.opts.set(Opt::OobInline, inline);
    }

    /// EPOLLPRI: the urgent byte has arrived and was not taken yet (with SO_OOBINLINE too).
    pub fn has_urgent(&self) -> bool {
        matches!(self.rcv_urg, UrgentIn::Arrived(_))
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
        if self.rcv_urg != UrgentIn::None && seq::gt(self.rcv.read_seq(), self.rcv_up) {
            self.rcv_urg = UrgentIn::None;
        }
    }

    /// An urgent pointer (Linux's `tcp_check_urg`): `up` is the offset of the byte after the
    /// urgent data (RFC 6093 section 4; Linux with `tcp_stdurg` 0, its default, so 0 names the
    /// segment's first byte). One that points at data already received, or not beyond the
    /// mark we have, is not news: a sender repeats its pointer on every segment until it is
    /// acknowledged. A new one replaces the old mark; if the reader stands at that old mark
    /// with its byte unread, the byte goes (else it would turn up in the stream).
    pub(super) fn urgent_pointer(&mut self, seg_seq: u32, up: u16) {
        let at = seg_seq.wrapping_add(u32::from(up.saturating_sub(1)));
        if seq::lt(at, self.rcv.nxt) || (self.rcv_urg != UrgentIn::None && seq::le(at, self.rcv_up)) {
            return;
        }
        self.events |= EV_URGENT;
        if self.urgent_mark() == Some(0) && !self.p.has(Opt::OobInline) && self.rcv.buf.len() > 0 {
            self.rcv.buf.pop(1);
        }
        self.rcv_urg = UrgentIn::Announced;
        self.rcv_up = at;
    }
}
