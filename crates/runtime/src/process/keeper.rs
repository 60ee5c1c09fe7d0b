//! The keeper (issue 24 stage 4): the process that drives the NIC for a fork family
//! (`share = "family"`) when the opener, which opened it, exits while other processes of the
//! family still run: nginx with `daemon on`, whose master listens and then forks the daemon that
//! serves and exits; any server whose children outlive it. At the opener's exit the runtime
//! forks a copy of it, the keeper: the opener continued, with the same shards, NIC objects and
//! fds (the AF_XDP socket, its rings and the mbufs are shared mappings, so nothing moves). The
//! opener gives up the shards unclosed and exits; the keeper leaves the program's world (a
//! session of its own, default signal dispositions, the program's files, pipes and kernel
//! sockets closed, stdio on /dev/null, named `pronghorn-keep`), drives the NIC with a stack
//! thread until no member of the family runs, then finishes the connections and closes the port
//! as the opener would have, and `_exit`s without running the program's exit handlers again.
//!
//! This module owns the hand-over and the keeper's life; `family` owns who the opener is, and
//! the cleanup helper (`pronghorn reap`) follows the keeper by the file `family::successor_file`
//! names.

use std::sync::atomic::{AtomicU32, Ordering};

use nic::Nic;

use super::Leaving;
use crate::accel::Accel;
use crate::family::{successor_file, Sharing};
use crate::real;

/// What the opener's exit became.
pub(super) enum Handoff {
    /// No keeper: nobody else of the family runs, this is not the opener, or the fork failed.
    None,
    /// This is the opener, and a keeper drives the NIC now: the exit closes nothing.
    Opener,
    /// This is the keeper, and the family has ended: finish as the opener's exit would, then
    /// [`end`].
    Keeper,
}

/// How often the keeper looks whether a member of the family still runs (the family's own
/// look for its dead runs once a second: `family::REAP_EVERY_NS`).
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The pid of the process that opened the EAL, in the keeper (its successor file is named
/// after it).
static OPENER: AtomicU32 = AtomicU32::new(0);

impl<N: Nic + 'static> Accel<N> {
    /// At the exit or exec (`leaving`) of the opener of a family some member of which still
    /// runs: its own sockets are closed as at exit or exec (those the family holds stay open;
    /// before an exec the fds become sockets that were never connected), then the keeper is
    /// forked. In the opener this returns at once ([`Handoff::Opener`]); in the keeper, once
    /// the family has ended ([`Handoff::Keeper`]).
    pub(super) fn hand_family_to_keeper(&self, leaving: Leaving) -> Handoff {
        let Some(Some((f, children))) = self.try_with(|rt| match rt.sharing {
            Sharing::Opener(f) if rt.shards.is_open() && f.members_alive() => {
                let _ = rt.close_all(leaving);
                Some((f, f.children_alive()))
            }
            _ => None,
        }) else {
            return Handoff::None;
        };
        let opener = std::process::id();
        // Named after the process that opened the EAL (this one, unless it took the NIC over
        // itself: `family::succession`), whose name the EAL's directory keeps.
        let eal = f.eal_pid();
        let file = successor_file(eal);
        OPENER.store(eal, Ordering::Relaxed);
        match self.fork_keeper() {
            Some(0) => {
                // The hooks tell a vfork child from the runtime's owner by its pid.
                super::OWNER.store(std::process::id(), Ordering::Relaxed);
                leave_the_program();
                self.with(|rt| rt.keeper_starts());
                while f.members_alive() {
                    std::thread::sleep(LOOK_EVERY);
                }
                Handoff::Keeper
            }
            Some(keeper @ 1..) => {
                // Before this process ends: the cleanup helper reads it when it does.
                let recorded = std::fs::write(&file, keeper.to_string());
                let list: Vec<String> = children.iter().map(i32::to_string).collect();
                let msg = format!(
                    "pronghorn: pid {opener} drives the NIC for its family (runtime.share = \"family\") and {} while \
                     {} still use its stack: pid {keeper} (pronghorn-keep), a copy of it, drives the NIC for them until \
                     the last one ends{}\n",
                    if leaving == Leaving::Exec { "execs a new program" } else { "exits" },
                    // A child that took the NIC over (`family::succession`) forked none of them.
                    if list.is_empty() {
                        "other processes of the family".to_string()
                    } else {
                        format!("its children {}", list.join(", "))
                    },
                    match recorded {
                        // Only a process that runs as root has a cleanup helper (`start_reaper`).
                        // SAFETY: geteuid takes no memory and cannot fail.
                        Err(e) if unsafe { libc::geteuid() } == 0 => {
                            format!(" (cannot write {file} for the cleanup helper: {e})")
                        }
                        _ => String::new(),
                    }
                );
                // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
                Handoff::Opener
            }
            _ => Handoff::None,
        }
    }
}

