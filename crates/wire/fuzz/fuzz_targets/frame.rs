//! One Ethernet frame through every parser of `wire`, the way the stack dispatches it: Ethernet,
//! ARP or IPv4 or IPv6 (and its extension headers), then ICMPv4, ICMPv6 with neighbor discovery,
//! TCP with its options, or UDP.
//!
//! Each frame is parsed twice, with checksums verified and without (so that the fuzzer gets past
//! them), and whatever parses is emitted again and re-parsed: parse(emit(repr)) must give repr
//! back. Nothing may panic.
//!

//! The checks live in `wire::fuzzing::frame_both_ways` (so that `cargo test` runs them too).
//!
//! Run from `crates/wire`: `cargo +nightly fuzz run frame` (seeds in `fuzz/corpus/frame`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wire::fuzzing::frame_both_ways(data));
