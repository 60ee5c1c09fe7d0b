//! pronghorn's test rigs, kept out of the product crates: the product builds (`libpronghorn.so`,
//! the `pronghorn` command) never link this crate, only tests, benchmarks and fuzzers do.
//!
//! - [`mem`]: an in-memory pair of NIC endpoints, deterministic, for stack tests and stack-level
//!   benchmarks, with transmit offloads (checksums, TCP segmentation) done in software by
//!   [`offload`] when asked;
//! - [`fuzzing`]: the stack's fuzz checks and [`fuzzing::Rig`], a shard with listeners and a
//!   hand-played peer;
//! - [`rng`]: the seeded generator of the tests;
//! - [`lab`]: what every lab test (`crates/cli/tests/lab/main.rs`) does before and checks after its
//!   scenario.
//!
//! Not here: the fault-injecting NIC (`nic::fault`), which production runs (`[nic] fault`), and the
//! echo service (`stack::echo`), which `pronghorn echo` runs.

pub mod fuzzing;
pub mod lab;
pub mod mem;
pub mod offload;
pub mod rng;

pub use rng::Rng;
