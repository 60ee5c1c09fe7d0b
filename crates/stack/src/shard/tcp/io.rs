//! TCP's work on the shard: demux of segments to connections and listeners (SYN and accept
//! queues, SYN cookies), the challenge-ACK budget, and servicing a connection: its segments
//! out, its events, its timers, freeing it.

use nic::{Nic, PacketBuf, Segmentation};
use tcp::{Connection, CookieOptions, Event as TcpEvent, TimeWait};
use wire::{checksum, IpAddress, IpProtocol, TcpFlags, TcpPacket, TcpRepr};

use super::{
    ListenGroup, TcpSocket, BUFFERS_CHECK_NS, CLOSED_PORTS_KEPT, LISTENER_GRACE_NS, OWED_RSTS_MAX, SUCCESSOR_LOOK_NS,
};
use crate::shard::api_types::Buffers;
use crate::shard::link::{transport_offset, TX_BURST};
use crate::shard::table::FourTuple;
use crate::shard::time_wait::TimeWaitInput;
use crate::shard::transport::{may_join, Candidate, TcpInput, Transport};
use crate::shard::{Shard, Socket, SocketId, TimerKey, ECN_ECT0, ECN_NOT_ECT, ETH};
use crate::syncookie::{siphash24, VALID_AFTER_LAST_SENT_NS};

