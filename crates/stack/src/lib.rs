//! One shard of the stack: a NIC queue, the interface on it (ARP, NDP, ICMP), the neighbor
//! cache and routes, the IP layer, TCP and UDP demux, listeners and SYN cookies, TIME-WAIT,
//! one timer wheel and the socket API above it. A shard is driven by `poll(now)` from one
//! thread and shares nothing with other shards (the shards of one process hand each other the
//! frames that reached the wrong queue: `shard::exchange`).
//!
//! [`shard::Shard`] is the whole of it; the other modules are its parts. It never reads a clock or
//! sleeps: time comes in as `now`.
//!
//! When the family arena is enabled (crate `arena`: a MAP_SHARED region that a fork keeps at the
//! same address, issue 24; `[runtime] share = "family"`), what a shard allocates lives in it, so
//! that the processes of a family can one day share the shard: each of its calls that may
//! allocate opens the arena's scope. Off (the default), a shard opens no scope.

pub mod echo;
pub mod errno;
pub mod iface;
pub mod ports;
pub mod shard;
pub mod syncookie;
pub use errno::Errno;
pub use tcp::forget_spare_buffers;
pub use tcp::Config as TcpConfig;
pub use tcp::CongestionAlgorithm;
pub use tcp::Ecn as TcpEcn;
pub use tcp::Info as TcpInfo;
pub use tcp::Keepalive;
pub use tcp::State as TcpState;

/// The unit tests' allocator: one of them checks what a shard places in the family arena, which
/// only `arena`'s allocator does (the integration tests and fuzz targets keep the system's).
#[cfg(test)]
#[global_allocator]
static GLOBAL: arena::ScopedAlloc = arena::ScopedAlloc;
