//! epoll over accelerated sockets, mixed with kernel fds in the same set.
//!
//! An application's epoll fd is a real kernel epoll set: kernel fds are added to it as usual.
//! Accelerated members live here, in a shadow set with a *ready list*: the stack pass queues a
//! member when its socket's readiness changes (`mark_ready`), and epoll_wait looks only at the
//! queued members, as Linux's ep_poll_callback/rdllist do. The cost of a wait is O(ready), not
//! O(members). Level-triggered members that are still ready go back on the list after they are
//! reported (Linux does the same); edge-triggered ones wait for the next change; EPOLLONESHOT
//! members are disabled until EPOLL_CTL_MOD.
//!
//! A thread with nothing to report sleeps on its parker plus the kernel epoll fd itself (an epoll
//! fd is pollable: readable while kernel members are ready), and in inline mode possibly on the
//! NIC's rx fd as the driver (see `wait`).

//!
//! This module holds the sets (members, ready list, waiters), which the fd table holds and the
//! stack pass marks ready; `calls` serves epoll_create, epoll_ctl and epoll_wait on them.

mod calls;

use std::collections::VecDeque;
use std::sync::Arc;

use nic::Nic;
use stack::shard::{Readiness, SocketId};

use crate::shards::ShardSet;
use crate::wait::{self, OwedWakes, Parker};

/// What an accelerated member is.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    Sock(SocketId),
    /// Bound, not listening: always writable, nothing else.
    Bound,
}

#[derive(Clone, Copy)]
struct Member {
    events: u32,
    data: u64,
    target: Target,
    /// For EPOLLET: the mask last reported, and the arrival count then.
    last: u32,
    arrivals: u32,
    disabled: bool,
    queued: bool,
}

/// The accelerated half of an epoll set.
#[derive(Default)]
pub(crate) struct EpollSet {
    /// Indexed by fd.
    members: Vec<Option<Member>>,
    count: usize,
    ready: VecDeque<i32>,
    /// Threads sleeping in epoll_wait on this set.
    waiters: Vec<Arc<Parker>>,
    /// Kernel fds added through epoll_ctl (an upper bound: the kernel drops closed ones itself).
    /// While it is 0 a wait with accelerated events to report needs no system call.
    kernel_members: u32,
}

impl EpollSet {
    fn member_mut(&mut self, fd: i32) -> Option<&mut Member> {
        self.members.get_mut(fd as usize)?.as_mut()
    }

    /// Threads asleep in epoll_wait on this set.
    pub(crate) fn sleepers(&self) -> usize {
        self.waiters.len()
    }

    /// `fd`'s socket changed: queue it and wake the set's waiters. Returns how many were woken.
    pub(crate) fn mark_ready(&mut self, fd: i32, owed: &mut OwedWakes) -> usize {
        let Some(Some(m)) = self.members.get_mut(fd as usize) else { return 0 };
        if m.disabled {
            return 0;
        }
        if !m.queued {
            m.queued = true;
            self.ready.push_back(fd);
        }
        let exclusive = m.events & libc::EPOLLEXCLUSIVE as u32 != 0;
        let n = if exclusive { self.waiters.len().min(1) } else { self.waiters.len() };
        for p in &self.waiters[..n] {
            wait::owe_wake(owed, p);
        }
        n
    }

    /// Updates `fd`'s target (a bound socket that started listening).
    pub(crate) fn retarget(&mut self, fd: i32, target: Target, owed: &mut OwedWakes) {
        if let Some(m) = self.member_mut(fd) {
            m.target = target;
        }
        self.mark_ready(fd, owed);
    }