impl<N: Nic> Shard<N> {
    pub(in crate::shard) fn path_mtu(&mut self, tuple: FourTuple, mss: u16, seq: u32) {
        let Some(&id) = self.conns.get(&tuple) else {
            self.stats.icmp_too_big_ignored += 1;
            return;
        };
        if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
            if s.conn.path_mtu_reduced(mss, seq) {
                self.stats.pmtu_reductions += 1;
                self.sockets.mark_dirty(id);
            } else {
                self.stats.icmp_too_big_ignored += 1;
            }
        }
    }

    /// A TCP segment to us, as ingress read the layers below. [`TcpInput::Unplaced`] when
    /// nothing here takes it and `may_hand_off`: another shard of the process may hold its
    /// connection (else it is answered here, with a RST if it calls for one).
    pub(in crate::shard) fn tcp_input(&mut self, t: &Transport, seg: &[u8], may_hand_off: bool) -> TcpInput {
        // Borrowed, not copied: an address is 17 bytes aligned to 1, copied byte by byte.
        let (src, dst) = (&t.src, &t.dst);
        let Ok(packet) = TcpPacket::new_checked(seg) else {
            self.stats.tcp_malformed += 1;
            return TcpInput::Taken;
        };
        let repr = match TcpRepr::parse(&packet, src, dst, self.link.checksums().verify_l4 && !t.verified) {
            Ok(r) => r,
            Err(wire::Error::Checksum) => {
                self.stats.tcp_bad_checksum += 1;
                return TcpInput::Taken;
            }
            Err(_) => {
                self.stats.tcp_malformed += 1;
                return TcpInput::Taken;
            }
        };
        self.stats.tcp_rx_segments += 1;
        let payload = &seg[packet.header_len() as usize..][..repr.payload_len];
        let tuple = FourTuple::new((*dst, repr.dst_port), (*src, repr.src_port));

        if let Some(&id) = self.conns.get(&tuple) {
            self.glean(t);
            let established =
                matches!(self.sockets.get(id), Some(Socket::Tcp(s)) if s.conn.state() == tcp::State::Established);
            // A PSH segment ends a run the moment it joins: one that would start a run is
            // handed over at once instead (request/response traffic, where every segment has
            // PSH, then pays nothing for coalescing: holding it cost ~900 instructions per
            // request in request-cost's epoll case).
            if established && may_join(t, &repr) && (!repr.flags.contains(TcpFlags::PSH) || self.holds_run_of(id)) {
                let start = t.start + packet.header_len() as usize;
                let payload = (start, start + repr.payload_len);
                return TcpInput::Coalesce(Candidate { id, repr, ecn: t.ecn, payload });
            }
            self.deliver_run_of(id);
            if self.accept_queue_full_at_handshake(id, &repr, payload.len()) {
                // Linux `tcp_v4_syn_recv_sock` on a full accept queue: the handshake's last
                // ACK (and any data on it) is dropped, counted in ListenOverflows and
                // ListenDrops; the connection stays in SYN-RECEIVED, and the peer's
                // retransmission, or the one our SYN-ACK's retransmission draws, completes it.
                self.stats.tcp_listen_overflows += 1;
                return TcpInput::Taken;
            }
            self.deliver(id, &repr, &[payload], t.ecn);
            return TcpInput::Taken;
        }
        let reopen_iss = match self.time_wait_input(&tuple, &repr) {
            TimeWaitInput::NoEntry => None,
            TimeWaitInput::Done => return TcpInput::Taken,
            TimeWaitInput::Reopen { iss } => Some(iss),
        };
        // RFC 9293 3.10.7.2, LISTEN: first, a RST is ignored (a SYN with RST too, as in Linux);
        // second, an ACK is answered with a RST (once no SYN cookie matches it); third, a SYN
        // opens a connection (not one with FIN: `tcp::opens_connection`); anything else has no
        // ACK and is dropped.
        let rst = repr.flags.contains(TcpFlags::RST);
        let is_syn = tcp::opens_connection(&repr);
        let is_ack = repr.ack_number.is_some() && !repr.flags.contains(TcpFlags::SYN) && !rst;
        if let Some(lid) = self.listeners.lookup((*dst, repr.dst_port)).map(|g| self.group_member(g, &tuple)) {
            if is_syn {
                // A SYN that is itself ECN-capable (or CE-marked) is no ECN-setup SYN (RFC 3168
                // section 6.1.1 forbids ECT on SYNs; Linux `tcp_ecn_create_request`).
                let mut syn = repr;
                if t.ecn != ECN_NOT_ECT {
                    syn.flags.remove(TcpFlags::ECE | TcpFlags::CWR);
                }
                self.syn_to_listener(lid, tuple, &syn, reopen_iss);
                return TcpInput::Taken;
            }
            if is_ack && self.cookie_ack(lid, tuple, &repr, payload) {
                return TcpInput::Taken;
            }
            if repr.ack_number.is_none() {
                return TcpInput::Taken;
            }
        }
        if may_hand_off {
            // Another shard of the process may hold the connection: it decides.
            return TcpInput::Unplaced;
        }
        if is_syn && !self.link.is_own_address(*src) && (self.closed_lately(repr.dst_port) || self.successor_waits()) {
            // A reload: this process closed its listener a moment ago, or another process waits
            // to take this queue over (a new worker or master, its listeners not open yet). A
            // RST would refuse the connection, while the client's retransmission of its SYN, a
            // second later, reaches the successor (a queue nobody drives drops it as well, with
            // no RST).
            self.stats.tcp_syns_left_unanswered += 1;
            return TcpInput::Taken;
        }
        if let Some(rst) = tcp::rst_for_unmatched(&repr, payload.len()) {
            self.send_tcp(&tuple, &rst);
        }
        TcpInput::Taken
    }

    /// Whether `port`'s last listener here closed less than [`LISTENER_GRACE_NS`] ago.
    fn closed_lately(&mut self, port: u16) -> bool {
        if self.closed_ports.is_empty() {
            return false;
        }
        let now = self.now;
        self.closed_ports.retain(|&(_, at)| now.saturating_sub(at) < LISTENER_GRACE_NS);
        self.closed_ports.iter().any(|&(p, _)| p == port)
    }

    /// Remembers that `port`'s last listener here closed at `now` (for [`LISTENER_GRACE_NS`]).
    pub(in crate::shard) fn note_closed_port(&mut self, port: u16, now: u64) {
        self.closed_ports.retain(|&(p, at)| p != port && now.saturating_sub(at) < LISTENER_GRACE_NS);
        if self.closed_ports.len() < CLOSED_PORTS_KEPT {
            self.closed_ports.push((port, now));
        }
    }

    /// Whether another process waits for this shard's NIC queue (`Nic::successor_waits`), asked
    /// at most every [`SUCCESSOR_LOOK_NS`]: a flood of SYNs to closed ports costs a system call
    /// per look, not per SYN.
    fn successor_waits(&mut self) -> bool {
        if self.successor_asked_at.map_or(true, |at| self.now.saturating_sub(at) >= SUCCESSOR_LOOK_NS) {
            self.successor_waits = self.link.nic().successor_waits();
            self.successor_asked_at = Some(self.now);
        }
        self.successor_waits
    }

    /// Whether `repr` would complete passive connection `id`'s handshake while its listener's
    /// accept queue is full.
    fn accept_queue_full_at_handshake(&self, id: SocketId, repr: &TcpRepr, payload_len: usize) -> bool {
        let Some(Socket::Tcp(s)) = self.sockets.get(id) else { return false };
        let Some(lid) = s.listener else { return false };
        s.conn.completes_handshake(repr, payload_len)
            && matches!(self.sockets.get(lid), Some(Socket::Listener(l)) if l.accept_queue.len() >= l.backlog)
    }

    /// The listener of `group` that takes connection `tuple`: with SO_REUSEPORT, a keyed hash
    /// of the 4-tuple spreads connections over the members the application waits on (all of
    /// them while it waits on none), and sends a SYN-cookie ACK to the member its SYN went to
    /// (the group being unchanged).
    pub(in crate::shard) fn group_member(&self, group: &ListenGroup, tuple: &FourTuple) -> SocketId {
        if group.members.len() == 1 {
            return group.members[0];
        }
        let watched = |id: &&SocketId| matches!(self.sockets.get(**id), Some(Socket::Listener(l)) if l.watched);
        let n = group.members.iter().filter(watched).count();
        let key: [u8; 16] = self.cfg.secret[4..20].try_into().unwrap();
        let hash = siphash24(&key, &tuple_bytes(tuple));
        if n == 0 {
            return group.members[(hash % group.members.len() as u64) as usize];
        }
        *group.members.iter().filter(watched).nth((hash % n as u64) as usize).unwrap()
    }

    pub(in crate::shard) fn syn_to_listener(
        &mut self,
        lid: SocketId,
        tuple: FourTuple,
        syn: &TcpRepr,
        iss: Option<u32>,
    ) {
        let syn_backlog = self.cfg.syn_backlog;
        let buffers = match self.sockets.get(lid) {
            Some(Socket::Listener(l)) => l.buffers,
            _ => return,
        };
        let cfg = self.conn_config(&tuple, buffers);
        if !self.room_for_connection() {
            // No memory left (Linux drops the SYN: ListenDrops): the peer retries.
            self.stats.tcp_listen_memory_drops += 1;
            return;
        }
        let now = self.now;
        let Some(Socket::Listener(l)) = self.sockets.get_mut(lid) else { return };
        if l.accept_queue.len() >= l.backlog {
            self.stats.tcp_listen_overflows += 1;
            return;
        }
        if l.half_open >= syn_backlog {
            l.last_cookie_sent = Some(now);
            // SYN flood (or just a burst): answer statelessly. The cookie keeps the MSS; the
            // other options are not offered, nor ECN, so the SYN-ACK promises nothing we cannot
            // keep.
            let (isn, mss) = self.cookies.encode(&tuple, syn.seq_number, syn.max_seg_size.unwrap_or(536), self.now);
            let stripped = TcpRepr {
                max_seg_size: Some(mss),
                window_scale: None,
                sack_permitted: false,
                timestamp: None,
                flags: syn.flags - (TcpFlags::ECE | TcpFlags::CWR),
                ..*syn
            };
            let mut c = Connection::accept(&cfg, &stripped, isn, self.now);
            if let Some(synack) = c.poll_transmit(self.now, &mut []) {
                self.stats.tcp_syncookies_sent += 1;
                self.send_tcp(&tuple, &synack);
            }
            return;
        }
        l.half_open += 1;
        let iss = iss.unwrap_or_else(|| self.iss(&tuple));
        let conn = Connection::accept(&cfg, syn, iss, self.now);
        self.stats.tcp_passive_opens += 1;
        self.add_connection(TcpSocket::from_syn(conn, tuple, lid));
    }

    /// Whether one more challenge ACK may go out now (RFC 5961 section 7): one budget per second
    /// of the shard's clock for all its connections, drawn from the keyed hash of the second
    /// between half and one and a half times `challenge_ack_limit` (see [`crate::shard::ShardConfig`]).
    pub(in crate::shard) fn take_challenge_ack(&mut self) -> bool {
        let limit = self.cfg.challenge_ack_limit;
        if limit == u32::MAX {
            return true;
        }
        let second = self.now / 1_000_000_000;
        if second != self.challenge_second {
            self.challenge_second = second;
            let key: [u8; 16] = self.cfg.secret[8..24].try_into().unwrap();
            let mut msg = *b"challenge-ack/second";
            msg[12..].copy_from_slice(&second.to_le_bytes());
            let draw = siphash24(&key, &msg) % u64::from(limit.max(1));
            let budget = u64::from(limit.div_ceil(2)) + draw;
            self.challenge_left = budget.min(u64::from(u32::MAX)) as u32;
        }
        if self.challenge_left == 0 {
            self.stats.tcp_challenge_acks_skipped += 1;
            return false;
        }
        self.challenge_left -= 1;
        true
    }

    /// An ACK at a listener with no connection: the third step of a SYN-cookie handshake? Only
    /// looked at while the listener may have cookies out (Linux's `cookie_v4_check` returns at
    /// once on `tcp_synq_no_recent_overflow`, counting nothing): else it is answered with a RST.
    pub(in crate::shard) fn cookie_ack(
        &mut self,
        lid: SocketId,
        tuple: FourTuple,
        ack: &TcpRepr,
        payload: &[u8],
    ) -> bool {
        let Some(ack_number) = ack.ack_number else { return false };
        let recent = match self.sockets.get(lid) {
            Some(Socket::Listener(l)) => l.last_cookie_sent,
            _ => None,
        };
        if !recent.is_some_and(|sent| self.now.saturating_sub(sent) < VALID_AFTER_LAST_SENT_NS) {
            return false;
        }
        let tsecr = ack.timestamp.map(|(_, ecr)| ecr);
        let Some(info) =
            self.cookies.check(&tuple, ack_number.wrapping_sub(1), ack.seq_number.wrapping_sub(1), tsecr, self.now)
        else {
            self.stats.tcp_syncookies_failed += 1;
            return false;
        };
        match self.sockets.get(lid) {
            Some(Socket::Listener(l)) if l.accept_queue.len() < l.backlog => {}
            _ => {
                self.stats.tcp_listen_overflows += 1;
                return true;
            }
        }
        self.stats.tcp_syncookies_ok += 1;
        self.stats.tcp_passive_opens += 1;
        let buffers = match self.sockets.get(lid) {
            Some(Socket::Listener(l)) => l.buffers,
            _ => Buffers::default(),
        };
        let cfg = self.conn_config(&tuple, buffers);
        if !self.room_for_connection() {
            self.stats.tcp_listen_memory_drops += 1;
            return true;
        }
        let opts = CookieOptions { mss: info.mss, window_scale: None, sack_permitted: false, timestamps: false };
        let mut conn = Connection::from_cookie(&cfg, ack, opts, self.now);
        if !payload.is_empty() || ack.flags.contains(TcpFlags::FIN) {
            conn.handle_segment(self.now, ack, payload);
        }
        self.add_connection(TcpSocket::from_cookie(conn, tuple, lid));
        true
    }

    /// Sends what the connection has, handles its events, re-arms its timer, frees it when done.
    pub(in crate::shard) fn service(&mut self, id: SocketId) {
        // One look at the connection gives it the budget and says whether it has anything to
        // send: after a segment in or a read, most often it has not.
        let budget = self.memory_budget();
        let sends = match self.sockets.get_mut(id) {
            Some(Socket::Tcp(s)) => {
                s.conn.set_memory_budget(budget);
                !s.conn.has_nothing_to_send()
            }
            _ => true,
        };
        if sends {
            self.send_segments(id);
        }
        if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
            let now = s.conn.counters();
            let before = std::mem::replace(&mut s.counted, now);
            let new = |f: fn(&tcp::Counters) -> u32| u64::from(f(&now).wrapping_sub(f(&before)));
            let t = &mut self.stats;
            t.tcp_retrans_segments += new(|c| c.retransmits);
            t.tcp_timeouts += new(|c| c.timeouts);
            t.tcp_loss_probes += new(|c| c.loss_probes);
            t.tcp_loss_probe_recoveries += new(|c| c.loss_probe_recoveries);
            t.tcp_rack_lost += new(|c| c.rack_lost);
            t.tcp_lost_retransmits += new(|c| c.lost_retransmits);
            t.tcp_challenge_acks_skipped += new(|c| c.challenge_acks_skipped);
            t.tcp_abort_on_timeout += new(|c| c.aborts_on_timeout);
            t.tcp_rcvq_drops += new(|c| c.rcvq_drops);
            t.tcp_ofo_drops += new(|c| c.ofo_drops);
        }
        while let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
            let Some(ev) = s.conn.poll_event() else { break };
            self.tcp_event(id, ev);
        }
        // The rest of the step takes the connection once (the events may have freed it): the
        // socket set, the timer wheel and the memory waiters are separate values.
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        // Events say what happened; readiness is what the application waits on. Report every
        // change of it (an ACK that frees send space is not always an event of the connection).
        let now_ready = s.readiness();
        let changed = std::mem::replace(&mut s.reported, now_ready) != now_ready && s.owned;
        let deadline = s.conn.poll_timeout();
        let check_buffers = s.buffers_timer.is_none() && s.conn.buffers_allocated() != (false, false);
        // Armed lazily, as Linux's socket timers are: a deadline that moved later (an ACK
        // pushing the retransmission timeout on) or went away keeps the timer where it
        // is, instead of unlinking and placing it on every segment; when it fires early,
        // `fire_timers` arms it again at the connection's real deadline. Only a deadline
        // that moved earlier moves the timer.
        s.timer = match (deadline, s.timer.map(|h| (h, self.timers.deadline(h)))) {
            (Some(d), Some((h, Some(armed)))) if armed <= d => Some(h),
            (None, Some((h, Some(_)))) => Some(h),
            (Some(d), Some((h, _))) if self.timers.reschedule(h, d) => Some(h),
            (Some(d), _) => Some(self.timers.insert(d, TimerKey::Socket(id))),
            (None, _) => None,
        };
        if check_buffers {
            s.buffers_timer = Some(self.timers.insert(self.now + BUFFERS_CHECK_NS, TimerKey::Buffers(id)));
        }
        let charged = s.conn.charged_bytes();
        let charged_before = std::mem::replace(&mut s.charged, charged);
        let waits_for_memory = s.owned && !s.mem_waiting && s.conn.send_waits_for_memory();
        if changed {
            self.sockets.mark_changed(id);
        }
        if charged_before == charged {
            // Nearly always the same rings (see `Shard::recharge`).
            if waits_for_memory {
                self.wait_for_memory(id);
            }
        } else {
            self.memory_changed(charged_before, charged);
            self.wait_for_memory(id);
        }
    }

    /// A connection's buffer check is due: out-of-order data may be pruned (see
    /// [`Shard::prune_out_of_order`]), rings that hold nothing (all sent data acknowledged,
    /// all received data read) go back to the thread's spare list, to be taken again on use,
    /// unless data came or was sent since the last look; rings in use are looked at again in
    /// [`BUFFERS_CHECK_NS`].
    pub(in crate::shard) fn check_buffers(&mut self, id: SocketId) {
        self.prune_out_of_order(id);
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        if !std::mem::take(&mut s.rings_used) {
            s.conn.release_buffers();
        }
        s.buffers_timer = (s.conn.buffers_allocated() != (false, false))
            .then(|| self.timers.insert(self.now + BUFFERS_CHECK_NS, TimerKey::Buffers(id)));
        self.recharge(id);
    }

    pub(in crate::shard) fn tcp_event(&mut self, id: SocketId, ev: TcpEvent) {
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        match ev {
            TcpEvent::Connected => {
                if let Some(lid) = s.listener {
                    let counted = std::mem::replace(&mut s.half_open, false);
                    let queued = match self.sockets.get_mut(lid) {
                        Some(Socket::Listener(l)) => {
                            if counted {
                                l.half_open -= 1;
                            }
                            l.accept_queue.push_back(id);
                            l.arrivals = l.arrivals.wrapping_add(1);
                            true
                        }
                        _ => false,
                    };
                    if queued {
                        self.sockets.mark_changed(lid);
                    } else {
                        // The listener went away during the handshake.
                        self.abort_and_free(id);
                    }
                } else {
                    self.sockets.mark_changed(id);
                }
            }
            TcpEvent::Readable | TcpEvent::ReadClosed => {
                s.arrivals = s.arrivals.wrapping_add(1);
                s.rings_used = true;
                self.sockets.mark_changed(id);
            }
            TcpEvent::Writable => self.sockets.mark_changed(id),
            TcpEvent::Urgent => {
                // Linux signals the socket's owner; a connection nobody accepted yet has none.
                if s.owned {
                    self.urgent.push(id);
                }
            }
            TcpEvent::Reset | TcpEvent::TimedOut | TcpEvent::Closed => {
                if s.owned && !s.app_closed {
                    // The application still holds the socket, but the 4-tuple is free again, as
                    // on Linux: a peer that reuses its port must reach the listener, not be
                    // reset by this dead connection (nginx keeps a reset keep-alive connection
                    // open until its next read; wrk then saw "write errors").
                    let tuple = s.tuple;
                    if self.conns.get(&tuple) == Some(&id) {
                        self.conns.remove(&tuple);
                    }
                    self.sockets.mark_changed(id);
                } else {
                    self.free_tcp(id);
                }
            }
            TcpEvent::TimeWait => {
                if s.owned && !s.app_closed {
                    // The application still holds the socket (nginx's lingering close: it shut
                    // down its side and reads until the peer's FIN). As on Linux, TIME-WAIT is
                    // kept for the 4-tuple from now on, so a peer that reuses its port is judged
                    // by RFC 6191, not challenged by this connection (that stalled wrk's
                    // Connection: close runs a second per reused port).
                    let (tw, tuple) = (TimeWait::from(&s.conn), s.tuple);
                    if self.conns.get(&tuple) == Some(&id) {
                        self.conns.remove(&tuple);
                    }
                    self.insert_time_wait(tw, tuple);
                    self.sockets.mark_changed(id);
                } else {
                    self.enter_time_wait(id);
                }
            }
        }
    }

    pub(in crate::shard) fn abort_and_free(&mut self, id: SocketId) {
        if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
            s.conn.abort();
            self.send_segments(id);
        }
        self.free_tcp(id);
    }

    /// Removes a TCP socket from the demux table, the timer wheel, its listener, and the slab.
    pub(in crate::shard) fn free_tcp(&mut self, id: SocketId) {
        let Some(Socket::Tcp(mut s)) = self.sockets.take(id) else { return };
        self.keep_owed_rst(&mut s);
        if self.conns.get(&s.tuple) == Some(&id) {
            self.conns.remove(&s.tuple);
        }
        self.memory_changed(s.charged, 0);
        if s.app_closed {
            self.orphans -= 1;
        }
        if s.mem_waiting {
            self.mem_waiters.retain(|&w| w != id);
        }
        for h in [s.timer, s.buffers_timer].into_iter().flatten() {
            self.timers.cancel(h);
        }
        if let Some(lid) = s.listener {
            if let Some(Socket::Listener(l)) = self.sockets.get_mut(lid) {
                if s.half_open {
                    l.half_open -= 1;
                }
                l.accept_queue.retain(|&c| c != id);
            }
        }
    }

    pub(in crate::shard) fn iss(&self, tuple: &FourTuple) -> u32 {
        // RFC 6528: a keyed hash of the 4-tuple plus a 4 µs clock.
        let key: [u8; 16] = self.cfg.secret[16..32].try_into().unwrap();
        (siphash24(&key, &tuple_bytes(tuple)) as u32).wrapping_add((self.now / 4_000) as u32)
    }

    /// The per-connection TCP settings: the MSS of the family (and segmentation offload where
    /// the NIC cuts its segments), a timestamp offset hashed from
    /// the addresses (so values between two hosts keep growing across connections), the
    /// socket's buffers.
    pub(in crate::shard) fn conn_config(&self, tuple: &FourTuple, buffers: Buffers) -> tcp::Config {
        let mut cfg = self.cfg.tcp;
        cfg.rcv_buf = buffers.recv.unwrap_or(cfg.rcv_buf);
        cfg.snd_buf = buffers.send.unwrap_or(cfg.snd_buf);
        // Set by the application: fixed, not autotuned (a maximum below the size).
        if buffers.recv_fixed {
            cfg.rcv_buf_max = 0;
        }
        if buffers.send.is_some() {
            cfg.snd_buf_max = 0;
        }
        if !tuple.is_ipv4() {
            cfg.mss = cfg.mss.saturating_sub(20);
            cfg.tso &= self.link.segments_ipv6();
        }
        let key: [u8; 16] = self.cfg.secret[0..16].try_into().unwrap();
        let mut addrs = [0u8; 32];
        addrs[..16].copy_from_slice(tuple.local_addr_bytes());
        addrs[16..].copy_from_slice(tuple.remote_addr_bytes());
        cfg.ts_offset = siphash24(&key, &addrs) as u32;
        cfg
    }

    /// Sends what the connection has to send, a frame per segment and one copy of the data:
    /// the connection writes the payload from its send buffer straight into the frame, after
    /// the headers it will get ([`Connection::data_header_len`]), and the headers are written
    /// in front of it.
    ///
    /// With segmentation offload (`Offloads::tx_tcp_segmentation`), a connection with more
    /// than a segment to send gets a large buffer and may fill it with several MSS of new data
    /// for the NIC to cut.
    pub(in crate::shard) fn send_segments(&mut self, id: SocketId) {
        let now = self.now;
        // A long run of segments goes to the NIC a burst at a time, while its frames are still in
        // the cache for the copy (or DMA) that reads them; not once the NIC pushed back.
        let mut burst_early = true;
        loop {
            if matches!(self.sockets.get(id), Some(Socket::Tcp(s)) if s.conn.has_nothing_to_send()) {
                return;
            }
            let large = self.tso_buffer(id);
            let is_large = large.is_some();
            let Some(mut buf) = large.or_else(|| self.link.tx_buffer()) else { return self.defer_segments(id) };
            let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return self.link.keep_tx_buffer(buf) };
            let at = transport_offset(s.tuple.remote().0) + s.conn.data_header_len();
            buf.set_len(buf.capacity());
            let Some(repr) = s.conn.poll_transmit(now, &mut buf.data_mut()[at..]) else {
                // A large buffer goes back to its pool rather than serve as the spare.
                return if is_large { drop(buf) } else { self.link.keep_tx_buffer(buf) };
            };
            // The payload went behind the header the connection announced; its options can change
            // in between (out-of-order data pruned at the buffer check takes its SACK blocks
            // away): the payload then moves behind the header it really has (found by the fuzzer).
            let header_end = transport_offset(s.tuple.remote().0) + repr.header_len();
            if repr.payload_len > 0 && header_end != at {
                if header_end + repr.payload_len > buf.capacity() {
                    // Cannot happen with a frame of at most the MTU; if it did, the segment is
                    // lost as on the wire (the connection sends it again) and counted.
                    self.stats.tx_no_buffer += 1;
                    self.link.keep_tx_buffer(buf);
                    continue;
                }
                buf.data_mut().copy_within(at..at + repr.payload_len, header_end);
            }
            let ecn = if s.conn.transmit_ect() { ECN_ECT0 } else { ECN_NOT_ECT };
            let tuple = s.tuple;
            let mss = s.conn.segment_payload_max(repr.header_len());
            self.emit_tcp(buf, &tuple, &repr, ecn, (repr.payload_len > mss).then_some(mss));
            if burst_early && self.link.queued().len() >= TX_BURST {
                self.transmit();
                burst_early = self.link.queued().is_empty();
            }
        }
    }

    /// A buffer for a segment the NIC cuts, if it can and the connection has more than one
    /// segment's worth to send (else an ordinary one serves, and keeps the few large ones free).
    fn tso_buffer(&mut self, id: SocketId) -> Option<N::Buf> {
        if !self.cfg.tcp.tso {
            return None;
        }
        let Some(Socket::Tcp(s)) = self.sockets.get(id) else { return None };
        if !s.tuple.is_ipv4() && !self.link.segments_ipv6() {
            return None;
        }
        if s.conn.unsent() <= s.conn.segment_payload_max(s.conn.data_header_len()) {
            return None;
        }
        self.link.nic_mut().alloc_tso()
    }

    /// No buffer for a frame (the pool is empty): what the connection has to send stays owed
    /// and it is serviced again at the next flush ([`Shard::retry_starved`]), counted. Drained
    /// as lost, a FIN waited for a retransmission timeout, and a RST of a connection freed
    /// right after (an abort, a close with unread data) never left.
    fn defer_segments(&mut self, id: SocketId) {
        self.stats.tx_deferred += 1;
        self.starved.push(id);
    }

    /// Sends the RSTs of freed connections that waited for a buffer, and services again the
    /// connections whose output did (each once, whatever it was pushed for), before the
    /// pass's own work. Cheap when nothing waits: two empty vectors.
    pub(in crate::shard) fn retry_starved(&mut self) {
        while let Some(&(tuple, repr)) = self.owed_rsts.last() {
            let Some(buf) = self.link.tx_buffer() else { break };
            self.owed_rsts.pop();
            self.emit_tcp(buf, &tuple, &repr, ECN_NOT_ECT, None);
        }
        let mut starved = std::mem::take(&mut self.starved);
        for id in starved.drain(..) {
            self.sockets.mark_dirty(id);
        }
        self.starved = starved;
    }

    /// A connection being freed still owes its RST (it found no buffer): the shard keeps it,
    /// up to [`OWED_RSTS_MAX`] (beyond that it is lost, counted as `tx_no_buffer`).
    fn keep_owed_rst(&mut self, s: &mut TcpSocket) {
        if !s.conn.owes_rst() {
            return;
        }
        let Some(repr) = s.conn.poll_transmit(self.now, &mut []) else { return };
        if self.owed_rsts.len() < OWED_RSTS_MAX {
            self.owed_rsts.push((s.tuple, repr));
        } else {
            self.stats.tx_no_buffer += 1;
        }
    }

    /// A segment without data that is not ECN-capable: a RST, TIME-WAIT's ACK, the SYN-ACK of
    /// a SYN cookie.
    pub(in crate::shard) fn send_tcp(&mut self, tuple: &FourTuple, repr: &TcpRepr) {
        debug_assert_eq!(repr.payload_len, 0);
        let Some(buf) = self.link.tx_buffer() else {
            self.stats.tx_no_buffer += 1;
            return;
        };
        self.emit_tcp(buf, tuple, repr, ECN_NOT_ECT, None);
    }

    /// Writes the headers of a segment whose payload is in place in `buf` (ECN field `ecn`) and
    /// sends it; with `cut`, a segment of several MSS for the NIC to cut into pieces of that
    /// many payload bytes: its TCP checksum field then holds the pseudo-header sum without the
    /// length, which each piece's finishes, and it counts once per piece (as Linux counts
    /// `OutSegs` by `tcp_skb_pcount`).
    fn emit_tcp(&mut self, mut buf: N::Buf, tuple: &FourTuple, repr: &TcpRepr, ecn: u8, cut: Option<usize>) {
        let (src, _) = tuple.local();
        let (dst, _) = tuple.remote();
        let at = transport_offset(dst);
        let len = repr.buffer_len();
        buf.set_len(at + len);
        if !self.link.write_headers(buf.data_mut(), src, dst, IpProtocol::Tcp, len, ecn) {
            self.stats.tx_no_route += 1;
            return self.link.keep_tx_buffer(buf);
        }
        let fill = self.link.checksums().fill_l4;
        let mut tcp = TcpPacket::new_unchecked(&mut buf.data_mut()[at..]);
        repr.emit_header(&mut tcp, &src, &dst, fill);
        if cut.is_some() {
            tcp.set_checksum(checksum::pseudo_header(&src, &dst, IpProtocol::Tcp, 0));
        }
        self.link.request_checksums(&mut buf);
        match cut {
            None => self.stats.tcp_tx_segments += 1,
            Some(mss) => {
                buf.request_segmentation(Segmentation {
                    l2_len: ETH as u16,
                    l3_len: (at - ETH) as u16,
                    l4_len: repr.header_len() as u16,
                    mss: mss as u16,
                    ipv4: matches!(dst, IpAddress::V4(_)),
                });
                self.stats.tcp_tx_segments += repr.payload_len.div_ceil(mss) as u64;
            }
        }
        if repr.flags.contains(TcpFlags::RST) {
            self.stats.tcp_rst_sent += 1;
        }
        self.link.route_out(buf, dst, self.now, &mut self.stats);
    }

    /// A new connection in the slab and the demux table, due for a first transmit.
    pub(in crate::shard) fn add_connection(&mut self, sock: TcpSocket) -> SocketId {
        let tuple = sock.tuple;
        let id = self.sockets.alloc(Socket::Tcp(Box::new(sock)));
        self.conns.insert(tuple, id);
        self.sockets.mark_dirty(id);
        id
    }
}

