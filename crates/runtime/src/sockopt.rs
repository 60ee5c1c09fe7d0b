//! Socket options on tracked sockets: kept per fd (accepted sockets inherit their listener's),
//! applied to the shard's connection where it has them, passed on to the kernel socket while a
//! socket is still pending, and read back as Linux reports them.
//!
//! SO_RCVBUF and SO_SNDBUF follow socket(7) on this host: the value is doubled, clamped by
//! `net.core.rmem_max`/`wmem_max` and Linux's minimums, and read back doubled; a socket that
//! set none reads back `tcp_rmem[1]`/`tcp_wmem[1]` (`BufferLimits`, read once from /proc). The
//! value read back is the buffer's size in bytes of data: pronghorn's buffers hold payload
//! only, where Linux's count its skb overhead too (measured here: a receive buffer read back
//! as N holds 0.77 N to 0.9 N of data on Linux, a send buffer about N). A socket that set
//! none starts with the shard's buffers (128 KiB each), which autotuning grows up to this
//! host's `tcp_rmem[2]`/`tcp_wmem[2]` as Linux's does (read back still as `tcp_rmem[1]`/
//! `tcp_wmem[1]`, where Linux reports the grown size); setting one fixes it.

use nic::Nic;
use stack::shard::Buffers;

use crate::accel::Accel;
use crate::fdtable::{Fd, SockOpts};
use crate::{Call, Errno};

/// Linux's smallest buffers (`SOCK_MIN_RCVBUF`, `SOCK_MIN_SNDBUF`: 2048 bytes plus an
/// `sk_buff`, once and twice; read back on this kernel after setting 0).
const MIN_RCVBUF: u32 = 2304;
const MIN_SNDBUF: u32 = 4608;

/// The host's socket-buffer limits and defaults (socket(7), tcp(7)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferLimits {
    /// `net.core.rmem_max`, `net.core.wmem_max`: the most SO_RCVBUF/SO_SNDBUF may ask for.
    pub rmem_max: u32,
    pub wmem_max: u32,
    /// `net.core.rmem_default`, `wmem_default`: what a UDP socket that set none reads back.
    pub rmem_default: u32,
    pub wmem_default: u32,
    /// `net.ipv4.tcp_rmem`, `tcp_wmem`: min, default, max.
    pub tcp_rmem: [u32; 3],
    pub tcp_wmem: [u32; 3],
}

impl BufferLimits {
    /// The values of this network namespace, or Linux's defaults where a file cannot be read.
    pub(crate) fn read() -> BufferLimits {
        let read = |path: &str, default: &[u32]| -> Vec<u32> {
            let values: Option<Vec<u32>> =
                std::fs::read_to_string(path).ok().and_then(|t| t.split_whitespace().map(|w| w.parse().ok()).collect());
            values.filter(|v| v.len() == default.len()).unwrap_or_else(|| default.to_vec())
        };
        let triple = |v: Vec<u32>| [v[0], v[1], v[2]];
        BufferLimits {
            rmem_max: read("/proc/sys/net/core/rmem_max", &[212_992])[0],
            wmem_max: read("/proc/sys/net/core/wmem_max", &[212_992])[0],
            rmem_default: read("/proc/sys/net/core/rmem_default", &[212_992])[0],
            wmem_default: read("/proc/sys/net/core/wmem_default", &[212_992])[0],
            tcp_rmem: triple(read("/proc/sys/net/ipv4/tcp_rmem", &[4096, 131_072, 6_291_456])),
            tcp_wmem: triple(read("/proc/sys/net/ipv4/tcp_wmem", &[4096, 16_384, 4_194_304])),
        }
    }

    /// What SO_RCVBUF/SO_SNDBUF `asked` becomes (Linux's `__sock_set_rcvbuf`: the request, as
    /// unsigned, clamped by `max`, doubled, at least `min`).
    fn doubled(asked: i32, max: u32, min: u32) -> u32 {
        let v = (asked as u32).min(max).min(i32::MAX as u32 / 2);
        (v * 2).max(min)
    }

    /// SO_RCVLOWAT `asked` on a socket with options `o` (Linux's `tcp_set_rcvlowat`): negative
    /// is INT_MAX, capped at half the buffer (half of `tcp_rmem[2]` while the buffer is not
    /// set), 0 is 1; an unset buffer grows to twice the mark (Linux's window-to-space ratio on
    /// a fresh socket) so that the mark can be reached.
    fn set_rcvlowat(&self, o: &mut SockOpts, asked: i32) {
        let asked = if asked < 0 { i32::MAX as u32 } else { asked as u32 };
        let cap = if o.rcvbuf_locked { o.rcvbuf.unwrap_or(self.tcp_rmem[1]) / 2 } else { self.tcp_rmem[2] / 2 };
        o.rcvlowat = asked.min(cap).max(1);
        let space = o.rcvlowat.saturating_mul(2);
        if !o.rcvbuf_locked && space > o.rcvbuf.unwrap_or(self.tcp_rmem[1]) {
            o.rcvbuf = Some(space);
        }
    }
}

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

/// Linux's `struct tcp_info` from the connection's snapshot (times in microseconds).
pub(crate) fn linux_tcp_info(i: &stack::TcpInfo) -> libc::tcp_info {
    // SAFETY: struct tcp_info is integers only: all zeroes is a valid value.
    let mut t: libc::tcp_info = unsafe { std::mem::zeroed() };
    t.tcpi_state = match i.state {
        stack::TcpState::Established => 1,
        stack::TcpState::SynSent => 2,
        stack::TcpState::SynReceived => 3,
        stack::TcpState::FinWait1 => 4,
        stack::TcpState::FinWait2 => 5,
        stack::TcpState::TimeWait => 6,
        stack::TcpState::Closed => 7,
        stack::TcpState::CloseWait => 8,
        stack::TcpState::LastAck => 9,
        stack::TcpState::Closing => 11,
    };
    t.tcpi_backoff = i.backoff;
    t.tcpi_retransmits = i.backoff;
    t.tcpi_options = (i.timestamps as u8) | ((i.sack as u8) << 1) | (((i.snd_wscale.is_some()) as u8) << 2);
    t.tcpi_snd_rcv_wscale = i.snd_wscale.unwrap_or(0) | (i.rcv_wscale.unwrap_or(0) << 4);
    t.tcpi_rto = (i.rto / 1000) as u32;
    t.tcpi_snd_mss = i.snd_mss;
    t.tcpi_rcv_mss = i.rcv_mss;
    t.tcpi_rtt = (i.rtt / 1000) as u32;
    t.tcpi_rttvar = (i.rttvar / 1000) as u32;
    t.tcpi_snd_ssthresh = i.ssthresh / i.snd_mss.max(1);
    t.tcpi_snd_cwnd = i.cwnd / i.snd_mss.max(1);
    t.tcpi_total_retrans = i.total_retransmits;
    t.tcpi_unacked = i.bytes_in_flight / i.snd_mss.max(1);
    t
}
