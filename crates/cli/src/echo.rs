//! `pronghorn echo`: one shard of the stack on the configured interface, answering ARP, NDP and
//! ping, with TCP echo (port 7), TCP discard (port 9) and UDP echo (port 7) on IPv4 and IPv6.
//! It is the first thing to run when asking "does the NIC path work?". With `--connect` it is a
//! client instead: it sends a stream to a kernel echo server and checks every byte that comes
//! back.
//!
//! The loop polls the NIC; after a run of empty polls it sleeps on the NIC's rx fd (when the PMD
//! has one) so an idle echo does not burn a core. SIGINT/SIGTERM end it cleanly: the port is
//! closed (the XDP program detached) and the counters printed.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use clap::Args;
use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::dpdk::DpdkNic;
use nic::fault::{FaultConfig, FaultyNic};
use nic::Nic;
use stack::echo::{ClientStatus, EchoClient, EchoServer};
use stack::shard::{Shard, ShardConfig};

#[derive(Args)]
pub struct EchoArgs {
    /// The config file (default: $PRONGHORN_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Inject faults on rx and tx, e.g. loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001,delay_us=200
    #[arg(long)]
    fault: Option<FaultConfig>,
    /// Never sleep on the rx fd: poll the NIC continuously (lowest latency, one core at 100%).
    #[arg(long)]
    busy_poll: bool,
    /// Client mode: connect to this echo server (e.g. 10.99.0.2:7007), send --bytes, check the echo.
    #[arg(long)]
    connect: Option<std::net::SocketAddr>,
    /// Bytes the client sends (with --connect).
    #[arg(long, default_value_t = 1 << 20)]
    bytes: u64,
    /// Connections the client opens at once, each sending --bytes (with --connect).
    #[arg(long, default_value_t = 1)]
    conns: usize,
    /// Print what DPDK said while setting up the port.
    #[arg(long, short)]
    verbose: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Empty polls in a row before the loop sleeps on the rx fd.
const SPIN_POLLS: u32 = 2000;
/// Longest sleep on the rx fd, so a stop request is seen promptly even with no traffic.
const SLEEP_MS: i32 = 100;

pub fn run(args: EchoArgs) -> Result<i32> {
    let path = Config::locate(args.config.as_deref())?;
    let cfg = Config::load(&path)?;
    let nic = DpdkNic::open(&runtime::dpdk_options(&cfg))?;
    if args.verbose {
        eprint!("{}", nic.setup_log());
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
    let shard_cfg = runtime::shard_config(&cfg, nic.mac(), runtime::random_secret().map_err(anyhow::Error::msg)?);
    let mode = match args.connect {
        Some(server) => Mode::Client { server, bytes: args.bytes, conns: args.conns },
        None => Mode::Server,
    };
    let addrs: Vec<String> =
        [cfg.ipv4.as_ref().map(|c| c.address.to_string()), cfg.ipv6.as_ref().map(|c| c.address.to_string())]
            .into_iter()
            .flatten()
            .collect();
    let ready = format!(
        "pronghorn echo: ready on {} ({}, {}) at {}{}",
        cfg.nic.iface,
        nic.mac(),
        cfg.nic.pmd,
        addrs.join(" "),
        args.fault.as_ref().map(|f| format!(" with faults {f}")).unwrap_or_default()
    );
    let clock = MonotonicClock::new();
    match args.fault {
        Some(f) => {
            let nic = FaultyNic::new(nic, f, clock);
            serve(nic, shard_cfg, mode, &ready, args.busy_poll, clock)
        }
        None => serve(nic, shard_cfg, mode, &ready, args.busy_poll, clock),
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Server,
    Client { server: std::net::SocketAddr, bytes: u64, conns: usize },
}

fn serve<N: Nic>(
    nic: N,
    cfg: ShardConfig,
    mode: Mode,
    ready: &str,
    busy_poll: bool,
    clock: MonotonicClock,
) -> Result<i32> {
    let rx_fd = if busy_poll { None } else { nic.rx_interrupt_fd() };
    let mut shard = Shard::new(nic, cfg);
    let mut server = match mode {
        Mode::Server => Some(EchoServer::start(&mut shard, 1024).map_err(|e| anyhow::anyhow!("cannot listen: {e}"))?),
        Mode::Client { .. } => None,
    };
    let mut clients = Vec::new();
    if let Mode::Client { server, bytes, conns } = mode {
        for i in 0..conns {
            let c = EchoClient::connect(&mut shard, server, bytes, i as u64)
                .map_err(|e| anyhow::anyhow!("cannot connect to {server}: {e}"))?;
            clients.push(c);
        }
    }
    println!("{ready}{}", if rx_fd.is_some() { "" } else { " (busy polling)" });
    std::io::stdout().flush().context("writing to stdout")?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut idle = 0u32;
    let mut exit = 0;
    while !STOP.load(Ordering::Relaxed) {
        let work = shard.poll(clock.now_ns());
        if let Some(s) = server.as_mut() {
            s.serve(&mut shard);
        }
        if !clients.is_empty() {
            for c in clients.iter_mut() {
                c.drive(&mut shard, &mut buf);
            }
            if clients.iter().all(|c| c.status() != ClientStatus::Running) {
                // Let the last FINs and ACKs go out before stopping.
                for _ in 0..1000 {
                    shard.poll(clock.now_ns());
                }
                for (i, c) in clients.iter().enumerate() {
                    match c.status() {
                        ClientStatus::Done => println!("connection {i}: {} bytes echoed back identical", c.received()),
                        other => {
                            println!("connection {i}: FAILED: {other:?}");
                            exit = 1;
                        }
                    }
                }
                break;
            }
        }
        if work > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if let Some(fd) = rx_fd {
            if idle >= SPIN_POLLS {
                let timeout = match shard.next_deadline() {
                    Some(d) => ((d.saturating_sub(clock.now_ns())) / 1_000_000).min(SLEEP_MS as u64) as i32,
                    None => SLEEP_MS,
                };
                let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                unsafe { libc::poll(&mut pfd, 1, timeout) };
                idle = 0;
            }
        }
    }
    let l = shard.link_stats();
    let t = shard.stats();
    let n = shard.nic().stats();
    println!(
        "pronghorn echo: stopped; rx {} frames, tx {} frames, {} arp replies, {} nd adverts, {} icmp echo replies, {} dropped; tcp: {} in, {} out, {} accepted, {} bytes echoed; udp: {} echoed (port: ipackets {} opackets {} imissed {} ierrors {})",
        l.rx_frames,
        l.tx_frames,
        l.arp_replies,
        l.nd_adverts,
        l.echo_replies,
        l.dropped(),
        t.tcp_rx_segments,
        t.tcp_tx_segments,
        server.as_ref().map_or(0, |s| s.stats().accepted),
        server.as_ref().map_or(0, |s| s.stats().echoed_bytes),
        server.as_ref().map_or(0, |s| s.stats().udp_echoed),
        n.ipackets,
        n.opackets,
        n.imissed,
        n.ierrors
    );
    Ok(exit)
}
