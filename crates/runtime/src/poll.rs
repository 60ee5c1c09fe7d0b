//! poll (and select, which the shim turns into poll) over any mix of fds: accelerated ones are
//! answered from the shard, kernel ones by the kernel. A caller with nothing ready registers its
//! parker on each accelerated socket and sleeps in the kernel on the kernel fds plus the parker
//! (plus the rx fd when it drives the NIC): woken by a change of any of them, never by another
//! socket's traffic. Like Linux's poll, a call costs O(fds given).

use std::time::{Duration, Instant};

use nic::Nic;
use smallvec::SmallVec;
use stack::shard::{Readiness, SocketId};

use crate::accel::{Accel, Runtime};
use crate::wait;
use crate::{real, Call, Errno};

fn poll_mask(r: Readiness, wanted: i16) -> i16 {
    let mut m = 0i16;
    if r.readable {
        m |= libc::POLLIN;
    }
    if r.writable {
        m |= libc::POLLOUT;
    }
    if r.read_closed {
        m |= libc::POLLRDHUP;
    }
    if r.urgent {
        m |= libc::POLLPRI;
    }
    let always = libc::POLLERR | libc::POLLHUP;
    if r.hangup {
        m |= libc::POLLHUP;
    }
    if r.error {
        m |= libc::POLLERR;
    }
    m & (wanted | always)
}

impl<N: Nic + 'static> Runtime<N> {
    /// Fills in the revents of the accelerated entries of `fds` and says in `ours` which entries
    /// are accelerated; returns how many are ready and how many are accelerated.
    fn poll_accelerated(&self, fds: &mut [libc::pollfd], ours: &mut [bool]) -> (usize, usize) {
        let (mut ready, mut accelerated) = (0, 0);
        for (p, mine) in fds.iter_mut().zip(ours.iter_mut()) {
            let r = self.readiness(p.fd);
            *mine = r.is_some();
            if let Some(r) = r {
                accelerated += 1;
                p.revents = poll_mask(r, p.events);
                ready += (p.revents != 0) as usize;
            }
        }
        (ready, accelerated)
    }
}

