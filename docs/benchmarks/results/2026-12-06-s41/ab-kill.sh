#!/usr/bin/env bash
# Alternating quiet-kill runs at N queues: node-wide polls (a) against
# full /metrics polls (b), same binaries.
set -u
BINS=$1; OUT=$2; N=$3; ROUNDS=$4
mkdir -p $OUT
for r in $(seq 1 $ROUNDS); do
  for set in a b; do
    extra=""; [ $set = b ] && extra="--full-scrapes"
    $BINS/many_queues --bin-dir $BINS --queues $N --idle-secs 10 --base-port 9600 $extra > $OUT/$set$r.json 2> $OUT/$set$r.log
    echo "$set$r: $(grep -o 'killed[^)]*) *[^:]*: all led again in [0-9.]* s\|node 1 killed: all led again in [0-9.]* s' $OUT/$set$r.log | tr '\n' ' ')"
  done
done
