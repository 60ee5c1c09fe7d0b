#!/bin/bash
# The counts of bench/results/stop25/family-targeted (see its README.md).
# usage: fw-pg.sh BINDIR LABEL  -- postgres under pronghorn (profile postgres) in lab fw, pgbench -S from side b,
# perf stat on the postmaster and its backends (inherited) over each run.
BIN=$1; LABEL=$2
DIR=/tmp/fw-pg-$LABEL; rm -rf $DIR; mkdir -p $DIR; chown postgres: $DIR
runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D $DIR/data -A trust >/dev/null 2>&1
echo "host all all 10.99.0.0/24 trust" >> $DIR/data/pg_hba.conf
CAPS=+dac_override,+net_admin,+net_raw,+ipc_lock,+sys_admin,+bpf
ip netns exec fw-a nice -n 19 $BIN/pronghorn run --config /run/pronghorn/lab/fw/a.toml --profile postgres -- setpriv --reuid=postgres --regid=postgres --init-groups --inh-caps=$CAPS --ambient-caps=$CAPS /usr/lib/postgresql/15/bin/postgres -D $DIR/data -c listen_addresses=10.99.0.1 -c unix_socket_directories=$DIR -c max_connections=100 > $DIR/log 2>&1 &
for i in $(seq 60); do grep -q "listening on IPv4" $DIR/log && break; sleep 0.5; done
PM=$(head -1 $DIR/data/postmaster.pid)
echo "postmaster $PM"
PB="ip netns exec fw-b nice -n 19 timeout 120 pgbench -h 10.99.0.1 -U postgres"
$PB -i -s 1 -q postgres > $DIR/init.log 2>&1 || { echo init failed; cat $DIR/init.log; }
for c in 16 64; do
  $BIN/pronghorn stat $PM --json > $DIR/stat-before-$c.json 2>/dev/null
  perf stat -x, -e context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_poll,syscalls:sys_enter_epoll_wait -p $PM -o $DIR/perf-$c.csv -- sleep 13 &
  PERF=$!
  sleep 0.5
  $PB -S -c $c -j 4 -T 10 postgres > $DIR/pgbench-$c.log 2>&1
  wait $PERF
  $BIN/pronghorn stat $PM --json > $DIR/stat-after-$c.json 2>/dev/null
  TX=$(grep "actually processed" $DIR/pgbench-$c.log | sed 's/.*: \([0-9]*\).*/\1/')
  TPS=$(grep "^tps" $DIR/pgbench-$c.log | head -1)
  echo "== $LABEL -c $c: tx $TX; $TPS; failed: $(grep 'failed trans' $DIR/pgbench-$c.log)"
  awk -F, -v tx=$TX '/^[0-9]/{printf "  %-36s %12d  %.2f/tx\n", $3, $1, $1/tx}' $DIR/perf-$c.csv
done
kill -INT $PM; sleep 2
