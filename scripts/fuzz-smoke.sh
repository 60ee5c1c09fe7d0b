#!/usr/bin/env bash
# Runs every cargo-fuzz target briefly (FUZZ_SECONDS each, default 20) from its seed corpus.
# Needs a nightly toolchain (cargo-fuzz uses sanitizer flags); where there is none, says so and
# exits 0: the same checks still run on stable over the corpus in `cargo test` (wire::fuzzing,
# testkit::fuzzing).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
seconds=${FUZZ_SECONDS:-20}

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: skipped: no nightly toolchain here (rustup toolchain install nightly); the corpus checks ran in cargo test"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo +nightly install --quiet --locked cargo-fuzz
fi

for dir in crates/*/fuzz; do
  crate=$(basename "$(dirname "$dir")")
  for target in $(cd "$dir/.." && cargo +nightly fuzz list); do
    corpus="$dir/corpus/$target"
    mkdir -p "$corpus"
    work=$(mktemp -d)   # new inputs go here, not into the committed corpus
    echo "fuzz: $crate/$target for ${seconds}s"
    log="$work.log"
    if ! (cd "$dir/.." && cargo +nightly fuzz run "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1) >"$log" 2>&1; then
      tail -40 "$log" >&2
      echo "fuzz: $crate/$target failed (a crash is saved under $dir/artifacts/$target)" >&2
      exit 1
    fi
    grep -E "^stat::number_of_executed_units" "$log" || true
    rm -rf "$work" "$log"
  done
done
