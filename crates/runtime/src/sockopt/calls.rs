//! setsockopt and getsockopt on tracked sockets: kept in the open file's options, applied to
//! the shard socket where it has them.

use nic::Nic;
use stack::shard::Buffers;

use super::{int_of, positive, timeval_us, BufferLimits, MIN_RCVBUF, MIN_SNDBUF};
use crate::accel::Accel;
use crate::fdtable::Fd;
use crate::{Call, Errno};

impl<N: Nic + 'static> Accel<N> {
    /// setsockopt on a tracked socket. Options are kept (and applied to the shard socket where it
    /// has them); on a still-pending socket they also go to its kernel socket.
    pub fn setsockopt(&self, fd: i32, level: i32, name: i32, value: &[u8]) -> Call<()> {
        self.with(|rt| {
            // (the shard socket the option applies to, whether it is UDP, still pending)
            let (id, udp, pending) = match rt.fds.kind(fd) {
                Some(Fd::Conn { id, .. }) => (Some(*id), false, false),
                // Linux's UDP passes other levels to ip_setsockopt, which knows only SOL_IP.
                Some(Fd::Udp { .. }) if level == libc::IPPROTO_TCP => return Call::Done(Err(Errno(libc::ENOPROTOOPT))),
                Some(Fd::Udp { id, .. }) => (Some(*id), true, false),
                Some(Fd::Pending | Fd::UdpPending { .. }) => (None, false, true),
                Some(Fd::Bound { .. } | Fd::Listening { .. } | Fd::Listener { .. }) => (None, false, false),
                _ => return Call::Kernel,
            };
            let limits = rt.limits;
            // The open file's, which dup'd fds share.
            let o = &mut rt.fds.file_mut(fd).unwrap().opts;
            let int = int_of(value);
            let need_int = |v: Option<i32>| v.ok_or(Errno::EINVAL);
            let r: Result<(), Errno> = (|| {
                match (level, name) {
                    (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay = need_int(int)? != 0,
                    (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive = need_int(int)? != 0,
                    (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.keepidle_s = positive(need_int(int)?, 32767)?,
                    (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => o.keepintvl_s = positive(need_int(int)?, 32767)?,
                    (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => o.keepcnt = positive(need_int(int)?, 127)?,
                    (libc::SOL_SOCKET, libc::SO_LINGER) => {
                        if value.len() < 8 {
                            return Err(Errno::EINVAL);
                        }
                        let on = int_of(&value[..4]).unwrap() != 0;
                        let secs = int_of(&value[4..8]).unwrap().max(0) as u32;
                        o.linger_s = on.then_some(secs);
                    }
                    (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => {
                        o.rcvtimeo_us = timeval_us(value).ok_or(Errno(libc::EDOM))?
                    }
                    (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => {
                        o.sndtimeo_us = timeval_us(value).ok_or(Errno(libc::EDOM))?
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => o.v6only = need_int(int)? != 0,
                    (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = need_int(int)? != 0,
                    (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuseport = need_int(int)? != 0,
                    (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
                        o.rcvbuf = Some(BufferLimits::doubled(need_int(int)?, limits.rmem_max, MIN_RCVBUF));
                        o.rcvbuf_locked = true;
                    }
                    (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                        o.sndbuf = Some(BufferLimits::doubled(need_int(int)?, limits.wmem_max, MIN_SNDBUF));
                    }
                    (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => limits.set_rcvlowat(o, need_int(int)?),
                    (libc::SOL_SOCKET, libc::SO_OOBINLINE) => o.oobinline = need_int(int)? != 0,
                    _ => {}
                }
                Ok(())
            })();
            let o = *o;
            if let Err(e) = r {
                return Call::Done(Err(e));
            }
            if pending {
                return Call::Kernel;
            }
            if let Some(&Fd::Listener { id, .. }) = rt.fds.kind(fd) {
                if matches!((level, name), (libc::SOL_SOCKET, libc::SO_RCVBUF | libc::SO_SNDBUF | libc::SO_RCVLOWAT)) {
                    rt.set_listener_buffers(id, o.buffers());
                }
            }
            if let (Some(id), true) = (id, udp) {
                if (level, name) == (libc::SOL_SOCKET, libc::SO_RCVBUF) {
                    let _ = rt.shards.of(id).udp_set_rcvbuf(id, o.rcvbuf.map(|b| b as usize));
                }
            } else if let Some(id) = id {
                let shard = rt.shards.of(id);
                match (level, name) {
                    (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
                        let _ = shard.tcp_set_nodelay(id, o.nodelay);
                    }
                    (libc::SOL_SOCKET, libc::SO_KEEPALIVE)
                    | (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) => {
                        let _ = shard.tcp_set_keepalive(id, o.keepalive());
                    }
                    // Clearing TCP_CORK pushes the held tail out at once (corking is left to Nagle).
                    (libc::IPPROTO_TCP, libc::TCP_CORK) if int == Some(0) => {
                        let _ = shard.tcp_push(id);
                        rt.flush_shard();
                    }
                    (libc::SOL_SOCKET, libc::SO_RCVBUF | libc::SO_SNDBUF) => {
                        let _ = shard.tcp_set_buffers(id, o.buffers());
                    }
                    (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => {
                        // Readable or not may change now (Linux wakes readers too).
                        let _ = shard.tcp_set_buffers(id, Buffers { send: None, ..o.buffers() });
                        let _ = shard.tcp_set_rcvlowat(id, o.rcvlowat);
                        rt.flush_shard();
                    }
                    (libc::SOL_SOCKET, libc::SO_OOBINLINE) => {
                        let _ = shard.tcp_set_oob_inline(id, o.oobinline);
                    }
                    _ => {}
                }
            }
            Call::Done(Ok(()))
        })
        .unwrap_or(Call::Kernel)
    }

    /// getsockopt on an accelerated socket: the value written to `out`, its length.
    pub fn getsockopt(&self, fd: i32, level: i32, name: i32, out: &mut [u8]) -> Call<usize> {
        self.with(|rt| {
            let id = match rt.fds.kind(fd) {
                Some(Fd::Conn { id, .. } | Fd::Listener { id, .. } | Fd::Udp { id, .. }) => Some(*id),
                Some(Fd::Bound { .. } | Fd::Listening { .. }) => None,
                _ => return Call::Kernel,
            };
            let udp = matches!(rt.fds.kind(fd), Some(Fd::Udp { .. }));
            if udp && level == libc::IPPROTO_TCP {
                return Call::Done(Err(Errno(libc::EOPNOTSUPP)));
            }
            let o = rt.fds.opts(fd);
            let put_int = |out: &mut [u8], v: i32| -> Result<usize, Errno> {
                let n = out.len().min(4);
                if n == 0 {
                    return Err(Errno::EINVAL);
                }
                out[..n].copy_from_slice(&v.to_ne_bytes()[..n]);
                Ok(n)
            };
            let put_tv = |out: &mut [u8], us: u64| -> Result<usize, Errno> {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&((us / 1_000_000) as i64).to_ne_bytes());
                b[8..].copy_from_slice(&((us % 1_000_000) as i64).to_ne_bytes());
                let n = out.len().min(16);
                out[..n].copy_from_slice(&b[..n]);
                Ok(n)
            };
            let r = match (level, name) {
                (libc::SOL_SOCKET, libc::SO_ERROR) => {
                    let e = match id {
                        Some(id) if rt.shards.is_open() => {
                            rt.shards.of(id).take_error(id).ok().flatten().map_or(0, |e| e.0)
                        }
                        _ => 0,
                    };
                    put_int(out, e)
                }
                (libc::SOL_SOCKET, libc::SO_TYPE) => {
                    put_int(out, if udp { libc::SOCK_DGRAM } else { libc::SOCK_STREAM })
                }
                // What Python's socket(fileno=) reads of a socket it did not make (a received one).
                (libc::SOL_SOCKET, libc::SO_DOMAIN) => {
                    let v6 = o.v6 || matches!(rt.fds.kind(fd), Some(Fd::Udp { v6: true, .. }));
                    put_int(out, if v6 { libc::AF_INET6 } else { libc::AF_INET })
                }
                (libc::SOL_SOCKET, libc::SO_PROTOCOL) => {
                    put_int(out, if udp { libc::IPPROTO_UDP } else { libc::IPPROTO_TCP })
                }
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
                    let default = if udp { rt.limits.rmem_default } else { rt.limits.tcp_rmem[1] };
                    put_int(out, o.rcvbuf.unwrap_or(default) as i32)
                }
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                    let default = if udp { rt.limits.wmem_default } else { rt.limits.tcp_wmem[1] };
                    put_int(out, o.sndbuf.unwrap_or(default) as i32)
                }
                (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => put_int(out, o.rcvlowat as i32),
                (libc::SOL_SOCKET, libc::SO_OOBINLINE) => put_int(out, o.oobinline as i32),
                (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => {
                    put_int(out, matches!(rt.fds.kind(fd), Some(Fd::Listener { .. } | Fd::Listening { .. })) as i32)
                }
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => put_int(out, o.nodelay as i32),
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => put_int(out, o.keepalive as i32),
                (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => put_int(out, o.keepidle_s as i32),
                (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => put_int(out, o.keepintvl_s as i32),
                (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => put_int(out, o.keepcnt as i32),
                (libc::SOL_SOCKET, libc::SO_REUSEADDR) => put_int(out, o.reuseaddr as i32),
                (libc::SOL_SOCKET, libc::SO_REUSEPORT) => put_int(out, o.reuseport as i32),
                (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => put_int(out, o.v6only as i32),
                (libc::SOL_SOCKET, libc::SO_LINGER) => {
                    let mut b = [0u8; 8];
                    b[..4].copy_from_slice(&(o.linger_s.is_some() as i32).to_ne_bytes());
                    b[4..].copy_from_slice(&(o.linger_s.unwrap_or(0) as i32).to_ne_bytes());
                    let n = out.len().min(8);
                    out[..n].copy_from_slice(&b[..n]);
                    Ok(n)
                }
                (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => put_tv(out, o.rcvtimeo_us),
                (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => put_tv(out, o.sndtimeo_us),
                _ => Err(Errno(libc::ENOPROTOOPT)),
            };
            Call::Done(r)
        })
        .unwrap_or(Call::Kernel)
    }
}
