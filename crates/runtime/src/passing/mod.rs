//! Passing fds to another process (SCM_RIGHTS over a unix socket): what the shim may let go.
//!
//! An accelerated socket's fd is a placeholder (an eventfd of the same number) and its
//! connection lives in this process's shard: another process that received the fd would hold
//! an eventfd that never carries a byte, a socket that silently receives nothing. So a message
//! that passes one is refused with EOPNOTSUPP, said once on stderr, until a shared stack lets
//! the receiver use it (issue 24). A TCP or UDP socket still on the kernel (not yet bound to
//! an accelerated address or connected) is a real kernel socket and goes as it is; so does
//! every other fd. Which fds are accelerated sockets the fd table says (`Accel::first_accelerated`,
//! in socket.rs); this module owns what the process says when it refuses.

use std::sync::atomic::{AtomicBool, Ordering};

use stack::Errno;

use crate::real;

/// Says once per process on stderr why a message passing accelerated `fd` was refused.
pub(crate) fn say_refused(fd: i32) -> Errno {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let msg = format!(
            "pronghorn: pid {} tried to pass accelerated socket fd {fd} to another process (SCM_RIGHTS): its \
             connection lives in this process's stack and the receiver could not use it, so the message is \
             refused with EOPNOTSUPP (keep the socket in this process, or run the server without pronghorn)\n",
            std::process::id()
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    Errno::EOPNOTSUPP
}
