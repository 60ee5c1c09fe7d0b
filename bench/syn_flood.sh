#!/usr/bin/env bash
# A bounded SYN flood around one client run (`pronghorn bench syn-flood`, issue 22).
#
#   bench/syn_flood.sh ADDR PORT MAX_SYNS -- CLIENT [ARGS...]
#
# Runs in the lab's side b (the bench runs it with `ip netns exec`). It gives side b a second
# address in ADDR's /24 (.3: the flood's source, so that the flood never shares a 4-tuple with
# the client's connections), drops the RSTs side b's kernel would send from that address (so
# the server's half-open entries stay until they time out, as under a real spoofed flood), and
# sends at most MAX_SYNS SYNs to ADDR:PORT with hping3 (one every 10 us at most, incrementing
# source ports) while CLIENT runs. The flood stops when the client ends (SIGINT, and SIGKILL if
# hping3 is still there 2 s later, said on stderr), after MAX_SYNS, or after 120 s, whichever is
# first; the address and the nftables table are removed on exit. Prints the client's output,
# then `flood: N SYNs in S s`: N counted by nftables as they left side b (hping3's own count can
# differ: it is printed from a signal handler), S from the flood's start to its end.
#
# Traffic goes only to ADDR, inside the lab's namespaces.
set -euo pipefail

if [[ $# -lt 5 || $4 != "--" ]]; then
    echo "usage: syn_flood.sh ADDR PORT MAX_SYNS -- CLIENT [ARGS...]" >&2
    exit 2
fi
addr=$1 port=$2 max=$3
shift 4
case $addr in
    10.*.*.*) ;;
    *) echo "syn_flood.sh: $addr is not a lab address (10.x.y.z)" >&2; exit 2 ;;
esac
command -v hping3 >/dev/null || { echo "syn_flood.sh: hping3 is not installed (apt-get install hping3)" >&2; exit 1; }

src=${addr%.*}.3
dev=$(ip -o route get "$addr" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
[[ -n $dev ]] || { echo "syn_flood.sh: no route to $addr in this namespace" >&2; exit 1; }
table=pronghorn_syn_flood
flood=

cleanup() {
    [[ -n $flood ]] && kill "$flood" 2>/dev/null || true
    [[ -n $flood ]] && wait "$flood" 2>/dev/null || true
    ip addr del "$src/32" dev "$dev" 2>/dev/null || true
    nft delete table inet "$table" 2>/dev/null || true
}
trap cleanup EXIT

ip addr add "$src/32" dev "$dev"
nft -f - <<EOF
table inet $table {
    chain out {
        type filter hook output priority 0; policy accept;
        ip saddr $src tcp flags & rst == rst drop
        ip saddr $src tcp flags & (syn | ack) == syn counter
    }
}
EOF

log=$(mktemp)
start=$(date +%s.%N)
timeout 120 hping3 -q -S -p "$port" -a "$src" -i u10 -c "$max" "$addr" >"$log" 2>&1 &
flood=$!
"$@"
hping=$(pgrep -P "$flood" -x hping3 || true)
kill -INT "$flood" 2>/dev/null || true
for _ in $(seq 20); do
    kill -0 "$flood" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$flood" 2>/dev/null; then
    echo "syn_flood.sh: hping3 did not stop on SIGINT within 2 s: killed" >&2
    [[ -n $hping ]] && kill -KILL "$hping" 2>/dev/null || true
fi
wait "$flood" 2>/dev/null || true
flood=
end=$(date +%s.%N)
sent=$(nft list table inet "$table" | sed -n 's/.*counter packets \([0-9]*\) .*/\1/p')
said=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' "$log")
rm -f "$log"
[[ -n $sent ]] || { echo "syn_flood.sh: no nftables count of the flood's SYNs" >&2; exit 1; }
echo "hping3: ${said:-no} SYNs by its own count" >&2
awk -v n="$sent" -v a="$start" -v b="$end" 'BEGIN { printf "flood: %d SYNs in %.2f s\n", n, b - a }'
