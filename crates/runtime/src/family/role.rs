//! What a fork does to a runtime whose shards the family shares: the child's becomes a child's,
//! the opener's drives with a stack thread (see the parent module).

use stack::shard::SocketId;

use super::{Family, Sharing};

impl<N: nic::Nic + 'static> crate::accel::Runtime<N> {
    /// Whether listen() opens the NIC at once instead of at the first wait: with
    /// `share = "family"` the process that listens must be the opener, so that the children it
    /// forks before it serves (nginx's workers, forked by a master that only sleeps) share its
    /// shards and its listener instead of each opening a port of its own; a reload's new
    /// workers are then children on the same shards as the old ones.
    pub(crate) fn opens_at_listen(&self) -> bool {
        self.cfg.runtime.share == config::Share::Family
    }

    /// In a child just forked from a process that shares its shards: from now on the runtime is
    /// a child's. The parent's threads (waiters, the driver role, the stack threads, the
    /// observer) are not in this process: their traces go, and so does the forking thread's
    /// parker, whose eventfd is the parent's (`wait::forget_my_parker`), and its lists of
    /// spare TCP buffers, which name the parent's arena blocks (`stack::forget_spare_buffers`).
    pub(crate) fn become_child(&mut self, f: &'static Family, slot: Option<usize>) {
        f.became(slot);
        // SAFETY: getpid has no preconditions.
        f.joined(slot, unsafe { libc::getpid() });
        self.sharing = Sharing::Child(f);
        self.family_seen = f.changes();
        self.socks.forget_waiters();
        self.fds.forget_epoll_waiters();
        self.owed_wakes.clear();
        self.wait.forget_threads();
        crate::wait::forget_my_parker();
        stack::forget_spare_buffers();
        // The observer's thread and region are the parent's: left to it, never dropped here.
        std::mem::forget(self.observer.take());
    }

    /// In the opener, after a fork that shares the shards: a stack thread drives the NIC from
    /// now on (dedicated mode), so that a child's rings are answered whatever the opener's own
    /// threads do (a parent in waitpid(2), or computing, drives nothing inline). A child that
    /// forks (nginx's daemon forking its workers) drives nothing: its stack thread would take
    /// the doorbell from the driver's, and the family's rings would go to a thread that only
    /// rings again.
    pub(crate) fn drive_for_children(&mut self, f: &'static Family, child: libc::pid_t) {
        if self.sharing.child().is_some() {
            return;
        }
        f.forked(child);
        self.wait.mode = crate::wait::Mode::Dedicated;
        self.ensure_stack_thread();
    }

    /// In the keeper just forked from the opener at its exit (`process::keeper`): the runtime
    /// goes on as the opener's, but the opener's threads (its waiters, its stack threads, its
    /// observer) are not in this process: their traces go, and the stack threads start anew.
    pub(crate) fn become_keeper(&mut self, f: &'static Family) {
        f.keeper_took_over();
        self.socks.forget_waiters();
        self.fds.forget_epoll_waiters();
        self.owed_wakes.clear();
        self.wait.forget_threads();
        self.wait.stats.dedicated = false;
        // The observer's thread is the opener's, and so are its region and control socket.
        std::mem::forget(self.observer.take());
    }

    /// In the keeper, once it has left the program's world: its stack threads drive the NIC,
    /// and its own stats region and control socket show it to `pronghorn ps` and `stat`.
    pub(crate) fn keeper_starts(&mut self) {
        self.ensure_stack_thread();
        if let Some(dir) = self.observe_dir.clone() {
            self.start_observer(dir);
        }
    }

    /// In the opener, after it forked its keeper: the shards are the keeper's to drive and to
    /// close. This process forgets them unclosed (their memory is the family arena's), so its
    /// stack thread stops and its exit closes no port.
    pub(crate) fn hand_shards_to_keeper(&mut self) {
        self.shards.hand_over();
    }

    /// At the exit of the process that drives the NIC for its family without a keeper
    /// (`process::keeper`: its fork failed, or the children were left out of the full process
    /// table): its children that still live lose the stack with it, so it says so on stderr,
    /// naming them.
    pub(crate) fn say_children_left_behind(&self) {
        let Sharing::Opener(f) = self.sharing else { return };
        let alive = f.children_alive();
        if alive.is_empty() {
            return;
        }
        let list: Vec<String> = alive.iter().map(i32::to_string).collect();
        let msg = format!(
            "pronghorn: pid {} drives the NIC for its family (runtime.share = \"family\") and exits while its \
             children {} still hold its stack, and no keeper drives the NIC for them: their accelerated sockets \
             stop working\n",
            std::process::id(),
            list.join(", ")
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { crate::real::write(2, msg.as_ptr().cast(), msg.len()) };
    }

    /// The family lock was just taken: when its previous holder died, the dead are buried
    /// before this hold touches the shards; a child then catches up with the driver's changes
    /// ([`Runtime::catch_up_changes`]), so that this hold's look sees them.
    #[inline]
    pub(crate) fn after_family_lock(&mut self) {
        if let Some(f) = self.sharing.family() {
            if f.take_holder_died() {
                let closes = f.bury_dead();
                self.close_given_back(closes);
            }
        }
        if let Some(f) = self.sharing.child() {
            self.catch_up_changes(f);
        }
    }

    /// Before a fork takes a slot of the process table for its child (family lock held): when
    /// every slot is taken, the dead are buried first. Children that end without the runtime's
    /// exit (`_exit`, a signal) keep their slots until the periodic look; a server forking
    /// more than [`super::MEMBERS`] such children a second would otherwise fill the table and
    /// its later children would share the stack untracked.
    pub(crate) fn room_for_a_child(&mut self, f: &'static Family) {
        if f.table_full() {
            let closes = f.bury_dead();
            self.close_given_back(closes);
        }
    }

    /// In the opener's stack pass at `now`: the periodic look for members that died without
    /// holding the lock (`family::REAP_EVERY_NS`).
    pub(crate) fn look_for_dead_members(&mut self, f: &'static Family, now: u64) {
        if f.look_due(now) {
            let closes = f.bury_dead();
            self.close_given_back(closes);
        }
    }

    /// A child at its exit, or a process of the family after the drain before an exec (the new
    /// program starts without the family's stack): what it still holds goes back to the family
    /// (family lock held), and no socket may be passed to it from now on.
    pub(crate) fn leave_family(&mut self) {
        match self.sharing {
            Sharing::Child(f) => {
                let closes = f.leave();
                self.close_given_back(closes);
            }
            Sharing::Opener(f) => f.opener_left(),
            Sharing::Alone => {}
        }
    }

    /// Closes on the shards the sockets that a gone process was the last to hold, as Linux
    /// closes a dead process's last fd of a socket: a connection sends its FIN after its data,
    /// or a RST when it had unread data; a listener resets what nobody accepted. What the gone
    /// process kept of them on its own (SO_LINGER, its address records) went with it.
    fn close_given_back(&mut self, closes: Vec<SocketId>) {
        if closes.is_empty() || !self.shards.is_open() {
            return;
        }
        for id in closes {
            for o in self.shards.take_siblings(id).iter() {
                let _ = self.shards.of(*o).close(*o);
            }
            let _ = self.shards.of(id).close(id);
        }
        self.flush_shard();
    }

    /// A child's part of `dispatch`: what its calls queued goes out through the driver. (The
    /// driver's changes it caught up with as the hold started, [`Runtime::catch_up_changes`]:
    /// none can come during the hold, which has the family lock.)
    pub(crate) fn hand_output_to_driver(&mut self, f: &'static Family) {
        if self.shards.all().iter().any(|s| s.has_output()) {
            f.ring();
        }
    }

    /// When the driver's passes changed sockets since this child last looked, every socket it
    /// holds counts as changed: its blocked calls, polls and epoll sets look again (the
    /// driver's list of changes is the driver's, and a child's epoll ready lists are its own).
    /// At the start of each hold (`after_family_lock`), so that the look a woken thread makes
    /// in it finds what woke it: done at the end, the look came first and found nothing, the
    /// thread registered again, and the end of the hold woke it for a second hold (every
    /// family wake counted idle, stop 33).
    pub(crate) fn catch_up_changes(&mut self, f: &'static Family) {
        let now = f.changes();
        if now == self.family_seen {
            return;
        }
        self.family_seen = now;
        for id in self.socks.held() {
            self.notify(id);
        }
    }
}
