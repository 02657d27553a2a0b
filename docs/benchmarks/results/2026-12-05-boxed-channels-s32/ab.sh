#!/usr/bin/env bash
# Session 32: boxed openraft channels (mem) against main before them
# (base) on a quiet machine, alternating, one config (the default).
# usage: ab.sh BASE_DIR MEM_DIR (each holding release/ with
# ramqp-brokerd, ramqp-ctl, latency, rig, floor; the client bins are the
# same files in both, only ramqp-brokerd differs). One set is session
# 30's measure.sh, unchanged; its table.py made table.md:
#   python3 ../2026-12-04-quiet-ab/table.py a1:base:a1-base b1:boxed:b1-boxed ...
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
measure="$here/../2026-12-04-quiet-ab/measure.sh"
for set in a1 b1 a2 b2 a3 b3; do
  case $set in
    a*) bins="$1"; dir="$here/$set-base" ;;
    b*) bins="$2"; dir="$here/$set-boxed" ;;
  esac
  "$measure" "$dir" 3 "$bins" > "/tmp/boxed-ab-$set.log" 2>&1
done
echo ALLDONE > /tmp/boxed-ab.done
