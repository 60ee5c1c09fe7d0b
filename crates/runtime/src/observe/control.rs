//! The control socket: `pronghorn.<pid>.ctl` in the run directory, a Unix stream socket of
//! mode 0600 that also checks its peer's credentials (root or the process's own user). A
//! thread of its own (`pronghorn-ctl`, asleep in accept) hands each connection to a thread that
//! answers its one request (at most `MAX_CLIENTS` at once, more are told so and closed), so a
//! client that never sends or never reads holds only its own. The request is one line of at most
//! `MAX_REQUEST` bytes that must arrive within `CLIENT_TIMEOUT_MS` of connecting; an answer the
//! client does not take for that long (SO_SNDTIMEO) ends the connection. Requests:
//!
//! - `stat`: the NIC's own counters read now and every counter copied into the region; `ok`.
//! - `conns`: a line per socket (`key=value` fields, see `conn_line`), then `end`.
//! - `pcap SNAPLEN`: a header (magic, shards, offset from the process's clock to the Unix
//!   epoch in ns), then a record per frame the shards receive or send, until the client goes
//!   away: at_ns u64, shard u32, direction u8 (0 in, 1 out, 255: `len` frames were dropped
//!   because the reader was slow), 3 zero bytes, len u32, caplen u32, caplen bytes; all
//!   little-endian. One capture at a time.
//!
//! The thread's own socket calls go to the kernel (INSIDE), and it takes the runtime's lock
//! only to copy what it answers with, never while writing to the client.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
/// The longest request line (longer: an error naming the limit).
pub const MAX_REQUEST: usize = 4096;
/// How long a client has to send its request, and to take each part of its answer.
pub const CLIENT_TIMEOUT_MS: i32 = 5000;
/// Connections served at once.
pub const MAX_CLIENTS: usize = 8;

/// Connections being served.
static CLIENTS: AtomicUsize = AtomicUsize::new(0);
/// Set while a capture runs (the shards keep one).
static CAPTURING: AtomicBool = AtomicBool::new(false);

pub(crate) fn start<N: Nic + 'static>(me: &'static Accel<N>, path: PathBuf) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    crate::threads::spawn("pronghorn-ctl".into(), move || {
        INSIDE.with(|i| i.set(true));
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if !peer_allowed(&stream) {
                let _ = (&stream).write_all(b"error: not the process's user\n");
                continue;
            }
            if CLIENTS.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                CLIENTS.fetch_sub(1, Ordering::AcqRel);
                send_all(stream.as_raw_fd(), format!("error: busy ({MAX_CLIENTS} clients already)\n").as_bytes());
                continue;
            }
            let spawned = crate::threads::spawn("pronghorn-ctl-client".into(), move || {
                INSIDE.with(|i| i.set(true));
                serve(me, stream);
                CLIENTS.fetch_sub(1, Ordering::AcqRel);
            });
            if spawned.is_err() {
                CLIENTS.fetch_sub(1, Ordering::AcqRel);
            }
        }
    })?;
    Ok(())
}

