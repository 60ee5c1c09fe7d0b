//! The accelerated process's life: the shard opened before the process gives up root, the
//! connections drained and the port closed at exit (which detaches the XDP program), the
//! connections drained before an exec (`exec` says when), and fork (the child never touches the
//! parent's queues).
//!
//! This module holds the process-wide flags, the exit's drain state and the cleanup helper's
//! start; `calls` holds what the runtime does at a fork, an exit, an exec and a privilege drop;
//! `keeper` the hand-over of a family's NIC when its opener exits first; `spawn` what
//! posix_spawn's program finds on an accelerated socket's fd; `handover` the deferred
//! listeners an exec'd program takes over (nginx's binary upgrade).

mod calls;
pub(crate) mod handover;
pub(crate) mod keeper;
pub(crate) mod spawn;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use stack::shard::SocketId;

use crate::observe::region::run_dir;
use crate::{real, set_tracked, set_tracked_state, tracked_fds, tracked_state, Errno, TRACKED_DATAGRAM};

/// Set in a forked child: the parent's shard must not be touched.
pub(crate) static FORKED: AtomicBool = AtomicBool::new(false);

/// The process whose runtime this is: the one it started in, a child forked before the NIC
/// opened (it keeps its copy), or the keeper forked at the opener's exit (`keeper`). A vfork
/// child (posix_spawn's, Python's subprocess) runs in its parent's memory, runtime included,
/// and is told apart only by its pid. 0: no runtime was made in this process or its parents.
pub(crate) static OWNER: AtomicU32 = AtomicU32::new(0);

/// The pid of the child that set `FORKED`: a vfork child (Python's subprocess, a vfork(2)
/// caller's) runs in that child's memory, tracked-fd table included, with an fd table of its own.
static FORKED_PID: AtomicU32 = AtomicU32::new(0);

/// In a child just forked: it does not keep the runtime (the parent's NIC is open and not
/// shared, or the fork interrupted the runtime).
pub(crate) fn lost_the_runtime_at_fork() {
    FORKED_PID.store(std::process::id(), Ordering::Relaxed);
    FORKED.store(true, Ordering::Relaxed);
}

/// Whether this process is a vfork child (Python's subprocess, a vfork(2) caller's; posix_spawn's
/// makes no hooked call) of the process
/// whose runtime (or whose lost runtime, `FORKED`) this memory holds: it runs in its parent's
/// memory, runtime and tracked-fd table included, with an fd table of its own, until its exec
/// or _exit. Its dups and closes must change only its own fds, never its parent's records of
/// theirs. A getpid: for the calls that end or copy an fd, not those that move data.
pub(crate) fn in_vfork_child(owner: u32) -> bool {
    let parent = if FORKED.load(Ordering::Relaxed) { FORKED_PID.load(Ordering::Relaxed) } else { owner };
    parent != 0 && parent != std::process::id()
}

/// A dup of `old` to `new` in a child that lost the runtime at its fork (whether this was one:
/// the runtime is not consulted then). A copy of the parent's socket placeholder is one too
/// (EOPNOTSUPP, buried before an exec); a placeholder replaced by another file is no longer
/// one. (A vfork child is `vfork_child_duplicated`'s.)
pub(crate) fn forked_child_duplicated(old: i32, new: i32) -> bool {
    if !FORKED.load(Ordering::Relaxed) {
        return false;
    }
    if old != new {
        let state = tracked_state(old);
        set_tracked_state(new, if matches!(state, 1 | TRACKED_DATAGRAM) { state } else { 0 });
    }
    true
}

/// Copies of placeholders a vfork child made (`dup2(conn, 0)` before it execs a program on the
/// connection): the child's pid and up to 8 fds. A vfork child runs on the thread that called
/// vfork, so this is that thread's, and the pid tells the current child's from an earlier
/// one's. The tracked-fd table is its parent's and stays untouched.
const VFORK_COPIES: usize = 8;
thread_local! {
    static VFORK_COPIED: std::cell::Cell<(u32, [i32; VFORK_COPIES])> =
        const { std::cell::Cell::new((0, [-1; VFORK_COPIES])) };
}

/// The fds a vfork child copied placeholders to ([`VFORK_COPIED`]; -1: none).
fn vfork_copies() -> [i32; VFORK_COPIES] {
    let me = std::process::id();
    VFORK_COPIED.try_with(|c| c.get()).ok().filter(|&(pid, _)| pid == me).map_or([-1; VFORK_COPIES], |(_, fds)| fds)
}

