//! The echo and discard services of `pronghorn echo` (RFC 862 and RFC 863), and a checking
//! client, written against the shard's socket API like any application.
//!
//! The server: TCP echo and UDP echo on port 7, TCP discard on port 9, IPv4 and IPv6. Echo
//! reads only as much as it can send back (back-pressure instead of buffering without bound);
//! at the end of the client's stream it closes after the echoed bytes. The client: connects,
//! sends a pseudo-random stream of a given length, reads the echo back and compares every byte
//! with the stream it sent (regenerated from the seed, so nothing is buffered).

use std::collections::HashMap;
use std::net::{Ipv6Addr, SocketAddr};

use nic::Nic;

use crate::shard::{Errno, Shard, SocketId};

pub const ECHO_PORT: u16 = 7;
pub const DISCARD_PORT: u16 = 9;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Echo,
    Discard,
}

/// Counters of the services.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EchoStats {
    pub accepted: u64,
    pub closed: u64,
    pub echoed_bytes: u64,
    pub discarded_bytes: u64,
    pub udp_echoed: u64,
    pub errors: u64,
}

/// TCP echo and discard, UDP echo, on a shard.
pub struct EchoServer {
    echo: SocketId,
    discard: SocketId,
    udp: SocketId,
    conns: HashMap<SocketId, Kind>,
    changed: Vec<SocketId>,
    buf: Vec<u8>,
    stats: EchoStats,
}

impl EchoServer {
    /// Listens on `[::]:7` and `[::]:9` (IPv4 too) and binds UDP `[::]:7`.
    pub fn start<N: Nic>(shard: &mut Shard<N>, backlog: usize) -> Result<EchoServer, Errno> {
        let any = |port| SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port);
        Ok(EchoServer {
            echo: shard.tcp_listen(any(ECHO_PORT), backlog)?,
            discard: shard.tcp_listen(any(DISCARD_PORT), backlog)?,
            udp: shard.udp_bind(any(ECHO_PORT))?,
            conns: HashMap::new(),
            changed: Vec::new(),
            buf: vec![0; 64 * 1024],
            stats: EchoStats::default(),
        })
    }

    pub fn stats(&self) -> &EchoStats {
        &self.stats
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Serves every socket whose readiness changed since the last call.
    pub fn serve<N: Nic>(&mut self, shard: &mut Shard<N>) {
        let mut changed = std::mem::take(&mut self.changed);
        shard.take_changed(&mut changed);
        for id in changed.drain(..) {
            if id == self.echo || id == self.discard {
                let kind = if id == self.echo { Kind::Echo } else { Kind::Discard };
                while let Ok((c, _)) = shard.tcp_accept(id) {
                    self.stats.accepted += 1;
                    self.conns.insert(c, kind);
                    self.pump(shard, c, kind);
                }
            } else if id == self.udp {
                while let Ok((n, from)) = shard.udp_recv_from(id, &mut self.buf) {
                    let n = n.min(self.buf.len());
                    if shard.udp_send_to(id, &self.buf[..n], from).is_ok() {
                        self.stats.udp_echoed += 1;
                    }
                }
            } else if let Some(&kind) = self.conns.get(&id) {
                self.pump(shard, id, kind);
            }
        }
        self.changed = changed;
    }

    fn pump<N: Nic>(&mut self, shard: &mut Shard<N>, id: SocketId, kind: Kind) {
        loop {
            let room = match kind {
                Kind::Echo => match shard.tcp_send_space(id) {
                    Ok(0) => return, // wait for Writable
                    Ok(n) => n.min(self.buf.len()),
                    Err(_) => self.buf.len(),
                },
                Kind::Discard => self.buf.len(),
            };
            match shard.tcp_recv(id, &mut self.buf[..room]) {
                Ok(0) => return self.finish(shard, id),
                Ok(n) => match kind {
                    Kind::Echo => {
                        let sent = shard.tcp_send(id, &self.buf[..n]);
                        debug_assert_eq!(sent, Ok(n), "echo sends only what fits");
                        self.stats.echoed_bytes += n as u64;
                    }
                    Kind::Discard => self.stats.discarded_bytes += n as u64,
                },
                Err(Errno::EAGAIN) => return,
                Err(_) => {
                    self.stats.errors += 1;
                    return self.finish(shard, id);
                }
            }
        }
    }

    fn finish<N: Nic>(&mut self, shard: &mut Shard<N>, id: SocketId) {
        let _ = shard.close(id);
        self.conns.remove(&id);
        self.stats.closed += 1;
    }
}

/// A deterministic byte stream: xorshift64* output, 8 bytes per step, from a seed.
#[derive(Clone, Debug)]
pub struct Stream {
    state: u64,
    word: [u8; 8],
    used: usize,
}

impl Stream {
    pub fn new(seed: u64) -> Stream {
        Stream { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, word: [0; 8], used: 8 }
    }

