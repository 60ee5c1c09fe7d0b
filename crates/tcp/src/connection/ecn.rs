//! Explicit Congestion Notification (RFC 3168): [`EcnState`] owns whether ECN is in use, the
//! echo of congestion the peer told us about, the CWR we owe and the window of the last
//! reduction; the connection's methods here decide what an ECE does to the congestion window.
//! Negotiation happens with the handshake (`input`, `output`) and the IP header's codepoints
//! are the stack's: the connection hears only "arrived CE-marked" (`handle_segment_ce`) and
//! says "send ECN-capable" (`transmit_ect`).

use wire::{TcpFlags, TcpRepr};

use crate::congestion::CongestionControl;
use crate::seq;
use crate::time::Instant;

use super::bits::{Bit, Bits};
use super::recovery::Recovery;
use super::Connection;

/// ECN's one-bit facts.
#[derive(Debug, Clone, Copy)]
pub(super) enum EcnBit {
    /// ECN is in use: negotiated, or asked for in our SYN (SYN-SENT).
    On,
    /// The peer sent us CE-marked data: every segment carries ECE until its CWR.
    Echo,
    /// The window was reduced: the next new data segment carries CWR.
    CwrPending,
    /// Within the window of the last reduction (see `reduced_at`).
    Reducing,
    /// The segment `poll_transmit` returned last goes out ECN-capable, ECT(0).
    TransmitEct,
}

impl Bit for EcnBit {
    fn index(self) -> u8 {
        self as u8
    }
}

/// One connection's ECN state.
#[derive(Debug, Clone, Copy)]
pub(super) struct EcnState {
    /// SND.MAX when we last reduced the window for congestion; an ECE is not acted on again
    /// until an ACK goes beyond it (`Reducing`).
    reduced_at: u32,
    bits: Bits<EcnBit>,
}

impl EcnState {
    /// Off; SND.MAX is `iss`.
    pub(super) fn new(iss: u32) -> Self {
        EcnState { reduced_at: iss, bits: Bits::default() }
    }

    pub(super) fn has(&self, bit: EcnBit) -> bool {
        self.bits.has(bit)
    }

    pub(super) fn insert(&mut self, bit: EcnBit) {
        self.bits.insert(bit);
    }

    pub(super) fn remove(&mut self, bit: EcnBit) {
        self.bits.remove(bit);
    }

    pub(super) fn set(&mut self, bit: EcnBit, on: bool) {
        self.bits.set(bit, on);
    }

    /// Whether `bit` was set; it is clear afterwards.
    pub(super) fn take(&mut self, bit: EcnBit) -> bool {
        self.bits.take(bit)
    }
}

impl Connection {
    /// RFC 3168 section 6.1.2 for an ACK of an ECN connection: an ECE is treated as a loss by
    /// the congestion controller, once per window of data (not again until an ACK goes beyond
    /// what was sent when the window was last reduced, as Linux's CWR state) and not during
    /// loss recovery, which reduced the window already. `flight` is what was outstanding when
    /// the ACK came.
    pub(super) fn on_ecn_ack(&mut self, now: Instant, seg: &TcpRepr, flight: u32) {
        if self.ecn.has(EcnBit::Reducing) && seq::gt(self.snd.una, self.ecn.reduced_at) {
            self.ecn.remove(EcnBit::Reducing);
        }
        if seg.flags.contains(TcpFlags::ECE) && !self.ecn.has(EcnBit::Reducing) && self.loss.mode == Recovery::None {
            self.cc.on_congestion_event(now, flight, self.eff_mss());
            self.ecn_window_reduced();
        }
    }

    /// The window was reduced for ECE or by an RTO: on an ECN connection the next new data
    /// carries CWR, so that the peer stops echoing congestion it told us about (RFC 3168
    /// section 6.1.2; Linux sets it after every reduction), and ECE for data sent before is
    /// not acted on (Linux's CWR and Loss states).
    pub(super) fn ecn_window_reduced(&mut self) {
        if self.ecn.has(EcnBit::On) {
            self.ecn.insert(EcnBit::CwrPending);
            self.ecn.insert(EcnBit::Reducing);
            self.ecn.reduced_at = self.snd.max;
        }
    }
}
