#!/usr/bin/env bash
# A second pair, later (same binary, same alternation).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins=/tmp/pipe-bins
"$here/measure.sh" "$here/b3-pipelined" 3 "$bins" > /tmp/pipe-b3.log 2>&1
"$here/measure.sh" "$here/a3-depth1" 3 "$bins" "$here/depth1.toml" > /tmp/pipe-a3.log 2>&1
echo ALLDONE > /tmp/pipe-ab2.done
