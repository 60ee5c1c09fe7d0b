#!/usr/bin/env bash
# Installs what pronghorn needs on Debian 12, idempotently: DPDK 22.11 (headers, pkg-config file,
# the af_xdp/af_packet PMDs), libclang for bindgen, clang with the kernel's and libbpf's headers
# for the XDP program (crates/nic/bpf), and the lab's tools (scapy and nftables craft
# segments and keep side b's kernel out of them in tests/lab/wire.py; hping3 floods in `bench
# syn-flood`; valgrind, strace and perf count what a request costs in bench/request_cost.sh;
# PostgreSQL 15 for the lab test of a server that forks per connection; HAProxy for the lab test
# of a seamless reload; dpkg-dev and man-db
# for building and checking the Debian package, scripts/package-deb.sh and test-package.sh).
# The toolchain's llvm-tools for the profile-guided build (scripts/build-pgo.sh).
# `setup.sh test` (the test command) also installs rustfmt, clippy and cargo-deny. Builds nothing
# else (go-tpc, the TPC-C client of `pronghorn bench tpcc`, is built on demand by bench/go-tpc.sh).
set -euo pipefail

packages=(
  build-essential pkg-config clang libclang-dev libbpf-dev linux-libc-dev
  dpdk dpdk-dev libdpdk-dev
  iproute2 iputils-ping ethtool procps util-linux
  python3
  redis-server redis-tools iperf3 nginx-light haproxy curl sockperf wrk python3-matplotlib
  mariadb-server mariadb-client sysbench postgresql-15 postgresql-client-15
  tshark
  python3-scapy nftables hping3
  valgrind strace linux-perf
  dpkg-dev man-db
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}; run this script as root (or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  for c in "$HOME/.cargo/bin/cargo" /root/.cargo/bin/cargo; do
    [ -x "$c" ] && { echo "setup: cargo is at $c: add $(dirname "$c") to PATH" >&2; exit 1; }
  done
  echo "setup: cargo not found: install Rust 1.80 or newer (https://rustup.rs, or Debian's rustc/cargo from bookworm-backports)" >&2
  exit 1
fi

# llvm-profdata, which the profile-guided build (scripts/build-pgo.sh: the package, the demo)
# merges the training run's counts with: the toolchain's own llvm-tools (its LLVM reads the file).
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  if command -v rustup >/dev/null 2>&1; then
    echo "setup: installing llvm-tools (llvm-profdata, for scripts/build-pgo.sh)"
    rustup component add llvm-tools
  else
    echo "setup: $profdata is missing and there is no rustup to add it: scripts/build-pgo.sh will fail (the plain build, cargo build --release, does not need it)" >&2
  fi
fi

# With `test` (scripts/test.sh): the test command's habits too, rustfmt and clippy (rustup
# components of the toolchain in use) and cargo-deny (from crates.io, pinned; 0.20.2 needs Rust
# 1.88 and takes minutes to build once).
[ "${1:-}" = test ] || exit 0
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    echo "setup: installing rustfmt and clippy"
    rustup component add rustfmt clippy
  else
    echo "setup: rustfmt or clippy is missing and there is no rustup to add them: install the ones of your Rust toolchain (bookworm-backports: apt-get install -t bookworm-backports rustfmt rust-clippy)" >&2
    exit 1
  fi
fi
deny_version=0.20.2
if [ "$(cargo deny --version 2>/dev/null)" != "cargo-deny $deny_version" ]; then
  echo "setup: installing cargo-deny $deny_version"
  cargo install --quiet --locked cargo-deny --version "$deny_version"
fi
