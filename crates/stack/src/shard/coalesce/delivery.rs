//! Coalescing on the shard: a data segment held in its connection's run (or a new one), and
//! the runs handed to their connections as one segment each.

use nic::{Nic, PacketBuf};
use wire::TcpRepr;

use super::{Run, MAX_RUNS};
use crate::shard::link::RX_BURST;
use crate::shard::transport::Candidate;
use crate::shard::{Shard, Socket, SocketId, ECN_CE};

impl<N: Nic> Shard<N> {
    /// Holds `c` (its frame `buf`) in its connection's run, or starts one: the run it does not
    /// continue is handed over first, and with [`MAX_RUNS`] held, the oldest.
    pub(in crate::shard) fn hold(&mut self, buf: N::Buf, c: Candidate) {
        let live = self.coalescer.live;
        if let Some(i) = self.coalescer.runs[..live].iter().position(|r| r.id == c.id) {
            if self.coalescer.runs[i].takes(&c) {
                self.stats.tcp_gro_merged += 1;
                self.coalescer.runs[i].push(buf, &c);
                return;
            }
            self.deliver_run(i);
        } else if live == MAX_RUNS {
            self.deliver_run(0);
        }
        let live = self.coalescer.live;
        if live == self.coalescer.runs.len() {
            self.coalescer.runs.push(Run {
                id: c.id,
                head: c.repr,
                ecn: c.ecn,
                piece: 0,
                end: 0,
                ended: false,
                frames: Vec::with_capacity(RX_BURST),
            });
        }
        self.coalescer.runs[live].push(buf, &c);
        self.coalescer.live += 1;
    }

    /// Whether connection `id` has a run held in this burst.
    pub(in crate::shard) fn holds_run_of(&self, id: SocketId) -> bool {
        self.coalescer.runs[..self.coalescer.live].iter().any(|r| r.id == id)
    }

    /// Hands connection `id` its held run, if it has one (a segment of it that may not join
    /// comes next).
    pub(in crate::shard) fn deliver_run_of(&mut self, id: SocketId) {
        let live = self.coalescer.live;
        if let Some(i) = self.coalescer.runs[..live].iter().position(|r| r.id == id) {
            self.deliver_run(i);
        }
    }

    /// Hands every held run to its connection (the burst is over).
    pub(in crate::shard) fn deliver_runs(&mut self) {
        while self.coalescer.live > 0 {
            self.deliver_run(0);
        }
    }

    /// Hands run `i` to its connection, as one segment, and keeps the order of the others.
    fn deliver_run(&mut self, i: usize) {
        let mut run = self.coalescer.runs.remove(i);
        self.coalescer.live -= 1;
        let mut parts: [&[u8]; RX_BURST] = [&[]; RX_BURST];
        for (part, (buf, (start, end))) in parts.iter_mut().zip(&run.frames) {
            *part = &buf.data()[*start..*end];
        }
        self.deliver(run.id, &run.head, &parts[..run.frames.len()], run.ecn);
        run.frames.clear();
        self.coalescer.runs.push(run);
    }

    /// Hands connection `id` a segment (or a run as one), with the shard's part around it: its
    /// memory budget before, the challenge-ACK budget, its memory charged after.
    pub(in crate::shard) fn deliver(&mut self, id: SocketId, repr: &TcpRepr, parts: &[&[u8]], ecn: u8) {
        let now = self.now;
        self.give_budget(id);
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        s.conn.handle_coalesced(now, repr, parts, ecn == ECN_CE);
        if s.conn.challenge_ack_pending() && !self.take_challenge_ack() {
            if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
                s.conn.cancel_challenge_ack();
            }
        }
        self.recharge(id);
        self.sockets.mark_dirty(id);
    }
}
