//! The accelerated process's life: the shard opened before the process gives up root, the
//! connections drained and the port closed at exit (which detaches the XDP program), the
//! connections drained before an exec (`exec` says when), and fork (the child never touches the
//! parent's queues).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use nic::Nic;
use stack::shard::SocketId;
use stack::TcpState;

use crate::accel::{Accel, Runtime};
use crate::observe::region::run_dir;
use crate::{real, set_tracked, Errno};

/// Set in a forked child: the parent's shard must not be touched.
pub(crate) static FORKED: AtomicBool = AtomicBool::new(false);

impl<N: Nic + 'static> Accel<N> {
    /// The process is about to change its credentials (setuid, setgid, setgroups, ...): a
    /// server that drops root (mariadbd --user=mysql, nginx's `user`) would lose the rights to
    /// open the NIC (AF_XDP, hugepages) before its first socket. Open it now, unless the calling
    /// thread manages its capabilities itself (`keeps_capabilities`).
    pub fn before_credentials_change(&self) {
        // SAFETY: PR_GET_SECUREBITS takes no other argument and no memory.
        if keeps_capabilities(unsafe { libc::prctl(libc::PR_GET_SECUREBITS) }) {
            return;
        }
        self.with(|rt| {
            let _ = rt.open_shards();
        });
    }

    /// At exit: the connections deliver what they were given (`Accel::drain`), then
    /// the port closes (which detaches the XDP program). The stack thread, if any, stops when
    /// it sees the shard gone. A forked child that does not own the NIC never gets here
    /// (`FORKED`).
    pub fn at_exit(&self) {
        self.try_with(|rt| rt.say_children_left_behind());
        self.drain(Leaving::Exit);
        if self.try_with(|rt| rt.sharing.child().is_some()) != Some(false) {
            // A child of a family that shares the shards let go of its sockets in `drain`;
            // the NIC and the shards are the opener's.
            return;
        }
        self.try_with(|rt| {
            rt.poll_shard();
            if EXIT_STATS.get().copied().unwrap_or(false) {
                for (k, s) in rt.shards.all().iter().enumerate() {
                    let msg = format!(
                        "pronghorn: pid {} shard {k} at exit: {:?}\n{:?}\n{:?}\n{:?}\n{:?}\n",
                        std::process::id(),
                        s.stats(),
                        s.link_stats(),
                        s.nic().stats(),
                        rt.wait.stats,
                        rt.routing
                    );
                    // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                    unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
                }
            }
            rt.stop_observer();
            rt.shards.stop();
        });
    }

    /// What the kernel does for a process that exits with sockets, and then some: every TCP
    /// socket still held is closed as if its last fd went (a FIN after its data; a RST when
    /// received data was left unread or SO_LINGER is 0), and the stacks keep running until
    /// every connection, those the process closed before included, has sent its data and its
    /// FIN and seen them acknowledged (FIN-WAIT-2, TIME-WAIT or gone). Linux's orphans send on
    /// after the process is gone; here the stack ends with the process, so the wait is bounded:
    /// by the socket's SO_LINGER time where it has one, else by `runtime.exit_drain_ms`. A
    /// connection still sending then is reset, as Linux resets an orphan it gives up on.
    ///
    /// The lock is taken for one pass at a time, never while waiting, so other threads (a
    /// stack thread, application threads the exit did not stop) go on; if it cannot be taken
    /// (a thread stopped while holding it) the drain ends.
    fn drain(&self, leaving: Leaving) {
        let Some(Some((mut drain, child))) =
            self.try_with(|rt| rt.shards.is_open().then(|| (rt.close_all(leaving), rt.sharing.child().is_some())))
        else {
            return;
        };
        if child {
            // Its sockets are closed as its last fds went (those the family still holds stay
            // open); the opener's passes deliver what is left.
            return;
        }
        loop {
            let Some(Some((work, rx_fds, wait_ms))) = self.try_with(|rt| {
                let work = rt.poll_shard();
                rt.drain_step(&mut drain).then(|| (work, rt.rx_fds.clone(), rt.next_wait_ms(None)))
            }) else {
                return;
            };
            if work == 0 {
                // Nothing moved: wait for frames or the next timer (a few ms at most).
                let mut fds: Vec<libc::pollfd> =
                    rx_fds.iter().flatten().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
                // SAFETY: `fds` is our Vec of fds.len() pollfds, read and written by the kernel.
                unsafe { real::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms.clamp(1, 10)) };
            }
        }
    }

    /// Before an exec the kernel would start (`exec`): the image that holds the stack is about
    /// to go, so the connections are finished as at exit ([`Accel::at_exit`], same bounds),
    /// with Linux's rule for which fds an exec closes. A connection whose fds are all
    /// close-on-exec is closed as the exec would close it (a FIN after its data). One with an
    /// fd that is not stays open under Linux, for the new program; pronghorn cannot carry it
    /// there, so it is reset: its peer learns the connection is broken, where a FIN would tell
    /// it the stream ended as the program meant. Listeners close either way (their unaccepted
    /// connections reset). The port stays open: the program continues if the exec fails after
    /// all, and the stack thread (if any) still runs. Every accelerated TCP fd then becomes a
    /// kernel socket that was never connected (`bury`), so a program whose exec failed gets
    /// errors on them (ENOTCONN, EPIPE, EINVAL from accept) rather than an eventfd that takes
    /// writes, and a new image that inherits one finds a socket there.
    pub fn drain_before_exec(&self) {
        self.drain(Leaving::Exec);
    }

    /// Before an exec the kernel would start: the accelerated listeners the new program would
    /// inherit (fds that are not close-on-exec) cannot follow it, since the program that an
    /// exec starts is not accelerated (only the process `pronghorn run` started is), and the
    /// stack cannot be mapped into another image yet (issue 24, stage 5). nginx's binary
    /// upgrade (USR2) hands its listeners to the new binary this way: the new master finds
    /// placeholders, not sockets, and its own bind() of the address then fails, so it exits and
    /// the old master serves on. Said on stderr (nginx's error log), naming the fds, so that
    /// the failure says why.
    pub fn say_listeners_left_behind(&self) {
        let Some(fds) = self.try_with(|rt| {
            let mut fds = rt.fds.streams();
            fds.extend(rt.fds.listening());
            fds.retain(|&fd| {
                matches!(rt.fds.kind(fd), Some(crate::fdtable::Fd::Listener { .. } | crate::fdtable::Fd::Listening { .. }))
                    // SAFETY: F_GETFD takes no memory.
                    && unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0
            });
            fds.sort_unstable();
            fds
        }) else {
            return;
        };
        if fds.is_empty() {
            return;
        }
        let list: Vec<String> = fds.iter().map(i32::to_string).collect();
        let msg = format!(
            "pronghorn: pid {} execs a new program that inherits accelerated listener(s) on fd(s) {}: it cannot \
             use them (a program started by exec is not accelerated, and the stack does not follow an exec: issue \
             24 stage 5); there they are not listening sockets\n",
            std::process::id(),
            list.join(", ")
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
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

impl<N: Nic + 'static> Runtime<N> {
    /// Closes every TCP socket the process still holds (listeners: their unaccepted
    /// connections are reset), as the kernel does when the last fd of each goes, and says how
    /// long each connection may take to finish. Before an exec, a connection that would stay
    /// open in the new program is reset instead, and the fds are buried
    /// ([`Accel::drain_before_exec`]).
    fn close_all(&mut self, leaving: Leaving) -> ExitDrain {
        let now = self.now();
        let deadline = now + u64::from(self.cfg.runtime.exit_drain_ms) * 1_000_000;
        let mut lingering = HashMap::new();
        let fds = self.fds.streams();
        let inherited = match leaving {
            Leaving::Exit => HashSet::new(),
            Leaving::Exec => self.kept_across_exec(&fds),
        };
        if !inherited.is_empty() {
            let msg = format!(
                "pronghorn: pid {} execs with {} accelerated connection(s) on fds that are not close-on-exec: they \
                 cannot follow into the new program and are reset\n",
                std::process::id(),
                inherited.len()
            );
            // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        }
        for &fd in &fds {
            let Some(entry) = self.fds.get_mut(fd) else { continue };
            let Some(id) = entry.fd.socket() else { continue };
            if inherited.contains(&id) {
                // Reset when its last fd goes, as SO_LINGER 0 does.
                entry.opts.linger_s = Some(0);
            } else if let Some(secs @ 1..) = entry.opts.linger_s {
                lingering.insert(id, now + u64::from(secs) * 1_000_000_000);
            }
            self.release(fd);
            if leaving == Leaving::Exec {
                bury(fd);
            }
        }
        let last = lingering.values().copied().fold(deadline, u64::max);
        ExitDrain { deadline, lingering, end: last + EXIT_RESET_GRACE_NS }
    }

    /// The connections (not listeners) among `fds` that a successful exec leaves open: one of
    /// their fds is not close-on-exec.
    fn kept_across_exec(&self, fds: &[i32]) -> HashSet<SocketId> {
        fds.iter()
            // SAFETY: F_GETFD takes no memory.
            .filter(|&&fd| unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0)
            .filter_map(|&fd| match self.fds.kind(fd) {
                Some(crate::fdtable::Fd::Conn { id, .. }) => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// After a pass: resets the connections past their deadline; whether to go on (a
    /// connection still delivering, or frames still queued, before the end).
    fn drain_step(&mut self, drain: &mut ExitDrain) -> bool {
        let now = self.now();
        let mut unsettled = false;
        for s in self.shards.all_mut() {
            let late: Vec<SocketId> = s
                .connections()
                .filter(|(_, _, _, info)| {
                    !matches!(info.state, TcpState::FinWait2 | TcpState::TimeWait | TcpState::Closed)
                })
                .map(|(id, ..)| id)
                .filter(|id| {
                    unsettled = true;
                    now >= drain.lingering.get(id).copied().unwrap_or(drain.deadline)
                })
                .collect();
            for id in late {
                let _ = s.abort(id);
            }
            s.flush(now);
            unsettled |= s.pending_frames() > 0;
        }
        unsettled && now < drain.end
    }
}

/// Puts a kernel TCP socket that was never connected in the place of `fd`, an accelerated
/// socket's placeholder that the runtime has released, keeping its close-on-exec flag, and
/// stops tracking it: calls on it fail as on a socket with no connection.
fn bury(fd: i32) {
    // SAFETY: fcntl (F_GETFD, F_SETFD with an integer), socket, dup2 and close take no
    // memory; `dead` is the socket made here, closed once; dup2 replaces the placeholder at
    // `fd`, which the runtime has released, atomically.
    unsafe {
        let cloexec = real::fcntl(fd, libc::F_GETFD, 0);
        let dead = real::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if dead >= 0 {
            if real::dup2(dead, fd) >= 0 && cloexec >= 0 {
                real::fcntl(fd, libc::F_SETFD, cloexec as libc::c_ulong);
            }
            real::close(dead);
        }
    }
    set_tracked(fd, false);
}

/// Set (to anything): the counters are written to stderr at exit (until `pronghorn stat` exists).
pub const ENV_EXIT_STATS: &str = "PRONGHORN_EXIT_STATS";

/// The variable `pronghorn run` sets to its own binary, for the cleanup helper.
pub const ENV_EXE: &str = "PRONGHORN_EXE";

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
