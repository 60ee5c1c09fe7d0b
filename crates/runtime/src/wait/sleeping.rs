//! A thread that cannot go on: the look at readiness that starts a wait, the NIC sleeper's
//! and the dedicated stack thread's sleeps, a blocking call's retries and a lingering close
//! (the parkers, wakeups and wait state they use are the parent's).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nic::Nic;
use stack::shard::SocketId;

use super::{
    forget_parker, my_parker, my_reset_parker, owe_wake, pin_to, restarts_after_signal, sleep, thread_token, Dir, Mode,
    Parker, PollFds, Sleep, CALLS_PER_PASS, DRIVER_LOOK_MS, NO_RX_FD_SLEEP_MS,
};
use crate::accel::{Accel, Runtime, NIC_SLEEP_CAP_MS};
use crate::family::Sharing;
use crate::real;
use crate::{Call, Errno};

impl<N: Nic + 'static> Runtime<N> {
    /// The start of a look at readiness (epoll_wait, poll): bring the shard up to date (inline:
    /// a stack pass; dedicated: the stack thread does that, only send what was written). A
    /// caller that then goes to sleep takes its parker with [`my_reset_parker`], in the same
    /// hold of the lock.
    pub(crate) fn start_looking(&mut self) {
        self.serve_deferred();
        if self.wait.inline() {
            self.poll_shard();
        } else {
            self.flush_shard();
        }
    }

    /// Records that this thread makes a stack pass in the current hold of the lock.
    pub(crate) fn mark_pass(&mut self) {
        self.wait.last_pass = (self.wait.holds, thread_token());
    }

    /// Whether the previous hold of the lock was this thread's and made a stack pass: nobody
    /// has touched the stack since, so another pass could only find frames that arrived in the
    /// microseconds between (and a thread about to sleep on them leaves those to the rx fd).
    pub(crate) fn passed_just_before(&self) -> bool {
        self.wait.last_pass == (self.wait.holds.wrapping_sub(1), thread_token())
    }

    /// Called with the lock held by a thread that found nothing to do and registered `parker`
    /// on what it waits for: decides whether it drives the NIC and for how long it sleeps.
    /// `limit_ms` is the caller's own bound (-1: none).
    /// `waiting_since` is when the caller first found nothing (set here on first use): a driver
    /// busy-polls until `busy_poll_us` after it.
    /// `kernel_fds`: the caller also sleeps on kernel fds (then the parker uses its eventfd).
    /// `waits_on`: the sockets it waits for, and `again`: it slept before in this call (both
    /// for a child of a family, which registers on them in the arena).
    /// `accepts_only`: all it waits for on the shards are listening sockets (an accept loop:
    /// [`super::AcceptLoop`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prepare_sleep(
        &mut self,
        parker: Arc<Parker>,
        limit_ms: i32,
        waiting_since: &mut Option<Instant>,
        kernel_fds: bool,
        waits_on: &[SocketId],
        again: bool,
        accepts_only: bool,
    ) -> Sleep {
        self.wait.parked += 1;
        self.wait.stats.sleeps += 1;
        if let Some(f) = self.sharing.child() {
            // Never the driver, never a stack thread: the opener's pass wakes it (`family`).
            let child = f.prepare_sleep(waits_on, kernel_fds, parker.fd(), again);
            parker.set_family_sleeper(child.sleeper());
            let family = Some(child);
            // At most so long: its process looks whether the driver still runs (`family`).
            let timeout_ms = if limit_ms < 0 { DRIVER_LOOK_MS } else { limit_ms.min(DRIVER_LOOK_MS) };
            return Sleep {
                parker,
                drives: false,
                accept_loop: false,
                parked: true,
                spin: false,
                rx_fd: None,
                timeout_ms,
                family,
                bell: None,
            };
        }
        if self.wait.auto && self.wait.mode == Mode::Inline && self.wait.parked >= 2 {
            // Two application threads blocked at once: a thread-per-connection program. From
            // now on a stack thread drives the NIC and wakes them.
            self.wait.mode = Mode::Dedicated;
        }
        if self.wait.mode == Mode::Dedicated {
            self.ensure_stack_thread();
        }
        // Inline mode has one shard (several need their stack threads: config validation).
        let rx_fd = self.rx_fds.first().copied().flatten();
        // The accept loop's way of holding the role (`AcceptLoop`): a process whose shards are
        // its own (a family's driver has the family's bell to watch too), without busy polling.
        let lends = rx_fd.is_some()
            && self.wait.inline()
            && self.shards.is_open()
            && matches!(self.sharing, Sharing::Alone)
            && self.wait.busy_poll_us == 0;
        // Through its set only while no thread stands by: a role that cannot be taken
        // (below) gains nothing there, and with threads standing by the accept loop then
        // drives exactly as before lending, on the rx fd itself (a wake through the set may
        // cost more: docs/design-notes.md, stop 51).
        if lends && accepts_only && !self.wait.accept_loop.asleep && self.wait.standby.is_empty() {
            if let Some(sleep) = self.accept_loop_sleep(parker.clone(), limit_ms, rx_fd.unwrap()) {
                return sleep;
            }
        }
        // Taken only by a thread that no other stands beside: the next frame is likely its own.
        // Among standby threads it likely is another's (each move costs an epoll_ctl, and a
        // frame that comes while the role is back with the accept loop wakes it).
        if lends && !accepts_only && self.wait.accept_loop.drives && self.wait.standby.is_empty() {
            self.take_role_from_accept_loop(rx_fd.unwrap());
        }
        let drives = self.wait.inline() && !self.wait.driver && self.shards.is_open();
        let rung = drives && self.sharing.family().is_some();
        parker.via_fd.store(kernel_fds || (drives && rx_fd.is_some()) || rung, Ordering::Release);
        let mut timeout_ms = limit_ms;
        let busy = Duration::from_micros(u64::from(self.wait.busy_poll_us));
        // The clock is read only when busy polling is on.
        if drives && !busy.is_zero() && waiting_since.get_or_insert_with(Instant::now).elapsed() < busy {
            self.wait.driver = true;
            return Sleep {
                parker,
                drives,
                accept_loop: false,
                parked: true,
                spin: true,
                rx_fd: None,
                timeout_ms: 0,
                family: None,
                bell: None,
            };
        }
        let mut bell = None;
        if drives {
            self.wait.driver = true;
            if let Some(f) = self.sharing.family() {
                bell = Some(f.driver_sleeps_on(parker.fd()));
            }
            let cap = if rx_fd.is_some() { self.next_wait_ms(None) } else { NO_RX_FD_SLEEP_MS };
            timeout_ms = if timeout_ms < 0 { cap } else { timeout_ms.min(cap) };
        } else if self.wait.inline() {
            self.wait.standby.push(parker.clone());
        }
        let rx_fd = if drives { rx_fd } else { None };
        Sleep { parker, drives, accept_loop: false, parked: true, spin: false, rx_fd, timeout_ms, family: None, bell }
    }

    /// The sleep of an accept loop ([`super::AcceptLoop`]): on its parker's eventfd and the
    /// accept loop's epoll set, which holds the rx fd when it drives (nobody did). Driving, it
    /// sleeps until the shard's next timer; while another thread drives, at most
    /// [`NIC_SLEEP_CAP_MS`], because the role may come back to it asleep: the timers due then
    /// fire at most that late, as any timer armed while the NIC sleeper sleeps
    /// ([`Runtime::next_wait_ms`]). (With the next timer's bound it woke every 1-3 ms under
    /// load for nothing.) `None`: the set could not be made or the rx fd not put in it; the
    /// thread then sleeps as any other.
    fn accept_loop_sleep(&mut self, parker: Arc<Parker>, limit_ms: i32, rx_fd: i32) -> Option<Sleep> {
        let drives = !self.wait.driver;
        let set = self.wait.accept_loop.set()?;
        if drives && !self.wait.accept_loop.rx_in(rx_fd) {
            return None;
        }
        self.wait.driver |= drives;
        self.wait.accept_loop.asleep = true;
        self.wait.accept_loop.drives = drives;
        parker.via_fd.store(true, Ordering::Release);
        let cap = if drives { self.next_wait_ms(None) } else { NIC_SLEEP_CAP_MS };
        let timeout_ms = if limit_ms < 0 { cap } else { limit_ms.min(cap) };
        Some(Sleep {
            parker,
            drives: false,
            accept_loop: true,
            parked: true,
            spin: false,
            rx_fd: Some(set),
            timeout_ms,
            family: None,
            bell: None,
        })
    }

    /// A thread about to wait on connections finds the accept loop driving: it takes the role
    /// (the rx fd leaves the accept loop's set; the accept loop sleeps on).
    fn take_role_from_accept_loop(&mut self, rx_fd: i32) {
        if self.wait.accept_loop.rx_out(rx_fd) {
            self.wait.accept_loop.drives = false;
            self.wait.driver = false;
            self.wait.stats.roles_taken_from_accept_loop += 1;
        }
    }

    /// Like [`Self::prepare_sleep`], for a thread waiting on an epoll set with no accelerated
    /// member: kernel fds only, or none yet (a thread pool's listener before its first
    /// connection). It sleeps among the set's waiters, where the EPOLL_CTL_ADD of an accelerated
    /// member wakes it, but it waits for nothing the stack does: it never drives the NIC or
    /// stands by to, and is not counted as parked (two parked threads make `drive = "auto"`
    /// start a stack thread). DPDK's interrupt thread, asleep so for the process's life, took the
    /// driver role for good: every frame then woke it first and it woke the thread the frame was
    /// for, and an unpinned Redis went dedicated (stop 50).
    pub(crate) fn prepare_outside_sleep(&mut self, parker: Arc<Parker>, limit_ms: i32, kernel_fds: bool) -> Sleep {
        self.wait.stats.sleeps += 1;
        parker.via_fd.store(kernel_fds, Ordering::Release);
        Sleep {
            parker,
            drives: false,
            accept_loop: false,
            parked: false,
            spin: false,
            rx_fd: None,
            timeout_ms: limit_ms,
            family: None,
            bell: None,
        }
    }

    /// Called with the lock held by a thread leaving the runtime after it waited: in inline
    /// mode, if nobody drives the NIC but threads are parked, one of them takes over.
    pub(crate) fn hand_off(&mut self) {
        if self.wait.inline() && !self.wait.driver {
            if self.wait.accept_loop.asleep && self.shards.is_open() {
                // Back to the accept loop asleep, without a wake (`AcceptLoop`).
                if let Some(rx_fd) = self.rx_fds.first().copied().flatten() {
                    if self.wait.accept_loop.rx_in(rx_fd) {
                        self.wait.accept_loop.drives = true;
                        self.wait.driver = true;
                        self.wait.stats.roles_given_back_to_accept_loop += 1;
                        return;
                    }
                }
            }
            if let Some(p) = self.wait.standby.first() {
                self.wait.stats.wakeups += 1;
                let p = p.clone();
                owe_wake(&mut self.owed_wakes, &p);
            }
        }
    }

    /// Called with the lock held when the woken thread is up again, in the hold that looks
    /// again (not one of its own: a wake cost two holds before): the thread is no longer
    /// parked, gives up the driver role or its place in the standby list, its parker leaves
    /// the waiter lists of the sockets in `lists`, and a driver makes the pass its wake asked
    /// for. True when it made that pass.
    pub(crate) fn end_sleep(&mut self, s: &Sleep, lists: impl IntoIterator<Item = SocketId>) -> bool {
        if s.parked {
            self.wait.parked = self.wait.parked.saturating_sub(1);
        }
        if let Some(child) = &s.family {
            s.parker.set_family_sleeper(None);
            child.end();
            if let Some(f) = self.sharing.child() {
                self.take_over_from_a_dead_driver(f);
            }
        }
        // An accept loop drove if the role was still (or again) its own as it woke.
        let drove = if s.accept_loop {
            let drove = self.wait.accept_loop.drives;
            self.wait.accept_loop.asleep = false;
            self.wait.accept_loop.drives = false;
            drove
        } else {
            s.drives
        };
        if drove {
            self.wait.driver = false;
        } else if !s.accept_loop {
            forget_parker(&mut self.wait.standby, &s.parker);
        }
        for id in lists {
            if let Some(st) = self.socks.get_mut(id) {
                forget_parker(&mut st.waiters, &s.parker);
            }
        }
        if drove {
            self.poll_shard();
        }
        drove
    }

    /// Starts the stack threads of dedicated mode: one per shard, shard k's pinned to
    /// `stack_cpus[k]` when that is set.
    pub(crate) fn ensure_stack_thread(&mut self) {
        if self.wait.stats.dedicated || !self.shards.is_open() {
            return;
        }
        let Some(me) = self.me else { return };
        self.wait.stats.dedicated = true;
        let mut spawned = Ok(());
        for k in 0..self.shards.len() {
            let cpus = self.wait.stack_cpus.get(k).cloned().unwrap_or_default();
            let name = if k == 0 { "pronghorn-stack".to_string() } else { format!("pronghorn-stack{k}") };
            let started = crate::threads::spawn(name, move || {
                if !cpus.is_empty() {
                    pin_to(&cpus);
                }
                me.stack_thread(k);
            });
            if let Err(e) = started {
                spawned = Err(e);
                break;
            }
        }
        if spawned.is_err() && self.shards.len() > 1 {
            let msg = "pronghorn: cannot start a stack thread per shard; the shards without one do not receive\n";
            // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        } else if spawned.is_err() {
            // No thread: stay inline (every waiter drives in turn), which still works.
            self.wait.stats.dedicated = false;
            self.wait.mode = Mode::Inline;
            self.wait.auto = false;
        }
    }
}

