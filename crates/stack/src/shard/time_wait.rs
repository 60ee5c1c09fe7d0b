//! Compact TIME-WAIT entries: a connection that reached TIME-WAIT leaves its socket and keeps
//! only what RFC 9293 and RFC 6191 need to answer its 4-tuple (`tcp::TimeWait`), in a table of
//! its own, until its timer expires; at most `max_tw_buckets` of them (Linux's
//! `tcp_max_tw_buckets`: beyond it a connection skips TIME-WAIT).
//!
//! It owns the entries and their table; it must not touch live connections beyond turning one
//! into an entry.

use nic::Nic;
use tcp::{State as TcpState, TimeWait, TimeWaitAction};
use wire::TcpRepr;

use super::Socket;
use super::{Shard, SocketId, TimerKey};
use crate::shard::table::FourTuple;
use crate::shard::timer::TimerHandle;

/// What a segment to a 4-tuple in TIME-WAIT came to.
pub(super) enum TimeWaitInput {
    /// No entry for the 4-tuple.
    NoEntry,
    /// The entry answered it (an ACK) or ignored it.
    Done,
    /// A new SYN the entry accepts (RFC 6191): the entry is gone, and the new connection starts
    /// from this ISS.
    Reopen { iss: u32 },
}

pub(super) struct TimeWaitEntry {
    pub(super) tw: TimeWait,
    pub(super) tuple: FourTuple,
    pub(super) timer: TimerHandle,
}

impl<N: Nic> Shard<N> {
    pub(super) fn enter_time_wait(&mut self, id: SocketId) {
        let Some(Socket::Tcp(s)) = self.sockets.get(id) else { return };
        if s.conn.state() != TcpState::TimeWait {
            return;
        }
        let tw = TimeWait::from(&s.conn);
        let tuple = s.tuple;
        let handed_over = self.conns.get(&tuple) != Some(&id);
        self.free_tcp(id);
        if !handed_over {
            self.insert_time_wait(tw, tuple);
        }
    }

    pub(super) fn insert_time_wait(&mut self, tw: TimeWait, tuple: FourTuple) {
        if let Some(&old) = self.time_wait_table.get(&tuple) {
            self.free_time_wait_entry(old);
        }
        if self.time_wait_count() >= self.cfg.max_tw_buckets {
            // Linux `tcp_time_wait` without a bucket: the connection is simply gone.
            self.stats.tcp_time_wait_overflows += 1;
            return;
        }
        let index = match self.free_time_wait.pop() {
            Some(i) => i,
            None => {
                self.time_wait.push(None);
                (self.time_wait.len() - 1) as u32
            }
        };
        let timer = self.timers.insert(tw.deadline(), TimerKey::TimeWait(index));
        self.time_wait[index as usize] = Some(TimeWaitEntry { tw, tuple, timer });
        self.time_wait_table.insert(tuple, index);
        self.stats.tcp_time_wait_entries += 1;
    }

    pub(super) fn free_time_wait_entry(&mut self, i: u32) {
        if let Some(e) = self.time_wait[i as usize].take() {
            self.timers.cancel(e.timer);
            self.time_wait_table.remove(&e.tuple);
            self.free_time_wait.push(i);
        }
    }

    /// A segment for `tuple`, if an entry holds it.
    pub(super) fn time_wait_input(&mut self, tuple: &FourTuple, repr: &TcpRepr) -> TimeWaitInput {
        let Some(&i) = self.time_wait_table.get(tuple) else { return TimeWaitInput::NoEntry };
        let Some(entry) = self.time_wait.get_mut(i as usize).and_then(Option::as_mut) else {
            // The table always points at a live entry; were it not so, the segment is judged
            // as if there were none rather than panic on a packet.
            self.time_wait_table.remove(tuple);
            return TimeWaitInput::NoEntry;
        };
        match entry.tw.handle_segment(self.now, repr) {
            TimeWaitAction::Ack(ack) => {
                self.send_tcp(tuple, &ack);
                TimeWaitInput::Done
            }
            TimeWaitAction::Ignore => TimeWaitInput::Done,
            TimeWaitAction::Reopen => {
                let iss = entry.tw.next_iss();
                self.free_time_wait_entry(i);
                TimeWaitInput::Reopen { iss }
            }
        }
    }

    /// An entry's timer fired: it is gone.
    pub(super) fn time_wait_expired(&mut self, i: u32) {
        if let Some(e) = self.time_wait[i as usize].take() {
            self.time_wait_table.remove(&e.tuple);
            self.free_time_wait.push(i);
        }
    }
}
