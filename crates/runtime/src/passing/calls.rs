//! The sender's and the receiver's side of passing accelerated sockets within a family (see the
//! parent module).

use nic::Nic;

use std::sync::atomic::Ordering;

use super::{eventfd_id, peer_pid, say_refused, InFlight, Kind, Passed, Passing, Refusal};
use crate::accel::{Accel, Runtime};
use crate::family::Family;
use crate::fdtable::{Entry, OpenFile};
use crate::liveness::runs;
use crate::{real, set_tracked_datagram, Errno};

impl<N: Nic + 'static> Accel<N> {
    /// Before a message passes `fds` over the unix socket `via` (SCM_RIGHTS): the accelerated
    /// sockets among them are recorded for the receiver when it is a process of the family
    /// (the caller gives the records back with [`Accel::passing_failed`] if the send fails);
    /// otherwise the message is refused (EOPNOTSUPP, or ETOOMANYREFS when too many are in
    /// flight), said once on stderr.
    pub fn pass_rights(&self, via: i32, fds: &[i32]) -> Result<Passing, Errno> {
        let accelerated = self.accelerated(fds);
        let Some(&first) = accelerated.first() else { return Ok(Passing::default()) };
        let Some(family) = self.with(|rt| rt.sharing.family()).flatten() else {
            return Err(say_refused(first, Refusal::Alone));
        };
        let peer = peer_pid(via).unwrap_or(0);
        if !family.has_member(peer) {
            return Err(say_refused(first, Refusal::Outside(peer)));
        }
        let mut ids = Vec::with_capacity(accelerated.len());
        for fd in accelerated {
            match eventfd_id(fd) {
                Some(id) => ids.push((fd, id)),
                None => return Err(say_refused(fd, Refusal::NoEventfdId)),
            }
        }
        self.with(|rt| rt.record_passing(family, peer, &ids)).unwrap_or_else(|| Err(say_refused(first, Refusal::Alone)))
    }

    /// The message [`Accel::pass_rights`] recorded was not sent: its records go, and so do the
    /// holds they took (a socket nobody holds any more closes).
    pub fn passing_failed(&self, passing: Passing) {
        self.with(|rt| {
            let Some(f) = rt.sharing.family() else { return };
            for eventfd in passing.0 {
                if let Some(p) = in_flight(f, false).and_then(|t| t.take(eventfd)) {
                    rt.let_go(f, p);
                }
            }
        });
    }

    /// After a message brought `fds` (SCM_RIGHTS): those that are sockets passed by a process of
    /// the family become this process's fds of those sockets.
    pub fn received_rights(&self, fds: &[i32]) {
        let Some(family) = self.with(|rt| rt.sharing.family()).flatten() else { return };
        let table = family.in_flight().load(Ordering::Acquire).cast::<InFlight>();
        // SAFETY: null, or the table `in_flight` made in the arena, never freed; `any` reads an
        // atomic.
        if table.is_null() || !unsafe { (*table).any() } {
            return;
        }
        let received: Vec<(i32, u64, bool)> = fds
            .iter()
            .filter_map(|&fd| {
                let id = eventfd_id(fd)?;
                // SAFETY: F_GETFL takes no argument and no memory.
                let flags = unsafe { real::fcntl(fd, libc::F_GETFL, 0) };
                Some((fd, id, flags >= 0 && flags & libc::O_NONBLOCK != 0))
            })
            .collect();
        if !received.is_empty() {
            self.with(|rt| rt.claim(family, &received));
        }
    }
}

