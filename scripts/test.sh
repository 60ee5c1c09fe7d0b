#!/usr/bin/env bash
# The test command (README): installs what is missing, builds, and runs every test: unit tests,
# stack-over-memory tests and, as root, the lab tests over DPDK af_xdp and af_packet.
# Labs made by the tests are named tst-*; whatever happens, they are taken down on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh test

# 2 MiB hugepages reserved before the tests: the labs reserve what they need and give it back,
# and each lab test checks that; the count is checked once more at the end (cleanup).
HUGEPAGES=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
hugepages_before=$(cat "$HUGEPAGES" 2>/dev/null || echo "")

cleanup() {
  if [ -x target/debug/pronghorn ] && [ "$(id -u)" -eq 0 ]; then
    for d in /run/pronghorn/lab/tst-*; do
      [ -d "$d" ] && target/debug/pronghorn lab down --prefix "$(basename "$d")" || true
    done
  fi
  give_back_hugepages
}

# Pages a step left reserved (a process that still held them when its lab went down: the
# kernel cannot lower the count below pages a live process has reserved) are said and given
# back, so that the machine is left as it was found. Pages still in use stay (as surplus, which
# the kernel frees when their process exits).
give_back_hugepages() {
  [ -n "$hugepages_before" ] && [ "$(id -u)" -eq 0 ] || return 0
  local now
  now=$(cat "$HUGEPAGES")
  if [ "$now" -gt "$hugepages_before" ]; then
    echo "test: $((now - hugepages_before)) hugepages were still reserved after the tests ($now, $hugepages_before before); giving them back" >&2
    echo "$hugepages_before" >"$HUGEPAGES" || true
  fi
}
trap cleanup EXIT

# Habits: formatting, lints (clippy also holds every crate to the workspace's rust-version),
# documentation without broken links, and the dependency policy (deny.toml). setup.sh installs
# rustfmt, clippy and cargo-deny; a machine where they are still missing fails here instead of
# passing with a check left out.
for tool in fmt clippy deny; do
  if ! cargo "$tool" --version >/dev/null 2>&1; then
    echo "test: cargo $tool is not installed and scripts/setup.sh could not install it (see its message)" >&2
    exit 1
  fi
done
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# Licenses, duplicate versions and sources. Not advisories: the advisory database is a git
# repository on github.com, which this project's machines cannot reach.
cargo deny --locked check licenses bans sources
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --lib --quiet
RUSTDOCFLAGS=-Dwarnings cargo doc -p cli --no-deps --bins --quiet   # its bin shares the name of preload's lib

# The module-DAG check (scripts/module-dag.py, its own tests in scripts/tests): no new import cycle
# among the modules of runtime and stack. scripts/module-dag/*.known would hold accepted cyclic
# arrows (both are empty: any cycle fails); one that is broken must leave its list.
python3 -m unittest discover -s scripts/tests
for crate in runtime stack; do
  python3 scripts/module-dag.py "crates/$crate/src" --known "scripts/module-dag/$crate.known"
done

# Unit tests, the stack over the in-memory NIC, fuzz corpora (debug build: overflow checks on).
# The lab tests say "skipped" here: they run below, in release, where 256 MiB transfers are quick.
cargo test --workspace -- --test-threads=2

# The benchmark scripts' parsers (callgrind and perf output) on their fixtures.
python3 -m unittest discover -s bench/tests

# The stack issue's full-size runs over the in-memory pair with faults (1 GiB; 10,000 connections).
cargo test --release -p stack --test pair -- --ignored

# Lab tests: DPDK af_xdp and af_packet on a veth pair, the Linux kernel on the other end.
if [ "$(id -u)" -eq 0 ]; then
  cargo build --release --workspace   # libpronghorn.so next to the pronghorn binary, for `pronghorn run`
  PRONGHORN_LAB_TESTS=1 cargo test --release -p cli --test lab
  # The profile-guided build (its training run serves mariadbd and redis-server in a lab under
  # the instrumented build), then the Debian package of it: its files, then installed with
  # dpkg -i and removed again.
  bash scripts/build-pgo.sh --prefix tst-pgo
  bash scripts/test-package.sh
else
  echo "test: not root: the lab tests (DPDK over veth in network namespaces) and the package's install test are skipped; run as root to include them" >&2
fi

# Every fuzz target briefly (nightly only; the corpus checks above run everywhere).
bash scripts/fuzz-smoke.sh
