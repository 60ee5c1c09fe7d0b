//! The shard's counters of the TCP and UDP layers and of the frames it could not send (the
//! link layer's own are `crate::iface::IfaceStats`). A plain value every part of the shard adds
//! to (the link is handed it by `&mut` where it counts); `pronghorn stat` shows them.

/// Counters of the TCP/UDP layers (the link layer's are in [`crate::iface::IfaceStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub tcp_rx_segments: u64,
    pub tcp_tx_segments: u64,
    pub tcp_bad_checksum: u64,
    pub tcp_malformed: u64,
    pub tcp_rst_sent: u64,
    pub tcp_active_opens: u64,
    pub tcp_passive_opens: u64,
    pub tcp_syncookies_sent: u64,
    pub tcp_syncookies_ok: u64,
    pub tcp_syncookies_failed: u64,
    /// SYNs dropped because the listener's accept queue was full.
    pub tcp_listen_overflows: u64,
    /// Challenge ACKs not sent: within the connection's rate limit or over the shard's budget
    /// (Linux `TCPACKSkippedChallenge`).
    pub tcp_challenge_acks_skipped: u64,
    pub tcp_time_wait_entries: u64,
    /// Segments that matched no socket here, handed to the process's other shards.
    pub tcp_handed_off: u64,
    /// UDP datagrams that matched no socket here, handed to the process's other shards.
    pub udp_handed_off: u64,
    pub udp_rx_datagrams: u64,
    pub udp_tx_datagrams: u64,
    pub udp_bad_checksum: u64,
    pub udp_no_port: u64,
    pub udp_rcvbuf_errors: u64,
    /// ICMP destination unreachable sent (a UDP datagram to a port nobody holds).
    pub icmp_out_dest_unreachs: u64,
    /// ICMP errors not sent: over Linux's rate limits.
    pub icmp_out_rate_limited: u64,
    /// ICMP destination unreachable received about a UDP datagram we sent.
    pub icmp_in_dest_unreachs: u64,
    /// ICMP "fragmentation needed" / "packet too big" that lowered a connection's segment size.
    pub pmtu_reductions: u64,
    /// Such messages not believed: no such connection, or the quoted segment is not in flight.
    pub icmp_too_big_ignored: u64,
    /// Segments retransmitted (Linux `RetransSegs`).
    pub tcp_retrans_segments: u64,
    /// Retransmission timeouts, SYN and SYN-ACK timeouts included (Linux `TCPTimeouts`).
    pub tcp_timeouts: u64,
    /// Tail loss probes sent (RFC 8985; Linux `TCPLossProbes`).
    pub tcp_loss_probes: u64,
    /// Losses repaired by a tail loss probe alone (Linux `TCPLossProbeRecovery`).
    pub tcp_loss_probe_recoveries: u64,
    /// Segments RACK marked lost (RFC 8985's time-based detection; Linux has no counter).
    pub tcp_rack_lost: u64,
    /// Retransmissions RACK found lost in turn (Linux `TCPLostRetransmit`).
    pub tcp_lost_retransmits: u64,
    /// Frames not sent: no buffer in the pool.
    pub tx_no_buffer: u64,
    /// Times a connection's segments (data, FIN, RST, ACK) waited for a buffer: the pool was
    /// empty, so they stayed owed and went out at a later pass.
    pub tx_deferred: u64,
    /// Frames not sent: the NIC's tx queue stayed full.
    pub tx_queue_full: u64,
    /// Frames not sent: no route to the destination (or none from the source: a destination of
    /// the other IP family).
    pub tx_no_route: u64,
    /// Frames dropped waiting for a neighbor that never answered (or a full queue).
    pub tx_unresolved: u64,
    /// Connections given up for unanswered retransmissions, probes or keepalives (Linux
    /// `TCPAbortOnTimeout`).
    pub tcp_abort_on_timeout: u64,
    /// Connections reset for too many orphans or no memory (Linux `TCPAbortOnMemory`).
    pub tcp_abort_on_memory: u64,
    /// In-order segments dropped: no memory for a receive ring (Linux `TCPRcvQDrop`).
    pub tcp_rcvq_drops: u64,
    /// Out-of-order segments dropped: no memory for a receive ring (Linux `TCPOFODrop`).
    pub tcp_ofo_drops: u64,
    /// Prunes of a connection's receive queue (Linux `PruneCalled`; here each drops its
    /// out-of-order data, so it moves with `tcp_ofo_pruned`).
    pub tcp_prune_called: u64,
    /// Connections whose out-of-order data was dropped to free memory (Linux `OfoPruned`).
    pub tcp_ofo_pruned: u64,
    /// Times the shard went under memory pressure (Linux `TCPMemoryPressures`).
    pub tcp_memory_pressures: u64,
    /// SYNs dropped: no memory for the connection's receive ring (with the accept-queue
    /// overflows, Linux's `ListenDrops`).
    pub tcp_listen_memory_drops: u64,
    /// SYNs that found no listener left unanswered (no RST): its last listener closed less
    /// than a second before, or another process waited to take the NIC's queue over (a
    /// reload: `nic::Nic::successor_waits`).
    pub tcp_syns_left_unanswered: u64,
    /// Connections that skipped TIME-WAIT: `max_tw_buckets` entries already (Linux
    /// `TCPTimeWaitOverflow`).
    pub tcp_time_wait_overflows: u64,
    /// Segments coalesced on receive into the one before them (software GRO, `coalesce`;
    /// Linux has no MIB counter for GRO).
    pub tcp_gro_merged: u64,
    /// Frames the shard sent to one of its own addresses and received itself, never on the
    /// NIC (`loopback`; Linux counts them on `lo`).
    pub loopback_frames: u64,
}
