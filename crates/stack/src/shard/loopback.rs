//! Frames to the shard's own addresses: received by the shard itself, never sent on the NIC
//! (Linux's loopback, issue 23 item 3). A connection between two sockets of one shard (a process
//! connecting to its own accelerated listener) is two ordinary connections whose segments go
//! through here; a connect() to a port nobody holds gets the listener's RST, ECONNREFUSED, at
//! once. Before, the SYN left on the NIC for a neighbor nobody is, and a blocking connect hung
//! until its retries ran out.
//!
//! `Link::route_out` queues such a frame in the link instead of routing it; the shard's flush
//! receives what is queued ([`Shard::receive_looped`]) after servicing its sockets, which may
//! queue more (an ACK answers data), for at most [`ROUNDS`] rounds per flush: what is left waits
//! for the next (`Shard::has_output` says so), so that two sockets answering each other cannot
//! hold the thread; the last round's receivers are serviced all the same, and a stack pass
//! that leaves frames counts them as work, so that its stack thread passes again instead of
//! sleeping (a flush by an application thread leaves them to the next pass). Counted:
//! `loopback_frames`. A capture (`pronghorn pcap`) does not see them,
//! as one of the NIC does not see lo's.
//!
//! It must not parse frames (that is ingress's) nor decide what to send.

use super::Shard;

/// Rounds of receiving what the shard sent itself per flush.
const ROUNDS: usize = 64;

impl<N: nic::Nic> Shard<N> {
    /// Services the dirty sockets and receives what they sent the shard itself, until neither
    /// is left or [`ROUNDS`] rounds have passed.
    pub(super) fn service_and_loop_back(&mut self) {
        let mut looped = Vec::new();
        for _ in 0..ROUNDS {
            self.service_dirty();
            if !self.link.has_looped() {
                return;
            }
            self.link.take_looped(&mut looped);
            self.stats.loopback_frames += looped.len() as u64;
            for buf in looped.drain(..) {
                self.receive_looped(buf);
            }
            self.deliver_runs();
            // Receiving may have queued more (a RST answered at once): they go next round.
        }
        // The last round's receivers are serviced (their readiness reported, their ACKs
        // queued); what that loops back waits for the next flush.
        self.service_dirty();
    }
}
