//! The real libc functions, found once with `dlsym(RTLD_NEXT)`. Inside the preloaded library a
//! plain `libc::close` would resolve to our own `close`: everything here must call these.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

macro_rules! real_fns {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            /// Calls the libc function of this name.
            ///
            /// # Safety
            /// The C function's contract for its arguments.
            #[allow(non_snake_case)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static PTR: AtomicUsize = AtomicUsize::new(0);
                let mut p = PTR.load(Ordering::Relaxed);
                if p == 0 {
                    // SAFETY: an identifier and one NUL: no NUL inside.
                    let sym = unsafe { CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) };
                    // SAFETY: dlsym takes a pseudo-handle and a NUL-terminated name, and returns an
                    // address or null.
                    p = unsafe { libc::dlsym(libc::RTLD_NEXT, sym.as_ptr()) } as usize;
                    if p == 0 {
                        // Not preloaded (tests, the CLI): the default lookup is libc's.
                        // SAFETY: as above.
                        p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, sym.as_ptr()) } as usize;
                    }
                    assert!(p != 0, "pronghorn: libc has no {}", stringify!($name));
                    PTR.store(p, Ordering::Relaxed);
                }
                // SAFETY: `p` is the non-null address of libc's function of this name, whose C
                // prototype is the signature declared for it below (fcntl's and ioctl's third,
                // variadic argument is an integer, which x86-64 passes in the same register either
                // way). Relaxed suffices: the code it points to is mapped before dlsym answers.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(p) };
                // SAFETY: the caller's contract for the C function, whose arguments go on unchanged.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

use libc::{
    c_int, c_uint, c_ulong, c_void, epoll_event, iovec, msghdr, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t,
};

real_fns! {
    socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    listen(fd: c_int, backlog: c_int) -> c_int;
    accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
    getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
    read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
    send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t;
    recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    close(fd: c_int) -> c_int;
    shutdown(fd: c_int, how: c_int) -> c_int;
    fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(fd: c_int, fd2: c_int) -> c_int;
    dup3(fd: c_int, fd2: c_int, flags: c_int) -> c_int;
    epoll_create1(flags: c_int) -> c_int;
    epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int;
    epoll_wait(epfd: c_int, evs: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
    poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    eventfd(initval: c_uint, flags: c_int) -> c_int;
    fork() -> libc::pid_t;
    pthread_create(
        thread: *mut libc::pthread_t,
        attr: *const libc::pthread_attr_t,
        start: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void
    ) -> c_int;
    _Fork() -> libc::pid_t;
    daemon(nochdir: c_int, noclose: c_int) -> c_int;
    pread(fd: c_int, buf: *mut c_void, n: size_t, off: libc::off_t) -> ssize_t;
    sendfile(out: c_int, input: c_int, off: *mut libc::off_t, n: size_t) -> ssize_t;
    ppoll(fds: *mut pollfd, n: nfds_t, ts: *const libc::timespec, mask: *const libc::sigset_t) -> c_int;
    select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, tv: *mut libc::timeval) -> c_int;
    pselect(
        n: c_int,
        r: *mut libc::fd_set,
        w: *mut libc::fd_set,
        e: *mut libc::fd_set,
        ts: *const libc::timespec,
        mask: *const libc::sigset_t
    ) -> c_int;
    recvmmsg(fd: c_int, msgs: *mut libc::mmsghdr, n: c_uint, flags: c_int, timeout: *mut libc::timespec) -> c_int;
    sendmmsg(fd: c_int, msgs: *mut libc::mmsghdr, n: c_uint, flags: c_int) -> c_int;
    setuid(uid: libc::uid_t) -> c_int;
    setgid(gid: libc::gid_t) -> c_int;
    seteuid(uid: libc::uid_t) -> c_int;
    setegid(gid: libc::gid_t) -> c_int;
    setreuid(r: libc::uid_t, e: libc::uid_t) -> c_int;
    setregid(r: libc::gid_t, e: libc::gid_t) -> c_int;
    setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t) -> c_int;
    setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t) -> c_int;
    setgroups(n: size_t, groups: *const libc::gid_t) -> c_int;
    initgroups(user: *const libc::c_char, group: libc::gid_t) -> c_int;
    execve(path: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    execv(path: *const libc::c_char, argv: *const *const libc::c_char) -> c_int;
    execvp(file: *const libc::c_char, argv: *const *const libc::c_char) -> c_int;
    execvpe(file: *const libc::c_char, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    fexecve(fd: c_int, argv: *const *const libc::c_char, envp: *const *const libc::c_char) -> c_int;
    posix_spawn(
        pid: *mut libc::pid_t,
        path: *const libc::c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut libc::c_char,
        envp: *const *mut libc::c_char
    ) -> c_int;
    posix_spawnp(
        pid: *mut libc::pid_t,
        file: *const libc::c_char,
        actions: *const libc::posix_spawn_file_actions_t,
        attr: *const libc::posix_spawnattr_t,
        argv: *const *mut libc::c_char,
        envp: *const *mut libc::c_char
    ) -> c_int;
    posix_spawn_file_actions_init(actions: *mut libc::posix_spawn_file_actions_t) -> c_int;
    posix_spawn_file_actions_destroy(actions: *mut libc::posix_spawn_file_actions_t) -> c_int;
    posix_spawn_file_actions_adddup2(actions: *mut libc::posix_spawn_file_actions_t, fd: c_int, new: c_int) -> c_int;
    posix_spawn_file_actions_addclose(actions: *mut libc::posix_spawn_file_actions_t, fd: c_int) -> c_int;
    posix_spawn_file_actions_addopen(
        actions: *mut libc::posix_spawn_file_actions_t,
        fd: c_int,
        path: *const libc::c_char,
        flags: c_int,
        mode: libc::mode_t
    ) -> c_int;
    posix_spawn_file_actions_addclosefrom_np(actions: *mut libc::posix_spawn_file_actions_t, from: c_int) -> c_int;
    execveat(
        dirfd: c_int,
        path: *const libc::c_char,
        argv: *const *const libc::c_char,
        envp: *const *const libc::c_char,
        flags: c_int
    ) -> c_int;
}
