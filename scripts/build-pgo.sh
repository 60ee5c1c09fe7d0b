#!/usr/bin/env bash
# The profile-guided build of pronghorn and libpronghorn.so, in target/pgo/ (what the package,
# the demo and the committed benchmark results use). Three steps:
#   1. an instrumented build (cargo profile pgo-gen, RUSTFLAGS=-Cprofile-generate) in target/pgo-gen;
#   2. its training run: mariadbd and redis-server under it in a lab, loaded for a few seconds
#      each (bench/pgo_train.py), each writing its counts when it exits; merged with the
#      toolchain's llvm-profdata into target/pgo-data/merged.profdata;
#   3. the build that uses them (cargo profile pgo, RUSTFLAGS=-Cprofile-use) in target/pgo.
# The compiler then lays the code the servers ran out together and the rest aside: on
# point_select the library's instructions per transaction, and what its code evicts from the
# server's own, fell (docs/design-notes.md, "Profile-guided builds"). Both profiles are the
# release profile; their own target directories keep cargo from rebuilding target/release.
# Needs root (the lab), the lab's tools and llvm-tools (scripts/setup.sh installs them); about
# five minutes. Prints the directory of the build last.
#   scripts/build-pgo.sh [--prefix P]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
prefix=pgo
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?build-pgo: --prefix needs a lab name}; shift 2 ;;
    *) echo "build-pgo: unknown argument $1 (--prefix P)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "build-pgo: the training run needs root (a lab of network namespaces and DPDK): run as root, or use the plain build (cargo build --release)" >&2
  exit 1
fi
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  echo "build-pgo: $profdata is missing: install the toolchain's llvm-tools (rustup component add llvm-tools; scripts/setup.sh does)" >&2
  exit 1
fi

data="$PWD/target/pgo-data"
rm -rf "$data"
mkdir -p "$data/raw"
# Where instrumented code writes its counts unless told otherwise: the build scripts cargo runs
# during this build, the lab commands below. The training's servers write theirs to raw/.
PRONGHORN_BUILD="instrumented for profiling (scripts/build-pgo.sh)" RUSTFLAGS="-Cprofile-generate=$data/other" cargo build --profile pgo-gen -q -p cli -p preload

was_up=0
case "$(target/pgo-gen/pronghorn lab status --prefix "$prefix" 2>/dev/null || true)" in *": up"*) was_up=1 ;; esac
target/pgo-gen/pronghorn lab up --prefix "$prefix" >/dev/null
[ "$was_up" = 1 ] || trap 'target/pgo-gen/pronghorn lab down --prefix "$prefix" >/dev/null' EXIT
(cd bench && /usr/bin/python3 pgo_train.py --prefix "$prefix" --exe ../target/pgo-gen/pronghorn --raw "$data/raw")
"$profdata" merge -o "$data/merged.profdata" "$data"/raw/*.profraw

PRONGHORN_BUILD="profile-guided (scripts/build-pgo.sh)" RUSTFLAGS="-Cprofile-use=$data/merged.profdata" cargo build --profile pgo -q -p cli -p preload
echo target/pgo
