#!/usr/bin/env bash
# What one fork costs a listening process: plain, with libpronghorn.so preloaded, under
# `pronghorn run` (the NIC open) and under runtime.share = "family" (bench/fork_cost.py). Needs
# root, hugepages and the lab's tools (scripts/setup.sh). Brings the lab up (and down again if
# it was not up). Writes bench/results/fork-cost[-BUILD][-touch].{json,md} (BUILD: a --build
# other than target/release).
#   bench/fork_cost.sh [--prefix P] [--rounds N] [--forks N] [--touch] [--build DIR]
exec "$(dirname "$0")/lab_run.sh" bench/fork_cost.py fk "$@"
