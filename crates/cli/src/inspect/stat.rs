//! `pronghorn stat`: a process's counters per shard, the TCP and UDP MIB in nstat's names,
//! and its routing decisions and kernel fallbacks; rates with `--interval`, as JSON or in
//! Prometheus's text format.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use runtime::observe::region::{bucket_floor, Snapshot, BUCKETS, PROCESS_COUNTERS, SHARD_COUNTERS, STAGES};

use super::{control_lines, pick, ps::summary, Process};

#[derive(Args)]
pub struct StatArgs {
    /// The accelerated process (the only one, if not given).
    #[arg(value_parser = super::parse_pid)]
    pid: Option<u32>,
    /// Print rates every S seconds (per second, over the interval) until interrupted.
    #[arg(long, value_name = "S")]
    interval: Option<f64>,
    /// Stop after this many intervals.
    #[arg(long)]
    count: Option<u64>,
    /// One JSON object (per interval).
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Prometheus text exposition format.
    #[arg(long)]
    prometheus: bool,
}

/// Counters that are levels, not totals: shown as they are, never as rates.
const GAUGES: &[&str] = &["pool_in_use", "pool_size", "sockets", "time_wait", "tcp_orphans", "tcp_mem_pages"];

/// The MIB in nstat's names, from the shard counters summed: (name, counters added).
const MIB: &[(&str, &[&str])] = &[
    ("TcpActiveOpens", &["tcp_active_opens"]),
    ("TcpPassiveOpens", &["tcp_passive_opens"]),
    ("TcpInSegs", &["tcp_in_segs"]),
    ("TcpOutSegs", &["tcp_out_segs"]),
    ("TcpRetransSegs", &["tcp_retrans_segs"]),
    ("TcpInErrs", &["tcp_in_csum_errors", "tcp_in_malformed"]),
    ("TcpInCsumErrors", &["tcp_in_csum_errors"]),
    ("TcpOutRsts", &["tcp_out_rsts"]),
    ("UdpInDatagrams", &["udp_in_datagrams"]),
    ("UdpOutDatagrams", &["udp_out_datagrams"]),
    ("UdpNoPorts", &["udp_no_ports"]),
    ("UdpInErrors", &["udp_in_csum_errors", "udp_rcvbuf_errors"]),
    ("UdpRcvbufErrors", &["udp_rcvbuf_errors"]),
    ("UdpInCsumErrors", &["udp_in_csum_errors"]),
    ("IcmpOutDestUnreachs", &["icmp_out_dest_unreachs"]),
    ("IcmpInDestUnreachs", &["icmp_in_dest_unreachs"]),
    ("TcpExtSyncookiesSent", &["tcp_syncookies_sent"]),
    ("TcpExtSyncookiesRecv", &["tcp_syncookies_recv"]),
    ("TcpExtSyncookiesFailed", &["tcp_syncookies_failed"]),
    ("TcpExtListenOverflows", &["tcp_listen_overflows"]),
    ("TcpExtListenDrops", &["tcp_listen_overflows", "tcp_listen_memory_drops"]),
    ("TcpExtTCPACKSkippedChallenge", &["tcp_challenge_acks_skipped"]),
    ("TcpExtTCPTimeouts", &["tcp_timeouts"]),
    ("TcpExtTCPLossProbes", &["tcp_loss_probes"]),
    ("TcpExtTCPLossProbeRecovery", &["tcp_loss_probe_recoveries"]),
    ("TcpExtTCPLostRetransmit", &["tcp_lost_retransmits"]),
    ("TcpExtTCPAbortOnTimeout", &["tcp_abort_on_timeout"]),
    ("TcpExtTCPAbortOnMemory", &["tcp_abort_on_memory"]),
    ("TcpExtTCPRcvQDrop", &["tcp_rcvq_drops"]),
    ("TcpExtTCPOFODrop", &["tcp_ofo_drops"]),
    ("TcpExtPruneCalled", &["tcp_prune_called"]),
    ("TcpExtOfoPruned", &["tcp_ofo_pruned"]),
    ("TcpExtTCPMemoryPressures", &["tcp_memory_pressures"]),
    ("TcpExtTCPTimeWaitOverflow", &["tcp_time_wait_overflows"]),
];

/// Every figure of one reading: per-shard counters, the MIB, the process counters.
struct Reading {
    shards: Vec<Vec<u64>>,
    mib: Vec<u64>,
    process: Vec<u64>,
}

fn reading(s: &Snapshot) -> Reading {
    let shards: Vec<Vec<u64>> = (0..s.shard_count()).map(|k| s.layout.shard[k].to_vec()).collect();
    let mib = MIB.iter().map(|(_, parts)| parts.iter().map(|c| s.total(c)).sum()).collect();
    Reading { shards, mib, process: s.layout.process.to_vec() }
}

