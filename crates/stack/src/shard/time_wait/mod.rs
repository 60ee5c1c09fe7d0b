//! Compact TIME-WAIT entries: a connection that reached TIME-WAIT leaves its socket and keeps
//! only what RFC 9293 and RFC 6191 need to answer its 4-tuple (`tcp::TimeWait`), in a table of
//! its own, until its timer expires; at most `max_tw_buckets` of them (Linux's
//! `tcp_max_tw_buckets`: beyond it a connection skips TIME-WAIT).
//!
//! It owns the entries and their table; it must not touch live connections beyond turning one
//! into an entry.
//!
//! This module holds the values (an entry, what a segment to one came to); `lifecycle` is
//! their work on the shard: a connection made an entry, a segment to an entry, its expiry.

use tcp::TimeWait;

use crate::shard::table::FourTuple;
use crate::shard::timer::TimerHandle;

mod lifecycle;

/// What a segment to a 4-tuple in TIME-WAIT came to.
pub(super) enum TimeWaitInput {
    /// No entry for the 4-tuple.
    NoEntry,
    /// The entry answered it (an ACK) or ignored it.
    Done,
    /// A new SYN the entry accepts (RFC 6191): the entry is gone, and the new connection starts
    /// from this ISS.
    Reopen { iss: u32 },
}

pub(super) struct TimeWaitEntry {
    pub(super) tw: TimeWait,
    pub(super) tuple: FourTuple,
    pub(super) timer: TimerHandle,
}
