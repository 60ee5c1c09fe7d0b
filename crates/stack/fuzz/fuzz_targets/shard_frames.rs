//! Arbitrary frames into a shard with IPv4 and IPv6 addresses, a listener and a UDP socket on
//! each: nothing may panic and every frame is accounted for. The checks live in
//! `testkit::fuzzing::shard_frames`; the seeds (`testkit::fuzzing::seeds`) include IPv6 extension
//! headers, IPv4-mapped and other martian sources, and frames under the other family's ethertype.
//!
//! Run from `crates/stack`: `cargo +nightly fuzz run shard_frames`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| testkit::fuzzing::shard_frames(data));
