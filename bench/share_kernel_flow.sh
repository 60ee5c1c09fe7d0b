#!/usr/bin/env bash
# Issue 23's second measurement of the shared mode: does a KERNEL flow on an interface that
# pronghorn shares (`nic.share = true`, its XDP program attached) keep its rate? An iperf3
# server of the kernel's listens on side a's DPDK veth, which carries the kernel address
# 10.99.0.1 for the run; side b sends to it (iperf3, 1 stream) with no XDP program on the veth,
# then while an accelerated redis-server holds the interface (pronghorn's program attached and
# passing the kernel everything that is not redis's), alternating, ROUNDS rounds of SECONDS each;
# and, as a control, with a two-instruction XDP program that passes everything (what attaching
# any native XDP program to a veth costs: the veth then runs its NAPI and XDP path per frame).
# The server on core 1, the client on core 0. Needs root, the lab's tools (scripts/setup.sh) and a
# release build. Writes bench/results/share-kernel-flow.md (or to --out DIR).
#   bench/share_kernel_flow.sh [--rounds N] [--seconds S] [--prefix P] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
rounds=3 seconds=5 prefix=skf out=bench/results
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "share_kernel_flow: unknown argument $1 (--rounds N, --seconds S, --prefix P, --out DIR)" >&2; exit 2 ;;
  esac
done
for tool in iperf3 redis-server redis-cli clang; do
  command -v "$tool" >/dev/null || { echo "share_kernel_flow: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
cargo build --release -q --workspace
exe=target/release/pronghorn
if ip netns list | grep -q "^$prefix-a\b"; then
  echo "share_kernel_flow: lab $prefix is up already: take it down or pass --prefix" >&2; exit 1
fi
"$exe" lab up --prefix "$prefix" >/dev/null
tmp=$(mktemp -d)
iperf=""
redis=""
cleanup() {
  set +e
  [ -n "$redis" ] && kill "$redis" 2>/dev/null && wait "$redis" 2>/dev/null
  [ -n "$iperf" ] && kill "$iperf" 2>/dev/null && wait "$iperf" 2>/dev/null
  "$exe" lab down --prefix "$prefix" >/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
a="ip netns exec $prefix-a"
b="ip netns exec $prefix-b"
ip -n "$prefix-a" addr add 10.99.0.1/24 dev "$prefix-a0"
printf '[nic]\npmd = "af_xdp"\niface = "%s"\nshare = true\n[ipv4]\naddress = "auto"\n' "$prefix-a0" >"$tmp/shared.toml"
printf '#include <linux/bpf.h>\n__attribute__((section("xdp"), used)) int pass(struct xdp_md *c) { return XDP_PASS; }\nchar _license[] __attribute__((section("license"), used)) = "GPL";\n' >"$tmp/pass.c"
clang -O2 -target bpf -I/usr/include/"$(uname -m)"-linux-gnu -c "$tmp/pass.c" -o "$tmp/pass.o"
$a taskset -c 1 iperf3 -s -B 10.99.0.1 -p 5301 >/dev/null 2>&1 &
iperf=$!
for _ in $(seq 100); do $b bash -c 'exec 3<>/dev/tcp/10.99.0.1/5301' 2>/dev/null && break; sleep 0.1; done

rate() { # Gbit/s of one iperf3 run from side b to the kernel's server
  $b taskset -c 0 iperf3 -c 10.99.0.1 -p 5301 -t "$seconds" -J |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9, 3))'
}
xdp_attached() { ip -n "$prefix-a" link show "$prefix-a0" | grep -q "prog/xdp"; }

without=() with=() pass=()
for r in $(seq "$rounds"); do
  xdp_attached && { echo "share_kernel_flow: an XDP program is on $prefix-a0 before round $r" >&2; exit 1; }
  without+=("$(rate)")
  ip -n "$prefix-a" link set dev "$prefix-a0" xdpdrv obj "$tmp/pass.o" sec xdp
  pass+=("$(rate)")
  ip -n "$prefix-a" link set dev "$prefix-a0" xdpdrv off
  $a taskset -c 1 "$exe" run --config "$tmp/shared.toml" -- redis-server --bind 10.99.0.1 --port 6379 \
    --save "" --protected-mode no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
  redis=$!
  for _ in $(seq 200); do [ "$($b redis-cli -h 10.99.0.1 ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$($b redis-cli -h 10.99.0.1 ping 2>/dev/null)" = PONG ] || { echo "share_kernel_flow: accelerated redis did not answer:" >&2; cat "$tmp/redis.log" >&2; exit 1; }
  xdp_attached || { echo "share_kernel_flow: pronghorn's XDP program is not on $prefix-a0" >&2; exit 1; }
  with+=("$(rate)")
  passed=$("$exe" stat --json "$redis" | python3 -c 'import json,sys; print(int(sum(s.get("xdp_passed",0) for s in json.load(sys.stdin)["shards"])))')
  kill "$redis"; wait "$redis" 2>/dev/null || true; redis=""
  echo "round $r: without XDP ${without[-1]} Gbit/s, with an XDP_PASS program ${pass[-1]}, with pronghorn's program ${with[-1]} Gbit/s (frames it passed to the kernel: $passed)"
done

mkdir -p "$out"
python3 - "$out/share-kernel-flow.md" "$rounds" "$seconds" "${without[*]}" "${with[*]}" "${pass[*]}" "$(git rev-parse --short HEAD)" <<'EOF'
import statistics, sys, datetime
path, rounds, seconds, without, with_, passing = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()
git = sys.argv[7]
w0, w1, wp = [float(x) for x in without], [float(x) for x in with_], [float(x) for x in passing]
ratios = [b / a for a, b in zip(w0, w1)]
pratios = [b / a for a, b in zip(w0, wp)]
with open(path, "w") as f:
    f.write("# A kernel flow on an interface pronghorn shares (issue 23)\n\n")
    f.write(f"`bench/share_kernel_flow.sh --rounds {rounds} --seconds {seconds}` ({git}, "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ}). iperf3, 1 stream, from side b to the "
            "kernel's iperf3 server on side a's DPDK veth (kernel address 10.99.0.1/24), server on core 1, client on "
            "core 0; alternating: no XDP program on the veth, then an accelerated redis-server holding it "
            "(`nic.share = true`: pronghorn's XDP program passes the kernel what is not redis's); and, as a control, "
            "with an XDP program that only returns XDP_PASS (what any native XDP program on a veth costs).\n\n")
    f.write("| round | without XDP (Gbit/s) | XDP_PASS only (Gbit/s) | pronghorn's program (Gbit/s) | XDP_PASS / without | pronghorn's / without |\n"
            "|---:|---:|---:|---:|---:|---:|\n")
    for i, (a, p, b, pr, r) in enumerate(zip(w0, wp, w1, pratios, ratios)):
        f.write(f"| {i + 1} | {a:.2f} | {p:.2f} | {b:.2f} | {pr:.2f}x | {r:.2f}x |\n")
    f.write(f"| median | {statistics.median(w0):.2f} | {statistics.median(wp):.2f} | {statistics.median(w1):.2f} | "
            f"{statistics.median(pratios):.2f}x | {statistics.median(ratios):.2f}x |\n")
print(open(path).read())
EOF