fn tuple_bytes(t: &FourTuple) -> [u8; 36] {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(t.local_addr_bytes());
    b[16..32].copy_from_slice(t.remote_addr_bytes());
    b[32..34].copy_from_slice(&t.local_port().to_be_bytes());
    b[34..36].copy_from_slice(&t.remote_port().to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use nic::Nic;
    use testkit::mem::{pair, MemConfig, MemNic};

    use crate::shard::tcp::{TcpSocket, BUFFERS_CHECK_NS};
    use crate::shard::{Shard, ShardConfig, Socket, SocketId};

    /// Two shards over the in-memory pair; a connection from the client to the server's port
    /// 80, accepted. Returns (client shard, its socket, server shard, its socket, the time).
    fn connected() -> (Shard<MemNic>, SocketId, Shard<MemNic>, SocketId, u64) {
        let (a, b) = pair(MemConfig::default());
        let (sa, ca) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let (amac, bmac) = (a.mac(), b.mac());
        let mut server = Shard::new(a, ShardConfig::new(amac, Some((sa, 24)), None, [1; 32]));
        let mut client = Shard::new(b, ShardConfig::new(bmac, Some((ca, 24)), None, [2; 32]));
        let now = 1_000_000_000;
        server.hear(ca.into(), bmac, now);
        client.hear(sa.into(), amac, now);
        let listener = server.tcp_listen(SocketAddr::from((sa, 80)), 8).unwrap();
        let c = client.tcp_connect(SocketAddr::from((sa, 80))).unwrap();
        let s = loop {
            client.poll(now);
            server.poll(now);
            if let Ok((s, _)) = server.tcp_accept(listener) {
                break s;
            }
        };
        (client, c, server, s, now)
    }

    fn rings(shard: &Shard<MemNic>, id: SocketId) -> (bool, bool) {
        match shard.sockets.get(id) {
            Some(Socket::Tcp(s)) => s.conn.buffers_allocated(),
            _ => panic!("no connection"),
        }
    }

    /// A connection's state is allocated in the family arena (what a fork would share), and a
    /// vector the caller hands the shard to fill stays the caller's (per process).
    #[test]
    fn a_connections_state_lives_in_the_family_arena_and_the_callers_vectors_do_not() {
        arena::enable_family().expect("ScopedAlloc is the unit tests' global allocator");
        let (mut client, c, mut server, s, now) = connected();
        server.take_changed(&mut Vec::new());
        client.tcp_send(c, b"request").unwrap();
        let mut changed = Vec::new();
        while changed.is_empty() {
            client.poll(now);
            server.poll(now);
            server.take_changed(&mut changed);
        }
        let arena = arena::family().expect("enabled above");
        assert!(arena.contains(server.sockets.slab_ptr()), "the socket slab");
        match server.sockets.get(s) {
            Some(Socket::Tcp(conn)) => assert!(arena.contains((&**conn as *const TcpSocket).cast())),
            _ => panic!("no connection"),
        }
        assert!(!arena.contains(changed.as_ptr().cast()), "the caller's vector");
        assert_eq!(arena.overflows(), 0);
    }

    /// A request from the client, read by the server, and its response, read by the client;
    /// then half a second for the delayed ACKs. Returns the time after.
    fn request_and_response(
        client: &mut Shard<MemNic>,
        c: SocketId,
        server: &mut Shard<MemNic>,
        s: SocketId,
        mut now: u64,
    ) -> u64 {
        client.tcp_send(c, b"request").unwrap();
        let mut buf = [0u8; 64];
        let mut got = 0;
        while got < 7 {
            client.poll(now);
            server.poll(now);
            got += server.tcp_recv(s, &mut buf).unwrap_or(0);
        }
        server.tcp_send(s, b"response").unwrap();
        let mut got = 0;
        while got < 8 {
            server.poll(now);
            client.poll(now);
            got += client.tcp_recv(c, &mut buf).unwrap_or(0);
        }
        // Everything read; the last ACKs go out (delayed ones after their timer).
        now += 500_000_000;
        for _ in 0..4 {
            client.poll(now);
            server.poll(now);
        }
        now
    }

    /// Rings that drained go back at the first buffer check that finds the connection idle since
    /// the one before, both ends; the check is not left armed.
    #[test]
    fn rings_that_drained_are_released_at_the_next_buffer_check() {
        let (mut client, c, mut server, s, mut now) = connected();
        now = request_and_response(&mut client, c, &mut server, s, now);
        assert_eq!((rings(&client, c), rings(&server, s)), ((true, true), (true, true)), "in use until a check");
        now += BUFFERS_CHECK_NS;
        client.poll(now);
        server.poll(now);
        assert_eq!(
            (rings(&client, c), rings(&server, s)),
            ((true, true), (true, true)),
            "the first look finds data sent and received since the rings came: kept"
        );
        now += BUFFERS_CHECK_NS;
        client.poll(now);
        server.poll(now);
        assert_eq!((rings(&client, c), rings(&server, s)), ((false, false), (false, false)), "idle since: released");
        // (The timer count says nothing here: a connection's timer armed lazily stays counted
        // until it fires.)
        let check_armed = |shard: &Shard<MemNic>, id| match shard.sockets.get(id) {
            Some(Socket::Tcp(s)) => s.buffers_timer.is_some(),
            _ => panic!("no connection"),
        };
        assert_eq!((check_armed(&client, c), check_armed(&server, s)), (false, false), "no check left armed");
    }

    /// Rings that hold data stay, and are looked at again.
    #[test]
    fn rings_in_use_stay_and_are_checked_again() {
        let (mut client, c, mut server, s, mut now) = connected();
        client.tcp_send(c, b"unread").unwrap();
        client.poll(now);
        now += 500_000_000; // the server's delayed ACK
        for _ in 0..4 {
            server.poll(now);
            client.poll(now);
        }
        for _ in 0..2 {
            // The first look finds the data sent and received since the rings came.
            now += BUFFERS_CHECK_NS;
            client.poll(now);
            server.poll(now);
        }
        // The server has not read it: its receive ring stays; the client's data was
        // acknowledged: its send ring went back.
        assert_eq!(rings(&server, s), (false, true));
        assert_eq!(rings(&client, c), (false, false));
        let armed = server.timer_count();
        now += BUFFERS_CHECK_NS;
        server.poll(now);
        assert_eq!(rings(&server, s), (false, true));
        assert_eq!(server.timer_count(), armed, "checked again later");
    }

    /// A connection that exchanges data between every two looks keeps its rings, drained as they
    /// are at each look: releasing them would free and allocate them again at the next request
    /// once the thread's spare list is full (more than 128 connections' rings).
    #[test]
    fn rings_of_a_connection_in_use_between_looks_stay() {
        let (mut client, c, mut server, s, mut now) = connected();
        for round in 0..4 {
            now = request_and_response(&mut client, c, &mut server, s, now) + BUFFERS_CHECK_NS;
            client.poll(now);
            server.poll(now);
            assert_eq!((rings(&client, c), rings(&server, s)), ((true, true), (true, true)), "round {round}");
        }
    }

    /// (The wheel's deadline for the connection's timer, the connection's own next deadline.)
    fn deadlines(shard: &Shard<MemNic>, id: SocketId) -> (Option<u64>, Option<u64>) {
        match shard.sockets.get(id) {
            Some(Socket::Tcp(s)) => (s.timer.and_then(|h| shard.timers.deadline(h)), s.conn.poll_timeout()),
            _ => panic!("no connection"),
        }
    }

    /// A connection's timer stays where it was when its deadline moves later or goes away (no
    /// unlink and place per ACK); firing early it does nothing but arm itself again at the real
    /// deadline, or go when there is none.
    #[test]
    fn a_timer_armed_lazily_that_fires_early_re_arms_and_fires_nothing() {
        let (mut client, c, mut server, s, mut now) = connected();
        let quiet = |shard: &Shard<MemNic>| {
            let t = shard.stats();
            (t.tcp_retrans_segments, t.tcp_timeouts, t.tcp_loss_probes, t.tcp_tx_segments)
        };
        server.tcp_send(s, b"data").unwrap();
        server.poll(now);
        let (armed, due) = deadlines(&server, s);
        assert!(armed.is_some() && armed == due, "armed at the deadline: {armed:?} {due:?}");
        let first = armed.unwrap();
        // Acknowledged (the client's delayed ACK): the deadline goes, the timer stays.
        let mut buf = [0u8; 64];
        client.poll(now);
        assert_eq!(client.tcp_recv(c, &mut buf), Ok(4));
        now = deadlines(&client, c).1.expect("a delayed ACK");
        client.poll(now);
        server.poll(now);
        assert_eq!(deadlines(&server, s), (Some(first), None), "kept, nothing due");
        // More data later: its deadline is later than the armed one, which stays.
        now = first - 1;
        let before = quiet(&server);
        server.tcp_send(s, b"more").unwrap();
        server.poll(now);
        let (armed, due) = deadlines(&server, s);
        assert_eq!(armed, Some(first));
        let real = due.unwrap();
        assert!(real > first, "the deadline moved later: {real} {first}");
        // The armed time comes: nothing fires, the timer moves to the real deadline.
        let sent = quiet(&server);
        server.poll(first);
        assert_eq!(quiet(&server), sent, "nothing sent or counted at the early firing");
        assert_eq!(deadlines(&server, s), (Some(real), Some(real)));
        // The real deadline: the unacknowledged data is probed or retransmitted.
        server.poll(real);
        let after = quiet(&server);
        assert!(after.0 + after.2 > before.0 + before.2, "retransmitted or probed at the deadline");
    }

    /// Takes every frame buffer the shard could use (its pool's and the one it keeps ready).
    fn drain_pool(shard: &mut Shard<MemNic>) -> Vec<<MemNic as Nic>::Buf> {
        let mut held: Vec<_> = shard.link.tx_buffer().into_iter().collect();
        held.extend(std::iter::from_fn(|| shard.nic_mut().alloc()));
        held
    }

    /// Ends the connection with `end` on the server while its pool is empty: nothing reaches
    /// the client, and the wait is counted. Then the buffers come back and both poll once at
    /// the same time (no retransmission timer can fire): returns the client and its socket.
    fn end_with_a_dry_pool(end: fn(&mut Shard<MemNic>, SocketId)) -> (Shard<MemNic>, SocketId) {
        let (mut client, c, mut server, s, now) = connected();
        let held = drain_pool(&mut server);
        end(&mut server, s);
        server.poll(now);
        client.poll(now);
        assert_eq!(client.tcp_state(c), Ok(tcp::State::Established), "nothing leaves without a buffer");
        assert!(server.stats().tx_deferred > 0);
        drop(held);
        server.poll(now);
        client.poll(now);
        (client, c)
    }

    /// A FIN that finds the pool empty stays owed and leaves at the first pass after buffers
    /// come back, not a retransmission timeout later.
    #[test]
    fn a_fin_that_found_no_buffer_leaves_when_buffers_return() {
        let (mut client, c) = end_with_a_dry_pool(|server, s| server.close(s).unwrap());
        assert_eq!(client.tcp_state(c), Ok(tcp::State::CloseWait));
        assert_eq!(client.tcp_recv(c, &mut [0u8; 8]), Ok(0), "end of stream");
    }

    /// The RST of an abort that finds the pool empty is kept past the connection's end and
    /// leaves at the first pass after buffers come back.
    #[test]
    fn a_rst_that_found_no_buffer_leaves_when_buffers_return() {
        let (mut client, c) = end_with_a_dry_pool(|server, s| server.abort(s).unwrap());
        assert_eq!(client.tcp_recv(c, &mut [0u8; 8]), Err(crate::errno::Errno::ECONNRESET));
    }
}
