//! Urgent data on accelerated sockets (tcp(7) "urgent data"): `recv(MSG_OOB)`,
//! `send(MSG_OOB)`, SIOCATMARK, and SIGURG to the socket's owner.
//!
//! The owner is what the application set with `fcntl(F_SETOWN)` or `F_SETOWN_EX`: those go to
//! the kernel unchanged, which keeps the owner on the placeholder's open file (shared by dup'd
//! fds, carried over when a kernel socket becomes a placeholder), so `F_GETOWN` answers as it
//! would for a socket. When the peer marks new urgent data the stack pass reads the owner back
//! and owes it a SIGURG, sent once the runtime's lock is released (a handler typically calls
//! `recv(MSG_OOB)`): to the thread, process or process group named, as Linux's
//! `sk_send_sigurg` does, before the urgent byte itself may have arrived.
//!
//! This module holds the signal owner and how it survives the placeholder swap; `calls` serves
//! the urgent-data calls.

mod calls;

use crate::real;

/// `fcntl` commands and owner kinds (fcntl(2)) that the libc crate lacks on x86-64 glibc.
const F_SETOWN_EX: libc::c_int = 15;
const F_GETOWN_EX: libc::c_int = 16;
const F_OWNER_TID: libc::c_int = 0;
const F_OWNER_PGRP: libc::c_int = 2;

/// `struct f_owner_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct OwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// Who gets SIGURG for a socket: a thread, a process or a process group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SignalOwner(OwnerEx);

impl SignalOwner {
    /// The owner set on `fd`, if any.
    fn of(fd: i32) -> Option<SignalOwner> {
        let mut owner = OwnerEx::default();
        // SAFETY: F_GETOWN_EX writes a struct f_owner_ex into `owner`, an OwnerEx of the same
        // layout (repr(C): two c_ints) that outlives the call.
        let r = unsafe { real::fcntl(fd, F_GETOWN_EX, &mut owner as *mut OwnerEx as libc::c_ulong) };
        (r == 0 && owner.pid > 0).then_some(SignalOwner(owner))
    }

    /// Sends SIGURG (errors, such as an owner that has exited, are ignored as Linux does).
    pub(crate) fn signal(self) {
        let OwnerEx { kind, pid } = self.0;
        // SAFETY: tgkill, getpid and kill take no memory; a gone target fails with ESRCH.
        unsafe {
            match kind {
                F_OWNER_TID => {
                    libc::syscall(libc::SYS_tgkill, libc::getpid(), pid, libc::SIGURG);
                }
                F_OWNER_PGRP => {
                    libc::kill(-pid, libc::SIGURG);
                }
                _ => {
                    libc::kill(pid, libc::SIGURG);
                }
            }
        }
    }
}

/// Keeps `fd`'s owner across the dup2 that puts a placeholder in a kernel socket's place:
/// call with the socket still at `fd`, then the returned closure with the placeholder there.
pub(crate) fn keep_owner(fd: i32) -> impl FnOnce() {
    let owner = SignalOwner::of(fd);
    move || {
        if let Some(SignalOwner(mut o)) = owner {
            // SAFETY: F_SETOWN_EX reads a struct f_owner_ex from `o`, an OwnerEx of that layout
            // that outlives the call.
            unsafe { real::fcntl(fd, F_SETOWN_EX, &mut o as *mut OwnerEx as libc::c_ulong) };
        }
    }
}
