#!/usr/bin/env bash
# Session 35: the serving leader's leadership watch woken at most every
# 50 ms (and on server-metrics changes), and openraft's data and progress
# metrics updated without notifications until subscribed (vendor/README.md),
# against main before them (ca0a6c0b); two binaries, alternating, default
# config. usage: ab.sh BEFORE_DIR AFTER_DIR (each holding release/ with
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
  "$measure" "$dir" 3 "$bins" > "/tmp/leader-ab-$set.log" 2>&1
done
echo ALLDONE > /tmp/leader-ab.done