impl<N: Nic + 'static> Runtime<N> {
    /// Records the accelerated `fds` (each with its eventfd-id) as passed to `peer`, each socket
    /// with one more holder (family lock held).
    fn record_passing(&mut self, f: &'static Family, peer: libc::pid_t, fds: &[(i32, u64)]) -> Result<Passing, Errno> {
        let mut passing: Vec<Passed> = Vec::with_capacity(fds.len());
        for &(fd, eventfd) in fds {
            if passing.iter().any(|p| p.eventfd == eventfd) {
                // Another fd of the same file: the receiver installs both from one record.
                continue;
            }
            let Some(entry) = self.fds.get(fd) else { return Err(say_refused(fd, Refusal::Alone)) };
            let (Some(socket), Some(kind)) = (entry.fd.socket(), Kind::of(&entry.fd)) else {
                return Err(say_refused(fd, Refusal::NotOnShard));
            };
            let (opts, bound_to) = (self.fds.opts(fd), entry.bound_to);
            passing.push(Passed { eventfd, socket, kind, opts, bound_to, peer });
        }
        let eventfds: Vec<u64> = passing.iter().map(|p| p.eventfd).collect();
        let Some(table) = in_flight(f, true) else { return Err(say_refused(fds[0].0, Refusal::Alone)) };
        let mut stale = Vec::new();
        table.take_stale(&eventfds, runs, &mut stale);
        for p in stale {
            self.let_go(f, p);
        }
        if !table.store(&passing) {
            return Err(say_refused(fds[0].0, Refusal::TooMany));
        }
        let sockets: Vec<_> = passing.iter().map(|p| p.socket).collect();
        f.hold_in_flight(&sockets);
        Ok(Passing(eventfds))
    }

    /// A record's hold goes (nobody will claim it): the socket closes when nobody else holds it
    /// (family lock held).
    fn let_go(&mut self, f: &'static Family, p: Passed) {
        if f.drop_in_flight(p.socket) {
            self.close_socket(p.socket, matches!(p.kind, Kind::Udp { .. }), p.opts.linger_s, p.bound_to);
        }
    }

    /// Installs the received fds whose eventfd-id a process of the family recorded (each with
    /// whether its file is non-blocking) as the sockets passed (family lock held).
    fn claim(&mut self, f: &'static Family, received: &[(i32, u64, bool)]) {
        let mut claimed: Vec<Passed> = Vec::new();
        for &(fd, eventfd, nonblock) in received {
            let p = match claimed.iter().find(|p| p.eventfd == eventfd) {
                Some(p) => *p,
                None => {
                    let Some(p) = in_flight(f, false).and_then(|t| t.take(eventfd)) else { continue };
                    if self.socks.get(p.socket).is_some_and(|st| !st.fds.is_empty()) {
                        // This process holds the socket already: the message's hold goes.
                        f.drop_in_flight(p.socket);
                    }
                    claimed.push(p);
                    p
                }
            };
            // An fd number the kernel just handed out: nothing of ours can be left on it, but a
            // stale record would be wrong, so forget it first.
            self.release(fd);
            self.fds.open(
                fd,
                Entry { bound_to: p.bound_to, ..Entry::new(p.kind.fd(p.socket)) },
                OpenFile::new(nonblock, p.opts),
            );
            self.adopt(fd, p.socket);
            if matches!(p.kind, Kind::Udp { .. }) {
                set_tracked_datagram(fd);
            }
        }
    }
}

/// The family's table of sockets in flight (family lock held), made in the family arena when
/// `make` and there is none yet (a pass); `None` when there is none (or no arena to make it in).
fn in_flight(f: &Family, make: bool) -> Option<&'static mut InFlight> {
    let slot = f.in_flight();
    let mut table = slot.load(Ordering::Acquire).cast::<InFlight>();
    if table.is_null() && make {
        let arena = arena::family()?;
        let _in = arena.enter();
        table = Box::into_raw(Box::new(InFlight::default()));
        if !arena.contains(table.cast()) {
            // The arena is full: this block is the heap's, which the other processes do not see.
            // SAFETY: the block just made, known to nothing else.
            drop(unsafe { Box::from_raw(table) });
            return None;
        }
        slot.store(table.cast(), Ordering::Release);
    }
    // SAFETY: null, or the arena block made above by some process of the family (at the same
    // address in every one of them), never freed; the family lock, held by the caller, keeps
    // any other reference from being made meanwhile.
    unsafe { table.as_mut() }
}
