//! `pronghorn echo`: one shard of the stack on the configured interface, answering ARP, NDP and
//! ping. It is the first thing to run when asking "does the NIC path work?".
//!
//! The loop polls the NIC; after a run of empty polls it sleeps on the NIC's rx fd (when the PMD
//! has one) so an idle echo does not burn a core. SIGINT/SIGTERM end it cleanly: the port is
//! closed (the XDP program detached) and the counters printed.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use clap::Args;
use config::{Config, PmdName};
use nic::clock::{Clock, MonotonicClock};
use nic::dpdk::{DpdkNic, DpdkOptions, Pmd};
use nic::fault::{FaultConfig, FaultyNic};
use nic::Nic;
use stack::iface::{Interface, InterfaceConfig};

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
    let pmd = match cfg.nic.pmd {
        PmdName::AfXdp => Pmd::AfXdp,
        PmdName::AfPacket => Pmd::AfPacket,
    };
    let mut opts = DpdkOptions::new(pmd, cfg.nic.iface.clone());
    opts.eal_args = cfg.nic.eal_args.clone();
    opts.pool_size = cfg.nic.mbufs;
    let nic = DpdkNic::open(&opts)?;
    if args.verbose {
        eprint!("{}", nic.setup_log());
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
    let iface_cfg = InterfaceConfig {
        mac: nic.mac(),
        ipv4: cfg.ipv4.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
        ipv6: cfg.ipv6.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
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
            serve(nic, iface_cfg, &ready, args.busy_poll, clock)
        }
        None => serve(nic, iface_cfg, &ready, args.busy_poll, clock),
    }
}

fn serve<N: Nic>(nic: N, cfg: InterfaceConfig, ready: &str, busy_poll: bool, clock: MonotonicClock) -> Result<i32> {
    let rx_fd = if busy_poll { None } else { nic.rx_interrupt_fd() };
    let mut iface = Interface::new(nic, cfg);
    println!("{ready}{}", if rx_fd.is_some() { "" } else { " (busy polling)" });
    std::io::stdout().flush().context("writing to stdout")?;
    let mut idle = 0u32;
    while !STOP.load(Ordering::Relaxed) {
        let handled = iface.poll(clock.now_ns());
        if handled > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if let Some(fd) = rx_fd {
            if idle >= SPIN_POLLS {
                let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                unsafe { libc::poll(&mut pfd, 1, SLEEP_MS) };
                idle = 0;
            }
        }
    }
    let s = iface.stats();
    let n = iface.nic().stats();
    println!(
        "pronghorn echo: stopped; rx {} frames, tx {} frames, {} arp replies, {} nd adverts, {} icmp echo replies, {} dropped (port: ipackets {} opackets {} imissed {} ierrors {})",
        s.rx_frames, s.tx_frames, s.arp_replies, s.nd_adverts, s.echo_replies, s.dropped(), n.ipackets, n.opackets, n.imissed, n.ierrors
    );
    Ok(0)
}
