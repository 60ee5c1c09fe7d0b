#!/bin/bash
# side by side: base (64a021b, stop 36's submission) and new builds, alternating
cd "$(dirname "$0")/../../.."
# B: the base build (git worktree add /tmp/basewt 64a021b; CARGO_TARGET_DIR=/tmp/basetarget cargo build --release -p cli -p preload)
B=/tmp/basetarget/release/pronghorn; N=target/release/pronghorn
$N lab down --prefix pp >/dev/null 2>&1
for r in 1 2; do
  for b in base new; do
    E=$B; [ $b = new ] && E=$N
    $E bench redis --quick --prefix pp --out /tmp/sbs/redis-$b-$r > /tmp/sbs/redis-$b-$r.log 2>&1
    $E bench http --quick --workers 2 --prefix pp --out /tmp/sbs/http-$b-$r > /tmp/sbs/http-$b-$r.log 2>&1
    $E bench redis-cps --quick --prefix pp --out /tmp/sbs/cps-$b-$r > /tmp/sbs/cps-$b-$r.log 2>&1
    $E lab down --prefix pp >/dev/null 2>&1
  done
done
for b in base new; do
  E=$B; [ $b = new ] && E=$N
  $E bench pgbench --quick --model both --prefix pp --out /tmp/sbs/pg-$b > /tmp/sbs/pg-$b.log 2>&1
  $E lab down --prefix pp >/dev/null 2>&1
done
echo done > /tmp/sbs/DONE
