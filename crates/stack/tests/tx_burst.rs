//! A connection with a long run of segments to send hands them to the NIC a burst
//! (`TX_BURST`, 32 frames) at a time as it makes them, not all at the end of the pass: an
//! AF_XDP socket in copy mode copies each frame into an skb when the burst is kicked, and
//! frames written thousands of frames earlier were out of the cache by then (iperf3 -R under
//! pronghorn, issue 26: the kernel's copy of our frames took half the time once they went a
//! burst at a time). The peer is played by hand (`testkit::fuzzing::Rig`).

use testkit::fuzzing::{base, Rig};
use wire::{TcpFlags, TcpRepr};

const ISN: u32 = 1000;

#[test]
fn a_long_run_of_segments_leaves_a_burst_at_a_time() {
    // A congestion window wide enough that one write is sent at once, as after slow start.
    let mut r = Rig::new(|cfg| cfg.tcp.initial_cwnd = 100);
    r.segment(&TcpRepr { max_seg_size: Some(1460), ..base(ISN, None, TcpFlags::SYN) }, &[]);
    let ours = r.replies().pop().expect("SYN-ACK").seq_number + 1;
    r.segment(&base(ISN + 1, Some(ours), TcpFlags::ACK), &[]);
    let (id, _) = r.shard.tcp_accept(r.listener).expect("accepted");
    // 44 full segments: what the peer's window (65535 bytes) takes.
    assert_eq!(r.shard.tcp_send(id, &[7u8; 44 * 1460]), Ok(44 * 1460));
    r.shard.flush(r.now);
    let data: Vec<_> = r.replies().into_iter().filter(|s| s.payload_len > 0).collect();
    assert_eq!(data.len(), 44, "all of it went out");
    let largest = r.shard.nic().largest_tx_burst();
    assert!(largest <= 32, "the NIC was handed {largest} frames at once");
}
