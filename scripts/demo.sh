#!/usr/bin/env bash
# The demo (README): on a fresh Debian 12 machine, as root, installs what is missing, builds (the
# profile-guided build, scripts/build-pgo.sh), brings up the lab, runs redis-benchmark (SET/GET,
# -c 50 and -c 1000) against a kernel redis-server and a pronghorn one, alternating, 3 rounds
# each, prints the side-by-side table with the ratios, and takes the lab down again. The full
# benchmark set is `pronghorn bench` (README.md, "Benchmarks").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (it creates network namespaces and drives a veth with DPDK)" >&2; exit 1; }

bash scripts/setup.sh
# The build users get (the package's): profile-guided, trained in a lab of its own first (about
# five minutes; scripts/build-pgo.sh).
bash scripts/build-pgo.sh
PMD=${PMD:-af_xdp}
echo "--- redis-server on the kernel (10.98.0.1) and on pronghorn over DPDK net_$PMD (10.99.0.1),"
echo "--- redis-benchmark from the other namespace; server on core 1, client on core 0"
# Results of this run go to target/demo (bench/results holds the committed ones).
exec target/pgo/pronghorn bench redis --quick --prefix demo --pmd "$PMD" --out target/demo
