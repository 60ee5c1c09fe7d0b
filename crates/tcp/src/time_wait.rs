//! After the connection: the compact TIME-WAIT entry. It is made from a connection in TIME-WAIT
//! and answers for it until 2*MSL; it must not need the connection afterwards.

use wire::{TcpFlags, TcpRepr};

use crate::connection::{Connection, State};
use crate::segment::bare_segment;
use crate::seq;
use crate::time::{Duration, Instant, MILLISECOND};

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
        let ack = bare_segment(
            self.local_port,
            self.remote_port,
            self.snd_nxt,
            Some(self.rcv_nxt),
            TcpFlags::ACK,
            self.window,
        );
        let tsval = ((now / MILLISECOND) as u32).wrapping_add(self.ts_offset);
        TcpRepr { timestamp: self.ts_ok.then_some((tsval, self.ts_recent)), ..ack }
    }
}
