//! Scripted tests, named after the rule they check. `harness` has the helpers.

mod ack_policy;
mod autotune;
mod buffers;
mod bulk;
mod harness;
mod keepalive;
mod memory;
mod rfc3168;
mod rfc5681;
mod rfc5961;
mod rfc6298;
mod rfc7323;
mod rfc8985;
mod rfc9293;
mod rfc9438;
mod sack;
mod time_wait;
mod tso;
mod urgent;
mod zero_window;

#[test]
fn connection_is_small() {
    let size = core::mem::size_of::<crate::Connection>();
    std::println!(
        "size_of::<Connection>() = {size}, size_of::<TimeWait>() = {}",
        core::mem::size_of::<crate::TimeWait>()
    );
    // 368 bytes before CUBIC (56 bytes of state, NewReno's 12), RACK-TLP (40 bytes, the
    // transmit log's 16-byte handle, a timer, counters), ECN (24) and urgent data (24) made it
    // 544. Split into parts it is 520: 27 bools became a few bytes of bit sets, the pending
    // RST lost its Option and the SACK scoreboard and out-of-order ranges their fat pointers.
    // What is left is state (no counter in it has a provably smaller range), and every part
    // pads to its own alignment. Linux's MIB counters TCPAbortOnTimeout, TCPRcvQDrop and
    // TCPOFODrop, and `tcp_orphan_retries`, made it 536 (the memory budget's state is a bit
    // of `flags` and the room, 2 bytes that fit in padding). Buffer autotuning (Linux's
    // `rcvq_space` and `rcv_rtt_est`, 24 bytes with times as wrapping µs, and the two maxima
    // in the parameters) made it 568. The rings' memory not zeroed when allocated (a `Vec`
    // whose length says how far it was written, 8 bytes more than a boxed slice, per ring) made
    // it 584.
    assert!(size <= 584, "{size}");
    assert!(core::mem::size_of::<crate::TimeWait>() <= 48);
}