/// The request line on `fd`, read within `timeout_ms` of now and at most `MAX_REQUEST` bytes
/// long (without its newline; a client that closes after the line may omit it).
fn read_request(fd: i32, timeout_ms: i32) -> Result<String, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64);
    let mut line = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Some(end) = line.iter().position(|&b| b == b'\n') {
            line.truncate(end);
            break;
        }
        if line.len() > MAX_REQUEST {
            return Err(format!("request line longer than {MAX_REQUEST} bytes"));
        }
        let left_ms = deadline.saturating_duration_since(std::time::Instant::now()).as_nanos().div_ceil(1_000_000);
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd, `p`, which outlives the call.
        let ready = unsafe { real::poll(&mut p, 1, left_ms.min(i32::MAX as u128) as i32) };
        if ready < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if ready <= 0 {
            return Err(format!("no request line within {} ms", timeout_ms));
        }
        let want = chunk.len().min(MAX_REQUEST + 1 - line.len().min(MAX_REQUEST));
        // SAFETY: `want` <= chunk.len(): the kernel writes within `chunk`.
        let n = unsafe { real::recv(fd, chunk.as_mut_ptr().cast(), want, libc::MSG_DONTWAIT) };
        match n {
            0 => break,
            n if n > 0 => line.extend_from_slice(&chunk[..n as usize]),
            _ => match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => {}
                _ => return Err(format!("reading the request: {}", std::io::Error::last_os_error())),
            },
        }
    }
    if line.len() > MAX_REQUEST {
        return Err(format!("request line longer than {MAX_REQUEST} bytes"));
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Root, or the user the process runs as.
fn peer_allowed(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes at most `len` bytes (a ucred) into `cred` and the length
    // into `len`, both of which outlive the call; the fd is `stream`'s, open for the call.
    let rc = unsafe {
        real::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid takes no memory and cannot fail.
    rc == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// Writes all of `buf` (MSG_NOSIGNAL: a reader that went away must not raise SIGPIPE in the
/// application). False when the reader is gone.
fn send_all(fd: i32, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: `buf` is readable for buf.len() bytes.
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
    let _ = stream.set_write_timeout(Some(std::time::Duration::from_millis(CLIENT_TIMEOUT_MS as u64)));
    let line = match read_request(fd, CLIENT_TIMEOUT_MS) {
        Ok(line) => line,
        Err(e) => {
            send_all(fd, format!("error: {e}\n").as_bytes());
            return;
        }
    };
    let mut words = line.split_whitespace();
    match words.next() {
        Some("stat") => {
            // A reader: the lock's holds are worth timing from now on.
            me.lock_stats().time_holds();
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
            if CAPTURING.swap(true, Ordering::AcqRel) {
                send_all(fd, b"error: a capture is already running (one at a time)\n");
                return;
            }
            capture(me, &stream, snaplen);
            CAPTURING.store(false, Ordering::Release);
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
        // SAFETY: clock_gettime writes only the timespec it is given, which outlives the call.
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
        // SAFETY: one pollfd, `p`, which outlives the call.
        if unsafe { real::poll(&mut p, 1, CAPTURE_EVERY_MS) } > 0 {
            let mut b = [0u8; 64];
            // SAFETY: the kernel writes at most b.len() bytes into `b`.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }

    #[test]
    fn a_request_line_is_capped() {
        let (mut client, server) = pair();
        client.write_all(&vec![b'x'; MAX_REQUEST + 1]).unwrap();
        let e = read_request(server.as_raw_fd(), CLIENT_TIMEOUT_MS).unwrap_err();
        assert!(e.contains("longer than 4096 bytes"), "{e}");
        let (mut client, server) = pair();
        client.write_all(&[vec![b'x'; MAX_REQUEST], b"\n".to_vec()].concat()).unwrap();
        assert_eq!(read_request(server.as_raw_fd(), CLIENT_TIMEOUT_MS).unwrap().len(), MAX_REQUEST);
    }

    #[test]
    fn a_client_that_sends_nothing_times_out() {
        let (mut client, server) = pair();
        client.write_all(b"sta").unwrap();
        let e = read_request(server.as_raw_fd(), 1).unwrap_err();
        assert!(e.contains("no request line within"), "{e}");
        client.write_all(b"t\n").unwrap();
    }

    #[test]
    fn a_request_split_over_writes_is_one_line() {
        let (mut client, server) = pair();
        client.write_all(b"co").unwrap();
        client.write_all(b"nns\nrest").unwrap();
        assert_eq!(read_request(server.as_raw_fd(), CLIENT_TIMEOUT_MS).unwrap(), "conns");
        let (mut client, server) = pair();
        client.write_all(b"stat").unwrap();
        drop(client);
        assert_eq!(read_request(server.as_raw_fd(), CLIENT_TIMEOUT_MS).unwrap(), "stat");
    }

    /// A client that connects and sends nothing does not keep the next one from its answer.
    #[test]
    fn a_silent_client_does_not_block_the_others() {
        use std::io::{BufRead, BufReader};
        let toml = "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"10.0.0.1/24\"\n";
        let cfg = config::Config::parse(toml, std::path::Path::new("control.toml")).unwrap();
        let (nic, _peer) = testkit::mem::pair(testkit::mem::MemConfig::default());
        let me = Accel::with_nic(cfg, nic);
        let dir = std::env::temp_dir().join(format!("pronghorn-control-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.ctl");
        start(me, path.clone()).unwrap();
        let _silent = UnixStream::connect(&path).unwrap();
        let mut asking = UnixStream::connect(&path).unwrap();
        asking.write_all(b"conns\n").unwrap();
        let lines: Vec<String> = BufReader::new(asking).lines().map(|l| l.unwrap()).collect();
        assert_eq!(lines.last().map(String::as_str), Some("end"), "{lines:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
