//! The send sequence space (RFC 9293 section 3.3.1) and the send buffer: SND.UNA, SND.NXT,
//! SND.WND, SND.WL1, SND.WL2 and ISS under their RFC names, the highest sequence number sent,
//! the largest window the peer offered, and the bytes the application queued. Given an ACK that
//! `input` found acceptable, it moves SND.UNA and takes the window update. What it must not do:
//! decide what to send or when (that is `output`, under the congestion window and loss
//! recovery), or whether a segment is acceptable (`input`).

use crate::ring::Ring;
use crate::seq;

/// The sender's sequence numbers and its buffer.
#[derive(Debug)]
pub(super) struct SendSpace {
    /// ISS: our initial sequence number.
    pub(super) iss: u32,
    /// SND.UNA: the oldest sequence number not acknowledged.
    pub(super) una: u32,
    /// SND.NXT: the next sequence number to send; below `max` while going back after an RTO.
    pub(super) nxt: u32,
    /// The highest sequence number sent, plus one.
    pub(super) max: u32,
    /// SND.WND: the peer's window, counted from SND.UNA.
    pub(super) wnd: u32,
    /// MAX.SND.WND (RFC 5961): the largest window the peer offered.
    pub(super) max_wnd: u32,
    /// SND.WL1 and SND.WL2: the sequence and acknowledgment numbers of the segment that last
    /// updated the window.
    pub(super) wl1: u32,
    pub(super) wl2: u32,
    /// Sequence number of the first byte in `buf`.
    pub(super) buf_seq: u32,
    /// Data queued by the application: sent and not acknowledged, then not sent yet.
    pub(super) buf: Ring,
    /// The application shut down writing: a FIN follows the data.
    pub(super) fin_queued: bool,
    /// A `send` found the buffer full: the application waits for `Writable`.
    pub(super) write_blocked: bool,
}

impl SendSpace {
    /// Nothing sent yet, ISS `iss`; data starts after the SYN.
    pub(super) fn new(iss: u32) -> Self {
        SendSpace {
            iss,
            una: iss,
            nxt: iss,
            max: iss,
            wnd: 0,
            max_wnd: 0,
            wl1: 0,
            wl2: iss,
            buf_seq: iss.wrapping_add(1),
            buf: Ring::default(),
            fin_queued: false,
            write_blocked: false,
        }
    }

    /// Bytes sent and not acknowledged (SYN and FIN count one each).
    pub(super) fn in_flight(&self) -> u32 {
        self.max.wrapping_sub(self.una)
    }

    /// The sequence number after the last byte queued.
    pub(super) fn data_end(&self) -> u32 {
        self.buf_seq.wrapping_add(self.buf.len() as u32)
    }

    /// Data in the buffer not sent yet.
    pub(super) fn has_unsent_data(&self) -> bool {
        seq::lt(self.nxt, self.data_end())
    }

    /// Our FIN is queued and acknowledged.
    pub(super) fn fin_acked(&self) -> bool {
        self.fin_queued && self.una == self.data_end().wrapping_add(1)
    }

    /// The peer acknowledged up to `ack`, beyond SND.UNA: SND.UNA moves there (SND.NXT too if
    /// it was behind) and the acknowledged data leaves the buffer. Returns whether buffer space
    /// was freed.
    pub(super) fn acknowledge(&mut self, ack: u32) -> bool {
        let upto = seq::min(ack, self.data_end());
        let mut freed = false;
        if seq::gt(upto, self.buf_seq) {
            self.buf.pop(upto.wrapping_sub(self.buf_seq) as usize);
            // Nothing is ever written beyond `len` in the send buffer.
            self.buf.rewind_if_empty();
            self.buf_seq = upto;
            freed = true;
        }
        self.una = ack;
        if seq::lt(self.nxt, ack) {
            self.nxt = ack;
        }
        freed
    }

    /// The window update from a segment at `seq` acknowledging `ack` with window `wnd` (scaled),
    /// if it is not older than the last: RFC 9293 3.10.7.4 (SND.WL1/SND.WL2), and also from any
    /// segment that acknowledges new data, as Linux does (`tcp_may_update_window`): the peer's
    /// ACKs only grow, so such a segment was made after every one we used, even if its SEG.SEQ
    /// is older (a retransmission that fills a hole behind data we have seen). SND.WND is
    /// counted from SND.UNA: moving SND.UNA while keeping the old SND.WND would move the right
    /// edge beyond anything the peer offered, and we would send into a window it never had.
    /// Returns whether a zero window opened.
    pub(super) fn update_window(&mut self, seq: u32, ack: u32, wnd: u32) -> bool {
        let newer = seq::lt(self.una, ack) || seq::lt(self.wl1, seq) || (self.wl1 == seq && seq::le(self.wl2, ack));
        if !(seq::le(self.una, ack) && newer) {
            return false;
        }
        let opened = self.wnd == 0 && wnd > 0;
        self.wnd = wnd;
        self.wl1 = seq;
        self.wl2 = ack;
        self.max_wnd = self.max_wnd.max(wnd);
        opened
    }

    /// Room in the peer's window at SND.NXT.
    pub(super) fn window_room(&self) -> u32 {
        let end = self.una.wrapping_add(self.wnd);
        if seq::gt(end, self.nxt) {
            end.wrapping_sub(self.nxt)
        } else {
            0
        }
    }
}
