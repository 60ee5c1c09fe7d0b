//! One shard of the stack: a NIC queue, the interface on it, and (as the stack issue lands) the
//! IP layer, TCP/UDP demux, timers and sockets above it. A shard is driven by `poll(now)` from
//! one thread and shares nothing with other shards.
//!
//! Today it holds the interface layer ([`iface`]): ARP, IPv6 neighbor discovery and ICMP echo,
//! which is what `pronghorn echo` runs. It never reads a clock or sleeps: time comes in as `now`.

pub mod iface;
pub mod timer;
pub mod table;
pub mod syncookie;
pub mod ports;
pub mod route;
pub mod neighbor;