/// A dup of `old` to `new` in a vfork child ([`in_vfork_child`]): recorded for its exec, in
/// [`VFORK_COPIED`], not in the table its parent owns.
pub(crate) fn vfork_child_duplicated(old: i32, new: i32) {
    if old == new {
        return;
    }
    let mut fds = vfork_copies();
    let placeholder = tracked_state(old) == 1 || fds.contains(&old);
    for fd in fds.iter_mut().filter(|fd| **fd == new) {
        *fd = -1;
    }
    if placeholder {
        if let Some(free) = fds.iter_mut().find(|fd| **fd < 0) {
            *free = new;
        }
    }
    let _ = VFORK_COPIED.try_with(|c| c.set((std::process::id(), fds)));
}

/// Before an exec, in a child that lost the runtime at its fork, or a vfork child of an
/// accelerated process (or of such a child): each placeholder of the parent's TCP sockets that
/// the new program would inherit (an fd that is not close-on-exec: an inetd-style child that
/// made the connection its stdin and stdout, Python's `subprocess` with `stdin=conn`) becomes
/// a kernel socket that was never connected, as the driver's own do before its exec (`bury`).
/// The new program's reads then fail with ENOTCONN and its writes with EPIPE, where the
/// placeholder, an eventfd, would take 8-byte writes and leave reads waiting for ever. The
/// parent's connection is untouched: the placeholder was this process's copy. Said on stderr,
/// naming the fds. Only an fd that is still an eventfd is buried (a vfork child reads its
/// parent's table, which does not see the child's closes). Whether the kernel would start the
/// program is not asked: if the exec fails, socket calls on the fds fail with EOPNOTSUPP as
/// before. Nothing here allocates or writes the tracked-fd table (a vfork child shares it and
/// the heap with its parent).
pub(crate) fn forked_child_before_exec() {
    use std::io::Write;
    let mut msg = [0u8; 512];
    let mut out = std::io::Cursor::new(&mut msg[..]);
    let mut buried = 0;
    let copies = vfork_copies();
    let candidates =
        tracked_fds::with_state(1).filter(|fd| !copies.contains(fd)).chain(copies.into_iter().filter(|&fd| fd >= 0));
    for fd in candidates {
        // SAFETY: F_GETFD takes no memory.
        let flags = unsafe { real::fcntl(fd, libc::F_GETFD, 0) };
        if flags < 0 || flags & libc::FD_CLOEXEC != 0 || !is_eventfd(fd) {
            continue;
        }
        replace_with_unconnected_socket(fd);
        let _ = if buried == 0 {
            write!(
                out,
                "pronghorn: pid {} execs a new program that inherits accelerated socket(s) of the process it was \
                 forked from, which serves them, on fd(s) {fd}",
                std::process::id()
            )
        } else {
            write!(out, ", {fd}")
        };
        buried += 1;
    }
    if buried > 0 {
        let _ = writeln!(out, ": there they are sockets that were never connected (ENOTCONN, EPIPE)");
        let len = out.position() as usize;
        // SAFETY: `msg` holds `len` bytes written above; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), len) };
    }
}

/// Whether `fd` is an eventfd (a placeholder's kind of file), by its /proc/self/fd link, read
/// without allocating.
fn is_eventfd(fd: i32) -> bool {
    use std::io::Write;
    let mut path = [0u8; 40];
    let mut w = std::io::Cursor::new(&mut path[..]);
    if write!(w, "/proc/self/fd/{fd}\0").is_err() {
        return false;
    }
    let mut link = [0u8; 32];
    // SAFETY: `path` is NUL-terminated (written above); `link` is writable for its length.
    let n = unsafe { libc::readlink(path.as_ptr().cast(), link.as_mut_ptr().cast(), link.len()) };
    usize::try_from(n).is_ok_and(|n| link[..n] == *b"anon_inode:[eventfd]")
}

/// securebits (`<linux/securebits.h>`): capabilities kept when the uids leave 0, and no
/// capability changes at all on a uid change.
const SECBIT_NO_SETUID_FIXUP: libc::c_int = 1 << 2;
const SECBIT_KEEP_CAPS: libc::c_int = 1 << 4;

