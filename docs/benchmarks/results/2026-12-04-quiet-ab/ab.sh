#!/usr/bin/env bash
# Session 30: the pipelining A/B on a quiet machine (nothing else running
# but this script), one binary, the mode by config file, alternating.
# usage: ab.sh BINS_DIR (holding release/ with ramqp-brokerd, ramqp-ctl,
# latency, rig, floor)
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins="$1"
for set in a1 b1 a2 b2 a3 b3; do
  case $set in
    a*) config="$here/depth1.toml"; dir="$here/$set-depth1" ;;
    b*) config="$here/pipelined16.toml"; dir="$here/$set-pipelined" ;;
  esac
  "$here/measure.sh" "$dir" 3 "$bins" "$config" > "/tmp/quiet-ab-$set.log" 2>&1
done
echo ALLDONE > /tmp/quiet-ab.done
