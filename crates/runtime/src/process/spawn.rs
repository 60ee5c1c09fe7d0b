//! posix_spawn and its file actions: the program a process starts with posix_spawn must not get
//! an accelerated socket's placeholder (an eventfd that takes 8-byte writes and leaves reads
//! waiting) where Linux would give it the socket. glibc's child makes no call a hook sees (its
//! file actions' dup2s and its execve are internal calls), so the parent does what a forked
//! child's exec does (`forked_child_before_exec`), in the hooks of the file-action functions
//! and of posix_spawn:
//! - a dup2 action whose source is a placeholder (an inetd-style spawn that makes the
//!   connection the program's stdin) gets a kernel socket that was never connected as its
//!   source instead, made then and closed when the actions are destroyed;
//! - a placeholder the program would inherit as it is (not close-on-exec, and no action of the
//!   spawn closes, opens or dups onto its fd) gets such a socket put on its fd by one more dup2
//!   action, added for that one spawn.
//!
//! The program's reads then fail with ENOTCONN and its writes with EPIPE; the parent's
//! connection is untouched. Said on stderr, naming the fds.
//!
//! This module holds what each file-actions object of the program did (by its address) and the
//! decisions; the preload's hooks make the real calls.

use std::sync::Mutex;

use super::{is_eventfd, unconnected_socket, OWNER};
use crate::{real, tracked_fds, tracked_state};

/// What a file-actions object's actions did that matters here (`ACTIONS`).
#[derive(Default)]
pub(crate) struct Record {
    /// The object's address.
    at: usize,
    /// The dup2 actions whose source was a placeholder: (the placeholder, the socket put in
    /// its place, the program's fd).
    substituted: Vec<(i32, i32, i32)>,
    /// The fds the actions close, open or dup onto.
    targets: Vec<i32>,
    /// A closefrom action's lowest fd.
    closes_from: Option<i32>,
}

/// The records of the file-actions objects alive in this process that hold any action.
static ACTIONS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

/// The records held across a fork about to run in this thread (`ForkHold`): a child must not
/// inherit them locked by a thread it does not have.
pub(crate) struct SpawnActionsForkHold {
    _records: std::sync::MutexGuard<'static, Vec<Record>>,
}

/// Takes the records for a fork (released after it, in parent and child).
pub(crate) fn hold_for_fork() -> SpawnActionsForkHold {
    SpawnActionsForkHold { _records: ACTIONS.lock().unwrap_or_else(|p| p.into_inner()) }
}

/// Whether this process may hold placeholders: it runs the runtime (or a parent did, and it
/// lost it at its fork), and this call is not the runtime's own (the cleanup helper's spawn).
fn may_hold_placeholders() -> bool {
    !crate::inside() && OWNER.load(std::sync::atomic::Ordering::Relaxed) != 0
}

/// Whether `fd` is a placeholder of an accelerated TCP socket.
fn is_placeholder(fd: i32) -> bool {
    tracked_state(fd) == 1 && is_eventfd(fd)
}

fn with_record<T>(actions: usize, f: impl FnOnce(&mut Record) -> T) -> T {
    let mut all = ACTIONS.lock().unwrap_or_else(|p| p.into_inner());
    let k = match all.iter().position(|r| r.at == actions) {
        Some(k) => k,
        None => {
            all.push(Record { at: actions, ..Record::default() });
            all.len() - 1
        }
    };
    f(&mut all[k])
}

/// posix_spawn_file_actions_init of the object at `actions`: a record left for that address (an
/// object the program never destroyed) is forgotten, its sockets closed.
pub fn spawn_actions_init(actions: usize) {
    spawn_actions_destroy(actions);
}

/// posix_spawn_file_actions_destroy of the object at `actions`: the sockets its dup2 actions
/// were given in place of placeholders are closed, and its record goes.
pub fn spawn_actions_destroy(actions: usize) {
    let gone = {
        let mut all = ACTIONS.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().position(|r| r.at == actions).map(|k| all.swap_remove(k))
    };
    for (_, socket, _) in gone.map(|r| r.substituted).unwrap_or_default() {
        // SAFETY: a socket made here for that object, closed once.
        unsafe { real::close(socket) };
    }
}

/// posix_spawn_file_actions_adddup2(`actions`, `fd`, `new`): the fd the real call dups from.
/// A placeholder's place is taken by a kernel socket that was never connected.
pub fn spawn_dup2_source(actions: usize, fd: i32, new: i32) -> i32 {
    if !may_hold_placeholders() {
        return fd;
    }
    let source = if is_placeholder(fd) { unconnected_socket() } else { -1 };
    with_record(actions, |r| {
        r.targets.push(new);
        if source >= 0 {
            r.substituted.push((fd, source, new));
        }
    });
    if source >= 0 {
        source
    } else {
        fd
    }
}

/// An action of `actions` that closes or opens `fd` (addclose, addopen).
pub fn spawn_action_on(actions: usize, fd: i32) {
    if may_hold_placeholders() {
        with_record(actions, |r| r.targets.push(fd));
    }
}

/// A closefrom action of `actions` (posix_spawn_file_actions_addclosefrom_np) from `fd` up.
pub fn spawn_closes_from(actions: usize, fd: i32) {
    if may_hold_placeholders() {
        with_record(actions, |r| r.closes_from = Some(r.closes_from.map_or(fd, |f| f.min(fd))));
    }
}

/// Before posix_spawn with the file actions at `actions` (0: none): the dup2 actions to add for
/// this spawn, (a kernel socket that was never connected, the fd it goes to), for each
/// placeholder the program would inherit as it is. Says on stderr which of the program's fds
/// are such sockets, those the actions' own dup2s give it included. The caller closes the
/// sockets after the spawn ([`after_spawn`]).
pub fn before_spawn(actions: usize) -> Vec<(i32, i32)> {
    if !may_hold_placeholders() {
        return Vec::new();
    }
    let (targets, closes_from, given) = {
        let all = ACTIONS.lock().unwrap_or_else(|p| p.into_inner());
        all.iter().find(|r| r.at == actions && actions != 0).map_or((Vec::new(), None, Vec::new()), |r| {
            (r.targets.clone(), r.closes_from, r.substituted.iter().map(|&(_, _, new)| new).collect())
        })
    };
    let inherited: Vec<i32> = tracked_fds::with_state(1)
        .filter(|fd| !targets.contains(fd) && closes_from.map_or(true, |from| *fd < from))
        // SAFETY: F_GETFD takes no memory.
        .filter(|&fd| unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0)
        .filter(|&fd| is_eventfd(fd))
        .collect();
    let extra: Vec<(i32, i32)> =
        inherited.iter().map(|&fd| (unconnected_socket(), fd)).filter(|&(socket, _)| socket >= 0).collect();
    let mut fds: Vec<String> = given.iter().chain(extra.iter().map(|(_, fd)| fd)).map(i32::to_string).collect();
    fds.dedup();
    if !fds.is_empty() {
        let msg = format!(
            "pronghorn: pid {} spawns a program (posix_spawn) that would get accelerated socket(s) on fd(s) {}: there \
             they are sockets that were never connected (ENOTCONN, EPIPE)\n",
            std::process::id(),
            fds.join(", ")
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    extra
}

/// After posix_spawn: the sockets [`before_spawn`] made for it are closed (the program has its
/// copies).
pub fn after_spawn(extra: Vec<(i32, i32)>) {
    for (socket, _) in extra {
        // SAFETY: a socket made by before_spawn, closed once.
        unsafe { real::close(socket) };
    }
}
