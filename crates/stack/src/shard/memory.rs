//! Linux's limits on what TCP connections may hold, per shard (shards share nothing): what
//! every connection's rings hold counted against `tcp_mem` (low, pressure, high) as Linux's
//! `sk_mem_charge` counts it (bytes queued, out-of-order data at its truesize:
//! `tcp::Connection::charged_bytes`; not the rings' capacity), the budget a connection is told
//! before a call that may queue data (`tcp::MemoryBudget`), the writers waiting for memory,
//! out-of-order data pruned so that it does not pin a receive ring, and the orphans
//! (`tcp_max_orphans`).
//!
//! What each limit does, as Linux does it: above `pressure` (until below `low`) receive windows
//! stop growing and out-of-order data is pruned at the connection's next buffer check; data
//! that would take the memory past `high` is not queued (a received segment is dropped and
//! counted unless it is in-order data for an empty receive queue, a write says EAGAIN and is woken when memory is freed, a SYN is dropped); an orphan
//! beyond `max_orphans`, or one with queued data while memory is past `high`, is reset
//! (`TCPAbortOnMemory`). It must not build segments (the connection and [`super::tcp`] do).

use nic::Nic;
use tcp::MemoryBudget;

use super::Socket;
use super::{Shard, SocketId};

impl<N: Nic> Shard<N> {
    /// What the budget allows a connection now.
    pub(super) fn memory_budget(&self) -> MemoryBudget {
        let room = self.cfg.tcp_mem.high.saturating_sub(self.tcp_mem_used);
        MemoryBudget { pressure: self.mem_pressure, room: room.min(u32::MAX as usize) as u32 }
    }

    /// Tells connection `id` the budget: before a call that may allocate one of its rings
    /// (a segment, a write) and before it chooses a window (a transmit).
    #[inline]
    pub(super) fn give_budget(&mut self, id: SocketId) {
        let budget = self.memory_budget();
        if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
            s.conn.set_memory_budget(budget);
        }
    }

    /// Counts what connection `id`'s rings hold again after a call that may have changed it.
    #[inline]
    pub(super) fn recharge(&mut self, id: SocketId) {
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        if let Some((before, after)) = s.recount() {
            self.memory_changed(before, after);
        }
    }

    /// A connection's charge went from `before` to `after` bytes: pressure is entered above
    /// `pressure` and left below `low` (Linux's hysteresis), and writers waiting for memory
    /// look again once a write fits (`tcp::SEND_QUANTUM`).
    pub(super) fn memory_changed(&mut self, before: usize, after: usize) {
        self.tcp_mem_used = self.tcp_mem_used - before + after;
        let limits = self.cfg.tcp_mem;
        if !self.mem_pressure && self.tcp_mem_used > limits.pressure {
            self.mem_pressure = true;
            self.stats.tcp_memory_pressures += 1;
        } else if self.mem_pressure && self.tcp_mem_used < limits.low {
            self.mem_pressure = false;
        }
        if after < before && !self.mem_waiters.is_empty() && self.tcp_mem_used + tcp::SEND_QUANTUM <= limits.high {
            self.wake_memory_waiters();
        }
    }

    /// Memory was freed and a write fits: every writer waiting for memory looks again. Out of
    /// line and cold: [`Shard::memory_changed`] runs for nearly every segment and call, and
    /// without this loop in it needs no registers saved.
    #[cold]
    fn wake_memory_waiters(&mut self) {
        for id in std::mem::take(&mut self.mem_waiters) {
            if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
                s.mem_waiting = false;
            }
            // Servicing it reports a change of readiness; one still without room waits again.
            self.sockets.mark_dirty(id);
        }
    }

    /// Connection `id`'s writer saw EAGAIN for want of memory: wake it when memory is freed.
    pub(super) fn wait_for_memory(&mut self, id: SocketId) {
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        if s.owned && !s.mem_waiting && s.conn.send_waits_for_memory() {
            s.mem_waiting = true;
            self.mem_waiters.push(id);
        }
    }

    /// Whether memory is left for a new connection: charged memory below `high`.
    pub(super) fn room_for_connection(&self) -> bool {
        self.tcp_mem_used < self.cfg.tcp_mem.high
    }

    /// Linux `tcp_check_oom` for an orphan with `queued` bytes still to send: more orphans
    /// than `max_orphans`, or data queued while memory is past `high` (`tcp_out_of_memory`).
    pub(super) fn orphan_out_of_resources(&self, queued: usize) -> bool {
        let no_room = self.tcp_mem_used >= self.cfg.tcp_mem.high;
        self.orphans > self.cfg.max_orphans || (queued > 0 && no_room)
    }

    /// Resets an orphan for want of resources (Linux `TCPAbortOnMemory`).
    pub(super) fn abort_orphan(&mut self, id: SocketId) {
        self.stats.tcp_abort_on_memory += 1;
        self.abort_and_free(id);
    }

    /// At a connection's buffer check: out-of-order data with nothing readable before it
    /// keeps the whole receive ring. Under pressure it is pruned at once (Linux
    /// `tcp_prune_ofo_queue`); otherwise when it was already all the ring held at the check
    /// before (one segment beyond a hole that never fills must not pin 128 KiB for ever).
    /// Under pressure, out-of-order data behind readable data is pruned too (it is what Linux
    /// drops first); the ring stays for the readable data.
    pub(super) fn prune_out_of_order(&mut self, id: SocketId) {
        let pressure = self.mem_pressure;
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        let only = s.conn.holds_only_out_of_order();
        let pinned = std::mem::replace(&mut s.ofo_pinned, only);
        if !(pressure || (only && pinned)) {
            return;
        }
        if s.conn.prune_out_of_order() {
            s.ofo_pinned = false;
            self.stats.tcp_prune_called += 1;
            self.stats.tcp_ofo_pruned += 1;
            self.recharge(id);
        }
    }
}
