#!/usr/bin/env bash
# One pgbench -S -C -c 16 -j 4 run (16 s) per path and build in the nic lab model, ROUNDS times,
# alternating: perf records the server core (1) for 10 s of each, split by bench/core_split.py,
# with the system's page faults per transaction over the same 10 s. Root, from the repository
# root, with the lab's tools and the builds given:
#   bash bench/results/stop42/split-builds.sh PREFIX ROUNDS LABEL=EXE ...   (LABEL kernel: the kernel path)
# KEEP=1 keeps the perf data (DIR/LABEL-ROUND.data).
set -euo pipefail
p=$1; rounds=$2; shift 2
caps=+dac_override,+net_admin,+net_raw,+ipc_lock,+sys_admin,+bpf
anyexe=$PWD/target/release/pronghorn; split=$PWD/bench/core_split.py
work=$(mktemp -d /tmp/pronghorn-split2-XXXX); chown postgres "$work"
cleanup() { pkill -INT -f "postgres -D $work" || true; for _ in $(seq 50); do pgrep -f "postgres -D $work" >/dev/null || break; sleep 0.2; done; $anyexe lab down --prefix "$p" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"; }
trap cleanup EXIT
$anyexe lab up --prefix "$p" >/dev/null
for d in kernel pronghorn; do runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D "$work/$d" -A trust >/dev/null; done
echo "host all all 10.98.0.0/24 trust" >>"$work/kernel/pg_hba.conf"
echo "host all all 10.99.0.0/24 trust" >>"$work/pronghorn/pg_hba.conf"
cat >"$work/inner.sh" <<INNER
set -euo pipefail
pg() { exec setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=$caps --ambient-caps=$caps \
  /usr/lib/postgresql/15/bin/postgres -D "$work/\$1" -c listen_addresses=\$2 -c unix_socket_directories="$work/\$1"; }
stop() { pkill -INT -f "postgres -D $work/\$1" || true; for _ in \$(seq 100); do pgrep -f "postgres -D $work/\$1" >/dev/null || break; sleep 0.2; done; }
run() {  # label datadir address
  ip netns exec $p-b pgbench -h \$3 -U postgres -i -s 8 -q postgres >/dev/null 2>&1
  (ip netns exec $p-b taskset -c 0 pgbench -h \$3 -U postgres -n -j 4 -T 16 -S -C -c 16 postgres >"$work/\$1.txt" 2>&1 &)
  sleep 4
  f0=\$(awk '/^pgfault/{print \$2}' /proc/vmstat)
  perf record -q -g -e cpu-clock -C 1 -o "$work/\$1.data" -- sleep 10 >/dev/null 2>&1
  f1=\$(awk '/^pgfault/{print \$2}' /proc/vmstat)
  sleep 4
  tps=\$(awk '/^tps/{print \$3}' "$work/\$1.txt")
  echo "== \$1: \$tps tps; page faults per tx (system, 10 s): \$(python3 -c "print(round((\$f1-\$f0)/(\$tps*10)))")"
  perf script -i "$work/\$1.data" -F comm,pid,ip,sym,dso 2>/dev/null | python3 $split "\$(python3 -c "print(\$tps * 10)")" | grep -E "pronghorn|fork|exit|page|rest|total "
}
for r in \$(seq $rounds); do
  for spec in $*; do
    label=\${spec%%=*}; exe=\${spec#*=}
    if [ \$label = kernel ]; then
      (ip netns exec $p-a taskset -c 1 bash -c "\$(declare -f pg); pg kernel 10.98.0.1" >"$work/kernel.log" 2>&1 &)
      sleep 3; run kernel-\$r kernel 10.98.0.1; stop kernel
    else
      (ip netns exec $p-a taskset -c 1 \$exe run --config /run/pronghorn/lab/$p/a.toml --profile postgres -- \
        bash -c "\$(declare -f pg); pg pronghorn 10.99.0.1" >"$work/\$label.log" 2>&1 &)
      sleep 5; run \$label-\$r pronghorn 10.99.0.1; stop pronghorn
    fi
  done
done
INNER
$anyexe lab model nic --prefix "$p" -- bash "$work/inner.sh"
