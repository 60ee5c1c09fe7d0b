//! Raw bindings to the system DPDK (found with pkg-config `libdpdk`, 22.11 on Debian 12, and
//! linked statically with the drivers of [`LINKED_DRIVERS`]), and `ph_*` C wrappers for the
//! static-inline fast-path functions (rx/tx burst, mbuf access, `rte_errno`) that bindgen
//! cannot link to.
//!
//! Nothing else lives here: the safe layer is `nic::dpdk`.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
include!("drivers.rs");
