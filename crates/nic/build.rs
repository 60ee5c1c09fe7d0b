//! Compiles pronghorn's XDP program (bpf/pronghorn_xdp.c) with clang's BPF target into
//! `$OUT_DIR/pronghorn_xdp.o`, which `nic::xdp` embeds (the DPDK backend only).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf/pronghorn_xdp.c");
    if std::env::var_os("CARGO_FEATURE_DPDK").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("pronghorn_xdp.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let multiarch = format!("-I/usr/include/{}-linux-gnu", std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", &multiarch, "-c", "bpf/pronghorn_xdp.c", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!(
                "{clang} failed ({s}) on bpf/pronghorn_xdp.c: it needs the kernel's and libbpf's headers \
                 (on Debian 12: `apt-get install clang linux-libc-dev libbpf-dev`, or run scripts/setup.sh)"
            );
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("cannot run {clang} to build the XDP program: {e} (on Debian 12: `apt-get install clang`)");
            std::process::exit(1);
        }
    }
}
