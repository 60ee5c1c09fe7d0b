//! After the connection: the compact TIME-WAIT entry, and the reply to segments that match no
//! connection.

use wire::{TcpFlags, TcpRepr};

use crate::connection::{Connection, State};
use crate::{seq, Duration, Instant, MILLISECOND};

/// A connection in TIME-WAIT reduced to what TIME-WAIT needs (RFC 9293 3.10.7.4): the ports,
/// both sequence numbers, the timestamp state and the deadline. About 40 bytes; the stack keeps
/// these in place of full connections the application has closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWait {
    deadline: Instant,
    time_wait: Duration,
    snd_nxt: u32,
    rcv_nxt: u32,
    ts_recent: u32,
    ts_offset: u32,
    local_port: u16,
    remote_port: u16,
    window: u16,
    ts_ok: bool,
}

/// What to do with a segment that reached a TIME-WAIT entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeWaitAction {
    /// Send this ACK (a retransmitted FIN, an old or unacceptable segment, a challenge).
    Ack(TcpRepr),
    /// A new SYN that may reopen the connection (RFC 9293 3.10.7.4, RFC 6191 with timestamps,
    /// RFC 1122 4.2.2.13 without): drop this entry and give the SYN to the listener, with an ISS
    /// above [`TimeWait::next_iss`].
    Reopen,
    /// Nothing to do.
    Ignore,
}

impl From<&Connection> for TimeWait {
    /// The entry for `conn`, which is in TIME-WAIT (the deadline is its TIME-WAIT deadline).
    fn from(conn: &Connection) -> Self {
        debug_assert_eq!(conn.state(), State::TimeWait);
        let t = conn.time_wait_parts();
        TimeWait {
            deadline: t.deadline,
            time_wait: t.time_wait,
            snd_nxt: t.snd_nxt,
            rcv_nxt: t.rcv_nxt,
            ts_recent: t.ts_recent,
            ts_offset: t.ts_offset,
            local_port: conn.local_port(),
            remote_port: conn.remote_port(),
            window: t.window,
            ts_ok: t.ts_ok,
        }
    }
}

/// What a connection hands to its `TimeWait` entry.
pub(crate) struct TimeWaitParts {
    pub(crate) deadline: Instant,
    pub(crate) time_wait: Duration,
    pub(crate) snd_nxt: u32,
    pub(crate) rcv_nxt: u32,
    pub(crate) ts_recent: u32,
    pub(crate) ts_offset: u32,
    pub(crate) window: u16,
    pub(crate) ts_ok: bool,
}

impl TimeWait {
    /// When the entry expires and can be dropped.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Our port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The peer's port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// A floor for the ISS of a connection that reopens this one: beyond anything this
    /// incarnation sent (what Linux uses: SND.NXT + 65535 + 2).
    pub fn next_iss(&self) -> u32 {
        self.snd_nxt.wrapping_add(65535 + 2)
    }

    /// Handles a segment for this entry.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpRepr) -> TimeWaitAction {
        let flags = seg.flags;
        if flags.contains(TcpFlags::RST) {
            // RFC 1337: a RST must not cut TIME-WAIT short.
            return TimeWaitAction::Ignore;
        }
        let tsval = seg.timestamp.map(|(tsval, _)| tsval);
        if flags.contains(TcpFlags::SYN) && seg.ack_number.is_none() {
            let newer = match (self.ts_ok, tsval) {
                (true, Some(tsval)) => seq::gt(tsval, self.ts_recent),
                _ => seq::gt(seg.seq_number, self.rcv_nxt),
            };
            return if newer { TimeWaitAction::Reopen } else { TimeWaitAction::Ack(self.ack(now)) };
        }
        if let (true, Some(tsval)) = (self.ts_ok, tsval) {
            if seq::lt(tsval, self.ts_recent) {
                // PAWS (RFC 7323 section 5.3).
                return TimeWaitAction::Ack(self.ack(now));
            }
        }
        let fin = flags.contains(TcpFlags::FIN);
        if fin && seg.seq_number.wrapping_add(seg.payload_len as u32 + 1) == self.rcv_nxt {
            // The peer's FIN again: our last ACK was lost. ACK it and restart 2*MSL.
            if let (true, Some(tsval)) = (self.ts_ok, tsval) {
                self.ts_recent = tsval;
            }
            self.deadline = now + self.time_wait;
            return TimeWaitAction::Ack(self.ack(now));
        }
        if seg.payload_len == 0 && !fin && !flags.contains(TcpFlags::SYN) {
            // A bare ACK: nothing to answer (answering could start an ACK loop).
            return TimeWaitAction::Ignore;
        }
        TimeWaitAction::Ack(self.ack(now))
    }

    fn ack(&self, now: Instant) -> TcpRepr {
        TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq_number: self.snd_nxt,
            ack_number: Some(self.rcv_nxt),
            flags: TcpFlags::ACK,
            window_len: self.window,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: self.ts_ok.then(|| (((now / MILLISECOND) as u32).wrapping_add(self.ts_offset), self.ts_recent)),
            payload_len: 0,
            urgent_at: 0,
        }
    }
}

/// The reply to a segment that matches no connection (RFC 9293 3.10.7.1, state CLOSED): nothing
/// to a RST; otherwise a RST that the sender will accept: `<SEQ=SEG.ACK><CTL=RST>` if the segment
/// had an ACK, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
pub fn rst_for_unmatched(seg: &TcpRepr, payload_len: usize) -> Option<TcpRepr> {
    if seg.flags.contains(TcpFlags::RST) {
        return None;
    }
    let (seq_number, ack_number, flags) = match seg.ack_number {
        Some(ack) => (ack, None, TcpFlags::RST),
        None => {
            let len = payload_len as u32
                + u32::from(seg.flags.contains(TcpFlags::SYN))
                + u32::from(seg.flags.contains(TcpFlags::FIN));
            (0, Some(seg.seq_number.wrapping_add(len)), TcpFlags::RST | TcpFlags::ACK)
        }
    };
    Some(TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq_number,
        ack_number,
        flags,
        window_len: 0,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 4],
        timestamp: None,
        payload_len: 0,
        urgent_at: 0,
    })
}
