#!/usr/bin/env bash
set -u
cd /work/wt-commit
for v in A2 C2 A3 C3; do
  b=${v:0:1}
  CARGO_TARGET_DIR=/tmp/hc/$b bench-compare/permsg.sh --no-build --n1 500 --n2 2500 --scenarios quorum --tools callgrind --idle 0 --out /tmp/hc/permsg-$v > /tmp/hc/permsg-$v.log 2>&1
done
echo done > /tmp/hc/permsg2.done
