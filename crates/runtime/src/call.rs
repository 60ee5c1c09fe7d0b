//! What a socket call of the shim answers: [`Call`] (the kernel's to handle, or done with a
//! result or an errno), and the errno of the system call that just failed. It depends on nothing
//! else of the runtime: every module that answers a call uses it.

use stack::Errno;

/// The answer to a call: the kernel should handle it, or here is the result.
pub enum Call<T> {
    Kernel,
    Done(Result<T, Errno>),
}

/// The errno the last failed system call of this thread left (EIO if there is none).
pub(crate) fn last_errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}