/// `now - before` per second, except for gauges.
fn rate(name: &str, now: u64, before: u64, secs: f64) -> f64 {
    if GAUGES.contains(&name) {
        now as f64
    } else {
        now.saturating_sub(before) as f64 / secs
    }
}

fn refresh(p: &mut Process) -> Result<()> {
    control_lines(p.pid, "stat")?;
    p.re_read()
}

pub fn run(args: StatArgs) -> Result<i32> {
    let mut p = pick(args.pid)?;
    refresh(&mut p)?;
    let Some(interval) = args.interval else {
        let r = reading(&p.snapshot);
        print(&p, &r, None, &args);
        return Ok(0);
    };
    anyhow::ensure!(interval > 0.0, "--interval must be more than 0 seconds, got {interval}");
    let mut before = reading(&p.snapshot);
    let mut at = Instant::now();
    let mut n = 0;
    loop {
        std::thread::sleep(Duration::from_secs_f64(interval));
        refresh(&mut p)?;
        let now = reading(&p.snapshot);
        let secs = at.elapsed().as_secs_f64();
        at = Instant::now();
        print(&p, &now, Some((&before, secs)), &args);
        before = now;
        n += 1;
        if args.count.is_some_and(|c| n >= c) {
            return Ok(0);
        }
    }
}

fn print(p: &Process, r: &Reading, rates: Option<(&Reading, f64)>, args: &StatArgs) {
    let value = |name: &str, now: u64, before: Option<u64>| -> f64 {
        match (rates, before) {
            (Some((_, secs)), Some(b)) => rate(name, now, b, secs),
            _ => now as f64,
        }
    };
    let shard_value =
        |k: usize, i: usize| value(SHARD_COUNTERS[i].0, r.shards[k][i], rates.map(|(b, _)| b.shards[k][i]));
    let mib_value = |i: usize| value(MIB[i].0, r.mib[i], rates.map(|(b, _)| b.mib[i]));
    let process_value = |i: usize| value(PROCESS_COUNTERS[i].0, r.process[i], rates.map(|(b, _)| b.process[i]));
    let fmt = |v: f64| if rates.is_some() { format!("{v:.1}") } else { format!("{v:.0}") };

    if args.prometheus {
        let pid = p.pid;
        for (i, (name, help)) in SHARD_COUNTERS.iter().enumerate() {
            let kind = if GAUGES.contains(name) { "gauge" } else { "counter" };
            println!("# HELP pronghorn_{name} {help}\n# TYPE pronghorn_{name} {kind}");
            for k in 0..r.shards.len() {
                println!("pronghorn_{name}{{pid=\"{pid}\",shard=\"{k}\"}} {}", r.shards[k][i]);
            }
        }
        for (i, (name, help)) in PROCESS_COUNTERS.iter().enumerate() {
            println!("# HELP pronghorn_{name} {help}\n# TYPE pronghorn_{name} counter");
            println!("pronghorn_{name}{{pid=\"{pid}\"}} {}", r.process[i]);
        }
        for (stage, name) in [("lock-wait", "lock_wait"), ("lock-hold", "lock_hold")] {
            if let Some(i) = STAGES.iter().position(|(s, _)| *s == stage) {
                print!("{}", prometheus_histogram(pid, name, STAGES[i].1, &p.snapshot.layout.latency[i]));
            }
        }
        return;
    }
    if args.json {
        let mut shards = Vec::new();
        for k in 0..r.shards.len() {
            let m: BTreeMap<&str, f64> =
                SHARD_COUNTERS.iter().enumerate().map(|(i, (n, _))| (*n, shard_value(k, i))).collect();
            shards.push(m);
        }
        let mib: BTreeMap<&str, f64> = MIB.iter().enumerate().map(|(i, (n, _))| (*n, mib_value(i))).collect();
        let process: BTreeMap<&str, f64> =
            PROCESS_COUNTERS.iter().enumerate().map(|(i, (n, _))| (*n, process_value(i))).collect();
        let v = serde_json::json!({
            "pid": p.pid, "per_second": rates.is_some(), "interval_s": rates.map(|(_, s)| s),
            "shards": shards, "mib": mib, "process": process,
        });
        println!("{v}");
        return;
    }
    let s = summary(p);
    println!(
        "pid {} ({}) on {} {} ({}), {} shard{}, {}{}",
        s.pid,
        s.command,
        s.iface,
        s.address,
        s.pmd,
        s.shards,
        if s.shards == 1 { "" } else { "s" },
        s.mode,
        rates.map_or(String::new(), |(_, secs)| format!("; per second over {secs:.2} s (gauges as they are)"))
    );
    let mut head = format!("{:<28}", "");
    for k in 0..r.shards.len() {
        head.push_str(&format!(" {:>14}", format!("shard{k}")));
    }
    if r.shards.len() > 1 {
        head.push_str(&format!(" {:>14}", "total"));
    }
    println!("{head}");
    for (i, (name, _)) in SHARD_COUNTERS.iter().enumerate() {
        let mut line = format!("{name:<28}");
        let mut total = 0.0;
        for k in 0..r.shards.len() {
            let v = shard_value(k, i);
            total += v;
            line.push_str(&format!(" {:>14}", fmt(v)));
        }
        if r.shards.len() > 1 {
            line.push_str(&format!(" {:>14}", fmt(total)));
        }
        println!("{line}");
    }
    println!("\n#MIB (nstat's names)");
    for (i, (name, _)) in MIB.iter().enumerate() {
        println!("{name:<32} {:>14}", fmt(mib_value(i)));
    }
    println!("\n#process: routing decisions, kernel fallbacks, waiting");
    for (i, (name, _)) in PROCESS_COUNTERS.iter().enumerate() {
        println!("{name:<32} {:>14}", fmt(process_value(i)));
    }
}

