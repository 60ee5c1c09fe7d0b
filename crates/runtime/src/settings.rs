//! The settings a config makes: the shards' (addresses, gateways, TCP limits), their TCP's and
//! the DPDK port's, for the process's runtime and `pronghorn echo`.

use config::{Config, Congestion, PmdName};
use nic::dpdk::{DpdkOptions, Pmd};
use nic::MacAddr;
use stack::shard::{ShardConfig, TcpMem, PAGE};

use crate::shared;

/// The shard settings a config describes, for a NIC with address `mac` (also `pronghorn
/// echo`'s); `secret` keys the shard's hashes.
pub fn shard_config(cfg: &Config, mac: MacAddr, secret: [u8; 32]) -> ShardConfig {
    let mut shard = ShardConfig::new(
        mac,
        cfg.ipv4.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
        cfg.ipv6.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
        secret,
    );
    shard.gateway4 = cfg.ipv4.as_ref().and_then(|c| c.gateway);
    shard.gateway6 = cfg.ipv6.as_ref().and_then(|c| c.gateway);
    shard.tcp = tcp_config(cfg);
    let t = &cfg.tcp;
    shard.max_orphans = t.max_orphans as usize;
    let [low, pressure, high] = t.mem.map(|pages| usize::try_from(pages).unwrap_or(usize::MAX).saturating_mul(PAGE));
    shard.tcp_mem = TcpMem { low, pressure, high };
    shard.max_tw_buckets = t.max_tw_buckets as usize;
    shard.somaxconn = t.somaxconn as usize;
    if cfg.nic.share {
        shard.ephemeral_ports = shared::EPHEMERAL;
        // The kernel keeps the interface: without a gateway in the config, its default routes'.
        if shard.gateway4.is_none() || shard.gateway6.is_none() {
            let (v4, v6) = shared::kernel_gateways(&cfg.nic.iface, shard.ipv4, shard.ipv6);
            shard.gateway4 = shard.gateway4.or(v4);
            shard.gateway6 = shard.gateway6.or(v6);
        }
    }
    shard
}

/// The DPDK port a config describes (also `pronghorn echo`'s).
pub fn dpdk_options(cfg: &Config) -> DpdkOptions {
    let pmd = match cfg.nic.pmd {
        PmdName::AfXdp => Pmd::AfXdp,
        PmdName::AfPacket => Pmd::AfPacket,
        PmdName::Tap => Pmd::Tap,
    };
    let mut opts = DpdkOptions::new(pmd, cfg.nic.iface.clone());
    opts.eal_args = cfg.nic.eal_args.clone();
    opts.pool_size = cfg.nic.mbufs;
    opts.queues = cfg.nic.queues;
    opts.shards = cfg.runtime.shards;
    opts.offloads = cfg.nic.offloads;
    opts.claim_patience =
        std::time::Duration::from_millis(cfg.runtime.exit_drain_ms.into()) + nic::dpdk::CLAIM_PATIENCE_BEYOND_DRAIN;
    opts.xdp_owner = Some(nic::xdp::Owner {
        ipv4: cfg.ipv4.as_ref().map(|c| c.address.addr),
        ipv6: cfg.ipv6.as_ref().map(|c| c.address.addr),
        share: cfg.nic.share,
        ephemeral: cfg.nic.share.then(|| (*shared::EPHEMERAL.start(), *shared::EPHEMERAL.end())),
    });
    opts
}

/// The TCP settings of the shards a config describes (also `pronghorn echo`'s).
pub fn tcp_config(cfg: &Config) -> stack::TcpConfig {
    let congestion = match cfg.tcp.congestion {
        Congestion::Cubic => stack::CongestionAlgorithm::Cubic,
        Congestion::NewReno => stack::CongestionAlgorithm::NewReno,
    };
    let ecn = stack::TcpEcn::from_sysctl(cfg.tcp.ecn).expect("the config crate checked tcp.ecn");
    stack::TcpConfig {
        congestion,
        ecn,
        orphan_retries: u8::try_from(cfg.tcp.orphan_retries).expect("the config crate checked tcp.orphan_retries"),
        fin_wait2_timeout: u64::from(cfg.tcp.fin_timeout) * 1_000_000_000,
        ..stack::TcpConfig::default()
    }
}