/// Whether a thread with these securebits (`PR_GET_SECUREBITS`; -1: unknown) changes its
/// credentials the way privilege-dropping wrappers do (setpriv, capsh): it keeps capabilities
/// across the uid change and raises them again with capset(2), which changes the calling
/// thread only. Threads the NIC started (DPDK's interrupt thread, the control thread) would
/// then lack the capability the next setresgid or setgroups needs: glibc runs each such call in
/// every thread (SIGSETXID) and aborts the process when one thread fails where another
/// succeeded (`setpriv --reuid=postgres --regid=postgres --init-groups` was killed by SIGABRT).
/// Such a thread gets no NIC from a credential change: the NIC opens at the first socket wait,
/// with the privileges the program has then (a wrapper's exec'd server: those it was given as
/// ambient capabilities, else it cannot, and says so).
fn keeps_capabilities(securebits: libc::c_int) -> bool {
    securebits != -1 && securebits & (SECBIT_KEEP_CAPS | SECBIT_NO_SETUID_FIXUP) != 0
}

/// Why the connections are finished: the process exits, or execs another program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaving {
    Exit,
    Exec,
}

/// The connections an exiting process waits for, and how long.
pub(crate) struct ExitDrain {
    /// When the wait for a connection without SO_LINGER ends (ns, the runtime's clock).
    deadline: u64,
    /// Connections closed at exit from a socket with SO_LINGER set: their own deadline.
    lingering: HashMap<SocketId, u64>,
    /// After the last deadline: the resets and what is queued leave, then the drain stops.
    end: u64,
}

/// Time for the resets sent at the deadline, and frames still queued, to leave.
const EXIT_RESET_GRACE_NS: u64 = 100_000_000;

/// Puts a kernel TCP socket that was never connected in the place of `fd`, an accelerated
/// socket's placeholder that the runtime has released, keeping its close-on-exec flag, and
/// stops tracking it: calls on it fail as on a socket with no connection.
fn bury(fd: i32) {
    replace_with_unconnected_socket(fd);
    set_tracked(fd, false);
}

/// `bury` without the table: a kernel TCP socket that was never connected takes `fd`'s place,
/// with `fd`'s close-on-exec flag.
fn replace_with_unconnected_socket(fd: i32) {
    // SAFETY: fcntl (F_GETFD, F_SETFD with an integer), socket, dup2 and close take no
    // memory; `dead` is the socket made here, closed once; dup2 replaces the placeholder at
    // `fd`, which nothing else uses, atomically.
    unsafe {
        let cloexec = real::fcntl(fd, libc::F_GETFD, 0);
        let dead = unconnected_socket();
        if dead >= 0 {
            if real::dup2(dead, fd) >= 0 && cloexec >= 0 {
                real::fcntl(fd, libc::F_SETFD, cloexec as libc::c_ulong);
            }
            real::close(dead);
        }
    }
}

/// A kernel TCP socket that was never connected, close-on-exec (-1: none could be made): what
/// a program finds in an accelerated socket's place when the socket cannot follow it.
fn unconnected_socket() -> i32 {
    // SAFETY: socket takes no memory.
    unsafe { real::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) }
}

/// Set (to anything): the counters are written to stderr at exit (until `pronghorn stat` exists).
pub const ENV_EXIT_STATS: &str = "PRONGHORN_EXIT_STATS";

/// The variable `pronghorn run` sets to its own binary, for the cleanup helper.
pub const ENV_EXE: &str = "PRONGHORN_EXE";

/// The variable `pronghorn run` sets to the pid it execs into: only that process is accelerated
/// (and a program it execs that it hands its listeners: `handover`).
pub const ENV_PID: &str = "PRONGHORN_ACCEL_PID";

/// `ENV_EXE` and `ENV_EXIT_STATS` as the process found them when its runtime started: later
/// the environment may be another (nginx gives itself and its workers one of their own).
static EXE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
static EXIT_STATS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Remembers the variables above and the run directory (`observe::region::run_dir`), called
/// when the process-wide runtime is made.
pub(crate) fn remember_env() {
    EXE.get_or_init(|| std::env::var(ENV_EXE).ok());
    EXIT_STATS.get_or_init(|| std::env::var_os(ENV_EXIT_STATS).is_some());
    run_dir();
}

