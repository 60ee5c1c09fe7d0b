//! What fork, exit, exec and a privilege drop do to the runtime's sockets and shards.

use std::collections::{HashMap, HashSet};

use nic::Nic;
use stack::shard::SocketId;
use stack::TcpState;

use super::keeper::{self, Handoff};
use super::{bury, keeps_capabilities, ExitDrain, Leaving, EXIT_RESET_GRACE_NS, EXIT_STATS};
use crate::accel::{Accel, Runtime};
use crate::real;

impl<N: Nic + 'static> Accel<N> {
    /// The process is about to change its credentials (setuid, setgid, setgroups, ...): a
    /// server that drops root (mariadbd --user=mysql, nginx's `user`) would lose the rights to
    /// open the NIC (AF_XDP, hugepages) before its first socket. Open it now, unless the calling
    /// thread manages its capabilities itself (`keeps_capabilities`).
    pub fn before_credentials_change(&self) {
        // SAFETY: PR_GET_SECUREBITS takes no other argument and no memory.
        if keeps_capabilities(unsafe { libc::prctl(libc::PR_GET_SECUREBITS) }) {
            return;
        }
        self.with(|rt| {
            let _ = rt.open_shards();
        });
    }

    /// At exit: the connections deliver what they were given (`Accel::drain`), then
    /// the port closes (which detaches the XDP program). The stack thread, if any, stops when
    /// it sees the shard gone. A forked child that does not own the NIC never gets here
    /// (`FORKED`). The opener of a fork family some member of which still runs hands the NIC to
    /// a keeper instead and closes nothing; the keeper finishes this way once the family has
    /// ended, then `_exit`s (`keeper`). A child of a family whose driver is gone (killed)
    /// takes its place first, and exits as the opener would (`family::succession`).
    pub fn at_exit(&self) {
        self.try_with(|rt| rt.take_over_at_exit());
        if !self.handed_to_keeper(Leaving::Exit) {
            self.finish_at_exit();
        }
    }

    /// The opener of a family some member of which still runs hands the NIC to a keeper as it
    /// exits or execs (`leaving`): true in the opener, which then closes nothing; the keeper
    /// never returns (once its family has ended it finishes as the opener's exit would have,
    /// then `_exit`s); false in any other process.
    fn handed_to_keeper(&self, leaving: Leaving) -> bool {
        match self.hand_family_to_keeper(leaving) {
            Handoff::Opener => true,
            Handoff::Keeper => {
                self.finish_at_exit();
                keeper::end()
            }
            Handoff::None => false,
        }
    }

    /// The exit's work in the process that drives the NIC or shares its stack: the opener
    /// with no keeper, the keeper once its family has ended, or a child of the family.
    fn finish_at_exit(&self) {
        self.try_with(|rt| rt.say_children_left_behind());
        self.drain(Leaving::Exit);
        if self.try_with(|rt| rt.sharing.child().is_some()) != Some(false) {
            // A child of a family that shares the shards let go of its connections in `drain`,
            // and leaves the process table with whatever else it held (a listener it
            // inherited): otherwise it would be counted dead. The NIC and the shards are the
            // opener's.
            self.try_with(|rt| rt.leave_family());
            return;
        }
        self.try_with(|rt| {
            rt.poll_shard();
            if EXIT_STATS.get().copied().unwrap_or(false) {
                for (k, s) in rt.shards.all().iter().enumerate() {
                    let msg = format!(
                        "pronghorn: pid {} shard {k} at exit: {:?}\n{:?}\n{:?}\n{:?}\n{:?}\n",
                        std::process::id(),
                        s.stats(),
                        s.link_stats(),
                        s.nic().stats(),
                        rt.wait.stats,
                        rt.routing
                    );
                    // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                    unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
                }
            }
            rt.stop_observer();
            rt.shards.stop();
            if let (Some(f), true) = (rt.sharing.family(), rt.starts_reaper) {
                // The port is closed: nobody is left for the cleanup helper to follow.
                f.unname_driver();
            }
        });
    }

    /// What the kernel does for a process that exits with sockets, and then some: every TCP
    /// socket still held is closed as if its last fd went (a FIN after its data; a RST when
    /// received data was left unread or SO_LINGER is 0), and the stacks keep running until
    /// every connection, those the process closed before included, has sent its data and its
    /// FIN and seen them acknowledged (FIN-WAIT-2, TIME-WAIT or gone). Linux's orphans send on
    /// after the process is gone; here the stack ends with the process, so the wait is bounded:
    /// by the socket's SO_LINGER time where it has one, else by `runtime.exit_drain_ms`. A
    /// connection still sending then is reset, as Linux resets an orphan it gives up on.
    ///
    /// The lock is taken for one pass at a time, never while waiting, so other threads (a
    /// stack thread, application threads the exit did not stop) go on; if it cannot be taken
    /// (a thread stopped while holding it) the drain ends.
    fn drain(&self, leaving: Leaving) {
        let Some(Some((mut drain, child))) =
            self.try_with(|rt| rt.shards.is_open().then(|| (rt.close_all(leaving), rt.sharing.child().is_some())))
        else {
            return;
        };
        if child {
            // Its sockets are closed as its last fds went (those the family still holds stay
            // open); the opener's passes deliver what is left.
            return;
        }
        loop {
            let Some(Some((work, rx_fds, wait_ms))) = self.try_with(|rt| {
                let work = rt.poll_shard();
                rt.drain_step(&mut drain).then(|| (work, rt.rx_fds.clone(), rt.next_wait_ms(None)))
            }) else {
                return;
            };
            if work == 0 {
                // Nothing moved: wait for frames or the next timer (a few ms at most).
                let mut fds: Vec<libc::pollfd> =
                    rx_fds.iter().flatten().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
                // SAFETY: `fds` is our Vec of fds.len() pollfds, read and written by the kernel.
                unsafe { real::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms.clamp(1, 10)) };
            }
        }
    }

    /// Before an exec the kernel would start (`exec`): the image that holds the stack is about
    /// to go, so the connections are finished as at exit ([`Accel::at_exit`], same bounds),
    /// with Linux's rule for which fds an exec closes. A connection whose fds are all
    /// close-on-exec is closed as the exec would close it (a FIN after its data). One with an
    /// fd that is not stays open under Linux, for the new program; pronghorn cannot carry it
    /// there, so it is reset: its peer learns the connection is broken, where a FIN would tell
    /// it the stream ended as the program meant. Listeners close either way (their unaccepted
    /// connections reset). The port stays open: the program continues if the exec fails after
    /// all, and the stack thread (if any) still runs. Every accelerated TCP fd then becomes a
    /// kernel socket that was never connected (`bury`), so a program whose exec failed gets
    /// errors on them (ENOTCONN, EPIPE, EINVAL from accept) rather than an eventfd that takes
    /// writes, and a new image that inherits one finds a socket there. A process of a fork
    /// family then leaves it: no socket may be passed to the new program.
    pub fn drain_before_exec(&self) {
        // The opener of a family some member of which still runs hands the NIC to a keeper,
        // as at its exit: the exec takes this process's image, and with it the EAL, the port
        // and the stack thread that drive the NIC for the others. HAProxy's master re-execs
        // itself into its "wait mode" right after forking its workers, and its workers served
        // nothing. An exec that fails after the hand-over leaves the program without its
        // accelerated sockets (buried as below) and without the NIC, which the keeper drives.
        if self.handed_to_keeper(Leaving::Exec) {
            return;
        }
        self.drain(Leaving::Exec);
        self.with(|rt| rt.leave_family());
    }

    /// Before an exec the kernel would start, when the listeners cannot be handed over
    /// (`handover`: they are on the shards, the NIC open): the accelerated listeners the new
    /// program would inherit (fds that are not close-on-exec) cannot follow it, since the stack
    /// cannot be mapped into another image yet (issue 24, stage 5). nginx's binary upgrade
    /// (USR2) under `share = "family"` hands its listeners to the new binary this way: the new
    /// master finds placeholders, not sockets, and its own bind() of the address then fails, so
    /// it exits and the old master serves on. Said on stderr (nginx's error log), naming the
    /// fds, so that the failure says why.
    pub fn say_listeners_left_behind(&self) {
        let Some(fds) = self.try_with(|rt| {
            let mut fds = rt.fds.listeners();
            // SAFETY: F_GETFD takes no memory.
            fds.retain(|&fd| unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0);
            fds
        }) else {
            return;
        };
        if fds.is_empty() {
            return;
        }
        let list: Vec<String> = fds.iter().map(i32::to_string).collect();
        let msg = format!(
            "pronghorn: pid {} execs a new program that inherits accelerated listener(s) on fd(s) {}: it cannot \
             use them (they are on pronghorn's stack, which does not follow an exec: issue 24 stage 5; listeners \
             of a process whose NIC is not open yet would); there they are not listening sockets\n",
            std::process::id(),
            list.join(", ")
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
}

impl<N: Nic + 'static> Runtime<N> {
    /// Closes every TCP socket the process still holds (listeners: their unaccepted
    /// connections are reset), as the kernel does when the last fd of each goes, and says how
    /// long each connection may take to finish. Before an exec, a connection that would stay
    /// open in the new program is reset instead, and the fds are buried
    /// ([`Accel::drain_before_exec`]).
    pub(super) fn close_all(&mut self, leaving: Leaving) -> ExitDrain {
        let now = self.now();
        let deadline = now + u64::from(self.cfg.runtime.exit_drain_ms) * 1_000_000;
        let mut lingering = HashMap::new();
        let fds = self.fds.streams();
        let (inherited, family_keeps): (HashSet<SocketId>, HashSet<SocketId>) = match leaving {
            Leaving::Exit => Default::default(),
            Leaving::Exec => {
                let family = self.sharing.family();
                self.kept_across_exec(&fds).into_iter().partition(|&id| !family.is_some_and(|f| f.held_by_others(id)))
            }
        };
        for (count, fate) in [
            (inherited.len(), "are reset"),
            (family_keeps.len(), "stay open for the other processes of the family that hold them"),
        ] {
            if count == 0 {
                continue;
            }
            let msg = format!(
                "pronghorn: pid {} execs with {count} accelerated connection(s) on fds that are not close-on-exec: they \
                 cannot follow into the new program (there they are sockets that were never connected) and {fate}\n",
                std::process::id(),
            );
            // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        }
        for &fd in &fds {
            let Some(id) = self.fds.kind(fd).and_then(|k| k.socket()) else { continue };
            let file = self.fds.file_mut(fd).unwrap();
            if inherited.contains(&id) {
                // Reset when its last fd goes, as SO_LINGER 0 does.
                file.opts.linger_s = Some(0);
            } else if let Some(secs @ 1..) = file.opts.linger_s {
                lingering.insert(id, now + u64::from(secs) * 1_000_000_000);
            }
            self.release(fd);
            if leaving == Leaving::Exec {
                bury(fd);
            }
        }
        let last = lingering.values().copied().fold(deadline, u64::max);
        ExitDrain { deadline, lingering, end: last + EXIT_RESET_GRACE_NS }
    }

    /// The connections (not listeners) among `fds` that a successful exec leaves open: one of
    /// their fds is not close-on-exec.
    fn kept_across_exec(&self, fds: &[i32]) -> HashSet<SocketId> {
        fds.iter()
            // SAFETY: F_GETFD takes no memory.
            .filter(|&&fd| unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0)
            .filter_map(|&fd| match self.fds.kind(fd) {
                Some(crate::fdtable::Fd::Conn { id, .. }) => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// After a pass: resets the connections past their deadline; whether to go on (a
    /// connection still delivering, or frames still queued, before the end).
    fn drain_step(&mut self, drain: &mut ExitDrain) -> bool {
        let now = self.now();
        let mut unsettled = false;
        for s in self.shards.all_mut() {
            let late: Vec<SocketId> = s
                .connections()
                .filter(|(_, _, _, info)| {
                    !matches!(info.state, TcpState::FinWait2 | TcpState::TimeWait | TcpState::Closed)
                })
                .map(|(id, ..)| id)
                .filter(|id| {
                    unsettled = true;
                    now >= drain.lingering.get(id).copied().unwrap_or(drain.deadline)
                })
                .collect();
            for id in late {
                let _ = s.abort(id);
            }
            s.flush(now);
            unsettled |= s.pending_frames() > 0;
        }
        unsettled && now < drain.end
    }
}
