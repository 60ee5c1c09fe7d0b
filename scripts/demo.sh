#!/usr/bin/env bash
# The demo (README): on a fresh Debian 12 machine, as root, installs what is missing, builds,
# brings up the lab, starts `pronghorn echo` on the DPDK side and pings it from the kernel side
# (IPv4 and IPv6), then takes everything down again.
# (A later issue turns this into kernel Redis vs pronghorn Redis side by side.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (it creates network namespaces and drives a veth with DPDK)" >&2; exit 1; }

bash scripts/setup.sh
cargo build --release -p cli
P=target/release/pronghorn
PREFIX=demo
PMD=${PMD:-af_xdp}

echo_pid=
cleanup() {
  if [ -n "$echo_pid" ]; then kill "$echo_pid" 2>/dev/null || true; wait "$echo_pid" 2>/dev/null || true; fi
  $P lab down --prefix $PREFIX
}
trap cleanup EXIT

$P lab up --prefix $PREFIX --pmd "$PMD"
coproc ECHO { exec $P lab exec --prefix $PREFIX a -- $P echo 2>&1; }
echo_pid=$ECHO_PID
exec 3<&"${ECHO[0]}"
read -r ready <&3 || { echo "demo: pronghorn echo did not start" >&2; exit 1; }
echo "$ready"
case "$ready" in *ready*) ;; *) cat <&3 >&2; exit 1;; esac

echo "--- ping from the kernel side (namespace $PREFIX-b) to pronghorn (namespace $PREFIX-a, $PMD):"
$P lab exec --prefix $PREFIX b -- ping -c 3 -i 0.2 10.99.0.1
$P lab exec --prefix $PREFIX b -- ping -6 -c 3 -i 0.2 fd99::1
kill "$echo_pid"
cat <&3   # echo's counters
wait "$echo_pid" 2>/dev/null || true
echo_pid=
