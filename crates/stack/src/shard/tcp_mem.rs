//! The TCP memory limits (Linux `tcp_mem`) as the shard's settings hold them: a value only;
//! what each limit does is `memory`'s.

/// Linux's page, the unit of its `tcp_mem`.
pub const PAGE: usize = 4096;

/// The TCP memory limits (Linux `tcp_mem`), in bytes charged (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMem {
    /// Below this, memory pressure ends.
    pub low: usize,
    /// Above this, memory pressure begins: windows stop growing, out-of-order data is pruned.
    pub pressure: usize,
    /// No ring is allocated that would take the memory past this.
    pub high: usize,
}

impl Default for TcpMem {
    /// What Linux gives a 16 GiB host (`tcp_init_mem`: `pressure` is 1/16 of the memory, `low`
    /// 3/4 of that, `high` twice `low`): 196,608, 262,144 and 393,216 pages (768 MiB, 1 GiB,
    /// 1.5 GiB), charged as Linux charges.
    fn default() -> Self {
        TcpMem { low: 196_608 * PAGE, pressure: 262_144 * PAGE, high: 393_216 * PAGE }
    }
}
