//! The process that drives the NIC for the family killed (SIGKILL, a crash: no exit handler
//! ran, so no keeper was forked): nobody receives or sends for the children any more. A child's
//! thread that sleeps in the runtime sleeps `wait::DRIVER_LOOK_MS` at most, and its process looks
//! that often whether the driver still runs; the first child that finds it gone takes its place
//! under the family lock ([`Runtime::take_over_from_a_dead_driver`]): it leaves the process
//! table (what it holds stays held, as the opener's holds are), becomes the family's opener and
//! starts the stack threads. Nothing of the NIC moves: the shards and their NIC objects are in
//! the arena, the AF_XDP rings and the mbufs in shared mappings, and a child inherited the NIC's
//! fds, so that, as with the keeper, a copy of the opener's process drives it.
//!
//! What the dead driver held itself is not known to the family (the opener's holds are counted,
//! not listed): those sockets stay open until the family ends.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Family, Sharing, NOT_A_MEMBER};
use crate::real;

/// How often a child looks whether the driver still runs (ns of its clock): as often as its
/// threads' sleeps end at the latest.
const DRIVER_LOOK_NS: u64 = crate::wait::DRIVER_LOOK_MS as u64 * 1_000_000;

impl Family {
    /// In a child's hold at `now`: the driver's pid when the look is due and finds it gone.
    fn driver_gone(&self, now: u64) -> Option<libc::pid_t> {
        if now < self.next_driver_look_ns.load(Ordering::Relaxed) {
            return None;
        }
        self.next_driver_look_ns.store(now + DRIVER_LOOK_NS, Ordering::Relaxed);
        let s = self.shared();
        let pid = s.opener.load(Ordering::Acquire);
        (pid > 0 && crate::liveness::gone(pid, s.opener_start.load(Ordering::Relaxed))).then_some(pid)
    }

    /// This child drives the NIC from now on (family lock held): its slot of the process table
    /// is freed and what it holds stays held, counted as the opener's holds are.
    fn child_took_over(&self) {
        if let Some(m) = self.member() {
            // The set is freed in the arena, where it was made.
            self.with_holds(|holds| drop(holds.by_member.remove(&m)));
            let member = &self.shared().members[m];
            member.sleeping.store(0, Ordering::Relaxed);
            member.start.store(0, Ordering::Relaxed);
            member.pid.store(0, Ordering::Release);
        }
        self.me.store(NOT_A_MEMBER, Ordering::Relaxed);
        self.drives_from_now(self.pid.load(Ordering::Relaxed));
    }
}

impl<N: nic::Nic + 'static> crate::accel::Runtime<N> {
    /// In a child's hold after one of its threads slept (both locks held): when the look at
    /// the driver is due and finds it gone, this process takes its place (module doc).
    pub(crate) fn take_over_from_a_dead_driver(&mut self, f: &'static Family) {
        if let Some(dead) = f.driver_gone(self.now()) {
            self.take_over_from(f, dead);
        }
    }

    /// At a child's exit (both locks held): when the driver is gone, this process takes its
    /// place first, so that its exit sends what its connections hold and their FINs, and, the
    /// last of the family, closes the port (a program whose children end when it dies, as
    /// PostgreSQL's backends do, leaves no driver otherwise: its clients wait for ever and the
    /// XDP program stays).
    pub(crate) fn take_over_at_exit(&mut self) {
        use crate::liveness::{standing, wait_exited, Standing};
        let Some(f) = self.sharing.child() else { return };
        let s = f.shared();
        let driver = s.opener.load(Ordering::Acquire);
        match standing(driver, s.opener_start.load(Ordering::Relaxed)) {
            _ if driver <= 0 => {}
            Standing::Runs => {}
            // A child may be exiting because the driver is (a closed pipe told it): the
            // driver's exit is let finish first (a second at most).
            Standing::Exiting => {
                wait_exited(driver);
                self.take_over_from(f, driver);
            }
            Standing::Gone => self.take_over_from(f, driver),
        }
    }

    /// This child takes the place of the driver `dead` (module doc). A child that cannot drive
    /// the NIC (the program closed the NIC's fds it inherited) says so once.
    fn take_over_from(&mut self, f: &'static Family, dead: libc::pid_t) {
        let me = std::process::id();
        if let Some(fd) = self.rx_fds.iter().flatten().copied().find(|&fd| !is_socket(fd)) {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                say(&format!(
                    "pronghorn: pid {dead}, which drove the NIC for its family (runtime.share = \"family\"), is gone \
                     without handing it on (killed by a signal?), and pid {me} cannot take its place: fd {fd}, the \
                     NIC's socket, is closed here; the family's accelerated sockets get no more traffic\n"
                ));
            }
            return;
        }
        f.child_took_over();
        self.sharing = Sharing::Opener(f);
        // The child's copy of the wait state says the dead driver's stack threads run.
        self.wait.stats.dedicated = false;
        self.wait.mode = crate::wait::Mode::Dedicated;
        self.ensure_stack_thread();
        if let Some(dir) = self.observe_dir.clone() {
            self.start_observer(dir);
        }
        if self.starts_reaper {
            // The cleanup helper follows the driver by this file (root only may write it).
            let _ = f.name_driver();
        }
        say(&format!(
            "pronghorn: pid {dead}, which drove the NIC for its family (runtime.share = \"family\"), is gone without \
             handing it on (killed by a signal?): pid {me} drives the NIC for the family from now on\n"
        ));
    }
}

/// Whether `fd` is a socket (the NIC's AF_XDP or AF_PACKET socket, inherited at the fork).
fn is_socket(fd: i32) -> bool {
    // SAFETY: a stat is plain integers: all zeroes is a valid one.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a stat of ours; a closed fd fails with EBADF.
    let r = unsafe { libc::fstat(fd, &mut st) };
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
}

fn say(msg: &str) {
    // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
    unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
}
