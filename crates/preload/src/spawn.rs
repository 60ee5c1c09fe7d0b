//! posix_spawn, posix_spawnp and the file actions they take: the runtime decides which of the
//! program's fds must be a kernel socket that was never connected instead of an accelerated
//! socket's placeholder (`runtime::process::spawn`); the hooks make the real calls.

use libc::{c_char, c_int, mode_t, pid_t, posix_spawn_file_actions_t, posix_spawnattr_t};
use runtime::real;

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_init(actions: *mut posix_spawn_file_actions_t) -> c_int {
    runtime::spawn_actions_init(actions as usize);
    // SAFETY: the caller's object, under the function's contract.
    unsafe { real::posix_spawn_file_actions_init(actions) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_destroy(actions: *mut posix_spawn_file_actions_t) -> c_int {
    runtime::spawn_actions_destroy(actions as usize);
    // SAFETY: the caller's object, under the function's contract.
    unsafe { real::posix_spawn_file_actions_destroy(actions) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_adddup2(
    actions: *mut posix_spawn_file_actions_t,
    fd: c_int,
    new: c_int,
) -> c_int {
    let source = runtime::spawn_dup2_source(actions as usize, fd, new);
    // SAFETY: the caller's object, under the function's contract.
    unsafe { real::posix_spawn_file_actions_adddup2(actions, source, new) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_addclose(
    actions: *mut posix_spawn_file_actions_t,
    fd: c_int,
) -> c_int {
    runtime::spawn_action_on(actions as usize, fd);
    // SAFETY: the caller's object, under the function's contract.
    unsafe { real::posix_spawn_file_actions_addclose(actions, fd) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_addopen(
    actions: *mut posix_spawn_file_actions_t,
    fd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    runtime::spawn_action_on(actions as usize, fd);
    // SAFETY: the caller's object and path, under the function's contract.
    unsafe { real::posix_spawn_file_actions_addopen(actions, fd, path, flags, mode) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_addclosefrom_np(
    actions: *mut posix_spawn_file_actions_t,
    from: c_int,
) -> c_int {
    runtime::spawn_closes_from(actions as usize, from);
    // SAFETY: the caller's object, under the function's contract.
    unsafe { real::posix_spawn_file_actions_addclosefrom_np(actions, from) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    actions: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: the caller's arguments go on unchanged but for the actions (`spawned`).
    unsafe { spawned(actions, |a| real::posix_spawn(pid, path, a, attr, argv, envp)) }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    actions: *const posix_spawn_file_actions_t,
    attr: *const posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    // SAFETY: the caller's arguments go on unchanged but for the actions (`spawned`).
    unsafe { spawned(actions, |a| real::posix_spawnp(pid, file, a, attr, argv, envp)) }
}

/// Runs `spawn` with the file actions `actions` (null: none) and, for this spawn only, one dup2
/// action more for each placeholder the program would inherit as it is (`runtime::before_spawn`):
/// appended to the caller's object and taken off again after (glibc's `__used`, the second int
/// of the object in <spawn.h>; entries past it are ignored), or in an object of its own when the
/// caller gave none. The added actions follow the caller's, which never close, open or dup
/// onto those fds.
///
/// # Safety
/// `actions` is null or an initialised file-actions object that no other thread changes or
/// spawns with meanwhile.
unsafe fn spawned(
    actions: *const posix_spawn_file_actions_t,
    spawn: impl FnOnce(*const posix_spawn_file_actions_t) -> c_int,
) -> c_int {
    let extra = runtime::before_spawn(actions as usize);
    if extra.is_empty() {
        return spawn(actions);
    }
    // SAFETY: a zeroed object is initialised before use and destroyed after; the caller's is
    // initialised (the contract): its `__used` count is read before and written back after.
    unsafe {
        let mut own: posix_spawn_file_actions_t = std::mem::zeroed();
        let (target, used) = if actions.is_null() {
            real::posix_spawn_file_actions_init(&mut own);
            (&mut own as *mut posix_spawn_file_actions_t, None)
        } else {
            let target = actions as *mut posix_spawn_file_actions_t;
            (target, Some(*(target as *const c_int).add(1)))
        };
        for &(socket, fd) in &extra {
            real::posix_spawn_file_actions_adddup2(target, socket, fd);
        }
        let rc = spawn(target);
        match used {
            None => {
                real::posix_spawn_file_actions_destroy(&mut own);
            }
            Some(n) => *(target as *mut c_int).add(1) = n,
        }
        runtime::after_spawn(extra);
        rc
    }
}
