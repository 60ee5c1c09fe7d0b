//! [`Errno`]: the error of every socket call, a Linux errno value with Linux's meaning (the shard
//! returns them, the runtime hands them to the application unchanged). It knows only numbers and
//! how to print them; which call returns which errno is decided where the call is.

/// A Linux errno value, as the socket calls return them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const EACCES: Errno = Errno(13);
    pub const EINVAL: Errno = Errno(22);
    pub const EPIPE: Errno = Errno(32);
    pub const EDESTADDRREQ: Errno = Errno(89);
    pub const EMSGSIZE: Errno = Errno(90);
    pub const ENOPROTOOPT: Errno = Errno(92);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EAFNOSUPPORT: Errno = Errno(97);
    pub const EADDRINUSE: Errno = Errno(98);
    pub const EADDRNOTAVAIL: Errno = Errno(99);
    pub const ENETUNREACH: Errno = Errno(101);
    pub const ECONNRESET: Errno = Errno(104);
    pub const EISCONN: Errno = Errno(106);
    pub const ENOTCONN: Errno = Errno(107);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const ECONNREFUSED: Errno = Errno(111);
    pub const EHOSTUNREACH: Errno = Errno(113);
}

impl From<tcp::Error> for Errno {
    fn from(e: tcp::Error) -> Errno {
        Errno(e.errno())
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}
