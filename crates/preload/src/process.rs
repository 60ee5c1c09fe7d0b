//! The process: fork, _Fork and daemon (the runtime decides what a child keeps), the credential changes
//! that must open the NIC while the process may still (setuid and friends), and the exec
//! functions, before which the runtime finishes the connections the new image cannot have.

use std::ffi::{CStr, CString};

use libc::{c_char, c_int, size_t};
use runtime::{real, Program};

/// Runs the real `fork` or `_Fork` with the runtime held across it.
/// # Safety
/// `real_fork` is `real::fork` or `real::_Fork`.
unsafe fn forked(real_fork: unsafe fn() -> libc::pid_t) -> libc::pid_t {
    // SAFETY: `real_fork` is the real fork or _Fork, which take no memory; the runtime
    // is held across it (fork_prepare) so that no lock of it is mid-update in the child.
    unsafe {
        let hold = runtime::fork_prepare();
        let pid = real_fork();
        runtime::fork_done(hold, pid);
        pid
    }
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    // SAFETY: forked's contract: the real fork.
    unsafe { forked(real::fork) }
}

/// glibc's fork without atfork handlers (2.34): a child all the same.
#[no_mangle]
pub unsafe extern "C" fn _Fork() -> libc::pid_t {
    // SAFETY: forked's contract: the real _Fork.
    unsafe { forked(real::_Fork) }
}

/// glibc's daemon() forks inside libc (our fork never sees it), exits in the parent and returns
/// in the child, whose failure (setsid, /dev/null) also reads -1: the pid tells them apart. In a
/// process that shares its stack with a fork family it is done here instead (`daemon_sharing`).
#[no_mangle]
pub unsafe extern "C" fn daemon(nochdir: c_int, noclose: c_int) -> c_int {
    if runtime::daemon_shares() {
        // SAFETY: daemon_sharing's contract is daemon's.
        return unsafe { daemon_sharing(nochdir, noclose) };
    }
    // SAFETY: daemon and getpid take no memory; the runtime is held across the fork
    // inside daemon as in `forked`.
    unsafe {
        let hold = runtime::fork_prepare();
        let before = libc::getpid();
        let rc = real::daemon(nochdir, noclose);
        runtime::daemon_done(hold, libc::getpid() != before);
        rc
    }
}

/// daemon(3) as glibc 2.36 does it, with the hooked fork: the child shares the family's stack,
/// and the parent ends through the runtime's exit work (the opener hands the NIC to a keeper
/// that drives it for the child) and `_exit(0)`. The child makes a session of its own, moves
/// to / unless `nochdir`, and puts /dev/null on its stdin, stdout and stderr unless `noclose`
/// (-1 with ENODEV when /dev/null is not the null device, as glibc).
/// # Safety
/// None beyond daemon's: the calls take no memory of the caller's.
unsafe fn daemon_sharing(nochdir: c_int, noclose: c_int) -> c_int {
    // SAFETY: forked's contract: the real fork; the rest are system calls on NUL-terminated
    // literals and a stat buffer of ours.
    unsafe {
        match forked(real::fork) {
            -1 => return -1,
            0 => {}
            _ => runtime::daemon_parent_exits(),
        }
        if libc::setsid() < 0 {
            return -1;
        }
        if nochdir == 0 {
            let _ = libc::chdir(c"/".as_ptr());
        }
        if noclose == 0 {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return -1;
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFCHR
                && st.st_rdev == libc::makedev(1, 3)
            {
                for std in 0..3 {
                    crate::fd::dup2(fd, std);
                }
                if fd > 2 {
                    crate::fd::close(fd);
                }
            } else {
                crate::fd::close(fd);
                *libc::__errno_location() = libc::ENODEV;
                return -1;
            }
        }
        0
    }
}