/// The keeper, its port closed: the program's exit handlers ran in the opener already, and
/// must not run twice (a handler that removes a pid file would remove a restarted server's).
pub(super) fn end() -> ! {
    // The record of this keeper goes (the cleanup helper, when there is one, removes it too).
    let _ = std::fs::remove_file(successor_file(OPENER.load(Ordering::Relaxed)));
    // SAFETY: _exit takes no memory and does not return.
    unsafe { libc::_exit(0) }
}

/// The signals the keeper ignores (`leave_the_program`): systemd's stop (SIGTERM to every
/// process of the unit, the children included), a terminal's, nginx's and others' controls.
const IGNORED: [libc::c_int; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// In the keeper, just forked: nothing of the program's may go on through it. A session of its
/// own (the terminal's signals and a hang-up of the opener's session do not reach it); every
/// signal back to its default and unblocked (the program's handlers are the program's), but
/// those that end a process by default and that people and supervisors send to stop or steer a
/// server ([`IGNORED`]): the keeper ends when its family does, after the children a supervisor
/// stops with the same signal have sent their last bytes through it (SIGKILL ends it at once,
/// and the cleanup helper detaches the program); named
/// `pronghorn-keep` (in ps, and out of the way of `killall` of the program); the program's fds
/// closed but for those the NIC and the runtime hold, and stdio on /dev/null, so that whoever
/// waits for the program's pipes or sockets to close (a shell's `$(...)`, a supervisor) sees
/// them close as the opener exits.
fn leave_the_program() {
    // SAFETY: setsid, prctl(PR_SET_NAME) with a NUL-terminated name, signal with SIG_DFL and
    // sigprocmask with a set made here take no memory of ours beyond those.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"pronghorn-keep".as_ptr());
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, if IGNORED.contains(&sig) { libc::SIG_IGN } else { libc::SIG_DFL });
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    for fd in fds {
        if !the_runtimes(fd) {
            // SAFETY: an fd of this process that nothing of the keeper uses.
            unsafe { real::close(fd) };
        }
    }
    // SAFETY: open of a NUL-terminated path; dup2 onto the standard fds; close of the spare.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for std in 0..3 {
                real::dup2(null, std);
            }
            if null > 2 {
                real::close(null);
            }
        }
    }
}

/// Whether `fd` is one the NIC or the runtime holds, by what it is: an AF_XDP socket, an
/// anonymous inode (eventfds: the parkers, the bell; BPF maps and programs), DPDK's and the
/// runtime's files (memory, the EAL's directory, queue claims under /run/pronghorn). The
/// program's placeholders are eventfds too, released at the exit, and stay unused.
fn the_runtimes(fd: i32) -> bool {
    let Ok(link) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else { return false };
    let link = link.to_string_lossy();
    if link.starts_with("socket:") {
        let mut domain: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `domain` and `len` are ours, of the sizes the call is told.
        let r = unsafe {
            real::getsockopt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN, (&mut domain as *mut libc::c_int).cast(), &mut len)
        };
        return r == 0 && domain == libc::AF_XDP;
    }
    ["anon_inode:", "/memfd:", "/dev/hugepages", "/run/pronghorn", "/var/run/dpdk", "/run/dpdk"]
        .iter()
        .any(|p| link.starts_with(p))
}
