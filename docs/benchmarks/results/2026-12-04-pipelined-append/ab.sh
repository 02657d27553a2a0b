#!/usr/bin/env bash
# Alternating sets, one binary: a = depth 1 (one append at a time, as
# before), b = the default (pipelined, 16).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins=/tmp/pipe-bins
"$here/measure.sh" "$here/a1-depth1" 3 "$bins" "$here/depth1.toml" > /tmp/pipe-a1.log 2>&1
"$here/measure.sh" "$here/b1-pipelined" 3 "$bins" > /tmp/pipe-b1.log 2>&1
"$here/measure.sh" "$here/a2-depth1" 3 "$bins" "$here/depth1.toml" > /tmp/pipe-a2.log 2>&1
"$here/measure.sh" "$here/b2-pipelined" 3 "$bins" > /tmp/pipe-b2.log 2>&1
echo ALLDONE > /tmp/pipe-ab.done
