#!/usr/bin/env bash
# Session 36, second A/B: the resident deque and the chunk searches
# (b6cae385 + 39b7616b, binary of 39b7616b) against the forwarder build
# before them (95ff77d4); two binaries, alternating, default config.
# usage: ab.sh BEFORE_DIR AFTER_DIR (each holding release/ with
# ramqp-brokerd, ramqp-ctl, latency, rig, floor). One set is session 30's
# measure.sh, unchanged; its table.py made table.md:
#   python3 ../2026-12-04-quiet-ab/table.py a1:before:a1-before b1:after:b1-after ...
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
measure="$here/../2026-12-04-quiet-ab/measure.sh"
for set in a1 b1 a2 b2; do
  case $set in
    a*) bins="$1"; dir="$here/$set-before" ;;
    b*) bins="$2"; dir="$here/$set-after" ;;
  esac
  "$measure" "$dir" 3 "$bins" > "/tmp/s36b-ab-$set.log" 2>&1
done
echo ALLDONE > /tmp/s36b-ab.done
# Then a3 (before) and b3 (after) the same way: a1's first minute shared
# the machine with a compile (its closed loop, blast and rig are not clean).
