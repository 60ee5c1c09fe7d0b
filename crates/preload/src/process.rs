//! The process: fork (the runtime decides what a child keeps), and the credential changes
//! that must open the NIC while the process may still (setuid and friends).

use libc::{c_int, size_t};
use runtime::real;

#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let hold = runtime::fork_prepare();
    let pid = real::fork();
    runtime::fork_done(hold, pid == 0);
    pid
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
