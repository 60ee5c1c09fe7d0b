//! Arbitrary frames into a shard with a listener and a UDP socket: nothing may panic and every
//! frame is accounted for. The checks live in `stack::fuzzing::shard_frames`.
//!
//! Run from `crates/stack`: `cargo +nightly fuzz run shard_frames`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stack::fuzzing::shard_frames(data));