// Credential changes: a server that drops root before its first socket (mariadbd --user=mysql,
// nginx's `user`) would no longer be allowed to open the NIC. The runtime opens it first.
macro_rules! credential_hooks {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                runtime::before_credentials_change();
                // SAFETY: the real function gets the caller's arguments unchanged (setgroups'
                // and initgroups' pointers under their own contract, the caller's).
                unsafe { real::$name($($arg),*) }
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

// exec: a successful one discards the image that holds the stack (`runtime::before_exec`).
// glibc's own callers (execl*, execv, execvp, posix_spawn, system, popen) call its internal
// __execve, which no hook sees: each exported function that stable Rust can define is hooked
// here. execl, execlp and execle are variadic (not definable in stable Rust) and are not.
// posix_spawn, system and popen start a new process: this one keeps its stack.

/// The program a path names (`None` for a null pointer: the real call answers EFAULT).
/// # Safety
/// `path` is null or a NUL-terminated string valid for `'a`.
unsafe fn named<'a>(path: *const c_char) -> Option<&'a CStr> {
    // SAFETY: a non-null `path` is a NUL-terminated string that outlives 'a (the exec
    // call's contract, the caller's).
    unsafe { (!path.is_null()).then(|| CStr::from_ptr(path)) }
}

/// `envp` (a null-terminated array, `environ` when null) with `extra`'s `NAME=value` entries in
/// place of its own of those names: the new program's environment when the runtime hands it
/// listeners (`runtime::before_exec`). The pointers borrow `envp`'s strings and `extra`'s.
/// # Safety
/// `envp` is null or a null-terminated array of NUL-terminated strings, valid while the result is.
unsafe fn with_env(envp: Argv, extra: &[CString]) -> Vec<*const c_char> {
    let names: Vec<&[u8]> =
        extra.iter().map(|e| e.as_bytes().split(|&b| b == b'=').next().unwrap_or_default()).collect();
    let mut out = Vec::new();
    // SAFETY: `environ` is the process's environment, a null-terminated array (glibc's).
    let mut p = if envp.is_null() { unsafe { environ as Argv } } else { envp };
    // SAFETY: `p` walks a null-terminated array of NUL-terminated strings (the caller's
    // contract, or glibc's for `environ`).
    unsafe {
        while !p.is_null() && !(*p).is_null() {
            let entry = CStr::from_ptr(*p).to_bytes();
            let name = entry.split(|&b| b == b'=').next().unwrap_or_default();
            if !names.contains(&name) {
                out.push(*p);
            }
            p = p.add(1);
        }
    }
    out.extend(extra.iter().map(|e| e.as_ptr()));
    out.push(std::ptr::null());
    out
}

extern "C" {
    static environ: *const *const c_char;
}

macro_rules! exec_hooks {
    ($($name:ident($($arg:ident: $ty:ty),*) runs $program:expr; with $env:ident: $with:expr;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                // SAFETY: the exec call's contract, the caller's: its path is null or a
                // NUL-terminated string (`named`'s contract), its argv and envp are what the
                // real function takes; it gets every argument unchanged, or the environment
                // with the runtime's entries in place (`with_env`).
                unsafe {
                    let extra = match $program {
                        Some(program) => runtime::before_exec(program),
                        None => Vec::new(),
                    };
                    if extra.is_empty() {
                        return real::$name($($arg),*);
                    }
                    let $env = with_env(exec_env!($name $($arg)*), &extra);
                    $with
                }
            }
        )*
    };
}

/// The environment an exec function passes: its `envp`, or `environ` (null) for those without.
macro_rules! exec_env {
    (execv $($a:ident)*) => {
        std::ptr::null()
    };
    (execvp $($a:ident)*) => {
        std::ptr::null()
    };
    (execve $p:ident $a:ident $e:ident) => {
        $e
    };
    (execvpe $p:ident $a:ident $e:ident) => {
        $e
    };
    (fexecve $f:ident $a:ident $e:ident) => {
        $e
    };
    (execveat $d:ident $p:ident $a:ident $e:ident $f:ident) => {
        $e
    };
}

type Argv = *const *const c_char;

exec_hooks! {
    execve(path: *const c_char, argv: Argv, envp: Argv) runs named(path).map(Program::Path);
        with env: real::execve(path, argv, env.as_ptr());
    execv(path: *const c_char, argv: Argv) runs named(path).map(Program::Path);
        with env: real::execve(path, argv, env.as_ptr());
    execvp(file: *const c_char, argv: Argv) runs named(file).map(Program::Search);
        with env: real::execvpe(file, argv, env.as_ptr());
    execvpe(file: *const c_char, argv: Argv, envp: Argv) runs named(file).map(Program::Search);
        with env: real::execvpe(file, argv, env.as_ptr());
    fexecve(fd: c_int, argv: Argv, envp: Argv) runs Some(Program::Fd(fd));
        with env: real::fexecve(fd, argv, env.as_ptr());
    execveat(dirfd: c_int, path: *const c_char, argv: Argv, envp: Argv, flags: c_int)
        runs named(path).map(|path| Program::At { dirfd, path, flags });
        with env: real::execveat(dirfd, path, argv, env.as_ptr(), flags);
}
