//! Socket options on tracked sockets: kept per fd (accepted sockets inherit their listener's),
//! applied to the shard's connection where it has them, passed on to the kernel socket while a
//! socket is still pending, and read back as Linux reports them.

use nic::Nic;

use crate::accel::Accel;
use crate::fdtable::Fd;
use crate::{Call, Errno};

fn int_of(v: &[u8]) -> Option<i32> {
    v.get(..4).map(|b| i32::from_ne_bytes(b.try_into().unwrap()))
}

fn timeval_us(v: &[u8]) -> Option<u64> {
    if v.len() < 16 {
        return None;
    }
    let sec = i64::from_ne_bytes(v[..8].try_into().unwrap());
    let usec = i64::from_ne_bytes(v[8..16].try_into().unwrap());
    (sec >= 0 && (0..1_000_000).contains(&usec)).then(|| sec as u64 * 1_000_000 + usec as u64)
}

fn positive(v: i32, max: i32) -> Result<u32, Errno> {
    if (1..=max).contains(&v) {
        Ok(v as u32)
    } else {
        Err(Errno::EINVAL)
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// setsockopt on a tracked socket. Options are kept (and applied to the shard socket where it
    /// has them); on a still-pending socket they also go to its kernel socket.
    pub fn setsockopt(&self, fd: i32, level: i32, name: i32, value: &[u8]) -> Call<()> {
        self.with(|rt| {
            let pending = matches!(rt.fds.kind(fd), Some(Fd::Pending { .. } | Fd::UdpPending { .. }));
            let id = match rt.fds.kind(fd) {
                Some(Fd::Conn { id, .. }) => Some(*id),
                // Linux's UDP passes other levels to ip_setsockopt, which knows only SOL_IP.
                Some(Fd::Udp { .. }) if level == libc::IPPROTO_TCP => return Call::Done(Err(Errno(libc::ENOPROTOOPT))),
                Some(
                    Fd::Pending { .. }
                    | Fd::Bound { .. }
                    | Fd::Listening { .. }
                    | Fd::Listener { .. }
                    | Fd::UdpPending { .. }
                    | Fd::Udp { .. },
                ) => None,
                _ => return Call::Kernel,
            };
            let o = &mut rt.fds.get_mut(fd).unwrap().opts;
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
            if let Some(id) = id {
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
            let o = rt.fds.get(fd).unwrap().opts;
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
                (libc::SOL_SOCKET, libc::SO_SNDBUF | libc::SO_RCVBUF) => put_int(out, 131_072),
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
