//! Finds the system DPDK through pkg-config, compiles the inline wrappers, runs bindgen and
//! links DPDK statically (docs/design-notes.md, "DPDK linked statically"): its libraries from
//! their PIC archives, and only the drivers of `LINKED_DRIVERS` (src/drivers.rs). A shared DPDK would instead make
//! the EAL load every driver of its plugin directory (hundreds of objects) into each process
//! pronghorn runs, which every fork and exit of that process then pays for.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.c");
    println!("cargo:rerun-if-changed=src/drivers.rs");

    let dpdk = match pkg_config::Config::new().atleast_version("22.11").cargo_metadata(false).probe("libdpdk") {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!(
                "pronghorn needs DPDK 22.11 or newer with its pkg-config file: \
                 on Debian 12 run `apt-get install dpdk-dev libdpdk-dev` ({e})"
            );
            std::process::exit(1);
        }
    };

    // DPDK's cflags carry `-include rte_config.h` and `-march=...`; pass them all to both cc and clang.
    let cflags: Vec<String> = pkg_config::get_variable("libdpdk", "cflags")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_else(cflags_from_pkg_config);

    let mut build = cc::Build::new();
    build.file("csrc/wrapper.c").include("csrc").warnings(false).opt_level(3);
    for f in &cflags {
        build.flag(f);
    }
    build.compile("ph_dpdk_wrapper");

    let mut clang_args: Vec<String> = cflags.clone();
    for p in &dpdk.include_paths {
        clang_args.push(format!("-I{}", p.display()));
    }
    let bindings = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_args(&clang_args)
        .allowlist_function("ph_.*")
        .allowlist_function("rte_eal_(init|cleanup|process_type)")
        .allowlist_function("rte_eth_(dev_configure|dev_start|dev_stop|dev_close|dev_info_get|dev_get_port_by_name|dev_get_mtu|dev_set_mtu|dev_count_avail|rx_queue_setup|tx_queue_setup|macaddr_get|link_get_nowait|stats_get|stats_reset|promiscuous_enable|dev_socket_id|find_next_owned_by|dev_get_name_by_port|dev_rx_intr_ctl_q_get_fd|dev_rx_intr_enable|dev_rx_intr_disable)")
        .allowlist_function("rte_pktmbuf_pool_create|rte_pktmbuf_pool_create_by_ops|rte_mempool_free|rte_mempool_avail_count|rte_mempool_in_use_count")
        .allowlist_function("rte_strerror|rte_socket_id|rte_log_set_global_level|rte_openlog_stream")
        .allowlist_var("RTE_ETH_.*|RTE_MBUF_F_RX_.*|RTE_MBUF_DEFAULT_BUF_SIZE|RTE_PKTMBUF_HEADROOM|RTE_MAX_ETHPORTS|RTE_LOG_.*|RTE_ETHER_.*")
        .allowlist_type("ph_tx_offload|ph_tx_request|rte_eth_conf|rte_eth_dev_info|rte_eth_stats|rte_eth_link|rte_ether_addr|rte_eth_rxconf|rte_eth_txconf")
        .opaque_type("rte_mbuf|rte_mempool")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on DPDK's headers");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("writing bindings");

    link_statically();
}

include!("src/drivers.rs");

/// The shared libraries the linked DPDK archives call into (libxdp and libbpf for af_xdp, libnuma
/// and libbsd for the EAL...): the linker keeps those actually used (rustc links `--as-needed`).
const SHARED_DEPENDENCIES: &[&str] = &["xdp", "bpf", "elf", "z", "numa", "fdt", "bsd", "md", "atomic", "m", "dl", "rt"];

/// DPDK's driver classes: an archive `librte_<class>_<name>.a` is a driver, the others libraries.
const DRIVER_CLASSES: &[&str] = &[
    "baseband", "bus", "common", "compress", "crypto", "dma", "event", "gpu", "mempool", "ml", "net", "raw", "regex",
    "vdpa",
];

fn link_statically() {
    let libdir = pkg_config::get_variable("libdpdk", "libdir").unwrap_or_else(|e| {
        eprintln!("pkg-config gives no libdir for libdpdk: {e}");
        std::process::exit(1);
    });
    println!("cargo:rustc-link-search=native={libdir}");
    for driver in LINKED_DRIVERS {
        let archive = format!("librte_{driver}.a");
        require_archive(&libdir, &archive);
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle,+verbatim={archive}");
    }
    // The libraries in the order DPDK's static pkg-config lists them (each before those it
    // uses); the linker takes from each only the objects something references.
    let out = std::process::Command::new("pkg-config")
        .args(["--static", "--libs", "libdpdk"])
        .output()
        .expect("running pkg-config --static --libs libdpdk");
    let flags = String::from_utf8_lossy(&out.stdout);
    let libraries: Vec<&str> = flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-l:librte_")?.strip_suffix(".a"))
        .filter(|name| !DRIVER_CLASSES.iter().any(|class| name.starts_with(&format!("{class}_"))))
        .collect();
    if libraries.is_empty() {
        eprintln!(
            "pkg-config --static --libs libdpdk names no static DPDK library ({}): pronghorn links DPDK's \
             archives (librte_*.a from Debian 12's libdpdk-dev)",
            flags.trim()
        );
        std::process::exit(1);
    }
    for name in libraries {
        let archive = format!("librte_{name}.a");
        require_archive(&libdir, &archive);
        println!("cargo:rustc-link-lib=static:-bundle,+verbatim={archive}");
    }
    for lib in SHARED_DEPENDENCIES {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
}

fn require_archive(libdir: &str, archive: &str) {
    if !std::path::Path::new(libdir).join(archive).exists() {
        eprintln!(
            "{libdir}/{archive} is missing: pronghorn links DPDK statically from the archives of \
             libdpdk-dev (on Debian 12: `apt-get install libdpdk-dev`)"
        );
        std::process::exit(1);
    }
}

fn cflags_from_pkg_config() -> Vec<String> {
    let out =
        std::process::Command::new("pkg-config").args(["--cflags", "libdpdk"]).output().expect("running pkg-config");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}
