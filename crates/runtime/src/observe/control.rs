//! The control socket: `pronghorn.<pid>.ctl` in the run directory, a Unix stream socket of
//! mode 0600 that also checks its peer's credentials (root or the process's own user). A
//! thread of its own (`pronghorn-ctl`, asleep in accept) answers one request per connection:
//!
//! - `stat`: the NIC's own counters read now and every counter copied into the region; `ok`.
//! - `conns`: a line per socket (`key=value` fields, see `conn_line`), then `end`.
//! - `pcap SNAPLEN`: a header (magic, shards, offset from the process's clock to the Unix
//!   epoch in ns), then a record per frame the shards receive or send, until the client goes
//!   away: at_ns u64, shard u32, direction u8 (0 in, 1 out, 255: `len` frames were dropped
//!   because the reader was slow), 3 zero bytes, len u32, caplen u32, caplen bytes; all
//!   little-endian.
//!
//! The thread's own socket calls go to the kernel (INSIDE), and it takes the runtime's lock
//! only to copy what it answers with, never while writing to the client.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

use nic::Nic;
use stack::shard::{CapturedFrame, Direction, SocketRow};

use crate::accel::{Accel, Runtime};
use crate::fdtable::Fd;
use crate::{real, INSIDE};

/// The pcap stream's first 16 bytes begin with this.
pub const PCAP_MAGIC: u32 = u32::from_le_bytes(*b"PHCP");

/// Frames a shard keeps for the reader between two visits (more are counted as dropped).
const CAPTURE_LIMIT: usize = 65_536;
/// How often a capture's frames are collected.
const CAPTURE_EVERY_MS: i32 = 10;

pub(crate) fn start<N: Nic + 'static>(me: &'static Accel<N>, path: PathBuf) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new().name("pronghorn-ctl".into()).spawn(move || {
        INSIDE.with(|i| i.set(true));
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if !peer_allowed(&stream) {
                let _ = (&stream).write_all(b"error: not the process's user\n");
                continue;
            }
            serve(me, stream);
        }
    })?;
    Ok(())
}

/// Root, or the user the process runs as.
fn peer_allowed(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        real::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    rc == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// Writes all of `buf` (MSG_NOSIGNAL: a reader that went away must not raise SIGPIPE in the
/// application). False when the reader is gone.
fn send_all(fd: i32, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        let n = unsafe { real::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        buf = &buf[n as usize..];
    }
    true
}

fn serve<N: Nic + 'static>(me: &'static Accel<N>, stream: UnixStream) {
    let fd = stream.as_raw_fd();
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    let mut words = line.split_whitespace();
    match words.next() {
        Some("stat") => {
            me.with(|rt| rt.publish(true, true));
            send_all(fd, b"ok\n");
        }
        Some("conns") => {
            let text = me.with(|rt| conns_text(rt)).unwrap_or_default();
            send_all(fd, text.as_bytes());
            send_all(fd, b"end\n");
        }
        Some("pcap") => {
            let snaplen = words.next().and_then(|w| w.parse::<usize>().ok()).unwrap_or(262_144);
            capture(me, &stream, snaplen);
        }
        _ => {
            send_all(fd, format!("error: unknown request {:?} (stat, conns, pcap SNAPLEN)\n", line.trim()).as_bytes());
        }
    }
}

/// The connection table, a line per socket.
fn conns_text<N: Nic + 'static>(rt: &mut Runtime<N>) -> String {
    let mut rows = Vec::new();
    for s in rt.shards.all() {
        s.socket_rows(&mut rows);
    }
    let mut out = String::new();
    for row in &rows {
        let fds = row.id.map(|id| rt.shards.known_as(id)).and_then(|id| rt.socks.get(id)).map(|st| st.fds.clone());
        out.push_str(&conn_line(row, fds.as_deref().unwrap_or(&[])));
        out.push('\n');
    }
    // Listeners made before the NIC opened and never turned into shard listeners.
    for fd in rt.fds.listening() {
        if let Some(Fd::Listening { local, backlog, .. }) = rt.fds.kind(fd) {
            out.push_str(&format!(
                "shard=- state=LISTEN proto=tcp local={local} peer=*:* recvq=0 sendq={backlog} fd={fd}\n"
            ));
        }
    }
    out
}

