//! A process of the family that ends without leaving it (kill -9, a crash, `_exit`: no exit
//! handler ran): how the others find out, and what of it they give back. Linux closes a dead
//! process's fds; here its holds are in the arena's process table and nobody drops them but
//! the family. The runtime (`Runtime::bury_dead_members`) closes on the shards the sockets
//! this returns.

use std::sync::atomic::Ordering;

use stack::shard::SocketId;

use super::{Family, FamilyStats, Member, FORKING, REAP_EVERY_NS};
use crate::liveness::gone;

impl Family {
    /// Whether the lock's previous holder died since the last look (the caller, holding the
    /// lock, then buries the dead before anything else).
    pub(crate) fn take_holder_died(&self) -> bool {
        let s = self.shared();
        s.holder_died.load(Ordering::Acquire) && s.holder_died.swap(false, Ordering::AcqRel)
    }

    /// In the opener's pass at `now`: whether its periodic look at the members is due.
    pub(crate) fn look_due(&self, now: u64) -> bool {
        if now < self.next_reap_ns.load(Ordering::Relaxed) {
            return false;
        }
        self.next_reap_ns.store(now + REAP_EVERY_NS, Ordering::Relaxed);
        true
    }

    /// Finds the members that died (family lock held) and gives back what they held: their
    /// slots are freed, their sleeps forgotten, and their holds dropped. Returns the sockets
    /// no process holds any more, for the caller to close on the shards.
    pub(crate) fn bury_dead(&self) -> Vec<SocketId> {
        let s = self.shared();
        let mut closes = Vec::new();
        for (m, member) in s.members.iter().enumerate() {
            let pid = member.pid.load(Ordering::Acquire);
            // A fork not returned yet is left to it (its child may still run).
            if pid == 0 || pid == FORKING || !gone(pid, member.start.load(Ordering::Relaxed)) {
                continue;
            }
            closes.extend(self.give_back(m, member, pid));
            s.dead_processes.fetch_add(1, Ordering::Relaxed);
        }
        closes
    }

    /// This process leaves the family at its exit (family lock held): what it still holds is
    /// given back as for the dead, without counting it dead. Returns the sockets to close.
    pub(crate) fn leave(&self) -> Vec<SocketId> {
        let Some(m) = self.member() else { return Vec::new() };
        let s = self.shared();
        let closes = self.give_back(m, &s.members[m], self.pid.load(Ordering::Relaxed));
        self.became(None);
        closes
    }

    /// Member `m` (process `pid`) is gone: its sleeps are forgotten, its holds dropped, its
    /// slot freed. Returns the sockets that no process holds any more.
    fn give_back(&self, m: usize, member: &Member, pid: libc::pid_t) -> Vec<SocketId> {
        self.forget_sleeps(member, pid);
        let held = self.with_holds(|holds| holds.by_member.remove(&m)).unwrap_or_default();
        let mut closes = Vec::with_capacity(held.len());
        self.with_holds(|holds| closes.extend(held.iter().copied().filter(|&id| holds.drop_one(id))));
        // Freed in the arena, under the family lock (the arena's lock is only taken there).
        drop(held);
        member.start.store(0, Ordering::Relaxed);
        member.pid.store(0, Ordering::Release);
        closes
    }

    /// Forgets what a gone member `member` (process `pid`) left of its sleeps: its threads'
    /// count in `broadcast_sleepers`, and its registrations on sockets
    /// ([`Family::forget_sleeps_of`]).
    fn forget_sleeps(&self, member: &Member, pid: libc::pid_t) {
        let s = self.shared();
        let n = member.sleeping.swap(0, Ordering::AcqRel);
        let _ = s.broadcast_sleepers.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(v.saturating_sub(n)));
        self.forget_sleeps_of(pid);
    }

    /// The family's figures now. `gauges`: also count the members and the sleepers, each a
    /// walk over a table of the arena (1,024 slots), so not on every publish (0 otherwise).
    pub(crate) fn stats(&self, gauges: bool) -> FamilyStats {
        let s = self.shared();
        let named = |pid: i32| pid != 0 && pid != FORKING;
        let members = || s.members.iter().filter(|m| named(m.pid.load(Ordering::Relaxed))).count() as u64;
        FamilyStats {
            dead_processes: s.dead_processes.load(Ordering::Relaxed),
            dead_lock_holders: s.dead_lock_holders.load(Ordering::Relaxed),
            dead_mid_update: s.dead_mid_update.load(Ordering::Relaxed),
            members: if gauges { members() } else { 0 },
            sleepers: if gauges { self.sleepers_in_use() } else { 0 },
            broadcast_sleepers: u64::from(s.broadcast_sleepers.load(Ordering::Relaxed)),
            wakes: s.wakes.load(Ordering::Relaxed),
            wakes_idle: s.wakes_idle.load(Ordering::Relaxed),
        }
    }
}