/// A latency histogram (ns) as a Prometheus histogram in seconds: a bucket per non-empty bucket
/// of the region's, cumulative, with `_count` (and no `_sum`: the region keeps none per stage).
fn prometheus_histogram(pid: u32, name: &str, help: &str, hist: &[u64; BUCKETS]) -> String {
    let mut out = format!("# HELP pronghorn_{name}_seconds {help}\n# TYPE pronghorn_{name}_seconds histogram\n");
    let mut cumulative = 0;
    for (b, &n) in hist.iter().enumerate().filter(|(_, &n)| n > 0) {
        cumulative += n;
        let le = if b + 1 < BUCKETS { bucket_floor(b + 1) as f64 / 1e9 } else { f64::INFINITY };
        out.push_str(&format!("pronghorn_{name}_seconds_bucket{{pid=\"{pid}\",le=\"{le:e}\"}} {cumulative}\n"));
    }
    out.push_str(&format!("pronghorn_{name}_seconds_bucket{{pid=\"{pid}\",le=\"+Inf\"}} {cumulative}\n"));
    out.push_str(&format!("pronghorn_{name}_seconds_count{{pid=\"{pid}\"}} {cumulative}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_histograms_are_cumulative_prometheus_buckets() {
        let mut h = [0; BUCKETS];
        h[runtime::observe::region::bucket_of(100)] = 2;
        h[runtime::observe::region::bucket_of(5000)] = 3;
        let text = prometheus_histogram(7, "lock_wait", "waits", &h);
        assert_eq!(
            text,
            "# HELP pronghorn_lock_wait_seconds waits\n# TYPE pronghorn_lock_wait_seconds histogram\n\
             pronghorn_lock_wait_seconds_bucket{pid=\"7\",le=\"1.12e-7\"} 2\n\
             pronghorn_lock_wait_seconds_bucket{pid=\"7\",le=\"5.12e-6\"} 5\n\
             pronghorn_lock_wait_seconds_bucket{pid=\"7\",le=\"+Inf\"} 5\n\
             pronghorn_lock_wait_seconds_count{pid=\"7\"} 5\n"
        );
    }

    /// A name that is not a shard counter would read as 0 for ever.
    #[test]
    fn every_mib_entry_and_gauge_is_a_shard_counter() {
        let known = |c: &str| SHARD_COUNTERS.iter().any(|(n, _)| *n == c);
        for (mib, parts) in MIB {
            assert!(parts.iter().all(|c| known(c)), "{mib}: {parts:?}");
        }
        assert!(GAUGES.iter().all(|g| known(g)), "{GAUGES:?}");
    }

    /// The limits on what TCP holds show under Linux's names.
    #[test]
    fn tcp_limits_show_as_nstat_names_them() {
        for name in [
            "TcpExtTCPAbortOnTimeout",
            "TcpExtTCPAbortOnMemory",
            "TcpExtTCPRcvQDrop",
            "TcpExtTCPOFODrop",
            "TcpExtPruneCalled",
            "TcpExtOfoPruned",
            "TcpExtTCPMemoryPressures",
            "TcpExtListenDrops",
            "TcpExtTCPTimeWaitOverflow",
        ] {
            assert!(MIB.iter().any(|(n, _)| *n == name), "{name}");
        }
        assert!(GAUGES.contains(&"tcp_orphans") && GAUGES.contains(&"tcp_mem_pages"));
    }
}
