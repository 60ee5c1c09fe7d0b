#!/usr/bin/env bash
# Both paths at once: a kernel-path server and a pronghorn one side by side on core 1, each
# with its own client on core 0 (mariadbd under sysbench: oltp_point_select, or --workload
# oltp_read_only/oltp_read_write; or PostgreSQL 15 under pgbench: --workload
# pgbench_select_only, pgbench_tpcb_like or pgbench_select_only_connect), one perf record of the
# core: what a transaction costs the server core on each path in the same seconds (this host's
# speed moves between runs). Needs root, hugepages and the lab's tools (scripts/setup.sh).
# Brings the lab up (and down again if it was not up). Writes
# bench/results/together[-WORKLOAD].{json,md} (--quick: together-quick.*). See bench/lab_together.py.
#   bench/lab_together.sh [--prefix P] [--quick] [--runs N] [--build DIR] [--workload W] [--model M] [--keep DIR]
exec "$(dirname "$0")/lab_run.sh" bench/lab_together.py tg "$@"
