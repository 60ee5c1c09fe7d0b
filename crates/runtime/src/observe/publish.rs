//! The stack pass's part of observing: the stats region's counters and latency samples
//! published, and the control socket started.

use std::path::PathBuf;

use nic::Nic;

use super::region::{Region, PROCESS_COUNTERS, SHARD_COUNTERS};

/// Where `family_sleepers` (a gauge read only when a reader asks) is among the process counters.
const FAMILY_SLEEPERS: usize = counter_index("family_sleepers");

/// The index of the process counter named `name` (at compile time: a name that is not there
/// fails the build).
const fn counter_index(name: &str) -> usize {
    let mut i = 0;
    while i < PROCESS_COUNTERS.len() {
        let (n, want) = (PROCESS_COUNTERS[i].0.as_bytes(), name.as_bytes());
        if n.len() == want.len() {
            let mut k = 0;
            while k < n.len() && n[k] == want[k] {
                k += 1;
            }
            if k == n.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("no such process counter")
}
use super::{
    control, lock_figures, region, sample, Observer, PendingWrites, NIC_COUNTERS, PUBLISH_EVERY_NS, STAGE_LOCK_HOLD,
    STAGE_LOCK_WAIT, STAGE_READ, STAGE_RX, STAGE_WRITE,
};
use crate::accel::Runtime;

impl<N: Nic + 'static> Runtime<N> {
    /// Makes the region and the control socket in `dir` (the NIC just opened). Failing costs
    /// only the observability: said once on stderr.
    pub(crate) fn start_observer(&mut self, dir: PathBuf) {
        let pid = std::process::id();
        let made = Region::create(&region::stats_path(&dir, pid)).map_err(|e| e.to_string()).and_then(|mut region| {
            let cfg = &self.cfg;
            let (shards, dedicated) = (self.shards.len() as u64, self.wait.stats.dedicated);
            region.write(|l| {
                l.shards = shards;
                l.dedicated = u64::from(dedicated);
                region::put_text(&mut l.iface, &cfg.nic.iface);
                region::put_text(&mut l.pmd, &cfg.nic.pmd.to_string());
                region::put_text(&mut l.ipv4, &cfg.ipv4.as_ref().map_or(String::new(), |c| c.address.to_string()));
                region::put_text(&mut l.ipv6, &cfg.ipv6.as_ref().map_or(String::new(), |c| c.address.to_string()));
            });
            if let Some(me) = self.me {
                control::start(me, region::control_path(&dir, pid)).map_err(|e| {
                    region.remove();
                    e.to_string()
                })?;
            }
            Ok(region)
        });
        match made {
            Ok(region) => {
                self.observer = Some(Observer { region, next_publish_ns: 0, pending_writes: PendingWrites::new() });
                self.publish(true, false);
            }
            Err(e) => {
                let msg = format!(
                    "pronghorn: no stats region or control socket in {} ({e}): pronghorn ps/stat/conns will not see pid {pid}\n",
                    dir.display()
                );
                // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                unsafe { crate::real::write(2, msg.as_ptr().cast(), msg.len()) };
            }
        }
    }

    /// Removes the region and the control socket (the process exits).
    pub(crate) fn stop_observer(&mut self) {
        if let Some(o) = self.observer.take() {
            o.region.remove();
            if let Some(dir) = o.region.path().parent() {
                let _ = std::fs::remove_file(region::control_path(dir, std::process::id()));
            }
        }
    }

    /// Copies the counters into the region: at most once a millisecond unless `force`;
    /// `with_nic` also reads the NIC's own counters (a system call for some drivers) and the
    /// packet pool's gauge (a walk over DPDK's per-lcore caches), so only when a reader asks.
    pub(crate) fn publish(&mut self, force: bool, with_nic: bool) {
        self.publish_at(self.now(), force, with_nic);
    }

    /// [`publish`](Self::publish) at `now` (the caller read the clock already).
    pub(crate) fn publish_at(&mut self, now: u64, force: bool, with_nic: bool) {
        let Some(o) = self.observer.as_mut() else { return };
        if !force && now < o.next_publish_ns {
            return;
        }
        o.next_publish_ns = now + PUBLISH_EVERY_NS;
        let r = self.routing;
        let w = self.wait.stats;
        let (lock_counters, lock_rows) =
            self.me.map_or(([0; 4], [[0; region::BUCKETS]; 2]), |a| lock_figures(a.lock_stats()));
        // The family's gauges walk its tables in the arena: read when a reader asks, as the
        // NIC's counters are (the region keeps the last reading in between).
        let family = self.sharing.family().map(|f| f.stats(with_nic)).unwrap_or_default();
        let process = [
            r.accelerated_listen,
            r.accelerated_connect,
            r.accepted,
            r.kernel_accepted,
            r.kernel_bind,
            r.kernel_connect,
            r.init_failed,
            r.accelerated_udp,
            r.kernel_udp,
            w.sleeps,
            w.wakeups,
            w.stack_thread_polls,
            w.inline_polls,
            w.skipped_passes,
            w.epoll_waits,
            w.epoll_events,
            w.roles_taken_from_accept_loop,
            w.roles_given_back_to_accept_loop,
            crate::shield::caught(),
            crate::lockstat::WAKEUP_SYSCALLS.load(std::sync::atomic::Ordering::Relaxed),
            family.wakes,
            family.wakes_idle,
            family.sleepers,
            lock_counters[0],
            lock_counters[1],
            lock_counters[2],
            lock_counters[3],
            family.dead_processes,
            family.dead_lock_holders,
            family.dead_mid_update,
        ];
        debug_assert_eq!(process.len(), PROCESS_COUNTERS.len());
        let shards = self.shards.all();
        o.region.write(|l| {
            l.updated_ns = now;
            l.dedicated = u64::from(w.dedicated);
            let sleepers_before = l.process[FAMILY_SLEEPERS];
            l.process = process;
            if !with_nic {
                l.process[FAMILY_SLEEPERS] = sleepers_before;
            }
            l.latency[STAGE_LOCK_WAIT] = lock_rows[0];
            l.latency[STAGE_LOCK_HOLD] = lock_rows[1];
            for (k, s) in shards.iter().enumerate().take(region::MAX_SHARDS) {
                let row = &mut l.shard[k];
                if with_nic {
                    let n = s.nic().stats();
                    row[..NIC_COUNTERS].copy_from_slice(&[
                        n.ipackets,
                        n.opackets,
                        n.ibytes,
                        n.obytes,
                        n.imissed,
                        n.ierrors,
                        n.oerrors,
                        n.rx_nombuf,
                        n.rx_ring_full,
                        n.tx_invalid,
                        n.xdp_redirected,
                        n.xdp_passed,
                        n.xdp_no_socket,
                    ]);
                }
                // The pool's gauge walks the pool's per-lcore caches: read when a reader asks,
                // as the NIC's counters are; between two asks the row keeps the last reading.
                let (in_use, size) = if with_nic {
                    s.nic().pool_usage().unwrap_or((0, 0))
                } else {
                    (row[NIC_COUNTERS], row[NIC_COUNTERS + 1])
                };
                let i = s.link_stats();
                let t = s.stats();
                let rest = [
                    in_use,
                    size,
                    i.rx_frames,
                    i.tx_frames,
                    i.arp_replies,
                    i.nd_adverts,
                    i.echo_replies,
                    i.drop_not_for_us,
                    i.drop_malformed,
                    i.drop_checksum,
                    i.drop_fragment,
                    i.drop_bad_source,
                    i.drop_unhandled,
                    i.drop_tx_full,
                    t.tcp_rx_segments,
                    t.tcp_tx_segments,
                    t.tcp_retrans_segments,
                    t.tcp_timeouts,
                    t.tcp_loss_probes,
                    t.tcp_loss_probe_recoveries,
                    t.tcp_rack_lost,
                    t.tcp_lost_retransmits,
                    t.tcp_bad_checksum,
                    t.tcp_malformed,
                    t.tcp_rst_sent,
                    t.tcp_active_opens,
                    t.tcp_passive_opens,
                    t.tcp_syncookies_sent,
                    t.tcp_syncookies_ok,
                    t.tcp_syncookies_failed,
                    t.tcp_listen_overflows,
                    t.tcp_challenge_acks_skipped,
                    t.tcp_time_wait_entries,
                    t.tcp_handed_off,
                    t.udp_rx_datagrams,
                    t.udp_tx_datagrams,
                    t.udp_bad_checksum,
                    t.udp_no_port,
                    t.udp_rcvbuf_errors,
                    t.udp_handed_off,
                    t.icmp_out_dest_unreachs,
                    t.icmp_out_rate_limited,
                    t.icmp_in_dest_unreachs,
                    t.pmtu_reductions,
                    t.icmp_too_big_ignored,
                    t.tx_no_buffer,
                    t.tx_deferred,
                    t.tx_queue_full,
                    t.tx_no_route,
                    t.tx_unresolved,
                    t.tcp_abort_on_timeout,
                    t.tcp_abort_on_memory,
                    t.tcp_rcvq_drops,
                    t.tcp_ofo_drops,
                    t.tcp_prune_called,
                    t.tcp_ofo_pruned,
                    t.tcp_memory_pressures,
                    t.tcp_listen_memory_drops,
                    t.tcp_syns_left_unanswered,
                    t.tcp_time_wait_overflows,
                    t.tcp_gro_merged,
                    t.loopback_frames,
                    s.socket_count() as u64,
                    s.time_wait_count() as u64,
                    s.orphan_count() as u64,
                    s.tcp_memory().div_ceil(stack::shard::PAGE) as u64,
                ];
                debug_assert_eq!(NIC_COUNTERS + rest.len(), SHARD_COUNTERS.len());
                row[NIC_COUNTERS..].copy_from_slice(&rest);
            }
        });
    }

    /// A stack pass that received `frames` began at `start_ns` and has woken its waiters (by
    /// `now`).
    pub(crate) fn observe_pass(&mut self, frames: usize, start_ns: u64, now: u64) {
        if frames == 0 || self.observer.is_none() {
            return;
        }
        if let Some(o) = self.observer.as_mut() {
            sample(&mut o.region, STAGE_RX, now.saturating_sub(start_ns), frames as u64);
        }
    }

    /// The application wrote to a socket (`write->tx` starts).
    pub(crate) fn observe_write(&mut self) {
        if self.observer.is_none() {
            return;
        }
        let now = self.now();
        if let Some(o) = self.observer.as_mut() {
            o.pending_writes.push(now);
        }
    }

    /// Frames were handed to the NIC (by `now`): the writes before it are out.
    pub(crate) fn observe_transmit(&mut self, now: u64) {
        if !matches!(&self.observer, Some(o) if !o.pending_writes.is_empty()) {
            return;
        }
        let Observer { region, pending_writes, .. } = self.observer.as_mut().unwrap();
        pending_writes.drain(|t| sample(region, STAGE_WRITE, now.saturating_sub(t), 1));
    }

    /// The application read from a socket that became readable at `since_ns`.
    pub(crate) fn observe_read(&mut self, since_ns: u64) {
        if since_ns == 0 {
            return;
        }
        let now = self.now();
        if let Some(o) = self.observer.as_mut() {
            sample(&mut o.region, STAGE_READ, now.saturating_sub(since_ns), 1);
        }
    }

    /// Whether latency is being recorded (the read stage needs the time a socket became
    /// readable).
    pub(crate) fn observing(&self) -> bool {
        self.observer.is_some()
    }
}
