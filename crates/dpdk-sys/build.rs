//! Finds the system DPDK through pkg-config, compiles the inline wrappers and runs bindgen.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.c");

    let dpdk = match pkg_config::Config::new().atleast_version("22.11").probe("libdpdk") {
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
        .allowlist_type("rte_eth_conf|rte_eth_dev_info|rte_eth_stats|rte_eth_link|rte_ether_addr|rte_eth_rxconf|rte_eth_txconf")
        .opaque_type("rte_mbuf|rte_mempool")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on DPDK's headers");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("writing bindings");
}

fn cflags_from_pkg_config() -> Vec<String> {
    let out =
        std::process::Command::new("pkg-config").args(["--cflags", "libdpdk"]).output().expect("running pkg-config");
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}
