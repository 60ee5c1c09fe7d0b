#!/usr/bin/env bash
# One pgbench -S -C -c 16 run per path in the nic lab model, the server core (1) recorded by perf
# with call graphs for 10 s of it, and the samples split by bench/core_split.py. Root, from the
# repository root, after a release build:
#   bash bench/results/stop40/split.sh [PREFIX]       (the lab is brought up and taken down)
set -euo pipefail
p=${1:-sp}
exe=$PWD/target/release/pronghorn
caps=+dac_override,+net_admin,+net_raw,+ipc_lock,+sys_admin,+bpf
work=$(mktemp -d /tmp/pronghorn-split-XXXX)
chown postgres "$work"
cleanup() {
  pkill -INT -f "postgres -D $work" || true
  for _ in $(seq 50); do pgrep -f "postgres -D $work" >/dev/null || break; sleep 0.2; done
  "$exe" lab down --prefix "$p" >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
"$exe" lab up --prefix "$p" >/dev/null
for path in kernel pronghorn; do
  runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$work/$path" -A trust >/dev/null
done
echo "host all all 10.98.0.0/24 trust" >>"$work/kernel/pg_hba.conf"
echo "host all all 10.99.0.0/24 trust" >>"$work/pronghorn/pg_hba.conf"
cat >"$work/inner.sh" <<INNER
set -euo pipefail
pg() { exec setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=$caps --ambient-caps=$caps \
  /usr/lib/postgresql/15/bin/postgres -D "$work/\$1" -c listen_addresses=\$2 -c unix_socket_directories="$work/\$1"; }
run() {  # path address
  ip netns exec $p-b pgbench -h \$2 -U postgres -i -s 8 -q postgres >/dev/null 2>&1
  (ip netns exec $p-b taskset -c 0 pgbench -h \$2 -U postgres -n -j 4 -T 16 -S -C -c 16 postgres >"$work/\$1.txt" 2>&1 &)
  sleep 4
  perf record -q -g -e cpu-clock -C 1 -o "$work/\$1.data" -- sleep 10 >/dev/null 2>&1
  sleep 4
  tps=\$(awk '/^tps/{print \$3}' "$work/\$1.txt")
  echo "== \$1 path: \$tps tps (pgbench -S -C -c 16 -j 4, 16 s; perf: 10 s of it)"
  perf script -i "$work/\$1.data" -F comm,pid,ip,sym,dso 2>/dev/null | python3 bench/core_split.py "\$(python3 -c "print(\$tps * 10)")"
}
(ip netns exec $p-a taskset -c 1 bash -c "\$(declare -f pg); pg kernel 10.98.0.1" >"$work/kernel.log" 2>&1 &)
sleep 3
run kernel 10.98.0.1
(ip netns exec $p-a taskset -c 1 $exe run --config /run/pronghorn/lab/$p/a.toml --profile postgres -- \
  bash -c "\$(declare -f pg); pg pronghorn 10.99.0.1" >"$work/pronghorn.log" 2>&1 &)
sleep 5
run pronghorn 10.99.0.1
INNER
"$exe" lab model nic --prefix "$p" -- bash "$work/inner.sh"