    /// The accelerated members' fds.
    pub(crate) fn member_fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.members.iter().enumerate().filter(|(_, m)| m.is_some()).map(|(fd, _)| fd as i32)
    }

    /// The sockets of the accelerated members that may still report (not disabled by
    /// EPOLLONESHOT).
    pub(crate) fn member_sockets(&self) -> impl Iterator<Item = SocketId> + '_ {
        self.members.iter().flatten().filter(|m| !m.disabled).filter_map(|m| match m.target {
            Target::Sock(id) => Some(id),
            Target::Bound => None,
        })
    }

    /// Wakes every waiter to look again: the set is going away (they find it gone), or it
    /// has its first kernel member (they sleep again watching the kernel set too).
    pub(crate) fn wake_all(&self, owed: &mut OwedWakes) {
        for p in &self.waiters {
            wait::owe_wake(owed, p);
        }
    }

    /// Forgets the threads waiting on the set (a forked child has none of its parent's).
    pub(crate) fn forget_waiters(&mut self) {
        self.waiters.clear();
    }

    /// `fd` leaves the set (EPOLL_CTL_DEL, or its close), and the ready list with it: an fd is
    /// on the list at most once, while its member says `queued` (a stale entry would be taken
    /// for the member that `fd` gets next, which is then reported twice in one wait).
    pub(crate) fn remove(&mut self, fd: i32) -> bool {
        match self.members.get_mut(fd as usize).and_then(|m| m.take()) {
            Some(m) => {
                if m.queued {
                    self.ready.retain(|&queued| queued != fd);
                }
                self.count -= 1;
                true
            }
            None => false,
        }
    }

    /// The application saw EAGAIN on `fd` for `bits` (EPOLLIN on a read or accept, EPOLLOUT on a
    /// write): for EPOLLET the next readiness is a new edge, as in Linux.
    pub(crate) fn rearm(&mut self, fd: i32, bits: u32) {
        if let Some(m) = self.member_mut(fd) {
            m.last &= !bits;
        }
    }

    /// Reports queued members into `out`; returns how many.
    fn collect<N: Nic>(&mut self, shards: &ShardSet<N>, out: &mut [libc::epoll_event]) -> usize {
        let mut n = 0;
        let mut todo = self.ready.len();
        while n < out.len() && todo > 0 {
            todo -= 1;
            let Some(fd) = self.ready.pop_front() else { break };
            let Some(Some(m)) = self.members.get_mut(fd as usize) else { continue };
            m.queued = false;
            if m.disabled {
                continue;
            }
            let (r, arrivals) = match m.target {
                Target::Sock(_) if !shards.is_open() => continue,
                Target::Sock(id) => (shards.readiness(id), shards.arrivals(id)),
                Target::Bound => (Readiness { writable: true, ..Readiness::default() }, 0),
            };
            let mask = epoll_mask(r, m.events);
            let edge = m.events & libc::EPOLLET as u32 != 0;
            let report = if edge {
                // New bits, and EPOLLIN again for every new arrival (Linux wakes ET waiters on each).
                let mut r = mask & !m.last;
                if arrivals != m.arrivals {
                    r |= mask & libc::EPOLLIN as u32;
                }
                r
            } else {
                mask
            };
            m.last = mask;
            m.arrivals = arrivals;
            if report == 0 {
                continue;
            }
            out[n] = libc::epoll_event { events: report, u64: m.data };
            n += 1;
            if m.events & libc::EPOLLONESHOT as u32 != 0 {
                m.disabled = true;
            } else if !edge {
                // Level-triggered and still ready: it stays on the list.
                m.queued = true;
                self.ready.push_back(fd);
            }
        }
        n
    }
}

pub(crate) fn epoll_mask(r: Readiness, wanted: u32) -> u32 {
    let mut m = 0u32;
    if r.readable {
        m |= libc::EPOLLIN as u32;
    }
    if r.writable {
        m |= libc::EPOLLOUT as u32;
    }
    if r.read_closed {
        m |= libc::EPOLLRDHUP as u32;
    }
    if r.urgent {
        m |= libc::EPOLLPRI as u32;
    }
    let always = libc::EPOLLERR as u32 | libc::EPOLLHUP as u32;
    if r.hangup {
        m |= libc::EPOLLHUP as u32;
    }
    if r.error {
        m |= libc::EPOLLERR as u32;
    }
    m & (wanted | always)
}
