#!/usr/bin/env bash
# A third pair, both modes by config file (same binary).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins=/tmp/pipe-bins
"$here/measure.sh" "$here/b4-pipelined" 3 "$bins" "$here/pipelined16.toml" > /tmp/pipe-b4.log 2>&1
"$here/measure.sh" "$here/a4-depth1" 3 "$bins" "$here/depth1.toml" > /tmp/pipe-a4.log 2>&1
echo ALLDONE > /tmp/pipe-ab3.done
