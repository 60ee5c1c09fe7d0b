#!/usr/bin/env bash
# Builds go-tpc (github.com/pingcap/go-tpc, its cmd/go-tpc), the TPC-C client that
# `pronghorn bench tpcc` runs, from its Go module with the `go` on PATH, into target/go-tpc/bin.
# go-tpc needs Go 1.21 or newer (Debian 12's golang is 1.19): with an older go this says so in
# one line and exits 1. Only the tpcc benchmark uses it; the tests and CI do not.
#
# It builds through a throwaway module that requires go-tpc at a pinned release instead of
# `go install ...@version`, because go install also fetches the module's list of versions (to
# look for deprecation notices) and fails where a module mirror serves versions but not lists.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.0.12
out=$PWD/target/go-tpc
bin=$out/bin/go-tpc

if ! command -v go >/dev/null 2>&1; then
  echo "go-tpc: no go on PATH: install Go 1.21 or newer (Debian 12's golang is 1.19, too old)" >&2
  exit 1
fi
have=$(go env GOVERSION 2>/dev/null || true)
if ! [[ $have =~ ^go([0-9]+)\.([0-9]+) ]] || { [ "${BASH_REMATCH[1]}" -eq 1 ] && [ "${BASH_REMATCH[2]}" -lt 21 ]; }; then
  echo "go-tpc: $(command -v go) is ${have:-of unknown version}; go-tpc $version needs Go 1.21 or newer" >&2
  exit 1
fi

if [ -x "$bin" ] && [ "$(cat "$out/bin/VERSION" 2>/dev/null)" = "$version" ]; then
  echo "go-tpc $version: $bin (already built)"
  exit 0
fi

mod=$out/mod
rm -rf "$mod"
mkdir -p "$mod" "$out/bin"
printf 'module pronghorn-go-tpc\n\ngo 1.21\n\nrequire github.com/pingcap/go-tpc %s\n' "$version" >"$mod/go.mod"
echo "go-tpc: building $version with $have"
(cd "$mod" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$bin" github.com/pingcap/go-tpc/cmd/go-tpc)
echo "$version" >"$out/bin/VERSION"
echo "go-tpc $version: $bin"
