#!/usr/bin/env bash
# Both paths at once: a kernel-path mariadbd and a pronghorn one side by side on core 1, each
# with its own sysbench (oltp_point_select, or --workload oltp_read_only/oltp_read_write), one
# perf record of the core: what a transaction costs the server core on each path in the same
# seconds (this host's speed moves between runs). Needs root, hugepages and the lab's tools
# (scripts/setup.sh). Brings the lab up (and down again if it was not up). Writes
# bench/results/together[-WORKLOAD].{json,md} (--quick: together-quick.*). See bench/lab_together.py.
#   bench/lab_together.sh [--prefix P] [--quick] [--runs N] [--build DIR] [--workload W]
exec "$(dirname "$0")/lab_run.sh" bench/lab_together.py tg "$@"
