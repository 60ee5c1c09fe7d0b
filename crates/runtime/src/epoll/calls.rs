//! epoll_create, epoll_ctl and epoll_wait on the accelerated halves of the sets, and a pending
//! socket's kernel registrations moving over when it becomes accelerated.

use std::time::{Duration, Instant};

use nic::Nic;
use smallvec::SmallVec;
use stack::shard::SocketId;

use super::{Member, Target};
use crate::accel::{Accel, Runtime};
use crate::fdtable::{Entry, Fd, KernelEpoll, OpenFile, SockOpts};
use crate::wait;
use crate::{real, Call, Errno};

impl<N: Nic + 'static> Runtime<N> {
    /// Pending socket `fd` just became accelerated: its registrations in kernel epoll sets
    /// (made before its bind or connect) move to the sets' accelerated halves, with their
    /// events and data. The kernel's went with the socket it replaced; were it kept, it would
    /// never report (the fd is a placeholder now).
    pub(crate) fn adopt_kernel_epolls(&mut self, fd: i32) {
        let Some(entry) = self.fds.get_mut(fd) else { return };
        let moved = std::mem::take(&mut entry.kernel_epolls);
        let target = match entry.fd {
            Fd::Conn { id, .. } | Fd::Listener { id, .. } | Fd::Udp { id, .. } => Target::Sock(id),
            Fd::Bound { .. } => Target::Bound,
            _ => return,
        };
        for k in moved {
            let mut none = libc::epoll_event { events: 0, u64: 0 };
            // SAFETY: the kernel reads nothing for EPOLL_CTL_DEL (`none` is valid all the same).
            unsafe { real::epoll_ctl(k.epfd, libc::EPOLL_CTL_DEL, fd, &mut none) };
            let Some(set) = self.fds.epoll_mut(k.epfd) else { continue };
            set.kernel_members = set.kernel_members.saturating_sub(1);
            let slot = fd as usize;
            if slot >= set.members.len() {
                set.members.resize_with(slot + 1, || None);
            }
            if set.members[slot].is_some() {
                continue;
            }
            let member =
                Member { events: k.events, data: k.data, target, last: 0, arrivals: 0, disabled: false, queued: false };
            set.members[slot] = Some(member);
            set.count += 1;
            set.mark_ready(fd, &mut self.owed_wakes);
            if let Some(entry) = self.fds.get_mut(fd) {
                entry.epolls.push(k.epfd);
            }
        }
    }

    /// `Runtime::end_sleep` for a wait on epoll set `epfd`: the parker was on the set's list.
    fn end_epoll_sleep(&mut self, epfd: i32, plan: &wait::Sleep) {
        if let Some(set) = self.fds.epoll_mut(epfd) {
            wait::forget_parker(&mut set.waiters, &plan.parker);
        }
        self.end_sleep(plan, None);
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// After the kernel created an epoll fd.
    pub fn epoll_created(&self, epfd: i32) -> bool {
        let file = OpenFile::new(true, SockOpts::default());
        self.with(|rt| rt.fds.open(epfd, Entry::new(Fd::Epoll(Box::default())), file)).is_some()
    }

    /// epoll_ctl: accelerated members go to the shadow set; kernel ones to the kernel set.
    pub fn epoll_ctl(&self, epfd: i32, op: i32, fd: i32, events: u32, data: u64) -> Call<()> {
        self.with(|rt| {
            if rt.fds.epoll(epfd).is_none() {
                return Call::Kernel;
            }
            if matches!(rt.fds.kind(fd), Some(Fd::Listening { .. })) {
                rt.serve_deferred();
            }
            if op != libc::EPOLL_CTL_DEL {
                rt.watch_listener(fd);
            }
            let target = match rt.fds.kind(fd) {
                Some(Fd::Conn { id, .. } | Fd::Listener { id, .. } | Fd::Udp { id, .. }) => Target::Sock(*id),
                Some(Fd::Bound { .. }) => Target::Bound,
                // The NIC did not open (the reason was said on stderr).
                Some(Fd::Listening { .. }) => return Call::Done(Err(Errno(libc::ENETDOWN))),
                _ => {
                    // A kernel fd: into the kernel set, counted.
                    let mut ev = libc::epoll_event { events, u64: data };
                    // SAFETY: `ev` is a valid epoll_event that outlives the call (the kernel reads it).
                    if unsafe { real::epoll_ctl(epfd, op, fd, &mut ev) } < 0 {
                        return Call::Done(Err(crate::last_errno()));
                    }
                    if let Some(entry) = rt.fds.get_mut(fd) {
                        // A pending socket: remembered, to move to the accelerated half of the
                        // set if it becomes accelerated (see `adopt_kernel_epolls`).
                        entry.kernel_epolls.retain(|k| k.epfd != epfd);
                        if op != libc::EPOLL_CTL_DEL {
                            entry.kernel_epolls.push(KernelEpoll { epfd, events, data });
                        }
                    }
                    let set = rt.fds.epoll_mut(epfd).unwrap();
                    match op {
                        libc::EPOLL_CTL_ADD => {
                            set.kernel_members += 1;
                            // Its waiters went to sleep without the kernel set among what they
                            // watch (it had no member): they look again, with it.
                            if set.kernel_members == 1 {
                                set.wake_all(&mut rt.owed_wakes);
                            }
                        }
                        libc::EPOLL_CTL_DEL => set.kernel_members = set.kernel_members.saturating_sub(1),
                        _ => {}
                    }
                    return Call::Done(Ok(()));
                }
            };
            if epfd == fd {
                return Call::Done(Err(Errno::EINVAL));
            }
            let fresh = Member { events, data, target, last: 0, arrivals: 0, disabled: false, queued: false };
            let set = rt.fds.epoll_mut(epfd).unwrap();
            let slot = fd as usize;
            if slot >= set.members.len() {
                set.members.resize_with(slot + 1, || None);
            }
            let r = match op {
                libc::EPOLL_CTL_ADD if set.members[slot].is_some() => Err(Errno(libc::EEXIST)),
                libc::EPOLL_CTL_ADD => {
                    set.members[slot] = Some(fresh);
                    set.count += 1;
                    Ok(true)
                }
                libc::EPOLL_CTL_MOD => match set.members[slot].as_mut() {
                    Some(m) => {
                        // Keep its place on the ready list; a new mask may be ready at once.
                        *m = Member { queued: m.queued, ..fresh };
                        Ok(false)
                    }
                    None => Err(Errno(libc::ENOENT)),
                },
                libc::EPOLL_CTL_DEL => {
                    if set.remove(fd) {
                        Ok(false)
                    } else {
                        Err(Errno(libc::ENOENT))
                    }
                }
                _ => Err(Errno::EINVAL),
            };
            match r {
                Err(e) => Call::Done(Err(e)),
                Ok(added) => {
                    if op != libc::EPOLL_CTL_DEL {
                        // Current readiness is reported by the next wait (and wakes a waiter).
                        set.mark_ready(fd, &mut rt.owed_wakes);
                    }
                    let entry = rt.fds.get_mut(fd).unwrap();
                    if added {
                        entry.epolls.push(epfd);
                    } else if op == libc::EPOLL_CTL_DEL {
                        entry.epolls.retain(|&e| e != epfd);
                    }
                    Call::Done(Ok(()))
                }
            }
        })
        .unwrap_or(Call::Kernel)
    }

    /// epoll_wait: the set's accelerated members and its kernel ones. A look (timeout 0) at a set
    /// with kernel members only is the kernel's ([`Call::Kernel`]).
    // Never inlined: bench/request_cost.sh reports this function's inclusive cost by name, and
    // LTO would fold it into its callers (one call instruction per call).
    #[inline(never)]
    pub fn epoll_wait(&self, epfd: i32, out: &mut [libc::epoll_event], timeout_ms: i32) -> Call<usize> {
        enum Step {
            Kernel,
            Done(usize, bool),
            Sleep(wait::Sleep, bool),
        }
        let deadline = (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        let mut waited = false;
        let mut waiting_since = None;
        let mut kernel = wait::PollFds::new();
        // A sleep that ended, to end at the start of the next hold (`Runtime::end_sleep`).
        let mut woke: Option<wait::Sleep> = None;
        loop {
            let step = self.with(|rt| {
                if let Some(plan) = woke.take() {
                    rt.end_epoll_sleep(epfd, &plan);
                }
                rt.start_looking();
                let Some(set) = rt.fds.epoll_mut(epfd) else { return Step::Kernel };
                // A look at a set without accelerated members is the kernel's alone. A wait
                // that may block sleeps here instead, among the set's waiters, because another
                // thread may add an accelerated member meanwhile (MariaDB's thread pool: its
                // listener waits on an empty set, other threads add each connection after its
                // login), and a thread asleep in the kernel's epoll_wait would never hear of it.
                if set.count == 0 && !waited && timeout_ms == 0 {
                    return Step::Kernel;
                }
                let n = set.collect(&rt.shards, out);
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                let parker = if n > 0 || left.is_some_and(|l| l.is_zero()) { None } else { wait::my_reset_parker() };
                let Some(parker) = parker else {
                    let kernel_too = set.kernel_members > 0;
                    rt.wait.stats.epoll_waits += 1;
                    rt.wait.stats.epoll_events += n as u64;
                    if waited {
                        rt.hand_off();
                    }
                    return Step::Done(n, kernel_too);
                };
                set.waiters.push(parker.clone());
                let limit_ms = left.map_or(-1, |l| l.as_millis().clamp(1, i32::MAX as u128) as i32);
                let kernel_fds = set.kernel_members > 0;
                // A child of a family registers on the members' sockets in the arena.
                let child = rt.sharing.child().is_some();
                if set.count == 0 && !child {
                    return Step::Sleep(rt.prepare_outside_sleep(parker, limit_ms, kernel_fds), kernel_fds);
                }
                let members: SmallVec<[SocketId; 8]> =
                    if child { set.member_sockets().collect() } else { SmallVec::new() };
                // An accept loop's set holds a listener or a few (a set of many is an event
                // loop's, which is not looked through).
                let few: Option<SmallVec<[i32; 4]>> = (set.count <= 4).then(|| set.member_fds().collect());
                let accepts_only = few.is_some_and(|fds| fds.iter().all(|&fd| rt.fds.is_listener(fd)));
                Step::Sleep(
                    rt.prepare_sleep(parker, limit_ms, &mut waiting_since, kernel_fds, &members, waited, accepts_only),
                    kernel_fds,
                )
            });
            let (plan, kernel_fds) = match step {
                None | Some(Step::Kernel) => return Call::Kernel,
                Some(Step::Done(n, kernel_too)) => {
                    let mut n = n;
                    if kernel_too && n < out.len() {
                        // SAFETY: the kernel writes at most `out.len() - n` (> 0, within i32: the caller's
                        // epoll_wait took a c_int) events into the rest of `out`.
                        let k = unsafe { real::epoll_wait(epfd, out[n..].as_mut_ptr(), (out.len() - n) as i32, 0) };
                        n += k.max(0) as usize;
                    }
                    return Call::Done(Ok(n));
                }
                Some(Step::Sleep(plan, kernel_fds)) => (plan, kernel_fds),
            };
            kernel.clear();
            if kernel_fds {
                // The kernel set is readable while kernel members are ready.
                kernel.push(libc::pollfd { fd: epfd, events: libc::POLLIN, revents: 0 });
            }
            let slept = wait::sleep(&plan, &mut kernel);
            waited = true;
            let kernel_ready = kernel.first().is_some_and(|p| p.revents != 0);
            if !(slept < 0 || kernel_ready) {
                // The next hold ends the sleep, then looks again.
                woke = Some(plan);
                continue;
            }
            let got = self.with(|rt| {
                rt.end_epoll_sleep(epfd, &plan);
                rt.hand_off();
            });
            if got.is_none() {
                return Call::Kernel;
            }
            if slept == -libc::EINTR {
                return Call::Done(Err(Errno(libc::EINTR)));
            }
            if kernel_ready {
                // SAFETY: the kernel writes at most out.len() (within i32) events into `out`.
                let k = unsafe { real::epoll_wait(epfd, out.as_mut_ptr(), out.len() as i32, 0) };
                let kernel_events = k.max(0) as usize;
                let accelerated = self
                    .with(|rt| {
                        let rest = &mut out[kernel_events..];
                        let n = if rest.is_empty() {
                            0
                        } else {
                            rt.fds.epoll_mut(epfd).map_or(0, |set| set.collect(&rt.shards, rest))
                        };
                        if kernel_events + n > 0 {
                            rt.wait.stats.epoll_waits += 1;
                            rt.wait.stats.epoll_events += n as u64;
                        }
                        n
                    })
                    .unwrap_or(0);
                let n = kernel_events + accelerated;
                if n > 0 {
                    return Call::Done(Ok(n));
                }
            }
        }
    }
}
