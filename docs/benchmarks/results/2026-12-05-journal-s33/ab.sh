#!/usr/bin/env bash
# Session 33: the append journal (store-redb/src/journal.rs) on and off,
# one binary, the mode by config file, alternating, on a quiet machine.
# usage: ab.sh BINS_DIR (holding release/ with ramqp-brokerd, ramqp-ctl,
# latency, rig, floor). One set is session 30's measure.sh, unchanged;
# its table.py made table.md:
#   python3 ../2026-12-04-quiet-ab/table.py a1:nojournal:a1-nojournal b1:journal:b1-journal ...
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
measure="$here/../2026-12-04-quiet-ab/measure.sh"
bins="$1"
for set in a1 b1 a2 b2 a3 b3; do
  case $set in
    a*) config="$here/nojournal.toml"; dir="$here/$set-nojournal" ;;
    b*) config="$here/journal.toml"; dir="$here/$set-journal" ;;
  esac
  "$measure" "$dir" 3 "$bins" "$config" > "/tmp/journal-ab-$set.log" 2>&1
done
echo ALLDONE > /tmp/journal-ab.done
