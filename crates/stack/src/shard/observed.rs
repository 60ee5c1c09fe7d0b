//! What a shard shows the observability tools (`pronghorn conns`, `pronghorn pcap`): a row per
//! socket, as `ss -tanei` prints them, and the frames a capture keeps. Values only; `inspect`
//! fills them from the shard.

use std::net::SocketAddr;

use super::sockets::SocketId;

/// One socket of the shard, for the connection table.
#[derive(Clone, Debug)]
pub struct SocketRow {
    /// The socket (TIME-WAIT entries have none: the application no longer holds them).
    pub id: Option<SocketId>,
    /// `ss`'s name of the state: LISTEN, SYN-SENT, SYN-RECV, ESTAB, FIN-WAIT-1, FIN-WAIT-2,
    /// CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT, CLOSE; UNCONN for a UDP socket.
    pub state: &'static str,
    pub udp: bool,
    pub local: SocketAddr,
    /// The unspecified address and port 0 for listeners and UDP sockets.
    pub peer: SocketAddr,
    /// Bytes the application has not read (a listener: connections waiting for accept).
    pub recv_q: u32,
    /// Bytes not yet acknowledged or not yet sent (a listener: its backlog).
    pub send_q: u32,
    /// The TCP details of a connection (not of listeners, UDP or TIME-WAIT).
    pub info: Option<tcp::Info>,
}

/// `ss`'s state names.
pub fn state_name(state: tcp::State) -> &'static str {
    use tcp::State::*;
    match state {
        SynSent => "SYN-SENT",
        SynReceived => "SYN-RECV",
        Established => "ESTAB",
        FinWait1 => "FIN-WAIT-1",
        FinWait2 => "FIN-WAIT-2",
        CloseWait => "CLOSE-WAIT",
        Closing => "CLOSING",
        LastAck => "LAST-ACK",
        TimeWait => "TIME-WAIT",
        Closed => "CLOSE",
    }
}

/// Which way a captured frame went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Received,
    Sent,
}

/// A frame the capture kept.
#[derive(Clone, Debug)]
pub struct CapturedFrame {
    /// The shard's clock (ns) when it was received or handed to the NIC.
    pub at_ns: u64,
    pub direction: Direction,
    /// The frame's length on the wire.
    pub len: u32,
    /// Its first `snaplen` bytes.
    pub data: Vec<u8>,
}

/// A capture in progress: frames wait here until the observer takes them.
pub(super) struct Capture {
    snaplen: usize,
    /// Frames kept before the observer takes them; more are counted as dropped.
    limit: usize,
    frames: Vec<CapturedFrame>,
    dropped: u64,
}

impl Capture {
    /// A capture of every frame's first `snaplen` bytes, at most `limit` of them kept.
    pub(super) fn new(snaplen: usize, limit: usize) -> Capture {
        Capture { snaplen: snaplen.max(1), limit, frames: Vec::new(), dropped: 0 }
    }

    pub(super) fn keep(&mut self, at_ns: u64, direction: Direction, frame: &[u8]) {
        if self.frames.len() >= self.limit {
            self.dropped += 1;
            return;
        }
        let data = frame[..frame.len().min(self.snaplen)].to_vec();
        self.frames.push(CapturedFrame { at_ns, direction, len: frame.len() as u32, data });
    }

    /// Moves the frames kept so far to `out`; returns how many were dropped since the last call.
    pub(super) fn take(&mut self, out: &mut Vec<CapturedFrame>) -> u64 {
        out.append(&mut self.frames);
        std::mem::take(&mut self.dropped)
    }
}
