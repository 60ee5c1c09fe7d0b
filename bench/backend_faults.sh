#!/usr/bin/env bash
# Page faults per PostgreSQL backend, the kernel path's and pronghorn's (runtime.share =
# "family"), counted by perf's page-fault tracepoints over N psql connections each
# (bench/backend_faults.py). Needs root, hugepages and the lab's tools (scripts/setup.sh). Brings
# the lab up (and down again if it was not up). Writes bench/results/backend-faults[-BUILD].{json,md}.
#   bench/backend_faults.sh [--prefix P] [--connections N] [--build DIR]
exec "$(dirname "$0")/lab_run.sh" bench/backend_faults.py bf "$@"
