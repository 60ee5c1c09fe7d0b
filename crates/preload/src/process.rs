//! The process: fork, _Fork and daemon (the runtime decides what a child keeps), and the credential changes
//! that must open the NIC while the process may still (setuid and friends).

use libc::{c_int, size_t};
use runtime::real;

/// Runs the real `fork` or `_Fork` with the runtime held across it.
unsafe fn forked(real_fork: unsafe fn() -> libc::pid_t) -> libc::pid_t {
    let hold = runtime::fork_prepare();
    let pid = real_fork();
    runtime::fork_done(hold, pid == 0);
    pid
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    forked(real::fork)
}

/// glibc's fork without atfork handlers (2.34): a child all the same.
#[no_mangle]
pub unsafe extern "C" fn _Fork() -> libc::pid_t {
    forked(real::_Fork)
}

/// glibc's daemon() forks inside libc (our fork never sees it), exits in the parent and returns
/// in the child, whose failure (setsid, /dev/null) also reads -1: the pid tells them apart.
#[no_mangle]
pub unsafe extern "C" fn daemon(nochdir: c_int, noclose: c_int) -> c_int {
    let hold = runtime::fork_prepare();
    let before = libc::getpid();
    let rc = real::daemon(nochdir, noclose);
    runtime::fork_done(hold, libc::getpid() != before);
    rc
}

// Credential changes: a server that drops root before its first socket (mariadbd --user=mysql,
// nginx's `user`) would no longer be allowed to open the NIC. The runtime opens it first.
macro_rules! credential_hooks {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                runtime::before_credentials_change();
                real::$name($($arg),*)
            }
        )*
    };
}

credential_hooks! {
    setuid(uid: libc::uid_t);
    setgid(gid: libc::gid_t);
    seteuid(uid: libc::uid_t);
    setegid(gid: libc::gid_t);
    setreuid(r: libc::uid_t, e: libc::uid_t);
    setregid(r: libc::gid_t, e: libc::gid_t);
    setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t);
    setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t);
    setgroups(n: size_t, groups: *const libc::gid_t);
    initgroups(user: *const libc::c_char, group: libc::gid_t);
}
