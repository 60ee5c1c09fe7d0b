//! The receive sequence space (RFC 9293 section 3.3.1) and the receive buffer: IRS, RCV.NXT and
//! the window we advertised (its right edge, from which RCV.WND is counted), what we last
//! acknowledged, the out-of-order ranges and the peer's FIN. What it must not do: decide which
//! segments are acceptable or what to acknowledge (`input` and `output` do, through it); it only
//! answers questions about the space.

use crate::ranges::OooRanges;
use crate::ring::Ring;
use crate::seq;

/// The receiver's sequence numbers and its buffer.
#[derive(Debug, Default)]
pub(super) struct RecvSpace {
    /// IRS: the peer's initial sequence number.
    pub(super) irs: u32,
    /// RCV.NXT: the next sequence number expected.
    pub(super) nxt: u32,
    /// The right edge of the window we advertised (it never moves left): RCV.WND is what is
    /// left of it beyond RCV.NXT.
    pub(super) adv: u32,
    /// RCV.NXT when we last sent an ACK (RFC 7323's Last.ACK.sent).
    pub(super) last_ack_sent: u32,
    /// Bytes received since we last sent an ACK.
    pub(super) unacked: u32,
    /// Where an out-of-order FIN sits, while `fin_ahead`.
    pub(super) fin: u32,
    /// In-order data not read yet, then out-of-order data at its offset from RCV.NXT.
    pub(super) buf: Ring,
    /// The out-of-order ranges held in `buf`.
    pub(super) ooo: OooRanges,
    /// RFC 2883: data that arrived twice, for the first SACK block of our next ACK (D-SACK);
    /// none when empty (not an `Option`: 8 bytes less per connection).
    pub(super) dsack: (u32, u32),
    /// Largest segment seen from the peer (for the delayed-ACK rule).
    pub(super) mss: u16,
    /// The peer's FIN is in (RCV.NXT counts it).
    pub(super) fin_received: bool,
    /// The peer's FIN arrived ahead of a hole, at `fin`.
    pub(super) fin_ahead: bool,
    /// The application closed: it will read no more (new data is answered with a RST).
    pub(super) closed: bool,
}

impl RecvSpace {
    /// RCV.WND: what is left of the window we advertised.
    pub(super) fn wnd(&self) -> u32 {
        if seq::gt(self.adv, self.nxt) {
            self.adv.wrapping_sub(self.nxt)
        } else {
            0
        }
    }

    /// The sequence number of the next byte the application reads (Linux's `copied_seq`).
    pub(super) fn read_seq(&self) -> u32 {
        self.nxt.wrapping_sub(self.buf.len() as u32).wrapping_sub(u32::from(self.fin_received))
    }
}