/// Called when the shard has started: a process that dies by a signal, or that is no longer
/// root when it exits (mariadbd --user=mysql), cannot detach its XDP program or remove the EAL's
/// directory itself. A root helper (`pronghorn reap`) waits for this process to end and, if the
/// directory is still there (the process did not close its port), does both. Only a process
/// started by `pronghorn run` as root has one.
pub(crate) fn start_reaper(iface: &str, queues: u16) {
    let Some(exe) = EXE.get().cloned().flatten() else { return };
    // SAFETY: geteuid takes no memory and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    if let Err(e) = spawn_reaper(&exe, iface, queues) {
        let msg = format!(
            "pronghorn: cannot start the cleanup helper ({e}): if this process dies by a signal or exits without root, \
             `ip link set dev {iface} xdp off` detaches the XDP program it leaves\n"
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
}

/// Starts `pronghorn reap --pid <us> --iface <iface>` in a session of its own (no terminal
/// signals reach it), its stdin and stdout on /dev/null. posix_spawn: no atfork handlers of the
/// application run, and the helper closes every fd it inherited beyond stderr at once.
fn spawn_reaper(exe: &str, iface: &str, queues: u16) -> Result<(), String> {
    use std::ffi::CString;
    let args = [
        exe.to_string(),
        "reap".into(),
        "--pid".into(),
        std::process::id().to_string(),
        "--iface".into(),
        iface.to_string(),
        "--queues".into(),
        queues.to_string(),
        "--run-dir".into(),
        run_dir().to_string_lossy().into_owned(),
    ];
    let cargs: Vec<CString> =
        args.iter().map(|a| CString::new(a.as_str()).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let mut argv: Vec<*mut libc::c_char> = cargs.iter().map(|a| a.as_ptr() as *mut libc::c_char).collect();
    argv.push(std::ptr::null_mut());
    let env = [CString::new("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").unwrap()];
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|a| a.as_ptr() as *mut libc::c_char).collect();
    envp.push(std::ptr::null_mut());
    let devnull = CString::new("/dev/null").unwrap();
    // SAFETY: the file actions and attributes are zeroed (valid bit patterns for them),
    // initialised before use and destroyed after; every path is a CString and `argv` and `envp`
    // null-terminated arrays of CStrings (`cargs`, `env`), all of which outlive posix_spawn,
    // which copies what the child needs; `pid` is ours to write.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut actions);
        libc::posix_spawn_file_actions_addopen(&mut actions, 0, devnull.as_ptr(), libc::O_RDONLY, 0);
        libc::posix_spawn_file_actions_addopen(&mut actions, 1, devnull.as_ptr(), libc::O_WRONLY, 0);
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawnattr_setflags(&mut attr, libc::POSIX_SPAWN_SETSID as libc::c_short);
        let mut pid: libc::pid_t = 0;
        let path = CString::new(exe).unwrap();
        let rc = libc::posix_spawn(&mut pid, path.as_ptr(), &actions, &attr, argv.as_ptr(), envp.as_ptr());
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc).to_string());
        }
    }
    Ok(())
}

/// In a child forked after the parent's NIC opened, a tracked fd is a placeholder of the
/// parent's socket: socket calls on it fail with EOPNOTSUPP (said once on stderr) instead of
/// silently reaching an eventfd; closing it only closes the placeholder. The child's own new
/// sockets are the kernel's. (A child forked before the NIC opened keeps the runtime.)
pub fn forked_child_socket(fd: i32) -> Option<Errno> {
    if !FORKED.load(Ordering::Relaxed) || !matches!(crate::tracked_state(fd), 1 | crate::TRACKED_DATAGRAM) {
        return None;
    }
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let msg = format!(
            "pronghorn: pid {} uses accelerated socket fd {fd} inherited through fork after its parent started serving: \
             a port cannot be shared between processes (fork the workers before serving, as nginx does, or give each \
             process its own queue with nic.queues)\n",
            std::process::id()
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    Some(Errno::EOPNOTSUPP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_keeps_its_capabilities_gets_no_nic_from_a_credential_change() {
        assert!(!keeps_capabilities(0), "root dropping with setuid (mariadbd --user)");
        assert!(!keeps_capabilities(-1), "securebits unknown: as before");
        assert!(keeps_capabilities(SECBIT_KEEP_CAPS), "setpriv: prctl(PR_SET_KEEPCAPS, 1)");
        assert!(keeps_capabilities(SECBIT_NO_SETUID_FIXUP));
        assert!(!keeps_capabilities(1 << 5), "SECBIT_KEEP_CAPS_LOCKED alone keeps nothing");
    }
}
