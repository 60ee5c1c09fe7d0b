//! What a shard shows of itself to the observability tools (`pronghorn conns`, `pronghorn
//! pcap`): a row per socket, as `ss -tanei` prints them, and a capture of the frames it receives
//! and sends. Both are control-path work: the rows walk every socket, the capture copies every
//! frame while it runs; neither costs anything on the data path while nobody asks (one branch
//! per burst). It reads the shard's state and never changes what the stack does.

use std::net::SocketAddr;

use nic::{Nic, PacketBuf};

use super::addr::to_std;
use super::observed::{state_name, Capture, CapturedFrame, Direction, SocketRow};
use super::{Shard, Socket};

impl<N: Nic> Shard<N> {
    /// Appends a row per socket (connections, listeners, UDP sockets, TIME-WAIT entries) to
    /// `out`. It walks every socket: never call it per packet.
    pub fn socket_rows(&self, out: &mut Vec<SocketRow>) {
        let unspecified = |local: SocketAddr| -> SocketAddr {
            match local {
                SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
                SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
            }
        };
        for (id, socket) in self.sockets.iter() {
            let id = Some(id);
            let row = match socket {
                Socket::Tcp(s) => {
                    let (la, lp) = s.tuple.local();
                    let (ra, rp) = s.tuple.remote();
                    let info = s.conn.info();
                    SocketRow {
                        id,
                        state: state_name(info.state),
                        udp: false,
                        local: SocketAddr::new(to_std(la), lp),
                        peer: SocketAddr::new(to_std(ra), rp),
                        recv_q: info.recv_queue,
                        send_q: info.send_queue,
                        info: Some(info),
                    }
                }
                Socket::Listener(l) => {
                    let local = SocketAddr::new(to_std(l.local.0), l.local.1);
                    SocketRow {
                        id,
                        state: "LISTEN",
                        udp: false,
                        local,
                        peer: unspecified(local),
                        recv_q: l.accept_queue.len() as u32,
                        send_q: l.backlog as u32,
                        info: None,
                    }
                }
                Socket::Udp(u) => {
                    let local = SocketAddr::new(to_std(u.local.0), u.local.1);
                    // ss prints a connected UDP socket as ESTAB with its peer.
                    let (state, peer) = match u.remote() {
                        Some(peer) => ("ESTAB", peer),
                        None => ("UNCONN", unspecified(local)),
                    };
                    SocketRow {
                        id,
                        state,
                        udp: true,
                        local,
                        peer,
                        recv_q: u.queued_bytes() as u32,
                        send_q: 0,
                        info: None,
                    }
                }
            };
            out.push(row);
        }
        for entry in self.time_wait.iter().flatten() {
            let (la, lp) = entry.tuple.local();
            let (ra, rp) = entry.tuple.remote();
            out.push(SocketRow {
                id: None,
                state: "TIME-WAIT",
                udp: false,
                local: SocketAddr::new(to_std(la), lp),
                peer: SocketAddr::new(to_std(ra), rp),
                recv_q: 0,
                send_q: 0,
                info: None,
            });
        }
    }

    /// Starts keeping a copy of every frame received and sent (its first `snaplen` bytes), at
    /// most `limit` of them until [`Shard::take_captured`] takes them (more are counted as
    /// dropped). A capture already running is restarted.
    pub fn start_capture(&mut self, snaplen: usize, limit: usize) {
        let _arena = self.in_arena();
        self.capture = Some(Box::new(Capture::new(snaplen, limit)));
    }

    /// Stops the capture (what it kept and did not hand over is dropped).
    pub fn stop_capture(&mut self) {
        let _arena = self.in_arena();
        self.capture = None;
    }

    /// Moves the frames captured so far to `out`; returns how many were dropped since the last
    /// call because the observer was too slow.
    pub fn take_captured(&mut self, out: &mut Vec<CapturedFrame>) -> u64 {
        self.capture.as_mut().map_or(0, |c| c.take(out))
    }

    /// The capture's view of a burst received (`Shard::poll`).
    pub(super) fn capture_received(&mut self, frames: &[N::Buf]) {
        if let Some(c) = &mut self.capture {
            for f in frames {
                c.keep(self.now, Direction::Received, f.data());
            }
        }
    }

    /// The capture's view of the frames about to be handed to the NIC: those not seen yet (the
    /// ones a full queue left behind last time were).
    pub(super) fn capture_sending(&mut self) {
        if let Some(c) = &mut self.capture {
            let queued = self.link.queued();
            for f in &queued[self.tx_captured.min(queued.len())..] {
                c.keep(self.now, Direction::Sent, f.data());
            }
            self.tx_captured = queued.len();
        }
    }
}
