//! The TCP connection as a sans-I/O state machine, in the manner of quinn-proto and rustls.
//!
//! This crate owns one connection's protocol logic: the RFC 9293 state machine, retransmission
//! (RFC 6298), window scaling, timestamps and PAWS (RFC 7323), congestion control (RFC 5681,
//! NewReno RFC 6582), SACK (RFC 2018) and SACK-based loss recovery (RFC 6675), blind-attack
//! protection (RFC 5961), delayed ACKs and keepalive (RFC 1122), Nagle; also the compact
//! TIME-WAIT entry and the reply to segments that match no connection.
//!
//! What it must not do: read a clock (time comes in as [`Instant`], nanoseconds from an origin
//! the caller picks), touch a socket or a NIC, keep global state, choose random numbers (the
//! ISS and the timestamp offset come from the caller), or allocate per packet (a connection's
//! send and receive rings are allocated once, on first use). It knows only its two ports:
//! addresses, demultiplexing, listeners, SYN cookies' cryptography and timer wheels belong to
//! the stack.
//!
//! The shape: [`Connection::handle_segment`] and [`Connection::handle_timeout`] take input;
//! [`Connection::poll_transmit`], [`Connection::poll_event`] and [`Connection::poll_timeout`]
//! give output; [`Connection::send`], [`Connection::recv`], [`Connection::shutdown_write`],
//! [`Connection::close`] and [`Connection::abort`] are the application's calls, with Linux's
//! errno meanings ([`Error`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod congestion;
mod connection;
mod ranges;
mod ring;
mod seq;
mod time_wait;

#[cfg(test)]
mod tests;

pub use config::{Config, Keepalive};
pub use congestion::{Congestion, CongestionControl, NewReno};
pub use connection::{Connection, CookieOptions, Error, Event, Info, State};
pub use time_wait::{rst_for_unmatched, TimeWait, TimeWaitAction};

/// A point in time: nanoseconds since an origin the caller chooses (a monotonic clock).
pub type Instant = u64;

/// A span of time in nanoseconds.
pub type Duration = u64;

/// One millisecond.
pub const MILLISECOND: Duration = 1_000_000;

/// One second.
pub const SECOND: Duration = 1_000_000_000;
