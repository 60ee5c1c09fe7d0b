//! Time as the connection sees it: plain nanoseconds from the caller (the crate reads no clock),
//! and the units its constants are written in.

/// A point in time: nanoseconds since an origin the caller chooses (a monotonic clock).
pub type Instant = u64;

/// A span of time in nanoseconds.
pub type Duration = u64;

/// One millisecond.
pub const MILLISECOND: Duration = 1_000_000;

/// One second.
pub const SECOND: Duration = 1_000_000_000;
