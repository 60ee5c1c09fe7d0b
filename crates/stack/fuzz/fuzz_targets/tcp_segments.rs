//! TCP segment processing: an established IPv4 or IPv6 connection fed segments decoded from the
//! input (flags, sequence and acknowledgment numbers near the live ones, windows, options,
//! payload; valid checksums; IPv6 extension headers, the other family's source or ethertype),
//! mixed with application calls and time steps. The checks live in
//! `testkit::fuzzing::tcp_segments`.
//!
//! Run from `crates/stack`: `cargo +nightly fuzz run tcp_segments`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| testkit::fuzzing::tcp_segments(data));
