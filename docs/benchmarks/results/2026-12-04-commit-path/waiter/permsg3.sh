#!/usr/bin/env bash
set -u
cd /work/wt-commit
for v in A C; do
  PERMSG_KEEP_PROFILES=1 CARGO_TARGET_DIR=/tmp/hc/$v bench-compare/permsg.sh --no-build --n1 500 --n2 2500 --scenarios quorum --tools callgrind --idle 0 --out /tmp/hc/permsgP-$v > /tmp/hc/permsgP-$v.log 2>&1
done
echo done > /tmp/hc/permsg3.done
