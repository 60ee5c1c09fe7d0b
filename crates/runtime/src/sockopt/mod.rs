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
//!
//! This module holds the buffer limits and the option values' encodings; `calls` serves
//! setsockopt and getsockopt.

mod calls;

use crate::fdtable::SockOpts;
use crate::Errno;

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
