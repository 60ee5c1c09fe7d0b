#!/usr/bin/env bash
# One Redis full resynchronisation between the server under test in side a and a kernel
# redis-server in side b (`pronghorn bench resync`, issue 26).
#
#   bench/resync.sh a-to-b|b-to-a A_ADDR B_ADDR KEYS VALUE_BYTES DIR
#
# Runs in the lab's side b (the bench runs it with `ip netns exec`). The server in side a
# (A_ADDR:6379) is a redis-server started for both roles: diskless sync as a master
# (repl-diskless-sync yes, delay 0, rdbcompression no so that the bytes on the wire are the
# dataset's), diskless load as a replica, nothing saved to disk. The script starts a second
# redis-server in side b on B_ADDR:6380 (files under DIR) with the same settings, and:
#
#   a-to-b: fills A with DEBUG POPULATE (KEYS keys `key:N` of VALUE_BYTES bytes), then makes
#           B a replica of A: side a sends the dataset.
#   b-to-a: fills B, then makes A a replica of B: side a receives it.
#
# Filling is not timed. The time is from REPLICAOF to the replica reporting
# master_link_status:up with loading:0 and DBSIZE = KEYS (polled every 10 ms). Then, untimed,
# the replica's DEBUG DIGEST must equal the master's; A is left empty and a master again, and
# B's server is shut down. Prints `resync: KEYS keys of VALUE_BYTES bytes in S s`.
#
# Traffic goes only to A_ADDR and B_ADDR, inside the lab's namespaces.
set -euo pipefail

if [[ $# -ne 6 ]]; then
    echo "usage: resync.sh a-to-b|b-to-a A_ADDR B_ADDR KEYS VALUE_BYTES DIR" >&2
    exit 2
fi
direction=$1 a=$2 b=$3 keys=$4 size=$5 dir=$6
for addr in "$a" "$b"; do
    case $addr in
        10.*.*.*) ;;
        *) echo "resync.sh: $addr is not a lab address (10.x.y.z)" >&2; exit 2 ;;
    esac
done
case $direction in
    a-to-b) master=("$a" 6379) replica=("$b" 6380) ;;
    b-to-a) master=("$b" 6380) replica=("$a" 6379) ;;
    *) echo "resync.sh: direction $direction is neither a-to-b nor b-to-a" >&2; exit 2 ;;
esac
# Seconds the sync may take before the run is rejected.
limit=600

cli() { redis-cli -h "$1" -p "$2" "${@:3}"; }
# One field of INFO (`field:value` lines).
info() { cli "$1" "$2" INFO "$3" | tr -d '\r' | sed -n "s/^$4://p"; }
# Fails with the command's answer unless it is exactly `want`.
expect() {
    local want=$1 got
    shift
    got=$(cli "$@" 2>&1 | tr -d '\r') || true
    [[ $got == "$want" ]] || { echo "resync.sh: \`${*:3}\` on $1:$2 answered \"$got\", not \"$want\"" >&2; exit 1; }
}

b_pid=
cleanup() {
    if [[ -n $b_pid ]]; then
        kill "$b_pid" 2>/dev/null || true
        wait "$b_pid" 2>/dev/null || true
    fi
    rm -f "$dir/replica-b.rdb"
}
trap cleanup EXIT

mkdir -p "$dir"
redis-server --bind "$b" --port 6380 --save "" --appendonly no --protected-mode no \
    --repl-diskless-sync yes --repl-diskless-sync-delay 0 --repl-diskless-load swapdb \
    --rdbcompression no --enable-debug-command yes --dir "$dir" --dbfilename replica-b.rdb \
    --logfile "$dir/redis-b.log" &
b_pid=$!
for _ in $(seq 500); do
    [[ $(cli "$b" 6380 PING 2>/dev/null) == PONG ]] && break
    kill -0 "$b_pid" 2>/dev/null || { echo "resync.sh: side b's redis-server exited: $(tail -3 "$dir/redis-b.log")" >&2; exit 1; }
    sleep 0.01
done
expect OK "$a" 6379 FLUSHALL
expect OK "${master[@]}" DEBUG POPULATE "$keys" key "$size"
expect "$keys" "${master[@]}" DBSIZE

start=$(date +%s.%N)
expect OK "${replica[@]}" REPLICAOF "${master[@]}"
while :; do
    if [[ $(info "${replica[@]}" replication master_link_status) == up ]] &&
        [[ $(info "${replica[@]}" persistence loading) == 0 ]] &&
        [[ $(cli "${replica[@]}" DBSIZE | tr -d '\r') == "$keys" ]]; then
        break
    fi
    if awk -v s="$start" -v n="$(date +%s.%N)" -v l="$limit" 'BEGIN { exit !(n - s > l) }'; then
        echo "resync.sh: the replica ${replica[0]}:${replica[1]} was not in sync within $limit s" >&2
        exit 1
    fi
    sleep 0.01
done
end=$(date +%s.%N)

want=$(cli "${master[@]}" DEBUG DIGEST | tr -d '\r')
expect "$want" "${replica[@]}" DEBUG DIGEST
expect OK "$a" 6379 REPLICAOF NO ONE
expect OK "$a" 6379 FLUSHALL
cli "$b" 6380 SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$b_pid" 2>/dev/null || true
b_pid=
awk -v k="$keys" -v v="$size" -v s="$start" -v e="$end" 'BEGIN { printf "resync: %d keys of %d bytes in %.3f s\n", k, v, e - s }'
