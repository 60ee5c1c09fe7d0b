//! Arbitrary bytes as a TCP option area: the option walk must end, never panic, and every option
//! it yields must survive emit and parse unchanged. Areas that fit a header (40 bytes or less)
//! also go through `TcpRepr::parse` inside a segment.
//!
//! The checks live in `wire::fuzzing::tcp_options`.
//!
//! Run from `crates/wire`: `cargo +nightly fuzz run tcp_options`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wire::fuzzing::tcp_options(data));
