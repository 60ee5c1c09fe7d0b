//! TIME-WAIT entries on the shard: a connection in TIME-WAIT made an entry (or, beyond
//! `max_tw_buckets`, none), a segment to an entry answered, an entry expired.

use nic::Nic;
use tcp::{State as TcpState, TimeWait, TimeWaitAction};
use wire::TcpRepr;

use super::{TimeWaitEntry, TimeWaitInput};
use crate::shard::table::FourTuple;
use crate::shard::{Shard, Socket, SocketId, TimerKey};

impl<N: Nic> Shard<N> {
    pub(in crate::shard) fn enter_time_wait(&mut self, id: SocketId) {
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

    pub(in crate::shard) fn insert_time_wait(&mut self, tw: TimeWait, tuple: FourTuple) {
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

    pub(in crate::shard) fn free_time_wait_entry(&mut self, i: u32) {
        if let Some(e) = self.time_wait[i as usize].take() {
            self.timers.cancel(e.timer);
            self.time_wait_table.remove(&e.tuple);
            self.free_time_wait.push(i);
        }
    }

    /// A segment for `tuple`, if an entry holds it.
    pub(in crate::shard) fn time_wait_input(&mut self, tuple: &FourTuple, repr: &TcpRepr) -> TimeWaitInput {
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
    pub(in crate::shard) fn time_wait_expired(&mut self, i: u32) {
        if let Some(e) = self.time_wait[i as usize].take() {
            self.time_wait_table.remove(&e.tuple);
            self.free_time_wait.push(i);
        }
    }
}
