#!/usr/bin/env bash
# System calls and context switches per request of redis-server (GET -c 50) and mariadbd
# (sysbench point_select, 16 threads) in the lab, on the kernel path and under pronghorn: the
# lab side of bench/request_cost.sh's accounting. Needs root, hugepages and the lab's tools
# (scripts/setup.sh). Brings the lab up (and down again if it was not up). Writes
# bench/results/cost-lab.{json,md} (--quick: cost-lab-quick.*). See bench/lab_cost.py.
#   bench/lab_cost.sh [--prefix P] [--quick]
exec "$(dirname "$0")/lab_run.sh" bench/lab_cost.py cost "$@"