    /// The next `out.len()` bytes of the stream. A word at a time: a byte-at-a-time loop here
    /// was three quarters of the instructions of the stack pair's 1 MiB echo (callgrind),
    /// hiding the stack's own cost.
    pub fn fill(&mut self, out: &mut [u8]) {
        let left = (8 - self.used).min(out.len());
        out[..left].copy_from_slice(&self.word[self.used..self.used + left]);
        self.used += left;
        let mut words = out[left..].chunks_exact_mut(8);
        for w in &mut words {
            self.step();
            w.copy_from_slice(&self.word);
        }
        let rest = words.into_remainder();
        if !rest.is_empty() {
            self.step();
            rest.copy_from_slice(&self.word[..rest.len()]);
            self.used = rest.len();
        }
    }

    /// The next word (all of it counted as used, as after a whole copy).
    fn step(&mut self) {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.word = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        self.used = 8;
    }
}

/// The outcome of one client connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientStatus {
    Running,
    /// Every byte came back, in order, then the end of stream.
    Done,
    /// The echo differed from what was sent at this offset.
    Mismatch(u64),
    /// The connection failed (errno) after this many bytes came back.
    Failed(Errno, u64),
}

/// Sends `total` bytes of `Stream::new(seed)` to an echo server and checks the echo.
pub struct EchoClient {
    id: SocketId,
    total: u64,
    sent: u64,
    received: u64,
    tx: Stream,
    expect: Stream,
    shut: bool,
    status: ClientStatus,
}

impl EchoClient {
    pub fn connect<N: Nic>(
        shard: &mut Shard<N>,
        server: SocketAddr,
        total: u64,
        seed: u64,
    ) -> Result<EchoClient, Errno> {
        Ok(EchoClient {
            id: shard.tcp_connect(server)?,
            total,
            sent: 0,
            received: 0,
            tx: Stream::new(seed),
            expect: Stream::new(seed),
            shut: false,
            status: ClientStatus::Running,
        })
    }

    pub fn socket(&self) -> SocketId {
        self.id
    }

    pub fn status(&self) -> ClientStatus {
        self.status
    }

    pub fn received(&self) -> u64 {
        self.received
    }

    /// Moves data; call it when the socket's readiness changed (or on every poll).
    pub fn drive<N: Nic>(&mut self, shard: &mut Shard<N>, buf: &mut [u8]) -> ClientStatus {
        if self.status != ClientStatus::Running {
            return self.status;
        }
        if let Ok(Some(e)) = shard.take_error(self.id) {
            return self.fail(shard, e);
        }
        while self.sent < self.total {
            let room = match shard.tcp_send_space(self.id) {
                Ok(n) => n,
                Err(e) => return self.fail(shard, e),
            };
            let n = room.min(buf.len()).min((self.total - self.sent) as usize);
            if n == 0 {
                break;
            }
            self.tx.fill(&mut buf[..n]);
            match shard.tcp_send(self.id, &buf[..n]) {
                Ok(m) => {
                    debug_assert_eq!(m, n);
                    self.sent += n as u64;
                }
                Err(Errno::EAGAIN) => break,
                Err(e) => return self.fail(shard, e),
            }
        }
        if self.sent == self.total && !self.shut {
            match shard.tcp_shutdown_write(self.id) {
                Ok(()) => self.shut = true,
                Err(Errno::EAGAIN) => {}
                Err(e) => return self.fail(shard, e),
            }
        }
        let mut want = [0u8; 4096];
        loop {
            match shard.tcp_recv(self.id, buf) {
                Ok(0) => {
                    self.status = if self.received == self.total {
                        ClientStatus::Done
                    } else {
                        ClientStatus::Mismatch(self.received)
                    };
                    let _ = shard.close(self.id);
                    return self.status;
                }
                Ok(n) => {
                    for chunk in buf[..n].chunks(want.len()) {
                        self.expect.fill(&mut want[..chunk.len()]);
                        if chunk != &want[..chunk.len()] {
                            let i = chunk.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                            self.status = ClientStatus::Mismatch(self.received + i as u64);
                            let _ = shard.abort(self.id);
                            return self.status;
                        }
                        self.received += chunk.len() as u64;
                    }
                }
                Err(Errno::EAGAIN) => return self.status,
                Err(e) => return self.fail(shard, e),
            }
        }
    }

    fn fail<N: Nic>(&mut self, shard: &mut Shard<N>, e: Errno) -> ClientStatus {
        self.status = ClientStatus::Failed(e, self.received);
        let _ = shard.close(self.id);
        self.status
    }
}

#[cfg(test)]
mod tests {
    use super::Stream;

    /// The stream as it was first written, a byte at a time: what the lab tests' blobs and
    /// every echo check were made of.
    fn reference(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        out.truncate(len);
        out
    }

    #[test]
    fn the_stream_is_the_same_however_it_is_cut() {
        let want = reference(16, 10_000);
        for most in 1..=19 {
            let mut s = Stream::new(16);
            let mut got = vec![0u8; want.len()];
            let mut at = 0;
            for k in 0.. {
                if at == got.len() {
                    break;
                }
                // Pieces of 0 to `most` bytes, varying.
                let n = (k % (most + 1)).min(got.len() - at);
                s.fill(&mut got[at..at + n]);
                at += n;
            }
            assert_eq!(got, want, "pieces of up to {most} bytes");
        }
        let mut whole = vec![0u8; want.len()];
        Stream::new(16).fill(&mut whole);
        assert_eq!(whole, want);
    }
}