/// How often a lingering close looks at its connection when nothing wakes it (ms).
const LINGER_LOOK_MS: i32 = 10;

impl<N: Nic + 'static> Accel<N> {
    /// Runs `attempt` until it gives something other than EAGAIN on a blocking socket, sleeping
    /// in between until the socket changes (or SO_RCVTIMEO/SO_SNDTIMEO runs out). `dontwait`
    /// (MSG_DONTWAIT) makes this one call non-blocking.
    pub(crate) fn blocking<T>(
        &self,
        fd: i32,
        dir: Dir,
        dontwait: bool,
        mut attempt: impl FnMut(&mut Runtime<N>) -> Call<T>,
    ) -> Call<T> {
        let mut deadline: Option<Option<Instant>> = None;
        let mut waited = false;
        let mut waiting_since: Option<Instant> = None;
        let mut woke: Option<(Sleep, Option<SocketId>)> = None;
        loop {
            let step = self.with(|rt| {
                if let Some((plan, id)) = woke.take() {
                    rt.end_sleep(&plan, id);
                }
                rt.serve_deferred();
                // What the shard already holds first; the NIC only when that is not enough
                // (and, in dedicated mode, never: the stack thread does that).
                let mut r = attempt(rt);
                if rt.wait.inline() {
                    if matches!(r, Call::Done(Err(Errno::EAGAIN))) {
                        rt.poll_shard();
                        r = attempt(rt);
                    } else if rt.wait.calls_since_pass >= CALLS_PER_PASS {
                        rt.poll_shard();
                    } else {
                        rt.wait.calls_since_pass += 1;
                    }
                }
                let file = rt.fds.file(fd);
                let nonblock = !matches!(file, Some(f) if !f.nonblock);
                let timeo = file.map_or(0, |f| match dir {
                    Dir::Recv => f.opts.rcvtimeo_us,
                    Dir::Send => f.opts.sndtimeo_us,
                });
                // What a call queued goes out now for a blocking socket (its program may wait
                // where we cannot see it) and always in dedicated mode. A non-blocking socket's
                // event loop comes back through epoll_wait/poll/select, which send first: the
                // replies of one loop iteration leave in one burst.
                if !nonblock || !rt.wait.inline() {
                    rt.flush_shard();
                } else {
                    self.note_held_output(rt);
                }
                if waited && matches!(r, Call::Kernel) {
                    // Another thread closed the fd while this one slept.
                    rt.hand_off();
                    return Err(Call::Done(Err(Errno::EBADF)));
                }
                let again = matches!(r, Call::Done(Err(Errno::EAGAIN))) && !nonblock && !dontwait;
                if !again {
                    if waited {
                        rt.hand_off();
                    }
                    return Err(r);
                }
                let limit =
                    *deadline.get_or_insert_with(|| (timeo > 0).then(|| Instant::now() + Duration::from_micros(timeo)));
                let mut limit_ms = -1;
                if let Some(d) = limit {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        if waited {
                            rt.hand_off();
                        }
                        return Err(Call::Done(Err(Errno::EAGAIN)));
                    }
                    limit_ms = left.as_millis().max(1).min(i32::MAX as u128) as i32;
                }
                let Some(parker) = my_reset_parker() else {
                    // Out of fds for a parker: poll, as the old runtime did.
                    return Ok(None);
                };
                let id = rt.fds.get(fd).and_then(|e| e.fd.socket());
                if let Some(id) = id {
                    rt.socks.entry(id).waiters.push(parker.clone());
                }
                let accepts = rt.fds.is_listener(fd);
                let plan =
                    rt.prepare_sleep(parker, limit_ms, &mut waiting_since, false, id.as_slice(), waited, accepts);
                Ok(Some((plan, id)))
            });
            let (sleep_plan, id) = match step {
                None => return Call::Kernel,
                Some(Err(r)) => return r,
                Some(Ok(None)) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Some(Ok(Some(x))) => x,
            };
            let slept = sleep(&sleep_plan, &mut PollFds::new());
            waited = true;
            if slept == -libc::EINTR && !restarts_after_signal(deadline.flatten().is_some()) {
                self.with(|rt| {
                    rt.end_sleep(&sleep_plan, id);
                    rt.hand_off();
                });
                return Call::Done(Err(Errno(libc::EINTR)));
            }
            // The next hold ends the sleep, then tries again.
            woke = Some((sleep_plan, id));
        }
    }

    /// `close()` of the last fd of a connection with SO_LINGER `secs` > 0: waits, as Linux's
    /// `sk_stream_wait_close`, until the FIN is acknowledged (the connection leaves FIN-WAIT-1,
    /// CLOSING and LAST-ACK, or is gone), `secs` pass, or a signal comes; close() returns 0
    /// either way. Linux waits so whatever O_NONBLOCK says (`inet_release` passes the linger
    /// time unconditionally), and so does this. The socket's readiness wakes the waiter; an
    /// orphan's last changes may not, so it also looks again every [`LINGER_LOOK_MS`].
    pub(crate) fn linger(&self, id: SocketId, secs: u32) {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(u64::from(secs));
        let mut waited = false;
        loop {
            let step = self.with(|rt| {
                let parker = my_parker();
                if let Some(p) = &parker {
                    p.reset();
                }
                let closing = |rt: &mut Runtime<N>| {
                    matches!(
                        rt.shards.of(id).tcp_state(id),
                        Ok(stack::TcpState::FinWait1 | stack::TcpState::Closing | stack::TcpState::LastAck)
                    )
                };
                if closing(rt) && rt.wait.inline() {
                    rt.poll_shard();
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if !closing(rt) || left.is_zero() {
                    return None;
                }
                let limit_ms = (left.as_millis().max(1) as i32).min(LINGER_LOOK_MS);
                let Some(parker) = parker else {
                    // Out of fds for a parker: look again after a while.
                    return Some(None);
                };
                rt.socks.entry(id).waiters.push(parker.clone());
                Some(Some(rt.prepare_sleep(parker, limit_ms, &mut Some(start), false, &[id], waited, false)))
            });
            let plan = match step.flatten() {
                None => break,
                Some(None) => {
                    std::thread::sleep(Duration::from_millis(LINGER_LOOK_MS as u64));
                    continue;
                }
                Some(Some(plan)) => plan,
            };
            let slept = sleep(&plan, &mut PollFds::new());
            waited = true;
            self.with(|rt| rt.end_sleep(&plan, Some(id)));
            if slept == -libc::EINTR {
                break;
            }
        }
        self.with(|rt| {
            if rt.socks.get(id).is_some_and(|st| st.fds.is_empty() && st.waiters.is_empty()) {
                rt.socks.remove(id);
            }
            if waited {
                rt.hand_off();
            }
        });
    }

    /// The stack thread of dedicated mode: polls the NIC and wakes waiters; spins `spin_us` while
    /// idle, then sleeps on the rx fd and its parker until a frame comes, a timer is due, or a
    /// call wakes it.
    pub(crate) fn stack_thread(&'static self, k: usize) {
        enum Plan {
            Stop,
            Busy,
            Spin,
            Sleep(Sleep),
        }
        let Some(parker) = my_parker() else { return };
        let mut idle_since = Instant::now();
        loop {
            // A panic in a pass (a bug) is counted and the thread goes on driving the NIC: the
            // waiters it serves would otherwise sleep for ever.
            let pass = || {
                self.with(|rt| {
                    parker.reset();
                    if !rt.shards.is_open() {
                        return Plan::Stop;
                    }
                    let work = rt.poll_one(k);
                    rt.wait.stats.stack_thread_polls += 1;
                    if work > 0 {
                        return Plan::Busy;
                    }
                    if idle_since.elapsed() < Duration::from_micros(u64::from(rt.wait.spin_us)) {
                        return Plan::Spin;
                    }
                    let rx_fd = rt.rx_fds.get(k).copied().flatten();
                    let cap = if rx_fd.is_some() { rt.next_wait_ms(Some(k)) } else { NO_RX_FD_SLEEP_MS };
                    rt.wait.stats.sleeps += 1;
                    let family = rt.sharing.family();
                    let bell = family.map(|f| f.driver_sleeps_on(parker.fd()));
                    parker.via_fd.store(rx_fd.is_some() || family.is_some(), Ordering::Release);
                    Plan::Sleep(Sleep {
                        parker: parker.clone(),
                        drives: true,
                        accept_loop: false,
                        parked: false,
                        spin: false,
                        rx_fd,
                        timeout_ms: cap,
                        family: None,
                        bell,
                    })
                })
            };
            match crate::shield::guard("the stack thread", || Some(Plan::Busy), pass) {
                None | Some(Plan::Stop) => return,
                Some(Plan::Busy) => idle_since = Instant::now(),
                Some(Plan::Spin) => std::hint::spin_loop(),
                Some(Plan::Sleep(s)) => {
                    sleep(&s, &mut PollFds::new());
                    idle_since = Instant::now();
                }
            }
        }
    }
}