/// One socket as `key=value` fields (`pronghorn conns` parses them).
fn conn_line(row: &SocketRow, fds: &[i32]) -> String {
    let shard = row.id.map_or("-".to_string(), |id| id.shard().to_string());
    let fd =
        if fds.is_empty() { "-".to_string() } else { fds.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(",") };
    let peer = if row.peer.port() == 0 { "*:*".to_string() } else { row.peer.to_string() };
    let mut line = format!(
        "shard={shard} state={} proto={} local={} peer={peer} recvq={} sendq={} fd={fd}",
        row.state,
        if row.udp { "udp" } else { "tcp" },
        row.local,
        row.recv_q,
        row.send_q
    );
    if let Some(i) = &row.info {
        line.push_str(&format!(
            " cwnd={} ssthresh={} srtt_us={} rttvar_us={} rto_ms={} backoff={} retrans={} mss={} rcv_mss={} \
             snd_wscale={} rcv_wscale={} ts={} sack={} snd_wnd={} rcv_wnd={} unacked={} recovery={}",
            i.cwnd,
            i.ssthresh,
            i.rtt / 1000,
            i.rttvar / 1000,
            i.rto / 1_000_000,
            i.backoff,
            i.total_retransmits,
            i.snd_mss,
            i.rcv_mss,
            i.snd_wscale.map_or("-".to_string(), |w| w.to_string()),
            i.rcv_wscale.map_or("-".to_string(), |w| w.to_string()),
            i.timestamps as u8,
            i.sack as u8,
            i.snd_wnd,
            i.rcv_wnd,
            i.bytes_in_flight,
            i.in_recovery as u8,
        ));
    }
    line
}

/// Streams the frames the shards receive and send until the reader goes away.
fn capture<N: Nic + 'static>(me: &'static Accel<N>, stream: &UnixStream, snaplen: usize) {
    let fd = stream.as_raw_fd();
    let Some((shards, offset)) = me.with(|rt| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let wall = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
        for s in rt.shards.all_mut() {
            s.start_capture(snaplen, CAPTURE_LIMIT);
        }
        (rt.shards.len() as u32, wall - rt.now() as i64)
    }) else {
        return;
    };
    let mut head = Vec::with_capacity(16);
    head.extend_from_slice(&PCAP_MAGIC.to_le_bytes());
    head.extend_from_slice(&shards.to_le_bytes());
    head.extend_from_slice(&offset.to_le_bytes());
    let mut alive = send_all(fd, &head);
    let mut frames: Vec<(u32, CapturedFrame)> = Vec::new();
    let mut batch = Vec::new();
    let mut out = Vec::new();
    while alive {
        // Sleep until it is time to collect, or the reader hangs up.
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        if unsafe { real::poll(&mut p, 1, CAPTURE_EVERY_MS) } > 0 {
            let mut b = [0u8; 64];
            let n = unsafe { real::recv(fd, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
            if n <= 0 {
                break;
            }
        }
        let dropped: u64 = me
            .with(|rt| {
                let mut dropped = 0;
                for (k, s) in rt.shards.all_mut().iter_mut().enumerate() {
                    dropped += s.take_captured(&mut batch);
                    frames.extend(batch.drain(..).map(|f| (k as u32, f)));
                }
                dropped
            })
            .unwrap_or(0);
        out.clear();
        for (shard, f) in frames.drain(..) {
            out.extend_from_slice(&f.at_ns.to_le_bytes());
            out.extend_from_slice(&shard.to_le_bytes());
            out.push(if f.direction == Direction::Received { 0 } else { 1 });
            out.extend_from_slice(&[0, 0, 0]);
            out.extend_from_slice(&f.len.to_le_bytes());
            out.extend_from_slice(&(f.data.len() as u32).to_le_bytes());
            out.extend_from_slice(&f.data);
        }
        if dropped > 0 {
            out.extend_from_slice(&0u64.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&[255, 0, 0, 0]);
            out.extend_from_slice(&(dropped.min(u64::from(u32::MAX)) as u32).to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        alive = send_all(fd, &out);
    }
    me.with(|rt| {
        for s in rt.shards.all_mut() {
            s.stop_capture();
        }
    });
}