impl<N: Nic + 'static> Accel<N> {
    // Never inlined: bench/request_cost.sh reports this function's inclusive cost by name, and
    // LTO would fold it into its callers (one call instruction per call).
    #[inline(never)]
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout_ms: i32) -> Call<usize> {
        // A set of kernel fds only is the kernel's, as the shim's ppoll and select already
        // treat it: no lock and no stack pass, which found nothing for this caller (a mariadbd
        // serving on the kernel's address under pronghorn spent 2.5-2.8 us of library per
        // point_select transaction there). The NIC is driven by the threads that wait on its
        // sockets and by every read and write of them, as before. What a non-blocking write
        // left for this wait goes out first.
        if !fds.iter().any(|p| crate::tracked(p.fd)) {
            self.flush_held_output();
            return Call::Kernel;
        }
        enum Step {
            Kernel,
            Done(usize),
            Sleep(wait::Sleep, SmallVec<[SocketId; 8]>),
        }
        // Set when the call first sleeps with a timeout: a call that needs no sleep reads no clock.
        let mut deadline: Option<Instant> = None;
        let mut ours: SmallVec<[bool; 8]> = smallvec::smallvec![false; fds.len()];
        let mut kernel = wait::PollFds::with_capacity(fds.len() + 2);
        let mut waited = false;
        let mut waiting_since = None;
        // Whether some of `fds` are the kernel's (the last look's answer).
        let mut kernel_fds = false;
        // A sleep that ended, to end at the start of the next hold (`Runtime::end_sleep`).
        let mut woke: Option<(wait::Sleep, SmallVec<[SocketId; 8]>)> = None;
        loop {
            let step = self.with(|rt| {
                // A driver's wake makes its pass here, in this hold: as good as the previous one.
                let drove = woke.take().is_some_and(|(plan, ids)| rt.end_sleep(&plan, ids));
                let passed_before = drove || rt.passed_just_before();
                // Inline, poll() makes a stack pass before it looks, except where the pass
                // would find nothing new: (a) this thread's previous hold of the lock made one
                // (MariaDB's recv -> EAGAIN -> poll: the recv just passed) and nothing is ready,
                // so the thread goes to sleep (frames that come meanwhile wake the driver, or
                // it, through the rx fd); (b) it slept and was woken, and a socket is ready (the
                // pass that found it was just made, by its waker or, driving, by itself). A
                // call that finds something ready without having slept always passes: a
                // program whose sockets stay ready (iperf3 -R's writers) makes its passes there.
                let blocks = timeout_ms != 0;
                let may_skip = rt.wait.inline() && (waited || (blocks && passed_before));
                if may_skip {
                    rt.serve_deferred();
                } else {
                    rt.start_looking();
                }
                let (mut n, mut accelerated) = rt.poll_accelerated(fds, &mut ours);
                if may_skip {
                    if (waited && n > 0) || (n == 0 && blocks && passed_before) {
                        rt.wait.stats.skipped_passes += 1;
                        rt.flush_shard();
                    } else {
                        rt.poll_shard();
                        (n, accelerated) = rt.poll_accelerated(fds, &mut ours);
                    }
                }
                kernel_fds = accelerated < fds.len();
                if accelerated == 0 {
                    if waited {
                        rt.hand_off();
                    }
                    return Step::Kernel;
                }
                let left = match deadline {
                    _ if timeout_ms < 0 => None,
                    None => Some(Duration::from_millis(timeout_ms as u64)),
                    Some(d) => Some(d.saturating_duration_since(Instant::now())),
                };
                let sleeps = n == 0 && !left.is_some_and(|l| l.is_zero());
                let Some(parker) = sleeps.then(wait::my_reset_parker).flatten() else {
                    if waited {
                        rt.hand_off();
                    }
                    return Step::Done(n);
                };
                let mut ids = SmallVec::new();
                let mut accepts_only = true;
                for (p, &mine) in fds.iter().zip(&ours) {
                    if let Some(id) = mine.then(|| rt.fds.get(p.fd).and_then(|e| e.fd.socket())).flatten() {
                        rt.socks.entry(id).waiters.push(parker.clone());
                        ids.push(id);
                        rt.watch_listener(p.fd);
                        accepts_only &= rt.fds.is_listener(p.fd);
                    }
                }
                let limit_ms = left.map_or(-1, |l| l.as_millis().clamp(1, i32::MAX as u128) as i32);
                if timeout_ms > 0 && deadline.is_none() {
                    deadline = Some(Instant::now() + Duration::from_millis(timeout_ms as u64));
                }
                Step::Sleep(
                    rt.prepare_sleep(parker, limit_ms, &mut waiting_since, kernel_fds, &ids, waited, accepts_only),
                    ids,
                )
            });
            // The kernel fds (accelerated slots get fd -1: the kernel ignores them).
            kernel.clear();
            if kernel_fds {
                for (p, &mine) in fds.iter().zip(&ours) {
                    kernel.push(libc::pollfd { fd: if mine { -1 } else { p.fd }, events: p.events, revents: 0 });
                }
            }
            let (plan, ids) = match step {
                None => return Call::Kernel,
                Some(Step::Kernel) => {
                    // None of them is accelerated (any more): the kernel alone, as asked.
                    return Call::Kernel;
                }
                Some(Step::Done(n)) => {
                    let k = if kernel_fds {
                        // SAFETY: `kernel` is our Vec of kernel.len() pollfds, read and written by the kernel.
                        unsafe { real::poll(kernel.as_mut_ptr(), kernel.len() as libc::nfds_t, 0) }
                    } else {
                        0
                    };
                    if k < 0 {
                        return Call::Done(Err(crate::last_errno()));
                    }
                    return Call::Done(Ok(n + self.take_kernel(fds, &ours, &kernel)));
                }
                Some(Step::Sleep(plan, ids)) => (plan, ids),
            };
            let slept = wait::sleep(&plan, &mut kernel);
            waited = true;
            if slept == -libc::EINTR {
                self.with(|rt| {
                    rt.end_sleep(&plan, ids);
                    rt.hand_off();
                });
                return Call::Done(Err(Errno(libc::EINTR)));
            }
            let k = if kernel_fds { self.take_kernel(fds, &ours, &kernel) } else { 0 };
            if k > 0 {
                let n = self
                    .with(|rt| {
                        rt.end_sleep(&plan, ids);
                        rt.hand_off();
                        rt.poll_accelerated(fds, &mut ours).0
                    })
                    .unwrap_or(0);
                return Call::Done(Ok(n + k));
            }
            woke = Some((plan, ids));
        }
    }

    /// Copies the kernel's answers for the kernel fds back into `fds`; returns how many are ready.
    fn take_kernel(&self, fds: &mut [libc::pollfd], ours: &[bool], kernel: &[libc::pollfd]) -> usize {
        let mut n = 0;
        for (i, p) in fds.iter_mut().enumerate() {
            if !ours[i] {
                p.revents = kernel[i].revents;
                n += (p.revents != 0) as usize;
            }
        }
        n
    }
}
