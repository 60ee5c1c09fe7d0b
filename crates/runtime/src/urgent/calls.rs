//! F_SETOWN_EX/F_GETOWN_EX kept over the placeholder swap, MSG_OOB reads and SIOCATMARK on
//! accelerated connections, and SIGURG to the owner when urgent data arrives.

use nic::Nic;

use super::SignalOwner;
use crate::accel::{Accel, Runtime};
use crate::fdtable::Fd;
use crate::{Call, Errno};

impl<N: Nic + 'static> Runtime<N> {
    /// The shards named connections with new urgent data (`urgent`): owe their owners a SIGURG.
    pub(crate) fn owe_sigurg(&mut self) {
        let mut ids = std::mem::take(&mut self.urgent);
        for id in ids.drain(..) {
            let owner = self.socks.get(id).and_then(|st| st.fds.first().copied()).and_then(SignalOwner::of);
            self.sigurg.extend(owner);
        }
        self.urgent = ids;
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// `recv(..., MSG_OOB)`: the urgent byte into `buf` (never waits). Linux's answers: EINVAL
    /// without urgent data, once it was read or with SO_OOBINLINE (and on a socket never
    /// connected); ENOTCONN on a listener; EAGAIN while the byte is announced but has not
    /// arrived; 0 at the end of the stream. `peek` (MSG_PEEK) leaves it.
    pub fn recv_urgent(&self, fd: i32, buf: &mut [u8], peek: bool) -> Call<usize> {
        self.with(|rt| {
            let id = match rt.fds.kind(fd) {
                Some(Fd::Conn { id, .. }) => *id,
                Some(Fd::Listener { .. }) => return Call::Done(Err(Errno::ENOTCONN)),
                Some(Fd::Bound { .. } | Fd::Listening { .. }) => return Call::Done(Err(Errno::EINVAL)),
                _ => return Call::Kernel,
            };
            Call::Done(rt.shards.of(id).tcp_recv_urgent(id, peek).map(|byte| match (byte, buf.first_mut()) {
                (Some(b), Some(slot)) => {
                    *slot = b;
                    1
                }
                _ => 0,
            }))
        })
        .unwrap_or(Call::Kernel)
    }

    /// SIOCATMARK: whether the reader stands at the urgent mark (0 on a socket without one,
    /// a listener included).
    pub fn at_mark(&self, fd: i32) -> Call<bool> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(&Fd::Conn { id, .. }) => Call::Done(rt.shards.of(id).tcp_urgent_mark(id).map(|m| m == Some(0))),
            Some(Fd::Listener { .. } | Fd::Bound { .. } | Fd::Listening { .. }) => Call::Done(Ok(false)),
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }

    /// `send(..., MSG_OOB)`: `send`, and the last byte taken is urgent data.
    pub fn send_urgent(&self, fd: i32, data: &[u8], dontwait: bool) -> Call<usize> {
        self.send_marked(fd, &[std::io::IoSlice::new(data)], dontwait, true)
    }
}
