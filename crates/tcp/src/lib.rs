//! The TCP connection as a sans-I/O state machine, in the manner of quinn-proto and rustls.
//!
//! This crate owns one connection's protocol logic: the RFC 9293 state machine, retransmission
//! (RFC 6298), window scaling, timestamps and PAWS (RFC 7323), congestion control (CUBIC RFC
//! 9438 by default, or RFC 5681 with NewReno RFC 6582), SACK (RFC 2018), SACK-based loss
//! recovery (RFC 6675) with RACK-TLP loss detection (RFC 8985), blind-attack protection (RFC
//! 5961), ECN (RFC 3168), delayed ACKs and keepalive (RFC 1122), Nagle, urgent data (RFC 6093,
//! kept as Linux keeps it); also the compact TIME-WAIT entry and the reply to segments that
//! match no connection.
//!
//! What it must not do: read a clock (time comes in as [`Instant`], nanoseconds from an origin
//! the caller picks), touch a socket or a NIC, choose random numbers (the ISS and the timestamp
//! offset come from the caller), or allocate per packet (a connection's send and receive rings
//! and its transmit log are allocated once, on first use). It keeps no global state but one
//! allocation cache: freed ring and transmit-log memory goes to a bounded per-thread list
//! (`spare.rs`) and the next buffer of the same size is taken from there, which spares short
//! connections a malloc, page faults and zeroing each. The cache changes no behaviour: a
//! connection reads only bytes it wrote itself, so it does the same whichever memory it gets,
//! as long as no other connection gets it too: a process forked from a thread, whose memory
//! its parent shares, forgets its copy of that thread's lists ([`forget_spare_buffers`]).
//! It knows only its two ports: addresses, demultiplexing, listeners, SYN cookies'
//! cryptography and timer wheels belong to the stack.
//!
//! The shape: [`Connection::handle_segment`] and [`Connection::handle_timeout`] take input;
//! [`Connection::poll_transmit`], [`Connection::poll_event`] and [`Connection::poll_timeout`]
//! give output; [`Connection::send`], [`Connection::recv`], [`Connection::shutdown_write`],
//! [`Connection::close`] and [`Connection::abort`] are the application's calls, with Linux's
//! errno meanings ([`Error`]), and the socket options that act on the connection itself
//! (buffer sizes, SO_RCVLOWAT, SO_OOBINLINE, TCP_NODELAY, keepalive) are setters. The stack's
//! memory budget (Linux's `tcp_mem`) comes in as a [`MemoryBudget`] before a call that may
//! queue data, and [`Connection::charged_bytes`] says what the connection holds: the
//! connection only obeys the budget; the accounting is the stack's.
//!
//! After every input or application call, the caller drains `poll_transmit` until `None`,
//! drains `poll_event`, and re-arms its timer from `poll_timeout`:
//!
//! ```
//! use tcp::{Config, Connection, Event, State, MILLISECOND};
//!
//! let cfg = Config::default();
//! let mut now = 0;
//! let mut client = Connection::connect(&cfg, 40000, 80, 1000, now);
//! let mut buf = [0u8; 1500];
//! let syn = client.poll_transmit(now, &mut buf).unwrap();
//! // The listener (in the stack) makes the server side from the SYN.
//! let mut server = Connection::accept(&cfg, &syn, 5000, now);
//! now += MILLISECOND;
//! let synack = server.poll_transmit(now, &mut buf).unwrap();
//! client.handle_segment(now, &synack, &[]);
//! assert_eq!(client.poll_event(), Some(Event::Connected));
//! let ack = client.poll_transmit(now, &mut buf).unwrap();
//! server.handle_segment(now, &ack, &[]);
//! assert_eq!(server.state(), State::Established);
//!
//! client.send(b"hello").unwrap();
//! let seg = client.poll_transmit(now, &mut buf).unwrap();
//! server.handle_segment(now, &seg, &buf[..seg.payload_len]);
//! assert_eq!(server.poll_event(), Some(Event::Connected));
//! assert_eq!(server.poll_event(), Some(Event::Readable));
//! // The server owes an ACK; it is delayed, so a timer is armed.
//! assert!(server.poll_transmit(now, &mut buf).is_none());
//! let deadline = server.poll_timeout().unwrap();
//! server.handle_timeout(deadline);
//! let ack = server.poll_transmit(deadline, &mut buf).unwrap();
//! assert_eq!(ack.ack_number, Some(seg.seq_number + 5));
//! let mut got = [0u8; 16];
//! assert_eq!(server.recv(&mut got), Ok(5));
//! assert_eq!(&got[..5], b"hello");
//! ```

#![warn(missing_docs)]

mod config;
mod congestion;
mod connection;
mod payload;
mod rack;
mod ranges;
mod ring;
mod segment;
mod sent;
mod seq;
mod spare;
mod time;
mod time_wait;

#[cfg(test)]
mod tests;

pub use config::{Config, Ecn, Keepalive};
pub use congestion::{Congestion, CongestionAlgorithm, CongestionControl, Cubic, NewReno};
pub use connection::{
    Connection, CookieOptions, Counters, Error, Event, Info, MemoryBudget, State, SEGMENT_OVERHEAD, SEND_QUANTUM,
};
pub use segment::{bare_segment, opens_connection, rst, rst_for_unmatched};
pub use time::{Duration, Instant, MILLISECOND, SECOND};
pub use time_wait::{TimeWait, TimeWaitAction};

/// In a process just forked, in the thread that forked: forgets, without freeing them, the
/// buffers that the thread's spare lists (freed rings and send logs kept for reuse) name. They
/// are the parent's, which reuses them for its own connections; where the parent's memory is
/// shared with the child (a fork family's arena) the child's copy of the lists would hand the
/// same blocks out again, to other connections, and free them a second time. From then on the
/// thread keeps no spare buffers: what it frees goes back to the allocator (in a family, the
/// arena, where the family's other processes take it for their next connections).
pub fn forget_spare_buffers() {
    ring::forget_spare();
    sent::forget_spare();
}
