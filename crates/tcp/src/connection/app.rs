//! The application's side of a connection: the socket calls (`send`, `recv`, `peek`,
//! `shutdown_write`, `close`, `abort`), the socket options that act on the connection, readiness
//! for epoll, `TCP_INFO`, and the events and deadline the caller drains. It owns no state of its
//! own; it must not build segments or run timers (it only marks what the next `poll_transmit`
//! and `handle_timeout` do).

use crate::config::Keepalive;
use crate::congestion::CongestionControl;
use crate::seq;
use crate::time::Instant;

use super::ecn::EcnBit;
use super::output::Owed;
use super::params::{ms, Opt};
use super::recovery::Recovery;
use super::timers::{Timer, NEVER};
use super::{
    Connection, Counters, Error, Event, Flag, Info, MemoryBudget, State, EV_CLOSED, EV_CONNECTED, EV_READABLE,
    EV_READ_CLOSED, EV_RESET, EV_TIMED_OUT, EV_TIME_WAIT, EV_WRITABLE, MIN_PATH_MSS,
};

impl Connection {
    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Our port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The peer's port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// Copies data into the send buffer; returns how much fitted. `Err(WouldBlock)` when the
    /// buffer is full or the handshake is not done; `Err(BrokenPipe)` after `shutdown_write`,
    /// `close` or the end of the connection; a pending error (reset, timeout) is returned once
    /// first, as Linux does.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        match self.state {
            State::SynSent | State::SynReceived if !self.snd.fin_queued => return Err(Error::WouldBlock),
            State::Established | State::CloseWait if !self.snd.fin_queued => {}
            _ => return Err(Error::BrokenPipe),
        }
        if data.is_empty() {
            return Ok(0);
        }
        if !self.may_allocate_send() {
            // Over the stack's memory budget: as Linux's `sk_stream_wait_memory`, EAGAIN (the
            // stack wakes the writer when memory is back).
            self.snd.write_blocked = true;
            return Err(Error::WouldBlock);
        }
        self.snd.buf.ensure(self.p.snd_buf as usize);
        let room = (self.p.snd_buf as usize).saturating_sub(self.snd.buf.len()).min(self.mem_room());
        let n = self.snd.buf.push(&data[..data.len().min(room)]);
        if self.mem_room != u16::MAX {
            self.mem_room -= n as u16;
        }
        if n < data.len() {
            self.snd.write_blocked = true;
        }
        if n == 0 {
            return Err(Error::WouldBlock);
        }
        Ok(n)
    }

    /// Reads in-order data. `Ok(0)` is end of stream (the peer's FIN, or the connection ended
    /// after its error was reported); `Err(WouldBlock)` when nothing is there yet. A pending
    /// error (reset, timeout) is returned once, after the data that arrived before it.
    ///
    /// The urgent mark ends a read that has data before it (Linux's `tcp_recvmsg`); a read at the
    /// mark skips the urgent byte unless SO_OOBINLINE (it is `recv_urgent`'s), even when nothing
    /// follows it yet.
    #[inline]
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if self.rcv.buf.len() == 0 {
            // Nothing to read: the read after the last one (EAGAIN, or the end) needs no span,
            // no copy and no window update.
            return self.recv_nothing(buf.is_empty());
        }
        self.recv_some(buf)
    }

    /// [`Connection::recv`] with nothing to read (an urgent mark then spans nothing either).
    fn recv_nothing(&mut self, empty_buf: bool) -> Result<usize, Error> {
        if empty_buf {
            return Ok(0);
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.rcv.fin_received || self.state == State::Closed {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// [`Connection::recv`] with something in the receive buffer.
    fn recv_some(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let (skip, len) = self.readable_span();
        let n = buf.len().min(len);
        if n > 0 || (skip > 0 && !buf.is_empty()) {
            self.rcv.buf.read_at(skip, &mut buf[..n]);
            self.rcv.buf.pop(skip + n);
            if self.rcv.ooo.is_empty() {
                self.rcv.buf.rewind_if_empty();
            }
            self.passed_urgent_mark();
            self.window_update_after_read();
            if n > 0 {
                return Ok(n);
            }
        }
        // Only the urgent byte was there (skipped), or nothing fits in `buf`.
        self.recv_nothing(buf.is_empty())
    }

    /// Like [`Connection::recv`] but leaves the data in place (MSG_PEEK): the same answer, the
    /// same errors (an error is reported, not consumed).
    pub fn peek(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let (skip, len) = self.readable_span();
        let n = buf.len().min(len);
        if n > 0 {
            self.rcv.buf.read_at(skip, &mut buf[..n]);
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(err) = self.error {
            return Err(err);
        }
        if self.rcv.fin_received || self.state == State::Closed {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// SO_RCVLOWAT: the connection is readable (EPOLLIN) once this many bytes are there (at
    /// least 1), or when the window left is at most one segment (Linux: the peer could not send
    /// more). How a blocking read waits for them is the caller's.
    pub fn set_rcvlowat(&mut self, bytes: u32) {
        self.p.rcvlowat = bytes.max(1);
    }

    /// SO_RCVBUF, in bytes of data (the window advertised is at most this). The window-scale
    /// shift was fixed by the handshake: a buffer larger than it can announce is announced as
    /// far as it can. A smaller buffer takes back no window already offered. The size is then
    /// fixed: autotuning no longer grows it (Linux's SOCK_RCVBUF_LOCK).
    pub fn set_recv_buffer(&mut self, bytes: u32) {
        self.p.rcv_buf = bytes.max(1);
        self.p.rcv_buf_max = self.p.rcv_buf;
        self.grow_rx_ring();
    }

    /// A receive buffer of at least `bytes`, still autotuned (Linux's `tcp_set_rcvlowat` on a
    /// buffer the application did not set; the most autotuning grows it to rises with it).
    pub fn grow_recv_buffer(&mut self, bytes: u32) {
        self.p.rcv_buf = self.p.rcv_buf.max(bytes);
        self.p.rcv_buf_max = self.p.rcv_buf_max.max(self.p.rcv_buf);
        self.grow_rx_ring();
    }

    /// SO_SNDBUF, in bytes of data: what `send` may queue (unsent and unacknowledged). Data
    /// already queued beyond a smaller buffer stays; `send` waits until it drains below it.
    /// The size is then fixed: autotuning no longer grows it (Linux's SOCK_SNDBUF_LOCK).
    pub fn set_send_buffer(&mut self, bytes: u32) {
        self.p.snd_buf = bytes.max(1);
        self.p.snd_buf_max = self.p.snd_buf;
        self.grow_tx_ring();
    }

    /// Bytes `recv` can return now, up to the urgent mark unless SO_OOBINLINE (FIONREAD, Linux's
    /// `tcp_inq`).
    pub fn recv_available(&self) -> usize {
        match self.urgent_mark() {
            Some(before_mark) if !self.p.has(Opt::OobInline) => before_mark.min(self.rcv.buf.len()),
            _ => self.rcv.buf.len(),
        }
    }

    /// Bytes `send` accepts now.
    pub fn send_space(&self) -> usize {
        match self.state {
            State::Established | State::CloseWait if !self.snd.fin_queued && self.may_allocate_send() => {
                (self.p.snd_buf as usize).saturating_sub(self.snd.buf.len())
            }
            _ => 0,
        }
    }

    /// Bytes in the send buffer, sent or not (SIOCOUTQ).
    pub fn send_queued(&self) -> usize {
        self.snd.buf.len()
    }

    /// EPOLLIN: SO_RCVLOWAT bytes of data (one more at the urgent mark, whose byte a read
    /// skips), or any data once the window left is at most a segment; end of stream; or an error
    /// to report. Linux's `tcp_poll`.
    #[inline]
    pub fn is_readable(&self) -> bool {
        let avail = self.rcv.buf.len() as u32;
        let skipped = u32::from(self.urgent_mark() == Some(0) && !self.p.has(Opt::OobInline));
        let target = self.p.rcvlowat.saturating_add(skipped);
        let enough = avail > 0 && (avail >= target || self.rcv.wnd() <= u32::from(self.rcv.mss));
        enough || self.rcv.fin_received || self.error.is_some() || self.state == State::Closed
    }

    /// EPOLLOUT: room in the send buffer (at least a third of it free, like Linux's
    /// `sk_stream_is_writeable`), or an error to report.
    #[inline]
    pub fn is_writable(&self) -> bool {
        (self.send_space() > 0 && self.tx_writable()) || self.error.is_some() || self.state == State::Closed
    }

    /// The pending error, consumed (SO_ERROR).
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// The pending error, left in place.
    pub fn error(&self) -> Option<Error> {
        self.error
    }

    /// `shutdown(SHUT_WR)`: a FIN follows the queued data. In SYN-SENT it abandons the connect
    /// (Linux disconnects); on a closed connection it is `Err(NotConnected)`.
    pub fn shutdown_write(&mut self) -> Result<(), Error> {
        match self.state {
            State::Closed => return Err(Error::NotConnected),
            State::SynSent => self.enter_closed(),
            State::SynReceived => self.snd.fin_queued = true,
            State::Established => {
                self.snd.fin_queued = true;
                self.state = State::FinWait1;
                self.timers.disarm(Timer::Idle); // keepalive is for ESTABLISHED and CLOSE-WAIT
            }
            State::CloseWait => {
                self.snd.fin_queued = true;
                self.state = State::LastAck;
                self.timers.disarm(Timer::Idle);
            }
            _ => {}
        }
        Ok(())
    }

    /// `close()`: like Linux, a RST instead of a FIN if received data was left unread;
    /// otherwise a FIN after the queued data, and any data the peer sends from now on is
    /// answered with a RST. The connection lives on (orphaned) until `Closed` or `TimeWait`.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            State::Closed => {}
            State::SynSent => self.enter_closed(),
            State::TimeWait => {
                self.rcv.closed = true;
                self.rcv.buf.clear();
            }
            _ if self.rcv.buf.len() > 0 => self.abort(),
            _ => {
                self.rcv.closed = true;
                let _ = self.shutdown_write(); // cannot fail: not CLOSED
                if self.state == State::FinWait2 {
                    self.timers.arm(Timer::Idle, now + ms(self.p.fin_wait2_ms));
                }
            }
        }
    }

    /// Abortive close (`SO_LINGER` 0, or the stack giving up): a RST to the peer if it knows
    /// the connection, then CLOSED.
    pub fn abort(&mut self) {
        match self.state {
            State::Closed => {}
            State::SynSent | State::TimeWait => self.enter_closed(),
            _ => {
                self.owe_rst(self.snd.max, Some(self.rcv.nxt));
                self.enter_closed();
            }
        }
        self.rcv.buf.clear();
    }

    /// `TCP_NODELAY`.
    pub fn set_nodelay(&mut self, nodelay: bool) {
        self.p.opts.set(Opt::Nodelay, nodelay);
    }

    /// `SO_KEEPALIVE` with its parameters; `None` turns it off.
    pub fn set_keepalive(&mut self, keepalive: Option<Keepalive>, now: Instant) {
        self.p.set_keepalive(keepalive);
        if matches!(self.state, State::Established | State::CloseWait) {
            self.timers.keepalive_answered();
            self.timers.arm(Timer::Idle, if self.p.has(Opt::Keepalive) { now + ms(self.p.ka_idle_ms) } else { NEVER });
        }
    }

    /// Frees the send and receive buffers if they are empty (they are allocated again on
    /// use). For idle connections under memory pressure.
    pub fn release_buffers(&mut self) {
        self.snd.buf.release();
        if self.snd.una == self.snd.max {
            self.loss.sent.clear();
        }
        if self.rcv.ooo.is_empty() {
            self.rcv.buf.release();
        }
    }

    /// Whether the buffers are allocated (send, receive).
    #[inline]
    pub fn buffers_allocated(&self) -> (bool, bool) {
        (self.snd.buf.is_allocated(), self.rcv.buf.is_allocated())
    }

    /// Ring memory allocated, send and receive together (what the process holds for it).
    pub fn buffer_bytes(&self) -> usize {
        self.snd.buf.capacity() + self.rcv.buf.capacity()
    }

    /// What the stack's budget (Linux's `tcp_mem`) counts, as Linux's `sk_mem_charge` does:
    /// the bytes the rings hold (data to send or to be acknowledged, data to read), and
    /// out-of-order data at its truesize (see `SEGMENT_OVERHEAD`); not the rings' capacity.
    #[inline]
    pub fn charged_bytes(&self) -> usize {
        self.snd.buf.len() + self.rcv.buf.len() + self.out_of_order_charge()
    }

    /// What the stack's memory budget allows from now on: whether it is under pressure
    /// (windows stop growing) and how many more bytes the rings may take on.
    #[inline]
    pub fn set_memory_budget(&mut self, budget: MemoryBudget) {
        self.flags.set(Flag::MemoryPressure, budget.pressure);
        self.mem_room = budget.room.min(u32::from(u16::MAX)) as u16;
    }

    /// The application saw EAGAIN because the budget had no room for its data: the stack
    /// wakes it when memory is freed.
    #[inline]
    pub fn send_waits_for_memory(&self) -> bool {
        self.snd.write_blocked && !self.may_allocate_send()
    }

    /// The receive ring holds out-of-order data and nothing the application can read: one
    /// segment beyond a hole keeps the whole ring allocated.
    pub fn holds_only_out_of_order(&self) -> bool {
        self.rcv.buf.len() == 0 && !self.rcv.ooo.is_empty()
    }

    /// Drops the out-of-order data held (Linux `tcp_prune_ofo_queue`): the peer sends it again
    /// (a receiver may renege on what it SACKed, RFC 2018 section 8; our next ACKs carry no
    /// SACK blocks for it). The receive ring goes back when nothing else is in it. Returns
    /// whether there was any.
    pub fn prune_out_of_order(&mut self) -> bool {
        if self.rcv.ooo.is_empty() && !self.rcv.fin_ahead {
            return false;
        }
        self.rcv.ooo.clear();
        self.rcv.fin_ahead = false;
        self.rcv.buf.release();
        true
    }

    /// A challenge ACK (RFC 5961) is waiting to be sent. Challenge ACKs are rate limited per
    /// stack (Linux: `tcp_challenge_ack_limit`), so after `handle_segment` the stack checks this
    /// and calls [`Connection::cancel_challenge_ack`] when over its budget.
    pub fn challenge_ack_pending(&self) -> bool {
        self.owed.has(Owed::ChallengeAck)
    }

    /// A RST is waiting to be sent (the next `poll_transmit` returns it). The stack asks before
    /// it frees a closed connection: a RST the connection could not send yet (no frame buffer)
    /// is taken out with `poll_transmit` and kept by the stack until it can be.
    pub fn owes_rst(&self) -> bool {
        self.owed.has(Owed::Rst)
    }

    /// Drops the pending challenge ACK (an ACK that is due anyway is still sent).
    pub fn cancel_challenge_ack(&mut self) {
        self.owed.remove(Owed::ChallengeAck);
    }

    /// Whether the segment [`Connection::poll_transmit`] returned last goes out ECN-capable,
    /// ECT(0) in its IP header: new data of an ECN connection, never a retransmission, a pure
    /// ACK, a window probe, a SYN or a RST (RFC 3168 sections 6.1.1, 6.1.4 and 6.1.5).
    pub fn transmit_ect(&self) -> bool {
        self.ecn.has(EcnBit::TransmitEct)
    }

    /// Path MTU discovery (RFC 1191 for IPv4, RFC 8201 for IPv6): an ICMP "fragmentation
    /// needed" or "packet too big" quoting our segment at `quoted_seq` says the path carries at
    /// most `mss` bytes of TCP payload (its MTU less the IP and TCP headers). The message is
    /// believed only if the quoted segment is in flight (RFC 5927 section 4.1), and the size
    /// never drops below 536 (Linux's floor: an ICMP cannot make us send tiny segments). The
    /// lost segment goes again, smaller, at the next retransmission. Returns whether the
    /// segment size went down.
    pub fn path_mtu_reduced(&mut self, mss: u16, quoted_seq: u32) -> bool {
        let in_flight = seq::ge(quoted_seq, self.snd.una) && seq::lt(quoted_seq, self.snd.max);
        let mss = mss.max(MIN_PATH_MSS);
        if !in_flight || mss >= self.mss_cap() {
            return false;
        }
        self.agreed.path_mss = mss;
        true
    }

    /// What loss recovery did so far: the shard's counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// For `TCP_INFO`.
    pub fn info(&self) -> Info {
        Info {
            state: self.state,
            rtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            rto: self.rto(),
            backoff: self.rtt.backoff,
            total_retransmits: self.counters.retransmits,
            snd_mss: self.eff_mss(),
            rcv_mss: u32::from(self.rcv.mss),
            cwnd: self.cc.cwnd(),
            ssthresh: self.cc.ssthresh(),
            snd_wnd: self.snd.wnd,
            rcv_wnd: self.rcv.wnd(),
            snd_wscale: self.agreed.window_scale().then_some(self.agreed.snd_wscale),
            rcv_wscale: self.agreed.window_scale().then_some(self.agreed.rcv_wscale),
            timestamps: self.agreed.timestamps(),
            sack: self.agreed.sack(),
            in_recovery: self.loss.mode != Recovery::None,
            bytes_in_flight: self.snd.in_flight(),
            send_queue: self.snd.buf.len() as u32,
            recv_queue: self.rcv.buf.len() as u32,
            rcv_buf: self.p.rcv_buf,
            snd_buf: self.p.snd_buf,
            challenge_acks: self.challenge_acks,
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.events == 0 {
            return None;
        }
        let bit = self.events & self.events.wrapping_neg();
        self.events &= !bit;
        Some(match bit {
            EV_CONNECTED => Event::Connected,
            EV_READABLE => Event::Readable,
            EV_READ_CLOSED => Event::ReadClosed,
            EV_WRITABLE => Event::Writable,
            EV_RESET => Event::Reset,
            EV_TIMED_OUT => Event::TimedOut,
            EV_TIME_WAIT => Event::TimeWait,
            EV_CLOSED => Event::Closed,
            _ => Event::Urgent,
        })
    }

    /// The earliest deadline: RTO, SYN retransmission, zero-window probe, delayed ACK, RACK's
    /// reordering timer, tail loss probe, keepalive, FIN-WAIT-2 or TIME-WAIT end. Call
    /// [`Connection::handle_timeout`] then.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }
}
